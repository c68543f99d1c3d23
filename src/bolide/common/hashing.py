"""Java ``String.hashCode()``, which RocketMQ uses for tag codes and index keys."""

from functools import lru_cache
from operator import mul

_POWERS: dict[int, tuple[int, ...]] = {}  # length -> 31**(n-1-i) mod 2**32


def _powers(n: int) -> tuple[int, ...]:
    found = _POWERS.get(n)
    if found is None:
        found = tuple(pow(31, n - 1 - i, 1 << 32) for i in range(n))
        if n <= 1024:
            _POWERS[n] = found
    return found


@lru_cache(maxsize=8192)
def java_string_hash(text: str) -> int:
    """Return ``text.hashCode()`` as Java computes it: a signed 32-bit int over UTF-16 units."""
    if text.isascii():
        # sum of c_i * 31**(n-1-i), computed in C by map/sum rather than a Python loop
        data = text.encode("ascii")
        h = sum(map(mul, data, _powers(len(data)))) & 0xFFFFFFFF
    else:
        h = 0
        units = text.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """ConsumeQueue tags code of a TAGS property: its Java hash, or 0 when absent or empty."""
    return java_string_hash(tags) if tags else 0
