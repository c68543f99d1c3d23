"""The HAProxy PROXY protocol header (v1 text, v2 binary) a load balancer puts before a
connection's own bytes to pass on the client's address: a pure codec, no I/O.

RocketMQ's remoting servers decode it with Netty's ``HAProxyMessageDecoder`` at the start of
every connection; this module reads the same headers and refuses the same malformed ones::

    header = parse_header(buffer)   # None: not all of it has arrived yet
    header.length                   # bytes of the header; what follows is the connection's own
    header.client                   # ("203.0.113.7", 41000), or None: use the socket's peer

:func:`starts_header` tells from a connection's first bytes whether a header begins there;
:class:`HeaderReader` takes a header off a connection whose bytes come in pieces.
Refusals raise :class:`ProxyHeaderError` naming the cause. :func:`encode_v1` and
:func:`encode_v2` build headers as HAProxy sends them (for tests and forwarders).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from bolide.errors import ProtocolError

V1_PREFIX = b"PROXY "
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V1_MAX_LENGTH = 107  # the longest v1 line the specification allows, CRLF included
V2_MAX_LENGTH = 16 + 0xFFFF  # the 16 fixed bytes and the largest length field (as Netty)

LOCAL, PROXY = 0, 1  # v2 commands
# v2 family/transport byte -> name (the only values the specification and Netty accept)
_V2_PROTOCOLS = {0x00: "UNKNOWN", 0x11: "TCP4", 0x12: "UDP4", 0x21: "TCP6", 0x22: "UDP6",
                 0x31: "UNIX_STREAM", 0x32: "UNIX_DGRAM"}
_V2_FIXED = struct.Struct(">12sBBH")
_V1_FAMILIES = {"TCP4": 4, "TCP6": 6}
_ADDRESS_BYTES = {1: 12, 2: 36, 3: 216}  # by family nibble: INET, INET6, UNIX

Address = tuple[str, int]


class ProxyHeaderError(ProtocolError):
    """A PROXY protocol header is malformed, too long, or of an unsupported kind."""


@dataclass(frozen=True, slots=True)
class ProxyHeader:
    """A decoded PROXY protocol header.

    ``protocol`` is ``TCP4``, ``TCP6``, ``UNKNOWN`` (v1 and v2), or ``UDP4``, ``UDP6``,
    ``UNIX_STREAM``, ``UNIX_DGRAM`` (v2); ``local`` is the v2 LOCAL command (a health check
    of the proxy itself). ``source`` and ``destination`` are ``(ip, port)`` (a UNIX socket's
    path and port 0), None when the header carries none. ``tlvs`` are the v2 type-length-value
    records as ``(type, value)``.
    """

    version: int
    protocol: str
    source: Address | None = None
    destination: Address | None = None
    tlvs: tuple[tuple[int, bytes], ...] = ()
    local: bool = False
    length: int = 0

    @property
    def client(self) -> Address | None:
        """The address a server takes as the client's: the source of an IP header with a port
        (RocketMQ uses it only then); None to use the connection's own peer."""
        if self.local or self.source is None or self.protocol.startswith("UNIX"):
            return None
        return self.source if self.source[1] > 0 else None

    def tlv_text(self) -> dict[str, str]:
        """The TLVs with ASCII values as RocketMQ keeps them on a channel:
        ``proxy_protocol_tlv_0x<type>`` -> text."""
        return {f"proxy_protocol_tlv_0x{kind:02x}": value.decode("ascii")
                for kind, value in self.tlvs if value.isascii()}


def starts_header(data: bytes | bytearray | memoryview) -> bool | None:
    """True when ``data`` (a connection's first bytes) begins a PROXY header, False when it
    cannot, None when too few bytes have arrived to tell."""
    head = bytes(data[:12])
    for signature in (V1_PREFIX, V2_SIGNATURE):
        n = min(len(head), len(signature))
        if head[:n] == signature[:n]:
            return True if n == len(signature) else None
    return False


def parse_header(data: bytes | bytearray | memoryview, *,
                 max_v2_length: int = V2_MAX_LENGTH) -> ProxyHeader | None:
    """The header at the start of ``data``, or None when more bytes are needed (then all of
    ``data`` belongs to the header). Raises ProxyHeaderError when ``data`` starts no header or
    a malformed one, or one longer than allowed (v1: 107 bytes; v2: ``max_v2_length``)."""
    started = starts_header(data)
    if started is None:
        return None
    if not started:
        raise ProxyHeaderError("the connection does not start with a PROXY protocol header")
    if data[0] == V1_PREFIX[0]:
        return _parse_v1(bytes(data[:V1_MAX_LENGTH]))
    return _parse_v2(data, max_v2_length)


class HeaderReader:
    """Reads a PROXY header off the start of a connection whose bytes come in pieces::

        rest = reader.feed(data)   # None: more of the header is to come
        reader.header              # the header, or None when the connection began with none

    :meth:`feed` raises ProxyHeaderError for a malformed header. Once it has returned bytes,
    the header is read and :attr:`pending` is 0; feed it nothing more.
    """

    __slots__ = ("_head", "header")

    def __init__(self) -> None:
        self._head = bytearray()
        self.header: ProxyHeader | None = None

    @property
    def pending(self) -> int:
        """Bytes of an unfinished header read so far."""
        return len(self._head)

    def feed(self, data: bytes) -> bytes | None:
        """The connection's own bytes after the header (all of ``data`` when it begins none),
        or None while more of the header is to come."""
        head = self._head
        if not head and starts_header(data) is False:  # the usual case: no header
            return data
        head += data
        header = parse_header(head)
        if header is None:
            return None
        self.header = header
        rest = bytes(head[header.length:])
        head.clear()
        return rest


def _parse_v1(data: bytes) -> ProxyHeader | None:
    end = data.find(b"\r\n")
    if end < 0:
        if len(data) >= V1_MAX_LENGTH:
            raise ProxyHeaderError(f"PROXY v1 header without CRLF in its first {V1_MAX_LENGTH} "
                                   "bytes (the longest allowed)")
        if b"\n" in data:
            raise ProxyHeaderError("PROXY v1 header ends with LF alone: CRLF expected")
        return None
    line = data[:end]
    if not line.isascii():
        raise ProxyHeaderError("PROXY v1 header with non-ASCII bytes")
    parts = line.decode("ascii").split(" ")
    protocol = parts[1] if len(parts) > 1 else ""
    if protocol == "UNKNOWN":  # the receiver ignores the rest of the line
        return ProxyHeader(1, protocol, length=end + 2)
    if protocol not in _V1_FAMILIES:
        raise ProxyHeaderError(f"PROXY v1 protocol {protocol!r}: TCP4, TCP6 or UNKNOWN expected")
    if len(parts) != 6:
        raise ProxyHeaderError(f"PROXY v1 {protocol} header with {len(parts)} fields (6 expected: "
                               "PROXY, protocol, source, destination, source port, destination port)")
    version = _V1_FAMILIES[protocol]
    source = (_v1_ip(parts[2], version), _v1_port(parts[4]))
    destination = (_v1_ip(parts[3], version), _v1_port(parts[5]))
    return ProxyHeader(1, protocol, source, destination, length=end + 2)


def _v1_ip(text: str, version: int) -> str:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        ip = None
    if ip is None or ip.version != version or "%" in text:
        raise ProxyHeaderError(f"PROXY v1 address {text!r} is not an IPv{version} address")
    return str(ip)


def _v1_port(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 5) or int(text) > 0xFFFF:
        raise ProxyHeaderError(f"PROXY v1 port {text!r}: 0 to 65535 expected")
    return int(text)


def _parse_v2(data: bytes | bytearray | memoryview, max_length: int) -> ProxyHeader | None:
    if len(data) < 16:
        return None
    _, ver_cmd, fam_proto, size = _V2_FIXED.unpack_from(data)
    total = 16 + size
    if total > max_length:
        raise ProxyHeaderError(f"PROXY v2 header of {total} bytes, over the {max_length} allowed")
    if ver_cmd >> 4 != 2:
        raise ProxyHeaderError(f"PROXY v2 header with version {ver_cmd >> 4}: 2 expected")
    command = ver_cmd & 0x0F
    if command not in (LOCAL, PROXY):
        raise ProxyHeaderError(f"PROXY v2 command {command}: LOCAL (0) or PROXY (1) expected")
    protocol = _V2_PROTOCOLS.get(fam_proto)
    if protocol is None:
        raise ProxyHeaderError(f"PROXY v2 address family and protocol 0x{fam_proto:02x} unknown")
    if len(data) < total:
        return None
    if command == LOCAL or protocol == "UNKNOWN":  # no addresses to use: skip the rest
        return ProxyHeader(2, protocol, local=command == LOCAL, length=total)
    body = bytes(data[16:total])
    family = fam_proto >> 4
    need = _ADDRESS_BYTES[family]
    if size < need:
        raise ProxyHeaderError(f"PROXY v2 {protocol} header with {size} bytes of addresses, "
                               f"{need} expected")
    if family == 3:
        source: Address = (_unix_path(body[:108]), 0)
        destination: Address = (_unix_path(body[108:216]), 0)
    else:
        n = 4 if family == 1 else 16
        src_port, dst_port = struct.unpack_from(">HH", body, 2 * n)
        source = (str(ipaddress.ip_address(body[:n])), src_port)
        destination = (str(ipaddress.ip_address(body[n:2 * n])), dst_port)
    return ProxyHeader(2, protocol, source, destination, _tlvs(body, need), length=total)


def _unix_path(raw: bytes) -> str:
    return raw.split(b"\x00", 1)[0].decode("utf-8", "replace")


def _tlvs(body: bytes, at: int) -> tuple[tuple[int, bytes], ...]:
    out = []
    while len(body) - at >= 3:
        kind, size = body[at], int.from_bytes(body[at + 1:at + 3], "big")
        at += 3
        if at + size > len(body):
            raise ProxyHeaderError(f"PROXY v2 TLV 0x{kind:02x} of {size} bytes overruns the header "
                                   f"({len(body) - at} left)")
        out.append((kind, body[at:at + size]))
        at += size
    return tuple(out)


# -- building headers (what a proxy sends) -------------------------------------------------------
def encode_v1(source: Address | None, destination: Address | None) -> bytes:
    """A v1 header for TCP between ``source`` and ``destination``; ``UNKNOWN`` when None."""
    if source is None or destination is None:
        return b"PROXY UNKNOWN\r\n"
    family = "TCP6" if _versions(source, destination) == 6 else "TCP4"
    return (f"PROXY {family} {source[0]} {destination[0]} {source[1]} {destination[1]}\r\n"
            .encode("ascii"))


def encode_v2(source: Address | None, destination: Address | None, *,
              tlvs: tuple[tuple[int, bytes], ...] = (), local: bool = False) -> bytes:
    """A v2 header (PROXY command, TCP) with ``tlvs``; the LOCAL command when ``local``, and
    the UNSPEC family when an address is None."""
    if source is None or destination is None:
        fam, addresses = 0x00, b""
    else:
        src, dst = ipaddress.ip_address(source[0]), ipaddress.ip_address(destination[0])
        fam = 0x21 if _versions(source, destination) == 6 else 0x11
        addresses = src.packed + dst.packed + struct.pack(">HH", source[1], destination[1])
    extra = b"".join(bytes([kind]) + len(value).to_bytes(2, "big") + value for kind, value in tlvs)
    body = addresses + extra
    return _V2_FIXED.pack(V2_SIGNATURE, 0x20 | (LOCAL if local else PROXY), fam, len(body)) + body


def _versions(source: Address, destination: Address) -> int:
    """The IP version of both addresses; ValueError when they differ (a header has one family)."""
    versions = {ipaddress.ip_address(source[0]).version, ipaddress.ip_address(destination[0]).version}
    if len(versions) != 1:
        raise ValueError(f"a PROXY header's addresses are of one family: {source[0]} and "
                         f"{destination[0]} are not")
    return versions.pop()
