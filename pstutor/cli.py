"""The `pstutor` command: `demo` (the main job), `doctor` and `build`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pstutor.language import LANGUAGES, say, set_language


def _demo(args: argparse.Namespace) -> int:
    from pstutor.demo import run_demo

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
    from pstutor.build import ROOT, build

    for path in build(args.lessons or None, run=not args.no_execute):
        print(say("wrote", "已写入"), path.relative_to(ROOT))
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
    build.set_defaults(run=_build)
    return main


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `pstutor` command."""
    args = parser().parse_args(argv)
    set_language(args.lang)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
