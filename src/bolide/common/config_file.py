"""Java ``.properties`` files (RocketMQ's ``broker.conf`` / ``namesrv.conf``) and the typed
reading of their values, shared by every component's config loader."""

from __future__ import annotations

import dataclasses
import enum
import os
from pathlib import Path
from typing import Any, Self

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


def config_field(key: str, default: Any, *, alias: str | None = None, **extra: Any) -> Any:
    """A dataclass field read from the RocketMQ property ``key`` (or its old spelling ``alias``)."""
    meta = {"key": key, **extra}
    if alias:
        meta["alias"] = alias
    return dataclasses.field(default=default, metadata=meta)


def known_values(cls: type, props: dict[str, str]) -> dict[str, Any]:
    """The values of ``props`` whose keys name fields of the dataclass ``cls``, converted."""
    by_key: dict[str, dataclasses.Field[Any]] = {}
    for f in dataclasses.fields(cls):
        if "key" in f.metadata:
            by_key[f.metadata["key"]] = f
            if "alias" in f.metadata:
                by_key[f.metadata["alias"]] = f
    values: dict[str, Any] = {}
    for key, raw in props.items():
        f = by_key.get(key)
        if f is not None:
            values[f.name] = convert_property(f.metadata["key"], f.default, raw)
    return values


class PropertiesConfig:
    """Loading for frozen config dataclasses whose fields come from :func:`config_field`."""

    __slots__ = ()

    @classmethod
    def from_properties(cls, path: str | os.PathLike[str], **overrides: Any) -> Self:
        """Load a RocketMQ properties file (``broker.conf``, ``namesrv.conf``); ``overrides`` win."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        return cls.from_mapping(parse_properties(text), **overrides)

    @classmethod
    def from_mapping(cls, props: dict[str, str], **overrides: Any) -> Self:
        """Build a config from RocketMQ camelCase keys (unknown keys are ignored)."""
        return cls(**{**known_values(cls, props), **overrides})
