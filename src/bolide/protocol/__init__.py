"""The RocketMQ remoting protocol as a pure codec: frames, commands, header codecs (JSON and
ROCKETMQ binary), codes, typed headers and bodies. No I/O: feed bytes in, get bytes out.
Format notes: docs/protocol.md."""

from bolide.errors import HeaderFieldError, ProtocolError
from bolide.protocol.codec import (
    CommandDecoder,
    decode_command,
    encode_command,
    encode_command_bytes,
    encode_header,
)
from bolide.protocol.codes import (
    DEFAULT_VERSION,
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from bolide.protocol.command import OpaqueCounter, RemotingCommand, next_opaque
from bolide.protocol.frame import MAX_FRAME_SIZE, Frame, FrameDecoder, encode_frame

__all__ = [
    "DEFAULT_VERSION",
    "MAX_FRAME_SIZE",
    "ONEWAY_FLAG",
    "RESPONSE_FLAG",
    "CommandDecoder",
    "Frame",
    "FrameDecoder",
    "HeaderFieldError",
    "LanguageCode",
    "OpaqueCounter",
    "ProtocolError",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "decode_command",
    "encode_command",
    "encode_command_bytes",
    "encode_frame",
    "encode_header",
    "next_opaque",
]
