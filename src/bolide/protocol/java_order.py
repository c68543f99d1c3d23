"""The iteration order of Java's ``HashMap``/``HashSet`` (JDK 8-18, as the JDK 17 mqadmin runs)
for string and small integer keys, for code that must walk maps in the order a RocketMQ tool
walks them (the static topic allocator breaks ties by it, and fastjson writes a HashMap's keys
in it).

A HashMap iterates its table's buckets in index order (``spread(hashCode) & (capacity - 1)``),
the keys of one bucket in insertion order; a resize splits buckets keeping that order. So the
order is a stable sort by bucket index of the keys in the order they were put.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

K = TypeVar("K", str, int)

DEFAULT_CAPACITY = 16
LOAD_FACTOR = 0.75


def string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def key_hash(key: str | int) -> int:
    """``HashMap.hash``: the key's hashCode with its high half folded into the low one."""
    h = (string_hash(key) if isinstance(key, str) else key) & 0xFFFFFFFF
    return h ^ (h >> 16)


def table_size_for(n: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at or above ``n`` (at least 1)."""
    size = 1
    while size < n:
        size <<= 1
    return size


def grown(capacity: int, size: int) -> int:
    """The capacity after ``size`` puts into a table of ``capacity`` (doubling past 3/4)."""
    while size > capacity * LOAD_FACTOR:
        capacity <<= 1
    return capacity


def default_capacity(size: int) -> int:
    """The table capacity of ``new HashMap<>()`` holding ``size`` keys."""
    return grown(DEFAULT_CAPACITY, size)


def put_all_capacity(size: int) -> int:
    """The table capacity of ``new HashMap<>()`` after ``putAll`` of a map of ``size`` keys
    (JDK 8-18 presize it to ``tableSizeFor(size / 0.75 + 1)``)."""
    if size == 0:
        return DEFAULT_CAPACITY
    return grown(table_size_for(int(size / LOAD_FACTOR + 1.0)), size)


def hash_order(keys: Iterable[K], capacity: int | None = None) -> list[K]:
    """``keys`` (in the order they were put) in the order a HashMap of ``capacity`` (default:
    that of ``new HashMap<>()`` holding them) iterates them."""
    listed = list(dict.fromkeys(keys))
    cap = capacity if capacity is not None else default_capacity(len(listed))
    return sorted(listed, key=lambda k: key_hash(k) & (cap - 1))
