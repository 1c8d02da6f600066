"""Stored results of the course's benchmarks, shipped with the package.

A measurement that a lesson's prose relies on has to be long enough to mean something
(several rounds of a second or more, their spread shown), which would make the lesson slow.
So a script in `benchmarks/` measures once and writes its results, with the machine and the
date, to `pstutor/measurements/NAME.json`; the lesson shows them with `measurement(NAME)`.
The files travel in the wheel, so the lesson shows them in Colab as well as in a clone.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from importlib import resources
from pathlib import Path

FOLDER = Path(__file__).with_name("measurements")


def measurement(name: str) -> dict:
    """The stored results of benchmark `name`: a dict with its `date` and `machine`."""
    text = resources.files("pstutor").joinpath("measurements", f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)


def machine() -> dict[str, object]:
    """Where a benchmark runs: processor, cores, system, Python and TensorFlow versions."""
    import tensorflow as tf

    processor = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            processor = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"processor": processor, "cores": os.cpu_count(), "system": platform.system(),
            "python": platform.python_version(), "tensorflow": tf.__version__}


def store(name: str, results: dict, folder: Path = FOLDER) -> Path:
    """Write `results` with today's date and this machine as `folder/NAME.json`; return the path."""
    record = {"benchmark": name, "date": datetime.date.today().isoformat(), "machine": machine(), **results}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
