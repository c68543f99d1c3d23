"""The PROXY protocol header codec (bolide.protocol.haproxy): v1 and v2 headers as HAProxy sends
them, what a server takes as the client's address, partial input, and refusals naming the cause."""

from __future__ import annotations

import pytest

from bolide.protocol.haproxy import (
    V1_MAX_LENGTH,
    HeaderReader,
    ProxyHeader,
    ProxyHeaderError,
    encode_v1,
    encode_v2,
    parse_header,
    starts_header,
)

SRC, DST = ("203.0.113.7", 41001), ("10.0.0.5", 10911)


def test_v1_headers() -> None:
    line = b"PROXY TCP4 203.0.113.7 10.0.0.5 41001 10911\r\n"
    assert encode_v1(SRC, DST) == line
    header = parse_header(line + b"\x00\x00\x00\x10rest")
    assert header == ProxyHeader(1, "TCP4", SRC, DST, length=len(line))
    assert header.client == SRC
    six = parse_header(b"PROXY TCP6 2001:db8:0:0::7 ::1 5000 10911\r\n")
    assert six is not None and six.source == ("2001:db8::7", 5000) and six.protocol == "TCP6"
    unknown = parse_header(b"PROXY UNKNOWN 1.2.3.4 anything at all\r\nrest")
    assert unknown is not None and unknown.client is None and unknown.length == 39
    longest = b"PROXY UNKNOWN " + b"f" * (V1_MAX_LENGTH - 16) + b"\r\n"
    assert len(longest) == V1_MAX_LENGTH and parse_header(longest) is not None


def test_v2_headers() -> None:
    tlvs = ((0x01, b"h2"), (0xE0, b"vpce-0abc"), (0x30, b""))
    raw = encode_v2(SRC, DST, tlvs=tlvs)
    assert raw[:16] == b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00" + bytes([12 + 5 + 12 + 3])
    header = parse_header(raw + b"after")
    assert header == ProxyHeader(2, "TCP4", SRC, DST, tlvs, length=len(raw))
    assert header.tlv_text() == {"proxy_protocol_tlv_0x01": "h2", "proxy_protocol_tlv_0xe0": "vpce-0abc",
                                 "proxy_protocol_tlv_0x30": ""}
    six = parse_header(encode_v2(("2001:db8::7", 1), ("2001:db8::1", 2)))
    assert six is not None and six.client == ("2001:db8::7", 1) and six.protocol == "TCP6"
    local = parse_header(encode_v2(SRC, DST, local=True))
    assert local is not None and local.local and local.client is None
    unspec = parse_header(encode_v2(None, None))
    assert unspec is not None and unspec.protocol == "UNKNOWN" and unspec.client is None
    unix = b"\r\n\r\n\x00\r\nQUIT\n\x21\x31\x00\xd8" + b"/tmp/a".ljust(108, b"\x00") + bytes(108)
    header = parse_header(unix)
    assert header is not None and header.source == ("/tmp/a", 0) and header.client is None
    udp = parse_header(b"\r\n\r\n\x00\r\nQUIT\n\x21\x12\x00\x0c" + bytes([192, 0, 2, 1]) + bytes(4)
                       + b"\x00\x05\x00\x06")
    assert udp is not None and udp.protocol == "UDP4" and udp.client == ("192.0.2.1", 5)  # as Netty
    assert parse_header(encode_v2(("203.0.113.7", 0), DST)).client is None  # type: ignore[union-attr]


@pytest.mark.parametrize("raw", [encode_v1(SRC, DST), encode_v2(SRC, DST, tlvs=((1, b"x"),))])
def test_every_prefix_needs_more(raw: bytes) -> None:
    for n in range(len(raw)):
        assert parse_header(raw[:n]) is None, n
    assert starts_header(raw[:3]) is None and starts_header(raw) is True


def test_what_does_not_start_a_header() -> None:
    for data in (b"\x00\x00\x00\x20", b"\x16\x03\x01", b"GET / HTTP/1.1", b"PROXX", b"\r\n\r\n\x00\r\nQUIX"):
        assert starts_header(data) is False
        with pytest.raises(ProxyHeaderError, match="does not start with a PROXY protocol header"):
            parse_header(data)
    assert starts_header(b"") is None


@pytest.mark.parametrize(("raw", "cause"), [
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "5 fields"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", "7 fields"),
    (b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", "7 fields"),
    (b"PROXY TCP4 1.2.3.04 5.6.7.8 1 2\r\n", "'1.2.3.04' is not an IPv4"),
    (b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n", "not an IPv6"),
    (b"PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", "not an IPv6"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", "port '-1'"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", "port '65536'"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 \xd9\xa1 2\r\n", "non-ASCII"),
    (b"PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n", "'tcp4'"),
    (b"PROXY \r\n", "protocol ''"),
    (b"PROXY TCP4 1.2.3.4\n", "LF alone"),
    (b"PROXY " + b"9" * 200, "first 107 bytes"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x11\x11\x00\x0c", "version 1"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x2f\x11\x00\x0c", "command 15"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x21\x10\x00\x0c", "0x10 unknown"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x21\x21\x00\x0c" + bytes(12), "36 expected"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x21\x31\x00\x0c" + bytes(12), "216 expected"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0f" + bytes(12) + b"\x01\x00\x01", "overruns"),
])
def test_malformed_headers_are_refused(raw: bytes, cause: str) -> None:
    with pytest.raises(ProxyHeaderError, match=cause):
        parse_header(raw)


def test_a_v2_header_over_the_limit_is_refused_before_it_arrives() -> None:
    raw = encode_v2(SRC, DST, tlvs=((0xE0, b"x" * 1000),))
    with pytest.raises(ProxyHeaderError, match=f"header of {len(raw)} bytes, over the 512 allowed"):
        parse_header(raw[:16], max_v2_length=512)
    assert parse_header(raw[:16]) is None  # the default: Netty's 16 + 65535


def test_a_header_read_off_a_connection_in_pieces() -> None:
    frame = b"\x00\x00\x00\x10rest-of-the-frame"
    plain = HeaderReader()
    assert plain.feed(frame) == frame and plain.header is None  # no header: all of it at once
    header = encode_v2(("203.0.113.7", 41000), ("10.0.0.1", 10911), tlvs=((0xE0, b"vpc"),))
    reader = HeaderReader()
    for i in range(len(header) - 1):  # one byte at a time: nothing until the header is whole
        assert reader.feed(header[i:i + 1]) is None
        assert reader.pending == i + 1
    assert reader.feed(header[-1:] + frame) == frame and reader.pending == 0
    assert reader.header is not None and reader.header.client == ("203.0.113.7", 41000)
    whole = HeaderReader()
    assert whole.feed(encode_v1(("198.51.100.7", 40001), ("10.0.0.1", 9876)) + frame) == frame
    with pytest.raises(ProxyHeaderError):
        HeaderReader().feed(b"PROXY TCP4 not-an-address\r\n")
