"""The JSON header codec (serialize type 0), shaped like fastjson's output.

Java writes the header fields sorted by name, leaves out null ones and writes the language
as its name::

    {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,
     "serializeTypeCurrentRPC":"JSON","version":409}

Bolide writes exactly that shape (extFields keys sorted too, and left out when empty).
On input it accepts what Java, Go and ali-ons send: fields in any order or missing, the
language as a name or a number, and extFields values that are numbers or booleans (ali-ons),
which become the strings Java would read (``true``/``false``, decimal digits).

The common headers go through the compiled twins in :mod:`bolide.protocol._codec` when it is
built (standard JSON, int32 numbers, string extFields); anything else takes the code below.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bolide.common.compiled import load
from bolide.errors import ProtocolError
from bolide.protocol import fastjson
from bolide.protocol.codes import LanguageCode, SerializeType
from bolide.protocol.command import RemotingCommand

try:
    import orjson
except ImportError:  # pragma: no cover - exercised when orjson is absent
    orjson = None  # type: ignore[assignment]

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_LANGUAGES = {member.name: member for member in LanguageCode}
_JSON = SerializeType.JSON
_compiled = load("bolide.protocol._codec")
if _compiled is not None:
    _compiled.configure(RemotingCommand, _LANGUAGES, {m: m.name for m in LanguageCode},
                        LanguageCode.JAVA, LanguageCode.OTHER, _JSON)


def ext_value(value: object) -> str | None:
    """An extFields value as the string Java would hold (None: leave the entry out)."""
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)
    return fastjson.dumps(value, standard=True).decode()


def string_map(ext: Mapping[Any, object]) -> dict[str, str]:
    """``ext`` with every value a string (a copy only when some value is not)."""
    for value in ext.values():
        if type(value) is not str:
            break
    else:
        return ext if type(ext) is dict else dict(ext)
    result = {}
    for key, value in ext.items():
        text = ext_value(value)
        if text is not None:
            result[str(key)] = text
    return result


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The JSON header of ``cmd``, byte for byte what a Java process writes."""
    if _compiled is not None and (header := _compiled.encode_json_header(cmd)) is not None:
        return header
    return encode_json_header_pure(cmd)


def encode_json_header_pure(cmd: RemotingCommand) -> bytes:
    """:func:`encode_json_header` in Python: every command (the compiled twin takes most)."""
    obj: dict[str, Any] = {"code": int(cmd.code)}
    if cmd.ext_fields:
        obj["extFields"] = string_map(cmd.ext_fields)
    obj["flag"] = cmd.flag
    obj["language"] = cmd.language.name
    obj["opaque"] = cmd.opaque
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = cmd.version
    if orjson is not None:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


def _int32(obj: dict[str, Any], name: str, default: int) -> int:
    value = obj.get(name, default)
    if value is None:
        return default
    if type(value) is not int or not _INT32_MIN <= value <= _INT32_MAX:
        raise ProtocolError(f"JSON header field {name!r} is {value!r}, not a 32-bit integer")
    return value


def decode_json_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode a JSON header into a command without body; raises ProtocolError."""
    if _compiled is not None and (cmd := _compiled.decode_json_header(data)) is not None:
        return cmd
    return decode_json_header_pure(data)


def decode_json_header_pure(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """:func:`decode_json_header` in Python: every header, and the errors naming the fault."""
    try:
        obj = fastjson.loads_strict(data)
    except (ValueError, RecursionError):
        obj = fastjson.loads(data)
    if type(obj) is not dict:
        raise ProtocolError(f"a JSON header must be an object, not {type(obj).__name__}")
    if "code" not in obj:
        raise ProtocolError("the JSON header has no 'code' field")
    language = obj.get("language")
    if isinstance(language, str):
        lang = _LANGUAGES.get(language, LanguageCode.OTHER)
    elif language is None:
        lang = LanguageCode.JAVA
    elif type(language) is int:
        lang = LanguageCode.from_byte(language)
    else:
        raise ProtocolError(f"JSON header field 'language' is {language!r}, not a language name")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = ext_value(remark)
    ext = obj.get("extFields")
    if ext is None:
        ext = {}
    elif type(ext) is dict:
        ext = string_map(ext)
    else:
        raise ProtocolError(f"JSON header field 'extFields' is {type(ext).__name__}, not an object")
    code, version, opaque, flag = (obj.get("code"), obj.get("version", 0), obj.get("opaque", 0),
                                   obj.get("flag", 0))
    if not (code.__class__ is version.__class__ is opaque.__class__ is flag.__class__ is int
            and _INT32_MIN <= code <= _INT32_MAX and _INT32_MIN <= version <= _INT32_MAX
            and _INT32_MIN <= opaque <= _INT32_MAX and _INT32_MIN <= flag <= _INT32_MAX):
        # a null, a non-integer or out of range: checked (and named) one by one
        code, version = _int32(obj, "code", 0), _int32(obj, "version", 0)
        opaque, flag = _int32(obj, "opaque", 0), _int32(obj, "flag", 0)
    return RemotingCommand(code, lang, version, opaque, flag, remark, ext, b"", _JSON)
