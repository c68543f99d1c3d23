"""Socket addresses as RocketMQ stores them: address bytes followed by the port as an i32."""

import ipaddress
import socket
import struct
from functools import lru_cache

_PORT = struct.Struct(">i")


@lru_cache(maxsize=1024)
def encode_host(address: str) -> bytes:
    """Encode ``"ip:port"`` (IPv6 as ``"[ip]:port"`` or ``"ip:port"``) into 8 or 20 bytes."""
    host, _, port = address.rpartition(":")
    if not host:
        raise ValueError(f"address {address!r} has no port; write it as ip:port")
    ip = ipaddress.ip_address(host.strip("[]"))
    number = int(port)
    if not 0 <= number <= 65535:
        raise ValueError(f"address {address!r} has port {number}; use a port from 0 to 65535")
    return ip.packed + _PORT.pack(number)


@lru_cache(maxsize=4096)
def _decode_host(raw: bytes) -> str:
    ip = ipaddress.ip_address(raw[:-4])
    port = _PORT.unpack_from(raw, len(raw) - 4)[0]
    return f"{ip}:{port}" if ip.version == 4 else f"[{ip}]:{port}"


def decode_host(data: bytes | memoryview) -> str:
    """Decode 8 (IPv4) or 20 (IPv6) bytes into ``"ip:port"`` (IPv6 in brackets)."""
    return _decode_host(bytes(data))


def local_ip() -> str:
    """The IPv4 address this host uses for outbound traffic (127.0.0.1 when there is none)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a source address
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"
