"""`pstutor doctor`: is this environment able to run the course? Says what is wrong and the fix."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import sys

from pstutor.environment import TESTED_TENSORFLOW, minor
from pstutor.language import say


@dataclasses.dataclass(frozen=True)
class Finding:
    """One check: passed (`ok`), a warning (`ok is None`) or a failure, and how to fix it."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_packages() -> list[Finding]:
    """Python, TensorFlow, tf-keras, tensorboard and the helpers, with versions."""
    found = []
    py = ".".join(map(str, sys.version_info[:2]))
    found.append(Finding("Python", (3, 10) <= sys.version_info[:2] <= (3, 13), py,
                         say("Use Python 3.10 to 3.13.", "请使用 Python 3.10 至 3.13。")))
    tf = _version("tensorflow")
    if tf is None:
        found.append(Finding("tensorflow", False, say("not installed", "未安装"),
                             "pip install 'tensorflow>=2.20,<2.22'"))
    else:
        tested = minor(tf) in TESTED_TENSORFLOW
        found.append(Finding("tensorflow", True if tested else None, tf, "" if tested else say(
            f"Tested with {' and '.join(TESTED_TENSORFLOW)}; other versions may differ.",
            f"课程在 {' 和 '.join(TESTED_TENSORFLOW)} 上测试过，其他版本的行为可能不同。")))
    keras = _version("tf-keras")
    pin = f"'tf-keras=={minor(tf)}.*'" if tf else "tf-keras"
    if keras is None:
        found.append(Finding("tf-keras", False, say("not installed", "未安装"), f"pip install {pin}"))
    else:
        same = tf is None or minor(keras) == minor(tf)
        found.append(Finding("tf-keras", same, keras, "" if same else f"pip install {pin}"))
    cpu = _version("tensorflow-cpu")
    if cpu is not None and tf is not None:
        found.append(Finding("tensorflow-cpu", False, say(
            f"{cpu} installed beside tensorflow {tf}: both write the same files",
            f"{cpu} 与 tensorflow {tf} 同时安装：两者会写入相同的文件"),
            "pip uninstall -y tensorflow-cpu tensorflow && pip install 'tensorflow>=2.20,<2.22'"))
    for package, why in (
        ("tensorboard", say("the TensorBoard callback writes its logs with it",
                            "TensorBoard 回调需要它来写日志")),
        ("portpicker", say("free ports for local clusters", "为本地集群选取空闲端口")),
        ("matplotlib", say("the course's pictures", "课程中的图")),
    ):
        version = _version(package)
        found.append(Finding(package, version is not None, version or say(
            f"not installed ({why})", f"未安装（{why}）"), f"pip install {package}"))
    return found


def check_runtime(verbose: bool = False) -> list[Finding]:
    """Keras 2 active, and a one-worker, one-ps cluster that really trains one step."""
    from pstutor.environment import setup

    try:
        env = setup(verbose=verbose)
    except Exception as err:  # the message says what to do; report it, do not crash
        return [Finding("pstutor.setup()", False, str(err).splitlines()[0], str(err))]
    import tensorflow as tf

    found = [
        Finding("pstutor.setup()", True, env.keras),
        Finding("tf.keras.optimizers.legacy", hasattr(tf.keras.optimizers, "legacy"), "SGD, Adam"),
        Finding(say("devices", "设备"), True, ", ".join(env.devices)),
    ]
    try:
        found.append(Finding(say("in-process cluster", "进程内集群"), True, _train_one_step(tf)))
    except Exception as err:
        found.append(Finding(say("in-process cluster", "进程内集群"), False,
                             f"{type(err).__name__}: {err}".splitlines()[0],
                             say("Run `pstutor doctor --verbose` to see TensorFlow's logs.",
                                 "运行 `pstutor doctor --verbose` 查看 TensorFlow 的日志。")))
    return found


def _train_one_step(tf) -> str:
    from pstutor.clusters import in_process_cluster

    strategy = tf.distribute.ParameterServerStrategy(in_process_cluster(1, 1))
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        weight = tf.Variable(1.0)

    @tf.function
    def step():
        return strategy.run(lambda: weight.assign_add(1.0))

    result = coordinator.schedule(step)
    coordinator.join()
    if float(result.fetch()) != 2.0:
        raise RuntimeError(say("the scheduled step returned a wrong value",
                               "调度的步骤返回了错误的值"))
    return say("1 worker + 1 ps trained one step", "1 个工作进程 + 1 个参数服务器完成了一个训练步骤")


def report(findings: list[Finding]) -> str:
    """The findings as lines of text, with fixes under the ones that need them."""
    marks = {True: "✓", None: "!", False: "✗"}
    lines = []
    for f in findings:
        lines.append(f"{marks[f.ok]} {f.name:<28} {f.detail}")
        if f.ok is not True and f.fix:
            lines.extend(f"    → {line}" for line in f.fix.splitlines())
    return "\n".join(lines)
