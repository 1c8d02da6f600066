"""The `pstutor` command: `demo` (the main job), `doctor`, `build`, `cluster` and `compare`."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from pstutor.course import CourseNotFoundError
from pstutor.language import LANGUAGES, say, set_language


def _demo(args: argparse.Namespace) -> int:
    from pstutor.demo import check_out_folder, run_demo

    check_out_folder(args.out)  # before a minute of training, not after
    print(say("pstutor demo: parameter server training on an in-process cluster",
              "pstutor 演示：在进程内集群上进行参数服务器训练"), flush=True)
    result = run_demo(args.out, workers=args.workers, ps=args.ps, epochs=args.epochs,
                      steps_per_epoch=args.steps, log=lambda line: print(line, flush=True))
    print()
    print(say("Summary", "小结"))
    print(f"  Model.fit     loss {result.fit_losses[0]:.4f} -> {result.fit_losses[-1]:.4f}"
          f"  ({result.seconds['Model.fit']:.1f} s)")
    print(f"  custom loop   loss {result.loop_losses[0]:.4f} -> {result.loop_losses[-1]:.4f}"
          f"  ({result.seconds['custom loop']:.1f} s, {result.loop_steps} steps)")
    print(say("  pictures:", "  图片："), ", ".join(str(p) for p in result.pictures))
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from pstutor.doctor import check_packages, check_runtime, report

    findings = check_packages()
    if all(f.ok is not False for f in findings):
        findings += check_runtime(verbose=args.verbose)
    print(report(findings))
    failed = [f for f in findings if f.ok is False]
    print()
    print(say(f"{len(failed)} problem(s) found." if failed else "Ready for the course.",
              f"发现 {len(failed)} 个问题。" if failed else "环境就绪，可以开始学习课程。"))
    return 1 if failed else 0


def _build(args: argparse.Namespace) -> int:
    from pstutor.build import build
    from pstutor.course import find_course

    root = find_course(args.course)
    for path in build(root, args.lessons or None, run=not args.no_execute, keep=args.keep_outputs):
        print(say("wrote", "已写入"), path.relative_to(root))
    return 0


def _cluster_up(args: argparse.Namespace) -> int:
    import signal
    import time

    from pstutor.local_cluster import LocalCluster

    cluster = LocalCluster(args.workers, args.ps)  # refuses a size the machine cannot hold
    for sig in (signal.SIGTERM, signal.SIGHUP):  # a plain `kill`, a closed terminal: clean up too
        signal.signal(sig, lambda *_: sys.exit(0))
    print(say(f"starting {args.workers} workers and {args.ps} ps as local processes ...",
              f"正在以本地进程启动 {args.workers} 个工作进程和 {args.ps} 个参数服务器……"),
          flush=True)
    with cluster:
        for job, index in cluster.tasks:
            print(f"  {job} {index}  {cluster.address(job, index)}")
        print(say("Warning: every server listens on all IPv4 and IPv6 interfaces, without "
                  "authentication; run this only on a trusted network or behind a firewall.",
                  "警告：每个服务器都在所有 IPv4 和 IPv6 网络接口上监听，且没有身份验证；"
                  "只在可信网络中或防火墙之后运行。"))
        print(say("Coordinator (chief) TF_CONFIG — export it in the program that trains:",
                  "协调器（chief）的 TF_CONFIG，请在训练程序中设置："))
        print(f"export TF_CONFIG='{cluster.tf_config('chief', 0)}'")
        try:
            print(say("Running; press Ctrl-C to stop.", "运行中；按 Ctrl-C 停止。"), flush=True)
            while all(cluster.alive(*task) for task in cluster.tasks):
                time.sleep(0.5)
            print(say("A task exited; stopping the cluster.", "有任务退出，正在停止集群。"))
            return 1
        except KeyboardInterrupt:
            print(say("stopping ...", "正在停止……"))
    return 0


def _launch_files(args: argparse.Namespace) -> int:
    from pstutor.launch_files import write_launch_files

    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    for path in write_launch_files(args.out, hosts, args.workers, args.ps, port=args.port,
                                   program=args.program, image=args.image, name=args.name,
                                   format=args.format, volume_claim=args.volume_claim):
        print(say("wrote", "已写入"), path)
    return 0


def _compare(args: argparse.Namespace) -> int:
    import signal

    from pstutor.compare import CompareError, check_strategies, compare, format_table

    try:
        names = check_strategies([n.strip() for n in args.strategies.split(",") if n.strip()])
    except ValueError as err:
        print(f"pstutor compare: {err}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a plain `kill` also stops the children
    listed = ", ".join(names)
    print(say(f"comparing {listed} on {args.examples} examples, one fresh process each",
              f"正在比较 {listed}，每个策略训练 {args.examples} 个样本，各用一个新进程"), flush=True)
    try:
        results = compare(names, args.examples, batch_size=args.batch_size,
                          steps_per_execution=args.steps_per_execution, timeout=args.timeout,
                          progress=lambda line: print(line, flush=True))
    except CompareError as err:
        print(f"pstutor compare: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(say("interrupted; every child process was stopped.", "已中断；所有子进程均已停止。"),
              file=sys.stderr)
        return 130
    print()
    print(format_table(results))
    return 0


def _grade(args: argparse.Namespace) -> int:
    import signal

    from pstutor.grading import GradingFailed, grade, summary

    def stop(*_) -> None:  # a plain `kill` or a closed terminal cleans up like Ctrl-C
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        results = grade(args.submissions, args.out, course=args.course, timeout=args.timeout,
                        sandbox=not args.no_sandbox, jobs=args.jobs, memory=args.memory * 2**30,
                        format=args.format, exercise=args.exercise, accept=tuple(args.accept),
                        regrade=args.regrade, log=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print(say(f"interrupted; the students graded so far are in {args.out}: run the same command "
                  "again to continue", f"已中断；已评分的学生都在 {args.out} 中：再次运行同一命令即可继续"),
              file=sys.stderr)
        return 130
    except GradingFailed as err:
        print(f"pstutor: {err}", file=sys.stderr)
        return 1
    print()
    print(summary(results))
    print(say(f"results written to {args.out}", f"结果已写入 {args.out}"))
    return 0


def _autograder(args: argparse.Namespace) -> int:
    from pstutor.grading.autograder import write_gradescope

    for path in write_gradescope(args.out, exercise=args.exercise, course=args.course):
        print(say("wrote", "已写入"), path)
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line's arguments."""
    main = argparse.ArgumentParser(
        prog="pstutor", description="Helper commands of the parameter server training course.")
    main.add_argument("--lang", choices=LANGUAGES, default="en",
                      help="language of the messages (en or zh)")
    commands = main.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="train on an in-process cluster, save pictures")
    demo.add_argument("--out", type=Path, default=Path("pstutor-demo"),
                      help="folder for the pictures (default: pstutor-demo)")
    demo.add_argument("--workers", type=_positive, default=3)
    demo.add_argument("--ps", type=_positive, default=2)
    demo.add_argument("--epochs", type=_positive, default=4)
    demo.add_argument("--steps", type=_positive, default=20, help="steps per epoch")
    demo.set_defaults(run=_demo)

    doctor = commands.add_parser("doctor", help="check the environment and say how to fix it")
    doctor.add_argument("--verbose", action="store_true", help="show TensorFlow's own logs")
    doctor.set_defaults(run=_doctor)

    build = commands.add_parser("build", help="regenerate (and execute) the notebooks")
    build.add_argument("lessons", nargs="*", help="lesson numbers or names, e.g. 01 (default: all)")
    build.add_argument("--no-execute", action="store_true",
                       help="only regenerate the cells; stored outputs are dropped")
    build.add_argument("--keep-outputs", action="store_true",
                       help="regenerate after prose-only edits, keeping the stored outputs")
    build.add_argument("--course", type=Path, default=None,
                       help="the clone of the course (default: found from the working directory)")
    build.set_defaults(run=_build)
    cluster = commands.add_parser("cluster", help="local clusters of real processes, launch files")
    actions = cluster.add_subparsers(dest="action", required=True)
    up = actions.add_parser("up", help="run workers and ps as local processes until Ctrl-C")
    up.add_argument("--workers", type=_positive, default=2)
    up.add_argument("--ps", type=_positive, default=1)
    up.set_defaults(run=_cluster_up)
    files = actions.add_parser("launch-files",
                               help="start scripts, a Kubernetes manifest and a Dockerfile")
    files.add_argument("--hosts", required=True,
                       help="comma-separated, one per task: chief, workers, then ps")
    files.add_argument("--workers", type=_positive, default=2)
    files.add_argument("--ps", type=_positive, default=1)
    files.add_argument("--port", type=_port, default=2222, help="the same on every host (default: 2222)")
    files.add_argument("--program", default="train.py", help="what the chief runs")
    files.add_argument("--format", choices=("jobs", "tfjob"), default="jobs",
                       help="jobs: a Service and a Job per task (kubernetes.yaml); "
                            "tfjob: one Kubeflow TFJob (tfjob.yaml)")
    files.add_argument("--image", default=None,
                       help="container image (default: the one the written Dockerfile builds)")
    files.add_argument("--name", default="pstutor", help="prefix of the Kubernetes objects")
    files.add_argument("--volume-claim", default="pstutor-checkpoints",
                       help="PersistentVolumeClaim for the checkpoints (default: pstutor-checkpoints)")
    files.add_argument("--out", type=Path, default=Path("launch"),
                       help="folder for the files; files pstutor did not write are never replaced")
    files.set_defaults(run=_launch_files)

    versus = commands.add_parser("compare", help="train one model under each strategy, side by side")
    versus.add_argument("--strategies", default="none,mirrored,ps,mwms",
                        help="comma-separated: none, mirrored, ps, mwms (default: all four)")
    versus.add_argument("--examples", type=_positive, default=8192,
                        help="examples trained and timed per strategy (default: 8192)")
    versus.add_argument("--batch-size", type=_positive, default=32, help="per replica (default: 32)")
    versus.add_argument("--steps-per-execution", type=_positive, default=1)
    versus.add_argument("--timeout", type=_positive, default=300, help="seconds per strategy")
    versus.set_defaults(run=_compare)

    marks = commands.add_parser("grade", help="grade a class's exercise notebooks, as you keep grades")
    marks.add_argument("submissions", type=Path,
                       help="folder with one .ipynb per student (the file name names the student)")
    marks.add_argument("--out", type=Path, default=Path("grades.csv"),
                       help="the file to write (default: grades.csv); only a file pstutor grade wrote "
                            "is replaced")
    marks.add_argument("--format", choices=("csv", "canvas", "gradescope", "prairielearn"), default="csv",
                       help="csv: the course's table; canvas: a Canvas/Moodle gradebook CSV; gradescope, "
                            "prairielearn: the autograder results.json of one submission")
    marks.add_argument("--exercise", default=None,
                       help="grade only this exercise (e.g. 03): other notebooks are invalid")
    marks.add_argument("--accept", action="append", default=[], metavar="STUDENT",
                       help="count the flagged tasks of STUDENT after you looked at them (repeatable)")
    marks.add_argument("--regrade", action="store_true",
                       help="grade every submission again, even those already in the table")
    marks.add_argument("--timeout", type=_positive, default=300,
                       help="seconds per submission (default: 300, at least 30)")
    marks.add_argument("--no-sandbox", action="store_true",
                       help="run without the bubblewrap sandbox (only if you trust every submission)")
    marks.add_argument("--course", type=Path, default=None,
                       help="the course folder whose exercises/ to grade against "
                            "(default: found above the working directory)")
    marks.add_argument("--jobs", type=_positive, default=None,
                       help="students graded at once (default: what this machine's cores and memory hold)")
    marks.add_argument("--memory", type=_gib, default=6,
                       help="GiB one submission may use, its kernel and children together "
                            "(default: 6, at least 1)")
    marks.add_argument("--lang", choices=LANGUAGES, default=argparse.SUPPRESS,
                       help="language of the table and messages (en or zh)")
    marks.set_defaults(run=_grade)

    autograder = commands.add_parser("autograder", help="the files an autograding service runs")
    services = autograder.add_subparsers(dest="service", required=True)
    gradescope = services.add_parser("gradescope", help="setup.sh and run_autograder for Gradescope")
    gradescope.add_argument("--exercise", required=True, help="the exercise it grades, e.g. 03")
    gradescope.add_argument("--out", type=Path, required=True, help="a new (or empty) folder for the files")
    gradescope.add_argument("--course", type=Path, default=None,
                            help="the course folder (default: found above the working directory)")
    gradescope.set_defaults(run=_autograder)
    return main


def _positive(text: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text.strip()):  # int() would also take '１２' or '1_0'
        raise argparse.ArgumentTypeError(say(f"must be a whole number, not {text!r}",
                                             f"必须是整数，而不是 {text!r}"))
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(say(f"must be at least 1, not {value}",
                                             f"必须至少为 1，而不是 {value}"))
    return value


def _gib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value < 1:
        raise argparse.ArgumentTypeError(say(f"must be a number of GiB, at least 1, not {text!r}",
                                             f"必须是以 GiB 为单位、至少为 1 的数，而不是 {text!r}"))
    return value


def _port(text: str) -> int:
    value = _positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(say(f"a port is at most 65535, not {value}",
                                             f"端口最大为 65535，而不是 {value}"))
    return value


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `pstutor` command."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["--lang", "zh"] or argv[:1] == ["--lang=zh"]:  # argument errors in Chinese too
        set_language("zh")
    args = parser().parse_args(argv)
    set_language(args.lang)
    try:
        return args.run(args)
    except CourseNotFoundError as err:  # a course tool run outside a clone
        print(f"pstutor: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(say("interrupted.", "已中断。"), file=sys.stderr)
        return 130
    except (ValueError, RuntimeError) as err:  # bad input or a cluster that failed: say why
        from pstutor.build import LessonError
        from pstutor.demo import DemoError
        from pstutor.grading import GradingError
        from pstutor.grading.autograder import AutograderError
        from pstutor.launch_files import LaunchFilesError
        from pstutor.local_cluster import ClusterStartError
        from pstutor.tf_config import TFConfigError

        if not isinstance(err, TFConfigError | ClusterStartError | GradingError | LaunchFilesError
                          | DemoError | LessonError | AutograderError):
            raise
        print(f"pstutor: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
