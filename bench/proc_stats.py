"""What a bench reads of another process from Linux /proc: its CPU time and its memory."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds a process has used (not the time the hypervisor stole from
    it); 0 when unknown."""
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB (NaN when unknown)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pin(pid: int, cpus: set[int]) -> None:
    """Run a process — every thread of it, and of the processes it started — on ``cpus`` only
    (``os.sched_setaffinity`` sets one thread's)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    todo = [pid]
    while todo:
        process = todo.pop()
        todo += children.get(process, [])
        for task in Path(f"/proc/{process}/task").glob("*"):
            try:
                os.sched_setaffinity(int(task.name), cpus)
            except (OSError, ValueError):
                pass  # a thread that ended meanwhile
