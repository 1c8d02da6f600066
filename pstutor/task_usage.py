"""What a task costs the machine, read from the operating system: its resident memory, and the
bytes its TCP connections carried.

Lesson 10 shards an embedding table over parameter servers and shows, per task, the memory
it holds and the bytes one training step moves. Both numbers come from the kernel, not from
the model's arithmetic, so the lesson can put them next to that arithmetic:

- `resident_bytes(pid)`: `VmRSS` of /proc/PID/status, the memory `top` shows for the process.
- `snapshot(pids)` and `traffic_between(before, after)`: the bytes each process sent and
  received on its TCP sockets in between, from `ss --tcp --info --processes` (iproute2). `ss`
  asks the kernel's sock_diag netlink interface for every socket's `tcp_info` counters
  (`bytes_sent`, `bytes_retrans`, `bytes_received`) and names the process holding each
  socket. Both work for an ordinary user on their own processes: no root, no network
  namespace, no packet capture (tested as user `nobody`).

Counted per process, not per port: TensorFlow's tasks talk in both directions. A worker
calls a ps on the ps's port, but a ps also opens connections of its own to a worker (a
receiving task pulls a tensor from the sending one: `RecvTensor`), so the bytes a ps
receives do not all arrive on the connections to its port.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from collections.abc import Iterable

from pstutor.language import say

_PID = re.compile(r"pid=(\d+),")
_COUNTER = re.compile(r"\b(bytes_sent|bytes_received|bytes_retrans):(\d+)")


@dataclasses.dataclass(frozen=True)
class Traffic:
    """Bytes a process's TCP sockets carried: data sent (each byte once) and received."""

    sent: int = 0
    received: int = 0
    retransmitted: int = 0  # sent again on top of `sent` (it happens on loopback too, rarely)

    def __sub__(self, other: Traffic) -> Traffic:
        return Traffic(self.sent - other.sent, self.received - other.received,
                       self.retransmitted - other.retransmitted)

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(self.sent + other.sent, self.received + other.received,
                       self.retransmitted + other.retransmitted)


# one socket's counters, by (pid, local address, peer address)
Snapshot = dict[tuple[int, str, str], Traffic]


def resident_bytes(pid: int) -> int:
    """The resident memory of process `pid` in bytes (`VmRSS`; the kernel reports it in kB)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise ProcessLookupError(pid)  # a zombie has no VmRSS line


def snapshot(pids: Iterable[int]) -> Snapshot:
    """The counters of every TCP socket that one of `pids` holds, from one call of `ss`."""
    if shutil.which("ss") is None:
        raise RuntimeError(say("`ss` is not installed; it comes with iproute2 (apt-get install iproute2).",
                               "没有找到 `ss`；它属于 iproute2（apt-get install iproute2）。"))
    wanted = set(pids)
    lines = subprocess.run(["ss", "--tcp", "--info", "--processes", "--numeric", "--no-header", "--oneline"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    sockets: Snapshot = {}
    for line in lines:
        fields = line.split()
        counters = {name: int(value) for name, value in _COUNTER.findall(line)}  # ss omits zeros
        retransmitted = counters.get("bytes_retrans", 0)  # bytes_sent counts these bytes twice
        traffic = Traffic(counters.get("bytes_sent", 0) - retransmitted, counters.get("bytes_received", 0),
                          retransmitted)
        for pid in {int(p) for p in _PID.findall(line)} & wanted:
            sockets[(pid, fields[3], fields[4])] = traffic
    return sockets


def traffic_between(before: Snapshot, after: Snapshot) -> dict[int, Traffic]:
    """Per process, the bytes sent to and received from other processes between two snapshots.

    A socket opened in between counts from zero; one closed in between is no longer seen and
    its last bytes are missed (TensorFlow's gRPC channels stay open while a cluster runs). A
    connection whose two ends the same process holds (a task's gRPC client calling its own
    server) moves nothing between tasks and is left out.
    """
    moved: dict[int, Traffic] = {}
    for (pid, local, peer), now in after.items():
        if (pid, peer, local) in after:
            continue
        moved[pid] = moved.get(pid, Traffic()) + (now - before.get((pid, local, peer), Traffic()))
    return moved
