"""What the user types: numbers, hosts, image references, program paths, folders."""

import time

import pytest

from pstutor import user_input
from pstutor.language import set_language
from pstutor.user_input import BadInput


@pytest.mark.parametrize("text, low, high, expected", [
    ("3", 1, 16, 3), (" 16 ", 1, 16, 16), ("+2", 1, None, 2), ("10" * 10, 1, None, int("10" * 10)),
])
def test_whole_numbers_in_range_are_taken(text, low, high, expected):
    assert user_input.whole_number(text, low, high) == expected


@pytest.mark.parametrize("text, message", [
    ("0", "must be at least 1, not 0"), ("-1", "must be at least 1"), ("17", "must be at most 16, not 17"),
    ("２", "must be a whole number"), ("1_0", "must be a whole number"), ("1e3", "must be a whole number"),
    ("", "must be a whole number"), ("1" + "0" * 400, "must be a whole number"), ("nan", "must be a whole"),
])
def test_other_numbers_are_refused_in_one_line(text, message):
    with pytest.raises(BadInput, match=message) as caught:
        user_input.whole_number(text, 1, 16)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 120


@pytest.mark.parametrize("text, expected", [
    ("10.0.0.5", "10.0.0.5"), ("node-1.example.com", "node-1.example.com"), ("a", "a"),
    ("10.0.0.5:2300", "10.0.0.5:2300"), ("[fd00::5]", "[fd00::5]"), ("fd00::5", "[fd00::5]"),
    ("[fd00::5]:2300", "[fd00::5]:2300"), ("1node.example.com", "1node.example.com"),
    (" h ", "h"), ("x" * 63 + ".example.com", "x" * 63 + ".example.com"),
])
def test_hosts_are_ip_addresses_or_rfc_1123_names(text, expected):
    assert user_input.host(text) == expected


@pytest.mark.parametrize("text", [
    "300.1.1.1", "10.0.0", "1.2.3.4.5", "010.0.0.1", "x" * 300, "x" * 64 + ".com", "-a.com", "a-.com",
    "a_b.com", "a..b", "", "grpc://a", "a:0", "a:65536", "a:port", "[fd00::zz]", "[a.b]", "ä.com",
    "a b", "fd00::5:2300:xyz", "1.2.3.999",
])
def test_other_hosts_are_refused(text):
    with pytest.raises(BadInput):
        user_input.host(text)


def test_a_host_list_names_an_empty_entry():
    assert user_input.hosts("a, b,10.0.0.1") == ["a", "b", "10.0.0.1"]
    with pytest.raises(BadInput, match="host 2 of 3 is empty"):
        user_input.hosts("a,,b")


@pytest.mark.parametrize("text", [
    "train", "team/train:1", "registry.example.com/team/train:1", "localhost:5000/train",
    "registry.example.com:5000/a.b/c__d/e---f:v1.2_3-rc", "Registry.Example.com/team/train:latest",
    "[fd00::1]:5000/train:1", "train@sha256:" + "a" * 64, "team/train:1@sha256:" + "0" * 64,
])
def test_image_references_of_the_distribution_grammar_are_taken(text):
    assert user_input.image_reference(text) == text


@pytest.mark.parametrize("text", [
    "", "Registry/Team/Train:1", "a::::@@", "Train", "team/Train", "train:", "train:-x", "train:" + "t" * 129,
    "train@sha256:abc", "/train", "train/", "a//b", "a_-b", "train tag", "train:1\n", "ü/train",
    "a" * 256, "http://registry/train", "team/.train",
])
def test_other_image_references_are_refused(text):
    with pytest.raises(BadInput, match="not a container image reference"):
        user_input.image_reference(text)


def test_a_long_image_reference_is_judged_at_once():
    started = time.perf_counter()
    for text in ("a-" * 5000 + "!", "a." * 5000, "a/" * 5000 + "A"):
        with pytest.raises(BadInput):
            user_input.image_reference(text)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("text, ok", [
    ("train.py", True), ("src/train.py", True), ("/opt/a-b/c_d.py", True), ("train", True),
    ("", False), ("a b.py", False), ("$x.py", False), ("a'b.py", False), ("-x.py", False), ("src/", False),
    ("..", False), ("src/..", False), ("train.py\n", False), ("ü.py", False), ("a;b.py", False),
])
def test_programs_are_portable_paths(text, ok):
    if ok:
        assert user_input.program_path(text) == text
    else:
        with pytest.raises(BadInput):
            user_input.program_path(text)


@pytest.mark.parametrize("text", ["", "   ", "a\0b"])
def test_a_folder_is_never_empty(text):
    with pytest.raises(BadInput):
        user_input.folder(text)


def test_messages_follow_the_language_and_shorten_long_input():
    set_language("zh")
    try:
        with pytest.raises(BadInput, match=r"^必须至少为 1，而不是 0$"):
            user_input.whole_number("0", 1)
    finally:
        set_language("en")
    with pytest.raises(BadInput) as caught:
        user_input.host("x" * 5000)
    assert len(str(caught.value)) < 250 and "…" in str(caught.value)
