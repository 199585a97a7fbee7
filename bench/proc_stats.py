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
