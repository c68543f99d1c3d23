"""Delay levels (``messageDelayLevel``) and the SCHEDULE_TOPIC_XXXX rewrite of delayed sends.

Timer messages (RocketMQ 5's delivery at any time) ride on the levels: a message due in
``remaining`` ms waits in the largest level not longer than that, then in the largest level not
longer than what is left, and so on (:func:`timer_level`), so every level queue stays in order of
due time and the whole wait is on disk.
"""

from __future__ import annotations

from bolide.errors import ConfigError

_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> dict[int, int]:
    """``"1s 5s 10s ..."`` -> {1: 1000, 2: 5000, ...} (levels are 1-based)."""
    levels: dict[int, int] = {}
    for i, item in enumerate(text.split(), start=1):
        unit = _UNITS.get(item[-1:])
        if unit is None or not item[:-1].isdecimal():
            raise ConfigError(
                f"messageDelayLevel item {item!r} is not valid: write numbers with a unit "
                "s, m, h or d, separated by spaces"
            )
        levels[i] = int(item[:-1]) * unit
    return levels


def timer_level(remaining_ms: int, delay_millis: dict[int, int]) -> int | None:
    """The level a timer message due in ``remaining_ms`` waits in next: the longest one not
    longer than that; None when it is due now (less than half the shortest level is left)."""
    best: tuple[int, int] | None = None  # (delay, level)
    shortest: tuple[int, int] | None = None
    for level, delay in delay_millis.items():
        if delay <= remaining_ms and (best is None or delay > best[0]):
            best = (delay, level)
        if shortest is None or delay < shortest[0]:
            shortest = (delay, level)
    if best is not None:
        return best[1]
    if shortest is not None and 2 * remaining_ms >= shortest[0]:
        return shortest[1]
    return None
