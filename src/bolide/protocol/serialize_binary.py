"""The ROCKETMQ binary header codec (serialize type 1).

Layout, big-endian: int16 code, int8 language, int16 version, int32 opaque, int32 flag,
int32 remark length + UTF-8 remark, int32 extFields length N + N bytes of entries, each an
int16 key length + key and an int32 value length + value. A zero length stands for null:
the remark is then None and an entry with an empty key or value is left out, as Java reads
it. Malformed UTF-8 is replaced with U+FFFD, as Java's decoder does.
"""

from __future__ import annotations

import struct

from bolide.errors import ProtocolError
from bolide.protocol.codes import LanguageCode, SerializeType
from bolide.protocol.command import RemotingCommand
from bolide.protocol.serialize_json import ext_value

_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
FIXED_SIZE = _FIXED.size + 8  # 21: the fixed fields and both length words


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """The binary header of ``cmd``; code and version must fit in 16 bits."""
    try:
        fixed = _FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)
    except struct.error:
        raise ProtocolError(
            f"code {cmd.code} or version {cmd.version} does not fit the binary header's int16 "
            f"(or opaque {cmd.opaque} / flag {cmd.flag} its int32): use the JSON codec"
        ) from None
    parts: list[bytes] = []
    for key, value in cmd.ext_fields.items():
        text = value if type(value) is str else ext_value(value)
        if key is None or text is None:
            continue
        kb = key.encode()
        vb = text.encode()
        if len(kb) > 0x7FFF:
            raise ProtocolError(f"extFields key {key[:40]!r}... is over 32767 bytes")
        parts += (_I16.pack(len(kb)), kb, _I32.pack(len(vb)), vb)
    ext = b"".join(parts)
    remark = cmd.remark.encode() if cmd.remark else b""
    return b"".join((fixed, _I32.pack(len(remark)), remark, _I32.pack(len(ext)), ext))


def _bad(what: str) -> ProtocolError:
    return ProtocolError(f"bad ROCKETMQ binary header: {what}")


def decode_binary_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode a binary header into a command without body; raises ProtocolError."""
    data = bytes(data)
    n = len(data)
    if n < FIXED_SIZE:
        raise _bad(f"{n} bytes, fewer than the {FIXED_SIZE} every header has")
    code, language, version, opaque, flag = _FIXED.unpack_from(data, 0)
    pos = _FIXED.size
    remark_len = _I32.unpack_from(data, pos)[0]
    pos += 4
    if remark_len < 0 or remark_len > n - pos - 4:
        raise _bad(f"remark length {remark_len} does not fit in the header")
    remark = data[pos:pos + remark_len].decode("utf-8", "replace") if remark_len else None
    pos += remark_len
    ext_len = _I32.unpack_from(data, pos)[0]
    pos += 4
    if ext_len != n - pos:
        raise _bad(f"extFields length {ext_len} differs from the {n - pos} bytes left")
    ext: dict[str, str] = {}
    while pos < n:
        if n - pos < 6:
            raise _bad("an extFields entry is cut short")
        key_len = _I16.unpack_from(data, pos)[0]
        pos += 2
        if key_len < 0 or key_len > n - pos - 4:
            raise _bad(f"extFields key length {key_len} does not fit")
        key = data[pos:pos + key_len]
        pos += key_len
        value_len = _I32.unpack_from(data, pos)[0]
        pos += 4
        if value_len < 0 or value_len > n - pos:
            raise _bad(f"extFields value length {value_len} does not fit")
        if key_len and value_len:
            ext[key.decode("utf-8", "replace")] = data[pos:pos + value_len].decode("utf-8", "replace")
        pos += value_len
    return RemotingCommand(
        code,
        language=LanguageCode.from_byte(language),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )
