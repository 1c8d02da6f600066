"""Lesson 7's short TensorFlow log: TensorFlow's own messages collected, then one line each."""

import os

import pstutor
from pstutor.language import set_language
from pstutor.tf_log import TensorFlowLog


def test_tensorflow_log_collects_python_and_native_messages_without_printing_them(capfd, caplog):
    pstutor.setup()
    import tensorflow as tf

    message = ("Remote function on worker /job:worker/replica:0/task:0 failed with UnavailableError():"
               "Graph execution error:\n\nsomething long {grpc_status:14}\n"
               "It is treated as a transient connectivity failure for now.")
    with TensorFlowLog(settle=0.1) as log:
        tf.get_logger().error(message)
        tf.get_logger().error("Start cancelling closures due to error\n:UNKNOWN:{grpc_status:14}")
        os.write(2, b"E0000 00:00:1796042213.731632   10207 context.cc:873] Failed to register function\n"
                    b"This could happen if the remote target has been disconnected from the client.\n")
    assert capfd.readouterr() == ("", "") and not caplog.records  # nothing went past it
    assert log.messages == [message, "Start cancelling closures due to error\n:UNKNOWN:{grpc_status:14}"]
    assert log.lines() == [
        "ERROR  Remote function on worker /job:worker/replica:0/task:0 failed with UnavailableError():Graph"
        " execution error: … It is treated as a transient connectivity failure for now.",
        "ERROR  Start cancelling closures due to error",  # its last line is no sentence: left out
        "E0000 context.cc:873] Failed to register function",
    ]
    tf.get_logger().error("after the block")
    assert [r.getMessage() for r in caplog.records] == ["after the block"]  # propagating again


def test_tensorflow_log_show_speaks_the_course_language(capsys):
    log = TensorFlowLog()
    log.messages, log.levels = ["one\nIt ended."], ["ERROR"]
    set_language("zh")
    try:
        log.show()
    finally:
        set_language("en")
    assert capsys.readouterr().out.splitlines() == ["这期间 TensorFlow 记录了 1 条日志，每条只显示一行：",
                                                    "    ERROR  one … It ended."]


def test_a_local_cluster_on_ports_it_picked_survives_a_port_taken_before_it_starts():
    import socket

    from pstutor.local_cluster import LocalCluster

    cluster = LocalCluster(num_workers=1, num_ps=1)
    stolen = cluster.address("worker", 0)
    thief = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # another program takes the port
    thief.bind(("0.0.0.0", int(stolen.rsplit(":", 1)[1])))
    thief.listen()
    try:
        cluster.start()
        assert cluster.address("worker", 0) != stolen and cluster.alive("worker", 0)
        assert len(cluster.pids()) == 2
    finally:
        cluster.close()
        thief.close()
