"""TF_CONFIG helpers: good configurations round-trip, every kind of bad input is named."""

import json

import pytest

import pstutor
from pstutor import TFConfigError, cluster_dict, make_tf_config, parse_tf_config

GOOD = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"], "ps": ["10.0.0.4:2222"]}


def test_cluster_dict_gives_free_loopback_ports_to_every_task():
    cluster = cluster_dict(3, 2, chief=True, evaluator=True)
    assert {job: len(a) for job, a in cluster.items()} == {"chief": 1, "worker": 3, "ps": 2, "evaluator": 1}
    addresses = [a for job in cluster.values() for a in job]
    assert len(set(addresses)) == 7
    assert all(a.startswith("127.0.0.1:") for a in addresses)


def test_cluster_dict_lays_tasks_out_on_hosts_in_job_order():
    cluster = cluster_dict(2, 1, chief=True, hosts=["a", "b", "c", "d"], port=2000)
    assert cluster == {"chief": ["a:2000"], "worker": ["b:2000", "c:2000"], "ps": ["d:2000"]}
    with pytest.raises(TFConfigError, match="3 hosts given for 4 tasks"):
        cluster_dict(2, 1, chief=True, hosts=["a", "b", "c"])


@pytest.mark.parametrize("workers, ps", [(0, 1), (-1, 1), (2, -1), (1.5, 1), (True, 1)])
def test_bad_counts_are_named(workers, ps):
    with pytest.raises(TFConfigError, match="must be an integer of at least"):
        cluster_dict(workers, ps)


def test_round_trip_through_json_and_the_environment(monkeypatch):
    config = make_tf_config(GOOD, "worker", 1)
    assert json.loads(config.to_json()) == {"cluster": GOOD, "task": {"type": "worker", "index": 1}}
    assert parse_tf_config(config.to_json()) == config
    assert parse_tf_config(config.to_dict()) == config
    monkeypatch.setenv("TF_CONFIG", config.to_json())
    assert parse_tf_config() == config


def test_all_tf_configs_share_the_cluster_and_differ_in_task():
    configs = pstutor.all_tf_configs(GOOD)
    assert [(c.task_type, c.task_index) for c in configs] == [
        ("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]
    assert all(c.cluster == GOOD for c in configs)


@pytest.mark.parametrize(
    "value, message",
    [
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 1}', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"cluster": {"worker": ["h:1"]}}', "no 'task' section"),
        ('{"task": {"type": "worker", "index": 0}}', "no 'cluster' section"),
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker"}}', "needs both 'type' and 'index'"),
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 1}}', "out of range"),
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": -1}}', "out of range"),
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": "0"}}', "must be an integer"),
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "ps", "index": 0}}', "no 'ps' job"),
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "master", "index": 0}}', "Unknown task type"),
        ('{"cluster": {"workers": ["h:1"]}, "task": {"type": "worker", "index": 0}}', "Unknown job name"),
        ('{"cluster": {"worker": ["grpc://h:1"]}, "task": {"type": "worker", "index": 0}}', "Malformed"),
        ('{"cluster": {"worker": ["h"]}, "task": {"type": "worker", "index": 0}}', "Malformed"),
        ('{"cluster": {"worker": ["h:70000"]}, "task": {"type": "worker", "index": 0}}', "Malformed"),
        ('{"cluster": {"worker": [":80"]}, "task": {"type": "worker", "index": 0}}', "Malformed"),
        ('{"cluster": {"worker": "h:1"}, "task": {"type": "worker", "index": 0}}', "non-empty list"),
        ('{"cluster": {"worker": ["h:1", "h:1"]}, "task": {"type": "worker", "index": 0}}', "used twice"),
        ('{"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}}',
         "at most one chief"),
        ('{"cluster": {}, "task": {"type": "worker", "index": 0}}', "non-empty mapping"),
    ],
)
def test_bad_tf_config_names_the_problem(value, message):
    with pytest.raises(TFConfigError, match=message):
        parse_tf_config(value)


def test_unset_tf_config_is_reported(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(TFConfigError, match="not set"):
        parse_tf_config()


def test_ipv6_and_hostnames_are_accepted():
    cluster = {"worker": ["[::1]:2222", "worker-0.training.svc:2222"]}
    assert make_tf_config(cluster, "worker", 1).task_index == 1


def test_errors_speak_the_chosen_language():
    pstutor.set_language("zh")
    try:
        with pytest.raises(TFConfigError, match="超出范围"):
            parse_tf_config({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 3}})
    finally:
        pstutor.set_language("en")
    with pytest.raises(ValueError, match="lang"):
        pstutor.set_language("fr")


def test_hosts_may_carry_their_own_ports():
    cluster = cluster_dict(1, 1, chief=True, hosts=["127.0.0.1:5001", "127.0.0.1:5002", "db"], port=7)
    assert cluster == {"chief": ["127.0.0.1:5001"], "worker": ["127.0.0.1:5002"], "ps": ["db:7"]}


@pytest.mark.parametrize("cluster, message", [
    ({"worker": ["h:２２２２"]}, "Malformed"),  # full-width digits are not a port
    ({"worker": ["h\n:1"]}, "Malformed"),  # a line break is not part of a host name
    ({"worker": ["localhost:1", "127.0.0.1:1"]}, "used twice"),  # one machine, one port
    ({"worker": ["[::1]:7", "LOCALHOST:7"]}, "used twice"),
    ({"worker": [7]}, "Malformed address for worker 0: 7"),
    ({"worker": [[[[[[[[["deep"]]]]]]]]]}, "Malformed"),
])
def test_addresses_that_only_look_right_are_refused(cluster, message):
    with pytest.raises(TFConfigError, match=message):
        pstutor.validate_cluster(cluster)


def test_port_zero_and_non_string_hosts_are_refused():
    with pytest.raises(TFConfigError, match="from 1 to 65535, not 0"):
        cluster_dict(1, 0, hosts=["a"], port=0)
    with pytest.raises(TFConfigError, match="list of strings"):
        cluster_dict(1, 0, hosts=[1])
    with pytest.raises(TFConfigError, match="list of strings"):
        cluster_dict(1, 0, hosts="a")


def test_deep_json_is_named_not_a_recursion_error():
    with pytest.raises(TFConfigError, match="nested too deeply"):
        parse_tf_config("[" * 100_000 + "]" * 100_000)
    deep = {"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": [[[[[[[[[0]]]]]]]]]}}
    with pytest.raises(TFConfigError, match=r"must be an integer, not \[+\.\.\.\]+\.$"):
        parse_tf_config(deep)


@pytest.mark.parametrize("lang, expected", [("en", "pstutor: TF_CONFIG is not valid JSON"),
                                            ("zh", "pstutor: TF_CONFIG 不是合法的 JSON")])
def test_the_task_server_names_a_bad_tf_config_in_one_line(lang, expected):
    from conftest import run_python

    result = run_python("import runpy; runpy.run_module('pstutor.task_server', run_name='__main__')",
                        env={"TF_CONFIG": "{oops", "PSTUTOR_LANG": lang}, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().startswith(expected)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("text, zh", [
    ('{"task": {"type": "worker" "index": 0}}', "第 1 行第 28 列应为逗号（或右括号）。"),
    ('{"task": 1} x', "第 1 行第 13 列之后还有多余内容。"),
    ('{"task": {"type": "worker", "index": 0}', "文本在第 1 行第 40 列就结束了，还有 { 或 [ 没有闭合。"),
])
def test_bad_json_is_named_in_chinese_in_a_zh_notebook(text, zh):
    """json's own English message is rendered in Chinese, with its line and column."""
    pstutor.set_language("zh")
    try:
        with pytest.raises(TFConfigError) as caught:
            parse_tf_config(text)
    finally:
        pstutor.set_language("en")
    assert str(caught.value).endswith(zh) and "Expecting" not in str(caught.value)


@pytest.mark.parametrize("text", ['{"task": {"type": "worker", "index": 0}', '{"cluster": {"worker": ["a:1"',
                                  '{'])
def test_a_cut_off_tf_config_says_it_ends_too_early_not_that_a_comma_is_missing(text):
    """json asks for a ',' where the text simply ends; a comma would not fix it, a closing bracket would."""
    with pytest.raises(TFConfigError, match=r"ends \(line 1, column \d+\) before every \{ and \[ is closed"):
        parse_tf_config(text)


@pytest.mark.parametrize("text", ["", " ", "\n\t \n"])
def test_an_empty_tf_config_says_it_is_empty(monkeypatch, text):
    """Text with nothing in it is named as empty, not as JSON cut off before its brackets close."""
    with pytest.raises(TFConfigError, match="TF_CONFIG is empty"):
        parse_tf_config(text)
    monkeypatch.setenv("TF_CONFIG", text)
    with pytest.raises(TFConfigError, match="not set" if text == "" else "TF_CONFIG is empty"):
        parse_tf_config()
