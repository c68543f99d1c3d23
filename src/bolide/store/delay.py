"""Delay levels (``messageDelayLevel``) and the SCHEDULE_TOPIC_XXXX rewrite of delayed sends."""

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
