"""TensorFlow's log while a lesson breaks a task on purpose: collected, then shown in a few lines.

When a task fails, TensorFlow logs what its coordinator made of it: `ERROR:tensorflow`
messages from Python (each many lines long, and in a notebook printed twice, by TensorFlow's
own handler and by absl's) and `E0000` lines from its C++ runtime. The decision the lesson
is about sits in one line of each ("It is treated as a transient connectivity failure for
now."). `TensorFlowLog` collects both kinds while its `with` block runs and prints nothing;
`show()` then prints one line per message: how it starts, and how it ends when it ends with
a sentence.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import threading
import time

from pstutor.language import say

# "E0000 00:00:1796.123   10207 context.cc:873] ..." -> level, where and what
_NATIVE = re.compile(r"^([EWIF]\d{4}) [\d:.]+\s+\d+ (.*)$")
_SENTENCE = re.compile(r"^[A-Z][^{}]*\.$")  # "This derived error is ignored and not reported to users."


class TensorFlowLog:
    """Collect TensorFlow's Python and C++ log messages during a `with` block; `show()` them short.

    The coordinator's threads may log a moment after the call that raised: on leaving the
    block it waits until no message has arrived for `settle` seconds (at most `limit`).
    """

    def __init__(self, settle: float = 0.5, limit: float = 5.0) -> None:
        self.settle, self.limit = settle, limit
        self.messages: list[str] = []  # the Python messages, in full
        self.levels: list[str] = []  # their levels ("ERROR", ...)
        self.native: list[str] = []  # the first line of each C++ message, time stamp removed
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def __enter__(self) -> TensorFlowLog:
        self._logger = logging.getLogger("tensorflow")
        self._saved = (self._logger.handlers[:], self._logger.propagate)
        handler = logging.Handler()
        handler.emit = self._collect  # type: ignore[method-assign]
        self._logger.handlers, self._logger.propagate = [handler], False
        sys.stderr.flush()
        self._stderr = os.dup(2)  # the C++ runtime writes to file descriptor 2
        self._file = tempfile.TemporaryFile(mode="w+b")
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc) -> None:
        deadline = time.monotonic() + self.limit
        while time.monotonic() < deadline and time.monotonic() - self._last < self.settle:
            time.sleep(0.05)
        self._logger.handlers, self._logger.propagate = self._saved
        os.dup2(self._stderr, 2)
        os.close(self._stderr)
        self._file.seek(0)
        text = self._file.read().decode("utf-8", errors="replace")
        self._file.close()
        self.native = [" ".join(m.groups()) for m in map(_NATIVE.match, text.splitlines()) if m]

    def _collect(self, record: logging.LogRecord) -> None:
        with self._lock:
            self.messages.append(record.getMessage())
            self.levels.append(record.levelname)
            self._last = time.monotonic()

    def lines(self, width: int = 110) -> list[str]:
        """One line per message: its first line, and its last line when that is a sentence."""
        shown = []
        for level, message in zip(self.levels, self.messages, strict=True):
            parts = [line.strip() for line in message.splitlines() if line.strip()] or [""]
            first = parts[0] if len(parts[0]) <= width else parts[0][:width - 1] + "…"
            ending = f" … {parts[-1]}" if len(parts) > 1 and _SENTENCE.match(parts[-1]) else ""
            shown.append(f"{level}  {first}{ending}")
        return shown + [line if len(line) <= width + 6 else line[:width + 5] + "…" for line in self.native]

    def show(self) -> None:
        """Print how many messages TensorFlow logged, then one line for each."""
        count = len(self.messages) + len(self.native)
        print(say(f"TensorFlow logged {count} message(s) meanwhile, one line each:",
                  f"这期间 TensorFlow 记录了 {count} 条日志，每条只显示一行："))
        for line in self.lines():
            print("   ", line)
