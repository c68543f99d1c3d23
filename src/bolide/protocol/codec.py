"""Commands to frames and back: picks the header codec and joins header and body."""

from __future__ import annotations

from bolide.errors import ProtocolError
from bolide.protocol.codes import SerializeType
from bolide.protocol.command import RemotingCommand
from bolide.protocol.frame import MAX_FRAME_SIZE, Buffer, Frame, FrameDecoder, encode_frame
from bolide.protocol.serialize_binary import decode_binary_header, encode_binary_header
from bolide.protocol.serialize_json import (
    _compiled,
    decode_json_header,
    decode_json_header_pure,
    encode_json_header,
    encode_json_header_pure,
)

_JSON, _ROCKETMQ = int(SerializeType.JSON), int(SerializeType.ROCKETMQ)
# the compiled JSON header twins, called here directly on the hot path (None: not built, or
# the command needs the Python code, which the functions of serialize_json then run)
_decode_json_fast = _compiled.decode_json_header if _compiled is not None else None
_encode_json_fast = _compiled.encode_json_header if _compiled is not None else None


def encode_header(cmd: RemotingCommand) -> bytes:
    """The header of ``cmd`` in its own codec (``cmd.serialize_type``)."""
    if cmd.serialize_type == _ROCKETMQ:
        return encode_binary_header(cmd)
    if _encode_json_fast is None:
        return encode_json_header(cmd)
    header = _encode_json_fast(cmd)
    return encode_json_header_pure(cmd) if header is None else header  # type: ignore[no-any-return]


def encode_command(cmd: RemotingCommand, max_frame_size: int = MAX_FRAME_SIZE) -> list[Buffer]:
    """The frame of ``cmd`` as buffers for ``writelines``; the body buffers are not copied."""
    return encode_frame(cmd.serialize_type, encode_header(cmd), cmd.body, max_frame_size)


def encode_command_bytes(cmd: RemotingCommand, max_frame_size: int = MAX_FRAME_SIZE) -> bytes:
    """The frame of ``cmd`` as one ``bytes`` object."""
    return b"".join(encode_command(cmd, max_frame_size))


def decode_command(frame: Frame) -> RemotingCommand:
    """Decode a frame's header in the codec it names and attach the body."""
    if frame.serialize_type == _JSON:
        if _decode_json_fast is None:
            cmd = decode_json_header(frame.header)
        elif (cmd := _decode_json_fast(frame.header)) is None:  # uncommon: Python, once
            cmd = decode_json_header_pure(frame.header)
    elif frame.serialize_type == _ROCKETMQ:
        cmd = decode_binary_header(frame.header)
    else:
        raise ProtocolError(
            f"frame names header codec {frame.serialize_type}; only 0 (JSON) and 1 (ROCKETMQ) "
            "exist: the peer does not speak the RocketMQ protocol"
        )
    cmd.body = frame.body
    return cmd


class CommandDecoder:
    """Incremental command decoder: :meth:`feed` bytes, get decoded commands.

    Any :class:`~bolide.errors.ProtocolError` means the connection should be closed, as the
    Java server does on every decode error.
    """

    __slots__ = ("_frames",)

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._frames = FrameDecoder(max_frame_size)

    @property
    def buffered(self) -> int:
        return self._frames.buffered

    def feed(self, data: Buffer) -> list[RemotingCommand]:
        return [decode_command(frame) for frame in self._frames.feed(data)]
