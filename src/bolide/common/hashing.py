"""Java ``String.hashCode()``, which RocketMQ uses for tag codes and index keys."""

from functools import lru_cache


@lru_cache(maxsize=8192)
def java_string_hash(text: str) -> int:
    """Return ``text.hashCode()`` as Java computes it: a signed 32-bit int over UTF-16 units."""
    h = 0
    if text.isascii():
        for ch in text.encode("ascii"):
            h = (31 * h + ch) & 0xFFFFFFFF
    else:
        units = text.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """ConsumeQueue tags code of a TAGS property: its Java hash, or 0 when absent or empty."""
    return java_string_hash(tags) if tags else 0
