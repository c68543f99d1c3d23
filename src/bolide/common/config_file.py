"""Java ``.properties`` files (RocketMQ's ``broker.conf`` / ``namesrv.conf``) and the typed
reading of their values, shared by every component's config loader."""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Self

from bolide.common.config_persist import write_atomic
from bolide.errors import ConfigError


def _entries(lines: list[str]) -> Iterator[tuple[int, int, str, str]]:
    """``(first, last, key, value)`` of each entry of properties ``lines``: the indexes of its
    first and last line (a value ending with ``\\`` goes on over the next line)."""
    i = 0
    while i < len(lines):
        first = i
        line = lines[i].strip()
        i += 1
        if not line or line[0] in "#!":
            continue  # a comment line is never continued onto the next line
        while line.endswith("\\"):
            line = line[:-1] + (lines[i].strip() if i < len(lines) else "")
            i += 1
        for j, ch in enumerate(line):
            if ch in "=:" or ch.isspace():
                key, value = line[:j], line[j + 1 :].strip()
                if ch.isspace() and value[:1] in ("=", ":"):
                    value = value[1:].strip()
                break
        else:
            key, value = line, ""
        yield first, min(i, len(lines)) - 1, key.strip(), value


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``key=value`` or ``key: value``, ``#``/``!`` comments)."""
    return {key: value for _, _, key, value in _entries(text.splitlines())}


def set_properties(text: str, changes: Mapping[str, str]) -> str:
    """``text`` with each key of ``changes`` set to its value: the key's last entry rewritten as
    ``key=value`` in place (earlier ones, which it overrides, left as they are), keys not in
    the text appended; comments and the other lines kept."""
    lines = text.splitlines()
    last: dict[str, tuple[int, int]] = {}
    for first, end, key, _ in _entries(lines):
        if key in changes:
            last[key] = (first, end)
    for key, (first, end) in sorted(last.items(), key=lambda item: -item[1][0]):
        lines[first:end + 1] = [f"{key}={changes[key]}"]
    lines += [f"{key}={value}" for key, value in changes.items() if key not in last]
    return "".join(line + "\n" for line in lines)


def update_properties_file(path: Path, changes: Mapping[str, str]) -> None:
    """Set ``changes`` in the properties file at ``path`` (:func:`set_properties`; created when
    missing), replaced atomically with the old text kept in ``.bak``; OSError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    write_atomic(path, set_properties(text, changes).encode("utf-8"))


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
        found = by_key.get(key)
        if found is not None:
            values[found.name] = convert_property(found.metadata["key"], found.default, raw)
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

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def updated(self, props: dict[str, str]) -> Self:
        """This config with the known keys of ``props`` changed (an UPDATE_*_CONFIG request)."""
        return dataclasses.replace(self, **known_values(type(self), props))  # type: ignore[type-var]

    def to_properties(self) -> dict[str, str]:
        """Every setting under its RocketMQ key, as Java's Configuration lists them."""
        out = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if "key" not in f.metadata:
                continue
            value = getattr(self, f.name)
            out[f.metadata["key"]] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out

    def to_properties_text(self) -> str:
        """A GET_*_CONFIG answer's body: ``key=value`` lines."""
        return "".join(f"{k}={v}\n" for k, v in sorted(self.to_properties().items()))
