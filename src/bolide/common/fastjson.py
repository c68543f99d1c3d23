"""JSON the way Java's fastjson writes it, and a parser for everything RocketMQ peers send.

Shared by the protocol codec (request headers and bodies) and the store's config files.
:func:`dumps` writes compact JSON with object keys sorted. Map keys that are ints are written
bare (``{0:"a"}``) and keys that are objects (a ``MessageQueue``) as bare JSON objects, as
fastjson does; with ``standard=True`` both become quoted strings, as fastjson's
BrowserCompatible mode writes them. :func:`loads` parses standard JSON with orjson (or the
standard library) and falls back to a lenient parser that accepts bare integer and object
keys, unquoted field names, single quotes and stray commas. The lenient parser turns every key
into a string: ``0`` becomes ``"0"`` and an object key becomes its compact JSON text, so both
spellings of a key parse to the same value. :func:`dumps_pretty` writes fastjson's
``prettyFormat`` text, as RocketMQ writes its ``config/*.json`` files. Parse errors raise
:class:`JSONError` (a ``ValueError``).
"""

from __future__ import annotations

import json
import math
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - exercised when orjson is absent
    orjson = None  # type: ignore[assignment]

MAX_DEPTH = 256


class JSONError(ValueError):
    """Text that is not JSON, not even as leniently as fastjson reads it."""

_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def loads_strict(data: bytes | bytearray | memoryview | str) -> Any:
    """Standard JSON only; raises ValueError (orjson or stdlib) on anything else."""
    if orjson is not None:
        return orjson.loads(data)
    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    if _SURROGATE_ESCAPE.search(text):
        raise ValueError("escaped surrogates: left to the lenient parser, which checks pairs")
    return json.loads(text)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON as a Java peer would accept it; raises JSONError when it cannot."""
    try:
        return loads_strict(data)
    except (ValueError, RecursionError):
        pass
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONError(f"JSON text is not valid UTF-8 ({exc})") from None
    return _Parser(text).parse()


def _quote(text: str) -> str:
    if _NEEDS_ESCAPE.search(text) is None:
        return f'"{text}"'
    return json.dumps(text, ensure_ascii=False)


def _key_order(key: Any) -> tuple[int, Any]:
    if isinstance(key, int) and not isinstance(key, bool):
        return (0, int(key))
    if isinstance(key, str):
        return (1, key)
    return (2, _dumps_str(key, True))


def _write(value: Any, out: list[str], standard: bool) -> None:
    if isinstance(value, str):
        out.append(_quote(value))
    elif value is None:
        out.append("null")
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(repr(value) if math.isfinite(value) else "null")
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key in sorted(value, key=_key_order):
            item = value[key]
            if item is None:
                continue
            if not first:
                out.append(",")
            first = False
            if isinstance(key, str):
                out.append(_quote(key))
            elif isinstance(key, int) and not isinstance(key, bool):
                out.append(_quote(str(int(key))) if standard else int.__repr__(key))
            elif hasattr(key, "to_json_obj"):
                text = _dumps_str(key, standard)
                out.append(_quote(text) if standard else text)
            else:
                out.append(_quote(_dumps_str(key, standard)))
            out.append(":")
            _write(item, out, standard)
        out.append("}")
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
        if isinstance(value, set | frozenset):
            items = sorted(value, key=_key_order)
        out.append("[")
        for i, item in enumerate(items):
            if i:
                out.append(",")
            _write(item, out, standard)
        out.append("]")
    elif hasattr(value, "to_json_obj"):
        _write(value.to_json_obj(), out, standard)
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _dumps_str(value: Any, standard: bool) -> str:
    out: list[str] = []
    _write(value, out, standard)
    return "".join(out)


def dumps(value: Any, *, standard: bool = False) -> bytes:
    """Compact JSON, keys sorted, None-valued entries left out (fastjson drops nulls)."""
    return _dumps_str(value, standard).encode("utf-8")


def _is_int(key: Any) -> bool:
    return isinstance(key, int) and not isinstance(key, bool)


def _write_pretty(value: Any, out: list[str], depth: int) -> None:
    if isinstance(value, dict):
        items = [(k, value[k]) for k in sorted(value, key=_key_order) if value[k] is not None]
        if not items:
            out.append("{}")
            return
        inner = "\n" + "\t" * (depth + 1)
        out.append("{")
        for i, (key, item) in enumerate(items):
            if _is_int(key):  # fastjson: no line break before a non-string key
                out.append("," if i else "")
                out.append(int.__repr__(key))
            else:
                out.append("," + inner if i else inner)
                out.append(_quote(key if isinstance(key, str) else _dumps_str(key, True)))
            out.append(":")
            _write_pretty(item, out, depth + 1)
        out.append("\n" + "\t" * depth + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = "\n" + "\t" * (depth + 1)
        out.append("[")
        for i, item in enumerate(value):
            out.append("," + inner if i else inner)
            _write_pretty(item, out, depth + 1)
        out.append("\n" + "\t" * depth + "]")
    elif hasattr(value, "to_json_obj"):
        _write_pretty(value.to_json_obj(), out, depth)
    else:  # scalars, and sets: fastjson writes a Set compactly even in pretty format
        _write(value, out, False)


def dumps_pretty(value: Any) -> bytes:
    """fastjson's ``toJSONString(obj, true)``: tab indents, keys sorted, int keys bare, nulls dropped.

    As fastjson does, a map with int keys keeps its entries on the opening line
    (``{0:12,1:30`` then a line break and ``}``), and a list gets one item per line while a set
    (a Python set or frozenset) is written compactly.
    """
    out: list[str] = []
    _write_pretty(value, out, 0)
    return "".join(out).encode("utf-8")


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_$][\w$]*")
_PLAIN_STRING = re.compile(r'"([^"\\\x00-\x1f]*)"')
_CONSTANTS = {"true": True, "false": False, "null": None}


def _no_lone_surrogates(text: str) -> str:
    # Escaped surrogate pairs were joined by scanstring; a lone one cannot become UTF-8.
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


class _Parser:
    """Recursive-descent parser for fastjson's relaxed JSON (see the module docstring)."""

    __slots__ = ("depth", "pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def error(self, what: str) -> JSONError:
        snippet = self.text[self.pos:self.pos + 20]
        return JSONError(f"bad JSON at offset {self.pos} ({snippet!r}): {what}")

    def skip(self) -> str:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]
        return self.text[self.pos:self.pos + 1]

    def parse(self) -> Any:
        value = self.value()
        if self.skip():
            raise self.error("unexpected text after the JSON value")
        return value

    def value(self) -> Any:
        ch = self.skip()
        if ch == "{":
            return self.container(True)
        if ch == "[":
            return self.container(False)
        if ch in ("\"", "'"):
            return self.string(ch)
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return self.number(match)
        match = _NAME.match(self.text, self.pos)
        if match and match.group() in _CONSTANTS:
            self.pos = match.end()
            return _CONSTANTS[match.group()]
        raise self.error("expected a JSON value")

    def number(self, match: re.Match[str]) -> int | float:
        try:
            if match.group(1) or match.group(2):
                return float(match.group())
            return int(match.group())
        except ValueError as exc:
            raise self.error(f"bad number ({exc})") from None

    def string(self, quote: str) -> str:
        text, pos = self.text, self.pos
        if quote == "\"":
            match = _PLAIN_STRING.match(text, pos)
            if match:
                self.pos = match.end()
                return match.group(1)
            try:
                scanned: tuple[str, int] = scanstring(text, pos + 1, False)
            except ValueError as exc:
                raise self.error(f"bad string ({exc})") from None
            self.pos = scanned[1]
            return _no_lone_surrogates(scanned[0])
        chars: list[str] = []  # single-quoted (fastjson's AllowSingleQuotes): rewrite, then scan
        end = pos + 1
        while True:
            if end >= len(text):
                raise self.error("unterminated string")
            ch = text[end]
            if ch == "'":
                break
            if ch == "\\" and end + 1 < len(text):
                nxt = text[end + 1]
                chars.append("'" if nxt == "'" else ch + nxt)
                end += 2
                continue
            chars.append('\\"' if ch == '"' else ch)
            end += 1
        try:
            scanned = scanstring('"' + "".join(chars) + '"', 1, False)
        except ValueError as exc:
            raise self.error(f"bad string ({exc})") from None
        self.pos = end + 1
        return _no_lone_surrogates(scanned[0])

    def key(self) -> str:
        ch = self.skip()
        if ch in ("\"", "'"):
            return self.string(ch)
        match = _NAME.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return match.group()
        value = self.value()
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return _dumps_str(value, True)

    def container(self, is_object: bool) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"nested deeper than {MAX_DEPTH} levels")
        self.pos += 1
        close = "}" if is_object else "]"
        result: Any = {} if is_object else []
        while True:
            ch = self.skip()
            if ch == close:
                self.pos += 1
                break
            if ch == ",":  # fastjson's AllowArbitraryCommas
                self.pos += 1
                continue
            if not ch:
                raise self.error(f"unterminated {'object' if is_object else 'array'}")
            if is_object:
                key = self.key()
                if self.skip() != ":":
                    raise self.error("expected ':' after an object key")
                self.pos += 1
                result[key] = self.value()
            else:
                result.append(self.value())
            ch = self.skip()
            if ch not in (",", close):
                raise self.error(f"expected ',' or {close!r}")
        self.depth -= 1
        return result
