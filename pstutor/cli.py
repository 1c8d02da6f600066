"""The `pstutor` command: `demo` (the main job), `doctor`, `build`, `cluster`, `compare` and `grade`.

What every subcommand shares is done here, once:

- the language: `--lang` before or after the subcommand; without it `LC_ALL`, `LC_MESSAGES`
  or `LANG` starting with `zh` chooses Chinese. Help, argparse's own words and every message
  follow it;
- bad input: one line in the user's language, exit code 2, before anything starts;
- signals: SIGTERM and SIGHUP end a command as Ctrl-C does (the same clean-up, the same one
  line), with exit code 128 + the signal (143 for SIGTERM); after a stop signal, whatever
  error the interruption caused (a kernel that died with it, a child that was stopped) is
  reported as the interruption. A second signal ends the process at once (its children end
  with it: `processes.guard_parent`);
- a closed standard output (`pstutor demo | head -1`) ends the command quietly with exit
  code 141, as a program killed by SIGPIPE, after the same clean-up as Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from pstutor import user_input
from pstutor.course import CourseNotFoundError
from pstutor.language import LANGUAGES, current_language, say, set_language
from pstutor.user_input import BadInput, argument_type

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CLOSED_PIPE = 128 + signal.SIGPIPE  # 141: what a shell reports for `yes | head -1`
# The most one comparison may ask for: `examples` trained per strategy, seconds per strategy.
MAX_EXAMPLES = 1_000_000
MAX_TIMEOUT = 24 * 3600


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def _demo(args: argparse.Namespace) -> int:
    from pstutor.demo import check_out_folder, check_size, run_demo

    check_size(args.workers, args.ps, args.epochs, args.steps)  # before a minute of training, not after
    check_out_folder(args.out, args.force)
    print(say("pstutor demo: parameter server training on an in-process cluster",
              "pstutor 演示：在进程内集群上进行参数服务器训练"), flush=True)
    result = run_demo(args.out, workers=args.workers, ps=args.ps, epochs=args.epochs,
                      steps_per_epoch=args.steps, log=lambda line: print(line, flush=True), force=args.force)
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
    from pstutor.build import build, exercise_paths, lesson_paths
    from pstutor.course import find_course

    root = find_course(args.course)
    stems = [p.stem for p in lesson_paths(root) + exercise_paths(root)]
    unknown = [name for name in args.lessons if not any(stem.startswith(name) for stem in stems)]
    if unknown:
        raise BadInput(say(
            f"no lesson or exercise matches {', '.join(map(repr, unknown))}; give a number such as 01 "
            f"or a name such as {stems[0] if stems else '01_cluster'}",
            f"没有与 {', '.join(map(repr, unknown))} 对应的课程或练习；请给出编号（如 01）"
            f"或名称（如 {stems[0] if stems else '01_cluster'}）"))
    done: list[Path] = []
    failed: list[BaseException] = []

    def work() -> None:
        try:
            done.extend(build(root, args.lessons or None, run=not args.no_execute, keep=args.keep_outputs))
        except BaseException as err:  # handed to the main thread, which reports it
            failed.append(err)

    # The build runs beside the main thread: nbclient replaces the main thread's SIGINT and
    # SIGTERM handlers with its own (which kill the kernel and end in DeadKernelError); in
    # another thread it cannot, so Ctrl-C and kill stay this command's, said in one line.
    worker = threading.Thread(target=work, name="pstutor-build", daemon=True)
    worker.start()
    try:
        worker.join()
    except KeyboardInterrupt:
        worker.join(timeout=10)  # Ctrl-C also interrupted the kernel: let nbclient shut it down
        raise
    if failed:
        raise failed[0]
    for path in done:
        print(say("wrote", "已写入"), path.relative_to(root))
    return 0


def _cluster_up(args: argparse.Namespace) -> int:
    import time

    from pstutor.local_cluster import LocalCluster, check_memory
    from pstutor.task_server import port_in_use
    from pstutor.tf_config import cluster_dict

    check_memory(args.workers, args.ps)  # refuses a size the machine cannot hold
    cluster = None
    if args.port is not None:
        tasks = 1 + args.workers + args.ps  # the chief's port too: the training program listens there
        if args.port + tasks - 1 > user_input.MAX_PORT:
            raise BadInput(say(f"--port {args.port}: {tasks} tasks need the ports {args.port} to "
                               f"{args.port + tasks - 1}, beyond {user_input.MAX_PORT}",
                               f"--port {args.port}：{tasks} 个任务需要端口 {args.port} 到 "
                               f"{args.port + tasks - 1}，超过了 {user_input.MAX_PORT}"))
        ports = range(args.port, args.port + tasks)
        busy = [str(p) for p in ports if port_in_use(p)]
        if busy:
            raise BadInput(say(f"port(s) {', '.join(busy)} already in use; choose another --port or stop "
                               "the program that holds them",
                               f"端口 {', '.join(busy)} 已被占用；请用 --port 换一个起始端口，"
                               "或停止占用它们的程序"))
        cluster = cluster_dict(args.workers, args.ps, chief=True, hosts=[f"127.0.0.1:{p}" for p in ports])
    cluster = LocalCluster(args.workers, args.ps, cluster=cluster)
    print(say(f"starting {_count(args.workers, 'worker', 'workers')} and {args.ps} ps as local processes ...",
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
        except KeyboardInterrupt:  # Ctrl-C, kill, a closed terminal: the way to stop it
            print(say("stopping ...", "正在停止……"), flush=True)
    return 0


def _launch_files(args: argparse.Namespace) -> int:
    from pstutor.launch_files import write_launch_files

    for path in write_launch_files(args.out, args.hosts, args.workers, args.ps, port=args.port,
                                   program=args.program, image=args.image, name=args.name,
                                   format=args.format, volume_claim=args.volume_claim, force=args.force):
        print(say("wrote", "已写入"), path)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from pstutor.compare import CompareError, check_strategies, compare, format_table
    from pstutor.compare_worker import NUM_EXAMPLES
    from pstutor.local_cluster import TASK_MEMORY_GB, memory_shortfall

    try:
        names = check_strategies([n.strip() for n in args.strategies.split(",")])
    except ValueError as err:
        raise BadInput(str(err)) from None
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadInput(say(f"--strategies names {', '.join(twice)} twice; each strategy runs once",
                           f"--strategies 中 {', '.join(twice)} 出现了两次；每个策略只运行一次"))
    if args.batch_size > NUM_EXAMPLES:
        raise BadInput(say(f"--batch-size {args.batch_size}: at most {NUM_EXAMPLES}, the examples of the "
                           "data set",
                           f"--batch-size {args.batch_size}：最大为 {NUM_EXAMPLES}，即数据集的样本数"))
    steps = args.examples // args.batch_size
    if args.steps_per_execution > max(1, steps):
        raise BadInput(say(
            f"--steps-per-execution {args.steps_per_execution}: at most {max(1, steps)}, the steps of "
            f"{args.examples} examples in batches of {args.batch_size}",
            f"--steps-per-execution {args.steps_per_execution}：最大为 {max(1, steps)}，"
            f"即以 {args.batch_size} 为批次训练 {args.examples} 个样本的步数"))
    short = memory_shortfall(4, TASK_MEMORY_GB)  # ps: coordinator, two workers and a ps at once
    if short is not None:
        raise BadInput(say(f"compare runs up to four TensorFlow processes at once, about {short[0]:.1f} GB "
                           f"of memory; this machine has {short[1]:.1f} GB available. Close other programs.",
                           f"compare 最多会同时运行四个 TensorFlow 进程，约需 {short[0]:.1f} GB 内存；"
                           f"本机可用 {short[1]:.1f} GB。请先关闭其他程序。"))
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
    from pstutor.grading import GradingFailed, grade, summary

    try:  # a plain `kill` or a closed terminal stops it like Ctrl-C (main's shared signal handling)
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
    """The command line's arguments, with help in the current language."""
    from pstutor import __version__

    main = _Parser(prog="pstutor", description=say(
        "Helper commands of the parameter server training course.", "参数服务器训练课程的辅助命令。"))
    main.add_argument("--version", action="version", version=f"pstutor {__version__}",
                      help=say("show pstutor's version and exit", "显示 pstutor 的版本并退出"))
    commands = main.add_subparsers(dest="command", required=True, parser_class=_Parser,
                                   metavar="{demo,doctor,build,cluster,compare,grade}")

    demo = commands.add_parser("demo", help=say("train on an in-process cluster, save pictures",
                                                 "在进程内集群上训练并保存图片"))
    demo.add_argument("--out", type=argument_type(user_input.folder), default=Path("pstutor-demo"),
                      help=say("folder for the pictures (default: pstutor-demo); files pstutor did not "
                               "write are never replaced", "存放图片的文件夹（默认：pstutor-demo）；"
                               "不是 pstutor 写的文件绝不会被覆盖"))
    demo.add_argument("--force", action="store_true",
                      help=say("replace pictures of an earlier run even if they were edited since",
                               "即使上一次运行的图片之后被修改过，也照样覆盖"))
    demo.add_argument("--workers", type=_number(1, 16), default=3, help=say("1 to 16 (default: 3)",
                                                                              "1 到 16（默认：3）"))
    demo.add_argument("--ps", type=_number(1, 16), default=2, help=say("1 to 16 (default: 2)",
                                                                         "1 到 16（默认：2）"))
    demo.add_argument("--epochs", type=_number(1, 100), default=4, help=say("1 to 100 (default: 4)",
                                                                              "1 到 100（默认：4）"))
    demo.add_argument("--steps", type=_number(1, 1000), default=20,
                      help=say("steps per epoch, 1 to 1000 (default: 20)",
                               "每个周期的步数，1 到 1000（默认：20）"))
    demo.set_defaults(run=_demo)

    doctor = commands.add_parser("doctor", help=say("check the environment and say how to fix it",
                                                    "检查环境，并说明如何修复问题"))
    doctor.add_argument("--verbose", action="store_true", help=say("show TensorFlow's own logs",
                                                                   "显示 TensorFlow 自己的日志"))
    doctor.set_defaults(run=_doctor)

    build = commands.add_parser("build", help=say("regenerate (and execute) the notebooks",
                                                  "重新生成（并执行）笔记本"))
    build.add_argument("lessons", nargs="*", help=say("lesson numbers or names, e.g. 01 (default: all)",
                                                      "课程编号或名称，例如 01（默认：全部）"))
    only = build.add_mutually_exclusive_group()
    only.add_argument("--no-execute", action="store_true",
                      help=say("only regenerate the cells; stored outputs are dropped",
                               "只重新生成单元格；丢弃已存储的输出"))
    only.add_argument("--keep-outputs", action="store_true",
                      help=say("regenerate after prose-only edits, keeping the stored outputs",
                               "只改了文字时重新生成，保留已存储的输出"))
    build.add_argument("--course", type=argument_type(user_input.folder), default=None,
                       help=say("the clone of the course (default: found from the working directory)",
                                "课程仓库的克隆（默认：从当前目录向上查找）"))
    build.set_defaults(run=_build)
    cluster = commands.add_parser("cluster", help=say("local clusters of real processes, launch files",
                                                      "由真实进程组成的本地集群，以及启动文件"))
    actions = cluster.add_subparsers(dest="action", required=True, metavar="{up,launch-files}")
    up = actions.add_parser("up", help=say("run workers and ps as local processes until Ctrl-C",
                                           "以本地进程运行工作进程和参数服务器，直到按下 Ctrl-C"))
    up.add_argument("--workers", type=_number(1), default=2,
                    help=say("as many as the memory holds (default: 2)", "内存容得下的数量（默认：2）"))
    up.add_argument("--ps", type=_number(1), default=1,
                    help=say("as many as the memory holds (default: 1)", "内存容得下的数量（默认：1）"))
    up.add_argument("--port", type=argument_type(user_input.port), default=None,
                    help=say("first port: the chief, the workers and the ps take consecutive ports "
                             "(default: free ports)", "起始端口：chief、工作进程和参数服务器依次使用"
                             "连续的端口（默认：任选空闲端口）"))
    up.set_defaults(run=_cluster_up)
    files = actions.add_parser("launch-files",
                               help=say("start scripts, a Kubernetes manifest and a Dockerfile",
                                        "启动脚本、Kubernetes 清单和 Dockerfile"))
    files.add_argument("--hosts", required=True, type=argument_type(user_input.hosts),
                       help=say("comma-separated, one per task: chief, workers, then ps (IP addresses "
                                "or DNS names, optionally HOST:PORT)",
                                "用逗号分隔，每个任务一个：chief、工作进程、参数服务器（IP 地址或 DNS 名称，"
                                "可写成 主机:端口）"))
    files.add_argument("--workers", type=_number(1, 1000), default=2, help=say("(default: 2)", "（默认：2）"))
    files.add_argument("--ps", type=_number(1, 1000), default=1, help=say("(default: 1)", "（默认：1）"))
    files.add_argument("--port", type=argument_type(user_input.port), default=2222,
                       help=say("the same on every host (default: 2222)", "每台主机都相同（默认：2222）"))
    files.add_argument("--program", default="train.py",
                       help=say("what the chief and the evaluator run (default: train.py)",
                                "chief 和评估器运行的程序（默认：train.py）"))
    files.add_argument("--format", choices=("jobs", "tfjob"), default="jobs",
                       help=say("jobs: a Service and a Job per task, and an evaluator Job (kubernetes.yaml); "
                                "tfjob: one Kubeflow TFJob with an Evaluator (tfjob.yaml)",
                                "jobs：每个任务一个 Service 和一个 Job，外加评估器的 Job（kubernetes.yaml）；"
                                "tfjob：一个带评估器的 Kubeflow TFJob（tfjob.yaml）"))
    files.add_argument("--image", default=None,
                       help=say("container image (default: the one the written Dockerfile builds)",
                                "容器镜像（默认：所写 Dockerfile 构建的镜像）"))
    files.add_argument("--name", default="pstutor",
                       help=say("prefix of the Kubernetes objects (default: pstutor)",
                                "Kubernetes 对象名称的前缀（默认：pstutor）"))
    files.add_argument("--volume-claim", default="pstutor-checkpoints",
                       help=say("PersistentVolumeClaim for the checkpoints (default: pstutor-checkpoints)",
                                "存放检查点的 PersistentVolumeClaim（默认：pstutor-checkpoints）"))
    files.add_argument("--out", type=argument_type(user_input.folder), default=Path("launch"),
                       help=say("folder for the files (default: launch); a rerun replaces its own files "
                                "and removes the stale ones; files pstutor did not write are never replaced",
                                "存放这些文件的文件夹（默认：launch）；再次运行会替换自己写的文件并删除"
                                "过时的文件；不是 pstutor 写的文件绝不会被覆盖"))
    files.add_argument("--force", action="store_true",
                       help=say("replace files of an earlier run even if they were edited since",
                                "即使上一次运行写出的文件之后被修改过，也照样覆盖"))
    files.set_defaults(run=_launch_files)

    versus = commands.add_parser("compare", help=say("train one model under each strategy, side by side",
                                                     "在每种策略下训练同一个模型，并排比较"))
    versus.add_argument("--strategies", default="none,mirrored,ps,mwms",
                        help=say("comma-separated: none, mirrored, ps, mwms (default: all four)",
                                 "用逗号分隔：none、mirrored、ps、mwms（默认：全部四种）"))
    versus.add_argument("--examples", type=_number(1, MAX_EXAMPLES), default=8192,
                        help=say(f"examples trained and timed per strategy, at most {MAX_EXAMPLES:,} "
                                 "(default: 8192)",
                                 f"每个策略训练并计时的样本数，最多 {MAX_EXAMPLES:,}（默认：8192）"))
    versus.add_argument("--batch-size", type=_number(1), default=32,
                        help=say("per replica, at most 1024 (default: 32)",
                                 "每个副本的批次大小，最大 1024（默认：32）"))
    versus.add_argument("--steps-per-execution", type=_number(1), default=1,
                        help=say("at most the steps trained (default: 1)", "不超过训练的步数（默认：1）"))
    versus.add_argument("--timeout", type=_number(1, MAX_TIMEOUT), default=300,
                        help=say("seconds per strategy (default: 300)", "每个策略的秒数上限（默认：300）"))
    versus.set_defaults(run=_compare)

    marks = commands.add_parser("grade", help=say("grade a class's exercise notebooks, as you keep grades",
                                                  "为全班的练习笔记本评分，输出为你保存成绩的格式"))
    marks.add_argument("submissions", type=Path,
                       help=say("folder with one .ipynb per student (the file name names the student)",
                                "每个学生一个 .ipynb 的文件夹（文件名即学生名）"))
    marks.add_argument("--out", type=Path, default=Path("grades.csv"),
                       help=say("the file to write (default: grades.csv); only a file pstutor grade wrote "
                                "is replaced",
                                "要写入的文件（默认：grades.csv）；只会替换 pstutor grade 自己写的文件"))
    marks.add_argument("--format", choices=("csv", "canvas", "gradescope", "prairielearn"), default="csv",
                       help=say("csv: the course's table; canvas: a Canvas/Moodle gradebook CSV; gradescope, "
                                "prairielearn: the autograder results.json of one submission",
                                "csv：课程自己的表格；canvas：Canvas/Moodle 成绩册 CSV；gradescope、"
                                "prairielearn：一份提交的自动评分 results.json"))
    marks.add_argument("--exercise", default=None,
                       help=say("grade only this exercise (e.g. 03): other notebooks are invalid",
                                "只评这个练习（例如 03）：其他笔记本都算无效"))
    marks.add_argument("--accept", action="append", default=[], metavar="STUDENT",
                       help=say("count the flagged tasks of STUDENT after you looked at them (repeatable)",
                                "查看之后，计入 STUDENT 被标记的任务的分数（可重复）"))
    marks.add_argument("--regrade", action="store_true",
                       help=say("grade every submission again, even those already in the table",
                                "重新评所有提交，包括表中已有的"))
    marks.add_argument("--timeout", type=_number(30), default=300,
                       help=say("seconds per submission (default: 300, at least 30)",
                                "每份提交的秒数上限（默认：300，至少 30）"))
    marks.add_argument("--no-sandbox", action="store_true",
                       help=say("run without the bubblewrap sandbox (only if you trust every submission)",
                                "不使用 bubblewrap 沙箱运行（只在你信任所有提交时使用）"))
    marks.add_argument("--course", type=Path, default=None,
                       help=say("the course folder whose exercises/ to grade against (default: found above "
                                "the working directory)", "用来评分的 exercises/ 所在的课程文件夹"
                                "（默认：从工作目录向上查找）"))
    marks.add_argument("--jobs", type=_positive, default=None,
                       help=say("students graded at once (default: what this machine's cores and memory "
                                "hold)",
                                "同时评分的学生数（默认：本机的核数和内存所能容纳的数量）"))
    marks.add_argument("--memory", type=_gib, default=6,
                       help=say("GiB one submission may use, its kernel and children together "
                                "(default: 6, at least 1)", "一份提交（内核及其子进程合计）可用的 GiB 数"
                                "（默认：6，至少 1）"))
    marks.set_defaults(run=_grade)

    autograder = commands.add_parser("autograder",
                                     help=say("the files an autograding service runs",
                                              "自动评分服务要运行的文件"))
    services = autograder.add_subparsers(dest="service", required=True)
    gradescope = services.add_parser("gradescope",
                                     help=say("setup.sh and run_autograder for Gradescope",
                                              "供 Gradescope 使用的 setup.sh 和 run_autograder"))
    gradescope.add_argument("--exercise", required=True,
                            help=say("the exercise it grades, e.g. 03", "它评分的练习，例如 03"))
    gradescope.add_argument("--out", type=Path, required=True,
                            help=say("a new (or empty) folder for the files",
                                     "存放这些文件的新（或空）文件夹"))
    gradescope.add_argument("--course", type=Path, default=None,
                            help=say("the course folder (default: found above the working directory)",
                                     "课程文件夹（默认：从工作目录向上查找）"))
    gradescope.set_defaults(run=_autograder)
    return main


def _positive(text: str) -> int:
    """A whole number of at least 1 (an argparse type)."""
    return argument_type(user_input.whole_number, 1)(text)


def _number(low: int, high: int | None = None):
    """An argparse type: a whole number from `low` to `high`."""
    return argument_type(user_input.whole_number, low, high)


class _Parser(argparse.ArgumentParser):
    """The parser of `pstutor` and of each subcommand: `--lang` everywhere, errors in one line.

    No abbreviations (`--work` is not taken for `--workers`): a typo is an error, never a guess.
    A subcommand that declares its own `--lang` replaces this one (conflict_handler="resolve").
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("conflict_handler", "resolve")
        super().__init__(*args, **kwargs)
        self.add_argument("--lang", choices=LANGUAGES, default=argparse.SUPPRESS,
                          help=say("language of the messages: en or zh (default: from LANG)",
                                   "消息的语言：en 或 zh（默认：取自 LANG）"))

    def error(self, message: str) -> None:
        """One line, `pstutor demo: argument --workers: ...`, and exit code 2."""
        self.exit(2, f"{self.prog}{say(': ', '：')}{message}\n")


# argparse words its own messages through gettext (`argparse._`); these are the Chinese ones.
# tests/test_cli.py checks that each still is a message of the running Python's argparse.
ARGPARSE_ZH = {
    "usage: ": "用法：",
    "positional arguments": "位置参数",
    "options": "选项",
    "show this help message and exit": "显示此帮助信息并退出",
    "argument %(argument_name)s: %(message)s": "参数 %(argument_name)s：%(message)s",
    "unrecognized arguments: %s": "无法识别的参数：%s",
    "not allowed with argument %s": "不能与参数 %s 同时使用",
    "ignored explicit argument %r": "此选项不接受值：%r",
    "the following arguments are required: %s": "缺少必需的参数：%s",
    "one of the arguments %s is required": "必须给出参数 %s 之一",
    "expected one argument": "需要一个值",
    "expected at most one argument": "最多只能有一个值",
    "expected at least one argument": "至少需要一个值",
    "ambiguous option: %(option)s could match %(matches)s": "有歧义的选项：%(option)s 可能是 %(matches)s",
    "invalid %(type)s value: %(value)r": "无效的 %(type)s 值：%(value)r",
    "invalid choice: %(value)r (choose from %(choices)s)": "无效的选择：%(value)r（可选：%(choices)s）",
}


@contextlib.contextmanager
def _argparse_words(lang: str) -> Iterator[None]:
    """While inside, argparse's own words (usage, options, its errors) are in `lang`."""
    if lang != "zh":
        yield
        return
    original = argparse._, argparse.ngettext
    argparse._ = lambda text: ARGPARSE_ZH.get(text, text)
    argparse.ngettext = lambda one, many, n: "需要 %s 个值" if one == "expected %s argument" else (
        one if n == 1 else many)
    try:
        yield
    finally:
        argparse._, argparse.ngettext = original


def chosen_language(argv: list[str], environ: Mapping[str, str]) -> str:
    """`--lang` anywhere before `--` (the last one wins), else the locale: zh_* is Chinese."""
    chosen = None
    for i, word in enumerate(argv):
        if word == "--":
            break
        if word == "--lang" and i + 1 < len(argv):
            chosen = argv[i + 1]
        elif word.startswith("--lang="):
            chosen = word.split("=", 1)[1]
    if chosen in LANGUAGES:
        return chosen
    locale = next((environ[name] for name in ("LC_ALL", "LC_MESSAGES", "LANG") if environ.get(name)), "")
    return "zh" if locale.lower().startswith("zh") else "en"


class _Stops:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt once; the signal is kept for the exit code."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> _Stops:
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup and friends keep their choice
                self._previous[sig] = signal.signal(sig, self._stop)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _stop(self, signum: int, frame: object) -> None:
        if self.signal is not None:  # a second signal while cleaning up: stop now
            os._exit(128 + signum)
        self.signal = signum
        raise KeyboardInterrupt

    def exit_code(self, code: int) -> int:
        """SIGTERM and SIGHUP exit with 128 + signal; Ctrl-C keeps the command's own code."""
        return 128 + self.signal if self.signal in (signal.SIGTERM, signal.SIGHUP) else code


def _gib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value < 1:
        raise argparse.ArgumentTypeError(say(f"must be a number of GiB, at least 1, not {text!r}",
                                             f"必须是以 GiB 为单位、至少为 1 的数，而不是 {text!r}"))
    return value


def _known_errors() -> tuple[type[Exception], ...]:
    """The errors that mean bad input or a task that could not start: said in one line.

    Only modules already imported can have raised theirs, so none is imported here.
    """
    names = {"pstutor.build": "LessonError", "pstutor.manifest": "ManifestError", "pstutor.demo": "DemoError",
             "pstutor.grading.classroom": "GradingError",
             "pstutor.grading.autograder": "AutograderError",
             "pstutor.launch_files": "LaunchFilesError", "pstutor.local_cluster": "ClusterStartError",
             "pstutor.tf_config": "TFConfigError", "pstutor.written": "OutputRefused"}
    found = [getattr(sys.modules[module], name) for module, name in names.items() if module in sys.modules]
    return (BadInput, CourseNotFoundError, *found)


def _prog(args: argparse.Namespace | None) -> str:
    """'pstutor cluster launch-files': the command the user ran, as the first words of a message."""
    words = ["pstutor", getattr(args, "command", None), getattr(args, "action", None)]
    return " ".join(word for word in words if word)


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that nothing more (not even the exit's flush) fails."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `pstutor` command; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    set_language(chosen_language(argv, os.environ))
    args = None
    with _Stops() as stops:
        try:
            try:
                with _argparse_words(current_language()):
                    args = parser().parse_args(argv)
            except SystemExit as done:  # --help, --version, or a bad argument (already said)
                return done.code if isinstance(done.code, int) else 2
            set_language(getattr(args, "lang", current_language()))
            return stops.exit_code(args.run(args))
        except BrokenPipeError:  # the reader of our output went away: stop as quietly as Ctrl-C
            _quiet_stdout()
            return CLOSED_PIPE
        except KeyboardInterrupt:
            print(say("interrupted.", "已中断。"), file=sys.stderr)
            return stops.exit_code(130)
        except Exception as err:
            if stops.signal is not None:  # what the interruption broke (a kernel, a child): not news
                print(say("interrupted.", "已中断。"), file=sys.stderr)
                return stops.exit_code(130)
            if isinstance(err, _known_errors()):
                print(f"{_prog(args)}{say(': ', '：')}{err}", file=sys.stderr)
                return 2
            if isinstance(err, OSError) and err.strerror:
                where = f": {err.filename}" if err.filename else ""
                print(f"{_prog(args)}{say(': ', '：')}{err.strerror}{where}", file=sys.stderr)
                return 1
            raise


if __name__ == "__main__":
    sys.exit(main())
