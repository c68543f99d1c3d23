"""RemotingCommand: the unit every request and response travels in."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, Self, TypeVar

from bolide.protocol.codes import (
    DEFAULT_VERSION,
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    LanguageCode,
    ResponseCode,
    SerializeType,
    code_name,
)
from bolide.protocol.frame import BodyLike, body_parts, nbytes


class ExtFieldsHeader(Protocol):
    """What a custom header class offers: conversion to and from the extFields map."""

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> Self: ...

    def to_ext_fields(self) -> dict[str, str]: ...


H = TypeVar("H", bound=ExtFieldsHeader)


class OpaqueCounter:
    """Thread-safe request ids: ``start``, ``start + 1``, ... wrapping to 0 after 2**31 - 1."""

    __slots__ = ("_lock", "_next")

    def __init__(self, start: int = 0) -> None:
        self._next = start
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            value = self._next
            self._next = 0 if value >= 0x7FFFFFFF else value + 1
        return value

    __next__ = next

    def __iter__(self) -> OpaqueCounter:
        return self


_OPAQUES = OpaqueCounter()


def next_opaque() -> int:
    """A new request id from this process's shared counter."""
    return _OPAQUES.next()


@dataclass(slots=True)
class RemotingCommand:
    """One request or response.

    ``code`` is a :class:`RequestCode` in requests and a :class:`ResponseCode` in responses
    (plain ints are kept as they arrive). ``ext_fields`` holds the custom header as strings;
    ``body`` is ``bytes`` when decoded and may be any buffer or list of buffers to send.
    ``serialize_type`` is the header codec the command arrived in or will be sent with.
    """

    code: int
    language: LanguageCode = LanguageCode.JAVA
    version: int = DEFAULT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: BodyLike = b""
    serialize_type: SerializeType = SerializeType.JSON

    @classmethod
    def request(
        cls,
        code: int,
        header: ExtFieldsHeader | None = None,
        body: BodyLike = b"",
        *,
        ext_fields: Mapping[str, str] | None = None,
        oneway: bool = False,
        opaque: int | None = None,
        serialize_type: SerializeType = SerializeType.JSON,
        remark: str | None = None,
    ) -> RemotingCommand:
        """A request with a fresh opaque (unless given); ``header`` fills ``ext_fields``."""
        ext = header.to_ext_fields() if header is not None else {}
        if ext_fields:
            ext.update(ext_fields)
        return cls(
            code,
            opaque=next_opaque() if opaque is None else opaque,
            flag=ONEWAY_FLAG if oneway else 0,
            remark=remark,
            ext_fields=ext,
            body=body,
            serialize_type=serialize_type,
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        """True for a request whose sender reads no response: never answer it."""
        return bool(self.flag & ONEWAY_FLAG) and not self.flag & RESPONSE_FLAG

    def make_response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        header: ExtFieldsHeader | None = None,
        body: BodyLike = b"",
        *,
        ext_fields: Mapping[str, str] | None = None,
    ) -> RemotingCommand:
        """The response to this request: same opaque and codec, response flag, language JAVA.

        ``header`` (a response header object) fills ``ext_fields``; ``ext_fields`` adds to it.
        """
        ext = header.to_ext_fields() if header is not None else {}
        if ext_fields:
            ext.update(ext_fields)
        return RemotingCommand(
            code,
            opaque=self.opaque,
            flag=RESPONSE_FLAG,
            remark=remark,
            ext_fields=ext,
            body=body,
            serialize_type=self.serialize_type,
        )

    def make_response_ext(self, code: int, ext_fields: dict[str, str],
                          remark: str | None = None) -> RemotingCommand:
        """:meth:`make_response` with a ready extFields dict, taken as it is (not copied):
        for the hot paths that build it themselves."""
        return RemotingCommand(code, LanguageCode.JAVA, DEFAULT_VERSION, self.opaque,
                               RESPONSE_FLAG, remark, ext_fields, b"", self.serialize_type)

    def read_header(self, header_type: type[H]) -> H:
        """Decode ``ext_fields`` into ``header_type``; raises HeaderFieldError when invalid."""
        return header_type.from_ext_fields(self.ext_fields)

    def body_bytes(self) -> bytes:
        """The body as one ``bytes`` object (joins a list of buffers)."""
        body = self.body
        if isinstance(body, bytes):
            return body
        return b"".join(body_parts(body))

    @property
    def body_length(self) -> int:
        return sum(map(nbytes, body_parts(self.body)))

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "oneway" if self.is_oneway else "request"
        remark = f", remark={self.remark!r}" if self.remark else ""
        return (
            f"RemotingCommand({kind} {code_name(self.code, self.is_response)}, "
            f"opaque={self.opaque}, {self.serialize_type.name}, language={self.language.name}, "
            f"version={self.version}{remark}, ext={self.ext_fields}, body={self.body_length} bytes)"
        )
