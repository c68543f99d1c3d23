"""Exception root of Bolide. Each layer subclasses :class:`BolideError`.

Expected outcomes (a full disk, an offset out of range) are reported as status enums by the
store; exceptions are for misuse and for conditions the caller must act on. Every message
says what to do about the problem.
"""


class BolideError(Exception):
    """Root of every error raised by Bolide."""

    retriable: bool = False


class ConfigError(BolideError):
    """A configuration value or file is invalid."""


class StoreError(BolideError):
    """The message store cannot carry out an operation."""


class StoreLockedError(StoreError):
    """Another process holds the store directory's lock."""


class StoreFormatError(StoreError):
    """Files in the store directory do not have the layout RocketMQ defines."""


class ProtocolError(BolideError):
    """Bytes from the network do not follow the RocketMQ remoting protocol.

    A frame-level error leaves the stream out of step: close the connection.
    """


class HeaderFieldError(ProtocolError):
    """A command's custom header lacks a required field or has a value of the wrong type."""

    def __init__(self, header: str, field: str, problem: str) -> None:
        super().__init__(f"{header}: field {field!r} {problem}")
        self.header = header
        self.field = field


class RemotingError(BolideError):
    """A call over a remoting connection failed in transport; retrying may succeed."""

    retriable = True


class RemotingConnectError(RemotingError):
    """A connection to the peer could not be opened."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the call's timeout."""


class RemotingSendError(RemotingError):
    """The connection closed before the request was written or its response arrived."""


class RemotingClosedError(RemotingError):
    """The client or channel was closed by its owner; it takes no more calls."""

    retriable = False


class AclError(BolideError):
    """A request failed plain-ACL authentication (unknown access key or bad signature)."""
