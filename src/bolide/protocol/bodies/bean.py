"""Declarative JSON bodies: dataclasses whose fields carry the names Java's beans use.

::

    @bean
    class QueueData(Bean):
        broker_name: str = ""
        topic_sys_flag: int = jfield(default=0, aliases=("topicSynFlag",))

A snake_case attribute maps to the camelCase JSON name (``broker_name`` -> ``brokerName``)
unless ``jfield(name=...)`` says otherwise. Types drive conversion: ``str``, ``int``,
``float``, ``bool``, ``Any``, nested beans, ``list[X]``, ``set[X]``, ``dict[K, V]`` with
``K`` one of ``str``, ``int`` (Java ``Long`` keys, written bare by fastjson) or a bean (a
``MessageQueue`` key, written as a bare object), and ``X | None``. Parsing is tolerant the
way Java's fastjson is: unknown fields are ignored, missing or null ones keep their default,
numbers may arrive as strings and strings as numbers (Go writes ``codeSet`` as strings).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple, Self, TypeVar, dataclass_transform, overload

from bolide.errors import ProtocolError
from bolide.protocol import fastjson

T = TypeVar("T")
ToJson = Callable[[Any], Any]
FromJson = Callable[[Any, str], Any]


def jfield(*, default: Any = dataclasses.MISSING, factory: Callable[[], Any] | None = None,
           name: str | None = None, aliases: tuple[str, ...] = ()) -> Any:
    """A bean field with a JSON name other than the camelCase one, or extra names to accept."""
    meta = {"json": name, "aliases": aliases}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class JsonField(NamedTuple):
    attr: str
    names: tuple[str, ...]  # the JSON name first, then accepted aliases
    to_json: ToJson
    from_json: FromJson


def _bad(path: str, kind: str, value: Any) -> ProtocolError:
    text = repr(value)
    return ProtocolError(f"{path}: expected {kind}, got {text[:60]}")


def _as_str(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise _bad(path, "a string", value)


def _as_int(value: Any, path: str) -> int:
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _bad(path, "an integer", value)


def _as_float(value: Any, path: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise _bad(path, "a number", value)


def _as_bool(value: Any, path: str) -> bool:
    if value is True or value is False:
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, int):
        return value != 0
    raise _bad(path, "a boolean", value)


def _same(value: Any) -> Any:
    return value


def _ordered(values: Any) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return list(values)


def _key_codec(hint: Any) -> FromJson:
    if hint is str:
        return _as_str
    if hint is int:
        return _as_int
    if isinstance(hint, type) and issubclass(hint, Bean):
        def parse_key(key: Any, path: str) -> Any:
            if isinstance(key, str):
                key = fastjson.loads(key)
            return hint.from_json_obj(key, path)
        return parse_key
    raise TypeError(f"bean map keys must be str, int or a bean, not {hint!r}")


def codec(hint: Any) -> tuple[ToJson, FromJson]:
    """The (to JSON, from JSON) converters for a field's type."""
    origin = typing.get_origin(hint)
    if isinstance(hint, types.UnionType) or origin is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"bean fields take one type or 'X | None', not {hint!r}")
        to_inner, from_inner = codec(args[0])
        return to_inner, lambda v, p: None if v is None else from_inner(v, p)
    scalars: dict[Any, FromJson] = {str: _as_str, int: _as_int, float: _as_float, bool: _as_bool,
                                    Any: lambda v, p: v}
    if hint in scalars:
        return _same, scalars[hint]
    if isinstance(hint, type) and issubclass(hint, Bean):
        return (lambda v: v.to_json_obj()), hint.from_json_obj
    if origin in (list, set):
        to_item, from_item = codec(typing.get_args(hint)[0])
        kind = origin

        def from_seq(value: Any, path: str) -> Any:
            if not isinstance(value, list):
                raise _bad(path, "an array", value)
            items = (from_item(v, f"{path}[{i}]") for i, v in enumerate(value) if v is not None)
            return kind(items)

        if origin is set:
            return (lambda v: [to_item(x) for x in _ordered(v)]), from_seq
        return (lambda v: [to_item(x) for x in v]), from_seq
    if origin is dict:
        key_hint, value_hint = typing.get_args(hint)
        from_key = _key_codec(key_hint)
        to_value, from_value = codec(value_hint)

        def from_map(value: Any, path: str) -> dict[Any, Any]:
            if not isinstance(value, dict):
                raise _bad(path, "an object", value)
            return {from_key(k, f"{path}.<key {k!r}>"): from_value(v, f"{path}[{k!r}]")
                    for k, v in value.items() if v is not None}

        return (lambda v: {k: to_value(x) for k, x in v.items()}), from_map
    raise TypeError(f"no JSON conversion for bean field type {hint!r}")


class Bean:
    """Base of JSON bodies built with :func:`bean`."""

    __slots__ = ()
    JSON_FIELDS: ClassVar[tuple[JsonField, ...]] = ()

    def to_json_obj(self) -> dict[str, Any]:
        """A dict of JSON values (map keys may stay ints or beans for the writer to place)."""
        out: dict[str, Any] = {}
        for f in self.JSON_FIELDS:
            value = getattr(self, f.attr)
            if value is not None:
                out[f.names[0]] = f.to_json(value)
        return out

    @classmethod
    def from_json_obj(cls, obj: Any, path: str = "") -> Self:
        """Build from parsed JSON; raises ProtocolError naming the first bad field."""
        path = path or cls.__name__
        if not isinstance(obj, dict):
            raise _bad(path, f"a {cls.__name__} object", obj)
        values: dict[str, Any] = {}
        for f in cls.JSON_FIELDS:
            for name in f.names:
                raw = obj.get(name)
                if raw is not None:
                    values[f.attr] = f.from_json(raw, f"{path}.{name}")
                    break
        return cls(**values)

    def encode(self, *, standard: bool = False) -> bytes:
        """fastjson-shaped JSON; ``standard=True`` quotes non-string map keys."""
        return fastjson.dumps(self, standard=standard)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse a body as Java, Go or ali-ons write it; raises ProtocolError."""
        return cls.from_json_obj(fastjson.loads(data))


@overload
def bean(cls: type[T], /) -> type[T]: ...


@overload
def bean(*, frozen: bool = False, order: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(jfield, dataclasses.field))
def bean(cls: type[T] | None = None, /, *, frozen: bool = False, order: bool = False) -> Any:
    """Class decorator: a slotted dataclass with its JSON field table."""

    def build(target: type[T]) -> type[T]:
        built: Any = dataclasses.dataclass(slots=True, frozen=frozen, order=order)(target)
        hints = typing.get_type_hints(built)
        table = []
        for f in dataclasses.fields(built):
            name = f.metadata.get("json") or camel(f.name)
            to_json, from_json = codec(hints[f.name])
            table.append(JsonField(f.name, (name, *f.metadata.get("aliases", ())), to_json,
                                   from_json))
        built.JSON_FIELDS = tuple(sorted(table, key=lambda j: j.names[0]))
        return built  # type: ignore[no-any-return]

    return build if cls is None else build(cls)
