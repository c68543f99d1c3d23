"""The SEND_BATCH_MESSAGE (320) body: messages packed back to back.

Each block (big-endian): int32 TOTALSIZE (22 + body + properties), int32 MAGICCODE (0),
int32 BODYCRC (0), int32 FLAG, int32 BODYLEN, body, int16 PROPSLEN, properties. Like the
Java broker, the decoder walks the length fields and ignores TOTALSIZE, MAGICCODE and
BODYCRC. Topic and queue come from the request header, not the body.

Pull, query and view bodies need no codec here: they are stored CommitLog records
concatenated as the store holds them (V1 magic, IPv4 hosts), sent as memoryview slices.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

from bolide.common.message import Message
from bolide.common.properties import decode_properties, encode_properties
from bolide.errors import ProtocolError

_HEAD = struct.Struct(">iiiii")  # TOTALSIZE MAGICCODE BODYCRC FLAG BODYLEN
_I16 = struct.Struct(">h")
BLOCK_OVERHEAD = _HEAD.size + _I16.size  # 22


class BatchEntry(NamedTuple):
    """One member of a batch: user flag, body and encoded properties."""

    flag: int
    body: bytes
    properties: bytes


def iter_batch_body(body: bytes | bytearray | memoryview) -> Iterator[BatchEntry]:
    """The members of a batch body in order; raises ProtocolError if a block is cut short."""
    data = bytes(body)
    n = len(data)
    pos = 0
    index = 0
    while pos < n:
        if n - pos < BLOCK_OVERHEAD:
            raise ProtocolError(f"batch member {index} at byte {pos}: {n - pos} bytes left, "
                                f"fewer than the {BLOCK_OVERHEAD} a member needs")
        _total, _magic, _crc, flag, body_len = _HEAD.unpack_from(data, pos)
        pos += _HEAD.size
        if body_len < 0 or body_len > n - pos - _I16.size:
            raise ProtocolError(f"batch member {index}: BODYLEN {body_len} does not fit the body")
        payload = data[pos:pos + body_len]
        pos += body_len
        props_len = _I16.unpack_from(data, pos)[0]
        pos += _I16.size
        if props_len < 0 or props_len > n - pos:
            raise ProtocolError(f"batch member {index}: PROPSLEN {props_len} does not fit the body")
        yield BatchEntry(flag, payload, data[pos:pos + props_len])
        pos += props_len
        index += 1


def decode_batch_body(body: bytes | bytearray | memoryview, topic: str,
                      batch_properties: Mapping[str, str] | None = None) -> list[Message]:
    """The members as messages of ``topic``.

    ``batch_properties`` (the header's ``properties``) are added to every member, winning
    over a member's own value as they do when the Java broker appends them.
    """
    extra = dict(batch_properties) if batch_properties else {}
    messages = []
    for flag, payload, props in iter_batch_body(body):
        properties = decode_properties(props) if props else {}
        if extra:
            properties.update(extra)
        messages.append(Message(topic, payload, flag=flag, properties=properties))
    return messages


def batch_members(body: bytes | bytearray | memoryview,
                  batch_properties: bytes = b"") -> list[tuple[bytes, bytes, int]]:
    """The members as (body, properties, flag) with the encoded ``batch_properties`` (the
    header's) appended to each member's own, as the Java broker appends them: decoders keep the
    last value of a key, so the batch's win. Raises ProtocolError if a block is cut short."""
    members = []
    for flag, payload, props in iter_batch_body(body):
        if batch_properties:
            if props and not props.endswith(b"\x02"):
                props += b"\x02"
            props += batch_properties
        members.append((payload, props, flag))
    return members


def encode_batch_body(messages: Iterable[Message]) -> bytes:
    """A batch body as the Java client writes it (``MessageDecoder.encodeMessages``)."""
    parts: list[bytes] = []
    for msg in messages:
        props = encode_properties(msg.properties)
        if len(props) > 0x7FFF:
            raise ValueError(f"a batch member's properties take {len(props)} bytes; at most 32767 fit")
        parts += (_HEAD.pack(BLOCK_OVERHEAD + len(msg.body) + len(props), 0, 0, msg.flag, len(msg.body)),
                  msg.body, _I16.pack(len(props)), props)
    return b"".join(parts)
