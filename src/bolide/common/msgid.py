"""Message ids: the broker's offsetMsgId and the client's UNIQ_KEY."""

import ipaddress
import itertools
import os
import random
import socket
import struct
import time
from datetime import datetime

from bolide.common.hosts import local_ip

_OFFSET = struct.Struct(">q")


def create_offset_msg_id(store_host: bytes, commit_log_offset: int) -> str:
    """offsetMsgId: hex of store address, port (i32) and CommitLog offset (i64), uppercase."""
    return (store_host + _OFFSET.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """Split an offsetMsgId into ``("ip:port", commit_log_offset)``; raises ValueError."""
    if len(msg_id) not in (32, 56):
        raise ValueError(
            f"{msg_id!r} is not an offsetMsgId: it must be 32 (IPv4) or 56 (IPv6) hex characters"
        )
    raw = bytes.fromhex(msg_id)
    ip_len = 4 if len(raw) == 16 else 16
    ip = ipaddress.ip_address(raw[:ip_len])
    port = struct.unpack_from(">i", raw, ip_len)[0]
    offset = _OFFSET.unpack_from(raw, ip_len + 4)[0]
    host = f"{ip}:{port}" if ip.version == 4 else f"[{ip}]:{port}"
    return host, offset


def _local_ip_bytes() -> bytes:
    return socket.inet_aton(local_ip())


class UniqKeyGenerator:
    """Creates UNIQ_KEY ids laid out like ``MessageClientIDSetter``: ip, pid, salt, time, counter."""

    def __init__(self, ip: bytes | None = None) -> None:
        ip = ip if ip is not None else _local_ip_bytes()
        prefix = ip + struct.pack(">hi", os.getpid() & 0x7FFF, random.getrandbits(31))
        self._prefix = prefix.hex().upper()
        self._counter = itertools.count(1)
        self._month_start_ms = 0.0
        self._next_month_ms = 0.0
        self._roll_month(time.time() * 1000)

    def _roll_month(self, now_ms: float) -> None:
        now = datetime.fromtimestamp(now_ms / 1000)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(
            month=start.month + 1
        )
        self._month_start_ms = start.timestamp() * 1000
        self._next_month_ms = nxt.timestamp() * 1000

    def next_id(self) -> str:
        """A new id: 32 uppercase hex characters for an IPv4 prefix."""
        now = time.time() * 1000
        if now >= self._next_month_ms:
            self._roll_month(now)
        counter = next(self._counter) & 0xFFFF  # itertools.count is atomic under the GIL
        return f"{self._prefix}{int(now - self._month_start_ms) & 0xFFFFFFFF:08X}{counter:04X}"



def decode_uniq_msg_id(msg_id: str, now_ms: float | None = None) -> tuple[str, int, int]:
    """What a UNIQ_KEY id says (mqadmin DecodeMessageId): ``(ip, pid, ms)``, the client's
    address, its process id (its low 15 bits for Bolide's ids) and about when the id was made
    (the id holds the milliseconds since the start of that month, local time: the latest such
    time not after ``now_ms``). Raises ValueError for text that is no such id."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"{msg_id!r} is not a message id: it must be hexadecimal") from None
    if len(raw) not in (16, 28):
        raise ValueError(f"{msg_id!r} is not a unique message id: it must be 32 (IPv4) or 56 (IPv6) "
                         "hex characters")
    ip_len = 4 if len(raw) == 16 else 16
    ip = str(ipaddress.ip_address(raw[:ip_len]))
    pid = struct.unpack_from(">H", raw, ip_len)[0]
    span_ms = struct.unpack_from(">I", raw, ip_len + 6)[0]
    now = datetime.fromtimestamp((time.time() * 1000 if now_ms is None else now_ms) / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if start.timestamp() * 1000 + span_ms >= now.timestamp() * 1000:  # made last month
        start = start.replace(year=start.year - 1, month=12) if start.month == 1 else start.replace(
            month=start.month - 1)
    return ip, pid, int(start.timestamp() * 1000) + span_ms
