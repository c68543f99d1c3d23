"""Java ``.properties`` files (RocketMQ's ``broker.conf`` / ``namesrv.conf``) and the typed
reading of their values, shared by every component's config loader."""

from __future__ import annotations

import enum
from typing import Any

from bolide.errors import ConfigError


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``key=value`` or ``key: value``, ``#``/``!`` comments)."""
    result: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue  # a comment line is never continued onto the next line
        while line.endswith("\\"):
            line = line[:-1] + next(lines, "").strip()
        for i, ch in enumerate(line):
            if ch in "=:" or ch.isspace():
                key, value = line[:i], line[i + 1 :].strip()
                if ch.isspace() and value[:1] in ("=", ":"):
                    value = value[1:].strip()
                break
        else:
            key, value = line, ""
        result[key.strip()] = value
    return result


def convert_property(name: str, default: Any, raw: str) -> Any:
    """``raw`` read as the type of ``default`` (bool, enum, int or str); raises ConfigError."""
    try:
        if isinstance(default, bool):
            if raw.lower() not in ("true", "false"):
                raise ValueError
            return raw.lower() == "true"
        if isinstance(default, enum.Enum):
            return type(default)(raw.strip().upper())
        if isinstance(default, int):
            return int(raw)
        return raw
    except ValueError:
        expected = (
            "true or false" if isinstance(default, bool)
            else " or ".join(e.value for e in type(default)) if isinstance(default, enum.Enum)
            else "an integer" if isinstance(default, int) else "a string"
        )
        raise ConfigError(f"{name}={raw!r} is not valid: expected {expected}") from None
