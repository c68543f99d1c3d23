"""What the ``bolide bench`` commands share: process memory from ``/proc``, percentiles, the
machine description, and the output conventions (a rich table on stderr, one JSON document
on stdout and in ``--output FILE``)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import click
from rich.console import Console

MiB = 1024 * 1024


def r(value: float | None, digits: int = 1) -> float | None:
    """``value`` rounded for the JSON document; None stays None."""
    return None if value is None else round(value, digits)


def proc_status(pid: int | None = None) -> dict[str, float]:
    """``VmHWM``, ``VmRSS``, ``RssAnon`` and ``RssFile`` of a process (this one by default)
    in MiB; empty off Linux or when the process is gone."""
    found: dict[str, float] = {}
    try:
        with open(f"/proc/{pid or 'self'}/status", encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                    found[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return found


def reset_peak_rss(pid: int | None = None) -> bool:
    """Reset a process's ``VmHWM`` to its current RSS (Linux 4.0+); False when not possible."""
    try:
        with open(f"/proc/{pid or 'self'}/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def percentile(sorted_values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * pct // 100))
    return sorted_values[int(rank) - 1]


def load_avg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def total_memory_mib() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // MiB
    except (ValueError, OSError):
        return None


def machine_info() -> dict[str, Any]:
    """The ``machine`` object of a benchmark's JSON document."""
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "memory_mib": total_memory_mib(),
    }


def stderr_console() -> Console:
    """The console the tables and progress lines go to."""
    console = Console(stderr=True)
    if not console.is_terminal:
        console.width = 160  # a log file: keep each case on one line
    return console


def emit(doc: dict[str, Any], output: Path | None) -> None:
    """Print ``doc`` as JSON on stdout and also write it to ``output`` when given."""
    text = json.dumps(doc, indent=2)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n", encoding="utf-8")
    click.echo(text)
