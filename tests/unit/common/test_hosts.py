"""Socket address encoding: address bytes then the port as a big-endian i32 (spec 2.7)."""

import pytest

from bolide.common.hosts import decode_host, encode_host


def test_ipv4_is_8_bytes() -> None:
    assert encode_host("192.168.0.1:10911") == bytes([192, 168, 0, 1, 0, 0, 0x2A, 0x9F])
    assert encode_host("192.168.0.10:50000") == bytes.fromhex("c0a8000a0000c350")


def test_ipv6_is_20_bytes() -> None:
    raw = encode_host("[::1]:10911")
    assert len(raw) == 20
    assert raw == bytes(15) + b"\x01" + bytes.fromhex("00002a9f")
    assert encode_host("::1:10911") == raw  # unbracketed: the port follows the last colon


@pytest.mark.parametrize(
    "address", ["127.0.0.1:1", "10.0.0.5:65535", "[fe80::1]:10911", "[2001:db8::42]:0"]
)
def test_round_trip(address: str) -> None:
    assert decode_host(encode_host(address)) == address
    assert decode_host(memoryview(encode_host(address))) == address


def test_missing_port() -> None:
    with pytest.raises(ValueError, match="no port"):
        encode_host("192.168.0.1")


def test_bad_address() -> None:
    with pytest.raises(ValueError):
        encode_host("not-an-ip:10911")


@pytest.mark.parametrize("address", ["1.2.3.4:65536", "1.2.3.4:-1", "1.2.3.4:99999999999", "1.2.3.4:x"])
def test_bad_port(address: str) -> None:
    with pytest.raises(ValueError):
        encode_host(address)
