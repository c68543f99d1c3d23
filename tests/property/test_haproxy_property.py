"""Properties of the PROXY protocol header codec: what encode_v1/encode_v2 write parses back
to the same addresses and TLVs whatever follows it, every proper prefix asks for more bytes,
and any input is either a header, a request for more, or a ProxyHeaderError."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from bolide.protocol.haproxy import (
    V1_MAX_LENGTH,
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderError,
    encode_v1,
    encode_v2,
    parse_header,
)

ports = st.integers(0, 65535)
v4 = st.builds(lambda n: str(ipaddress.IPv4Address(n)), st.integers(0, 2**32 - 1))
v6 = st.builds(lambda n: str(ipaddress.IPv6Address(n)), st.integers(0, 2**128 - 1))
pairs = st.one_of(st.tuples(st.tuples(v4, ports), st.tuples(v4, ports)),
                  st.tuples(st.tuples(v6, ports), st.tuples(v6, ports)))
tlvs = st.lists(st.tuples(st.integers(0, 255), st.binary(max_size=40)), max_size=5).map(tuple)


@given(pairs, st.binary(max_size=64))
def test_v1_round_trip(addresses: tuple, after: bytes) -> None:
    source, destination = addresses
    raw = encode_v1(source, destination)
    assert len(raw) <= V1_MAX_LENGTH
    header = parse_header(raw + after)
    assert header is not None and header.length == len(raw) and header.version == 1
    assert (header.source, header.destination) == (source, destination)
    assert header.client == (source if source[1] else None)
    assert all(parse_header(raw[:n]) is None for n in range(len(raw)))


@given(pairs, tlvs, st.booleans(), st.binary(max_size=64))
def test_v2_round_trip(addresses: tuple, records: tuple, local: bool, after: bytes) -> None:
    source, destination = addresses
    raw = encode_v2(source, destination, tlvs=records, local=local)
    header = parse_header(raw + after)
    assert header is not None and header.length == len(raw) and header.local == local
    if local:
        assert header.client is None
    else:
        assert header == ProxyHeader(2, "TCP6" if ":" in source[0] else "TCP4", source, destination,
                                     records, length=len(raw))
    assert all(parse_header(raw[:n]) is None for n in range(len(raw)))


@given(st.one_of(st.binary(max_size=300),
                 st.binary(max_size=300).map(lambda b: b"PROXY " + b),
                 st.binary(max_size=300).map(lambda b: V2_SIGNATURE + b)))
def test_any_input_is_a_header_more_or_a_refusal(data: bytes) -> None:
    try:
        header = parse_header(data)
    except ProxyHeaderError:
        return
    if header is not None:
        assert 0 < header.length <= len(data)
        assert parse_header(data[:header.length]) == header
