"""Declarative custom headers: a plain dataclass declaration is the field table.

::

    @header
    class GetMaxOffsetRequestHeader(Header):
        topic: str                 # @CFNotNull in Java: required
        queue_id: int              # extFields key "queueId" (camelCase of the attribute)
        bname: str | None = None   # nullable: left out while None

The field type (``str``, ``int``, ``bool``, ``float``) says how the string is parsed; keys
other than the camelCase attribute name go in ``WIRE_NAMES``. A field whose type excludes
None is written on every encode (:meth:`Header.to_ext_fields` raises :class:`HeaderFieldError`
if it is None, because a Java client unboxing a missing response field fails with a
NullPointerException); without a default it is also required on decode, and
:meth:`Header.from_ext_fields` raises :class:`HeaderFieldError` naming it when it is absent
or does not parse. A non-None default stands for a Java primitive's initial value.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple, Self, TypeVar, dataclass_transform

from bolide.common.compiled import load
from bolide.errors import HeaderFieldError

T = TypeVar("T")
_compiled = load("bolide.protocol._codec")
_KINDS = {str: 0, int: 1, bool: 2, float: 3}  # the field kinds of _codec.header_from_ext


def _parse_bool(value: object) -> bool:
    # Java Boolean.parseBoolean: "true" in any case is true, anything else false.
    return value is True or str(value).lower() == "true"


def format_value(value: object) -> str:
    """A header value as Java's ``toString`` writes it (booleans lower-case)."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    return str(value)


_PARSERS: dict[type, tuple[Callable[[Any], Any] | None, str]] = {
    str: (None, "a string"),
    int: (int, "an integer"),
    bool: (_parse_bool, "a boolean"),
    float: (float, "a number"),
}


class FieldSpec(NamedTuple):
    """One header field: attribute, extFields key, parser, and its presence rules."""

    attr: str
    wire: str
    parse: Callable[[Any], Any] | None
    kind: str
    required: bool  # must be present when decoding
    nullable: bool  # may be None (then left out) when encoding
    default: Any = None


def _missing(cls: type, wire: str) -> HeaderFieldError:
    return HeaderFieldError(cls.__name__, wire, "is required but missing")


def _unparsable(cls: type, wire: str, raw: object, kind: str) -> HeaderFieldError:
    return HeaderFieldError(cls.__name__, wire, f"is {raw!r}, not {kind}")


def _unset(cls: type, wire: str) -> HeaderFieldError:
    return HeaderFieldError(cls.__name__, wire,
                            "is required but None: set it (Java clients fail on a missing field)")


def _compile(cls: type, specs: tuple[FieldSpec, ...]) -> None:
    """Give ``cls`` a generated from_ext_fields / to_ext_fields pair for ``specs``.

    Generated straight-line code (as dataclasses does for ``__init__``) keeps the send and
    pull headers, parsed on every request, a few times faster than a loop over the table;
    the compiled ``header_from_ext``, when built, parses the common case (a dict of plain
    strings with every required field, decimal integers) faster still and leaves the rest
    (and every error) to that code.
    """
    env: dict[str, Any] = {"_missing": _missing, "_unparsable": _unparsable, "_unset": _unset,
                           "_fmt": format_value, "_new": object.__new__, "_int": int.__repr__,
                           "_fast": _compiled.header_from_ext if _compiled else None,
                           "_table": compiled_table(specs)}
    parse = ["def from_ext_fields(cls, ext):"]
    if _compiled is not None:
        parse += ["    self = _fast(cls, ext, _table)", "    if self is not None: return self"]
    parse += ["    get = ext.get", "    self = _new(cls)"]
    emit = ["def to_ext_fields(self):", "    out = {}"]
    for i, s in enumerate(specs):
        v, wire = f"v{i}", repr(s.wire)
        parse.append(f"    {v} = get({wire})")
        if s.required:
            parse.append(f"    if {v} is None: raise _missing(cls, {wire})")
            indent = "    "
        else:
            env[f"d{i}"] = s.default
            parse.append(f"    if {v} is None: {v} = d{i}")
            parse.append("    else:")
            indent = "        "
        if s.parse is not None:
            env[f"p{i}"] = s.parse
            parse += [f"{indent}try: {v} = p{i}({v})",
                      f"{indent}except (ValueError, TypeError):",
                      f"{indent}    raise _unparsable(cls, {wire}, {v}, {s.kind!r}) from None"]
        elif not s.required:
            parse.append(f"{indent}pass")
        parse.append(f"    self.{s.attr} = {v}")
        emit.append(f"    {v} = self.{s.attr}")
        text = f"{v} if {v}.__class__ is str else _fmt({v})"
        if s.parse is int:
            text = f"_int({v}) if {v}.__class__ is int else _fmt({v})"
        if not s.nullable:
            emit.append(f"    if {v} is None: raise _unset(type(self), {wire})")
            emit.append(f"    out[{wire}] = {text}")
        else:
            emit.append(f"    if {v} is not None: out[{wire}] = {text}")
    parse.append("    return self")
    emit.append("    return out")
    exec("\n".join(parse + emit), env)  # source built above from the field table
    from_ext = env["from_ext_fields"]
    from_ext.__doc__ = Header.from_ext_fields.__doc__
    env["to_ext_fields"].__doc__ = Header.to_ext_fields.__doc__
    cls.FIELDS = specs  # type: ignore[attr-defined]
    cls.from_ext_fields = classmethod(from_ext)  # type: ignore[attr-defined]
    cls.to_ext_fields = env["to_ext_fields"]  # type: ignore[attr-defined]


def compiled_table(specs: tuple[FieldSpec, ...]) -> tuple[tuple[str, str, int, bool, Any], ...]:
    """``specs`` as ``_codec.header_from_ext`` reads them: (attribute, extFields key, kind,
    required, default) per field."""
    return tuple((sys.intern(s.attr), s.wire, _KINDS[_parser_type(s)], s.required, s.default)
                 for s in specs)


def _parser_type(spec: FieldSpec) -> type:
    return next(t for t, (parse, _) in _PARSERS.items() if parse is spec.parse)


class Header:
    """Base of all custom headers; subclasses are built with :func:`header`.

    A subclass of a header class that assigns ``FIELDS`` in its body (a :func:`renamed`
    table) gets conversion methods for that table.
    """

    __slots__ = ()
    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "FIELDS" in cls.__dict__:
            _compile(cls, cls.FIELDS)

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> Self:
        """Parse ``ext``; unknown keys are ignored, missing optional fields get defaults."""
        raise NotImplementedError(f"{cls.__name__} was not built with @header")

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields map: every set field as a string, required ones always."""
        raise NotImplementedError(f"{type(self).__name__} was not built with @header")


def _field_type(hint: Any) -> tuple[type, bool]:
    """The base type of a field and whether it admits None."""
    nullable = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        if len(args) == 1:
            hint = args[0]
    if hint in _PARSERS:
        return hint, nullable
    raise TypeError(f"header fields must be str, int, bool or float (or None), not {hint!r}")


def camel(name: str) -> str:
    """``queue_id`` -> ``queueId``: the Java field name of a snake_case attribute."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def specs_of(cls: type) -> tuple[FieldSpec, ...]:
    """The field table of a header dataclass (names from ``WIRE_NAMES`` or camelCase)."""
    hints = typing.get_type_hints(cls)
    wires: Mapping[str, str] = getattr(cls, "WIRE_NAMES", {})
    specs = []
    for f in dataclasses.fields(cls):
        base, nullable = _field_type(hints[f.name])
        parse, kind = _PARSERS[base]
        has_default = f.default is not dataclasses.MISSING
        specs.append(FieldSpec(f.name, wires.get(f.name) or camel(f.name), parse, kind,
                               not nullable and not has_default, nullable,
                               f.default if has_default else None))
    return tuple(specs)


@dataclass_transform(kw_only_default=True)
def header(cls: type[T]) -> type[T]:
    """Class decorator: a slotted keyword-only dataclass with its field table."""
    built = dataclasses.dataclass(slots=True, kw_only=True)(cls)
    _compile(built, specs_of(built))
    return built


def renamed(specs: tuple[FieldSpec, ...], wires: Mapping[str, str]) -> tuple[FieldSpec, ...]:
    """``specs`` with extFields keys replaced by ``wires[attr]`` (for the short-name forms)."""
    return tuple(s._replace(wire=wires.get(s.attr, s.wire)) for s in specs)
