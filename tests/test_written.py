"""A command's output set: a rerun replaces its own files, removes its stale ones, refuses edited
ones unless forced, and never replaces, removes or follows anything that is not its own."""

import json
import os

import pytest

from pstutor import written
from pstutor.written import RECORD, OutputRefused


def _tree(folder):
    """Every entry below `folder` with its content (links as their target), for before/after checks."""
    tree = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            tree[name] = ("link", os.readlink(path))
        elif path.is_file():
            tree[name] = ("file", path.read_bytes(), path.stat().st_mode & 0o777)
        else:
            tree[name] = ("folder",)
    return tree


def test_a_rerun_replaces_its_set_and_removes_its_stale_files(tmp_path):
    out = tmp_path / "out"
    written.write(out, {"a.txt": "one", "b.sh": "echo", "c.txt": "old"}, "demo", executable=["b.sh"])
    assert os.access(out / "b.sh", os.X_OK) and not os.access(out / "a.txt", os.X_OK)
    (out / "notes.txt").write_text("mine")
    paths = written.write(out, {"a.txt": "two", "d.txt": "new"}, "demo")
    assert paths == [out / "a.txt", out / "d.txt"]
    assert sorted(p.name for p in out.iterdir()) == [RECORD, "a.txt", "d.txt", "notes.txt"]
    assert (out / "a.txt").read_text() == "two" and (out / "notes.txt").read_text() == "mine"
    record = json.loads((out / RECORD).read_text())["sets"]
    assert sorted(record["demo"]) == ["a.txt", "d.txt"]  # the stale names are forgotten too


def test_an_edited_file_is_refused_with_the_list_unless_forced(tmp_path):
    written.write(tmp_path, {"a.txt": "one", "b.txt": "two", "c.txt": "three"}, "demo")
    (tmp_path / "a.txt").write_text("my edit")
    (tmp_path / "c.txt").write_text("my edit too")
    before = _tree(tmp_path)
    with pytest.raises(OutputRefused, match=r"^a\.txt, c\.txt in .* were edited since pstutor demo wrote "
                                            r"them; rerun with --force"):
        written.write(tmp_path, {"a.txt": "new", "b.txt": "new"}, "demo")  # c.txt would be removed
    assert _tree(tmp_path) == before
    written.write(tmp_path, {"a.txt": "new", "b.txt": "new"}, "demo", force=True)
    assert (tmp_path / "a.txt").read_text() == "new" and not (tmp_path / "c.txt").exists()


@pytest.mark.parametrize("force", [False, True])
def test_a_file_it_did_not_write_is_never_replaced(tmp_path, force):
    (tmp_path / "loss.png").write_bytes(b"the user's own picture")
    before = _tree(tmp_path)
    with pytest.raises(OutputRefused, match=r"^not replaced: loss\.png in .* was not written by"):
        written.write(tmp_path, {"loss.png": b"png", "topology.png": b"png"}, "demo", force=force)
    assert _tree(tmp_path) == before  # not even the record or the other picture


@pytest.mark.parametrize("force", [False, True])
def test_a_link_is_never_followed_nor_replaced(tmp_path, force):
    target = tmp_path / "target.txt"
    target.write_text("precious")
    out = tmp_path / "out"
    written.write(out, {"loss.png": b"png"}, "demo")
    (out / "loss.png").unlink()
    (out / "loss.png").symlink_to(target)  # a link where its own file was: no longer its own
    before = _tree(tmp_path)
    with pytest.raises(OutputRefused, match=r"not replaced: loss\.png"):
        written.write(out, {"loss.png": b"new"}, "demo", force=force)
    assert _tree(tmp_path) == before and target.read_text() == "precious"


def test_another_commands_files_are_not_its_own(tmp_path):
    written.write(tmp_path, {"Dockerfile": "FROM x"}, "cluster launch-files")
    with pytest.raises(OutputRefused, match="not written by pstutor demo"):
        written.write(tmp_path, {"Dockerfile": "FROM y"}, "demo", force=True)
    written.write(tmp_path, {"loss.png": b"png"}, "demo")  # both sets live in one folder
    written.write(tmp_path, {"Dockerfile": "FROM z"}, "cluster launch-files")
    assert (tmp_path / "loss.png").exists() and (tmp_path / "Dockerfile").read_text() == "FROM z"


def test_a_stale_name_that_became_the_users_is_left_alone(tmp_path):
    written.write(tmp_path, {"a.txt": "one", "b.txt": "two"}, "demo")
    (tmp_path / "b.txt").unlink()
    (tmp_path / "b.txt").mkdir()
    (tmp_path / "b.txt" / "mine").write_text("mine")
    written.write(tmp_path, {"a.txt": "again"}, "demo")
    assert (tmp_path / "b.txt" / "mine").read_text() == "mine"


def test_an_interrupted_run_still_owns_old_and_new_files(tmp_path, monkeypatch):
    written.write(tmp_path, {"a.txt": "one", "b.txt": "two"}, "demo")
    real = written._replace

    def fail_on_b(path, content, mode):
        if path.name == "b.txt":
            raise KeyboardInterrupt  # Ctrl-C between two files
        real(path, content, mode)

    monkeypatch.setattr(written, "_replace", fail_on_b)
    with pytest.raises(KeyboardInterrupt):
        written.write(tmp_path, {"a.txt": "ONE", "b.txt": "TWO"}, "demo")
    monkeypatch.setattr(written, "_replace", real)
    assert (tmp_path / "a.txt").read_text() == "ONE" and (tmp_path / "b.txt").read_text() == "two"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".b.txt")] == []  # no temporary left
    written.write(tmp_path, {"a.txt": "1", "b.txt": "2"}, "demo")  # neither counts as edited
    assert (tmp_path / "b.txt").read_text() == "2"


@pytest.mark.parametrize("record", ["not json", '{"sets": []}', '{"other": 1}', "link"])
def test_a_record_it_did_not_write_is_refused(tmp_path, record):
    if record == "link":
        (tmp_path / "elsewhere").write_text('{"sets": {}}')
        (tmp_path / RECORD).symlink_to(tmp_path / "elsewhere")
    else:
        (tmp_path / RECORD).write_text(record)
    before = _tree(tmp_path)
    with pytest.raises(OutputRefused, match="is not a record pstutor wrote"):
        written.check(tmp_path, ["a.txt"], "demo")
    assert _tree(tmp_path) == before


def test_a_file_or_an_unwritable_place_is_refused_before_anything(tmp_path):
    (tmp_path / "file").write_text("mine")
    with pytest.raises(OutputRefused, match="is a file, not a folder"):
        written.check(tmp_path / "file", ["a.txt"], "demo")
    with pytest.raises(OutputRefused, match=r"cannot write into .*file"):
        written.check(tmp_path / "file" / "sub", ["a.txt"], "demo")
    assert not (tmp_path / "new").exists()
    written.check(tmp_path / "new" / "deeper", ["a.txt"], "demo")  # a folder to be created: fine
    assert not (tmp_path / "new").exists()  # checking creates nothing


def test_the_record_is_not_read_by_kubectl_apply():
    """`kubectl apply -f FOLDER` takes .json, .yaml and .yml files: the record must be none of them."""
    assert not RECORD.endswith((".json", ".yaml", ".yml"))
