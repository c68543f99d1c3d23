"""Remote-address patterns of ``plain_acl.yml`` (``globalWhiteRemoteAddresses`` and an
account's ``whiteRemoteAddress``), as RocketMQ's RemoteAddressStrategyFactory reads them:

- blank: matches nothing; ``*``, ``*.*.*.*`` or ``*:*:*:*:*:*:*:*``: matches everything;
- one address (``192.168.0.10``, ``::1``), or several joined by commas;
- a last part in braces: ``192.168.1.{1,2,3}``;
- a range in one part, the parts after it ``*``: ``192.168.*.*``, ``10.10.1-20.*``,
  ``1050:0:0:0:5:600:300c:1-ff``.

A pattern RocketMQ refuses is a ConfigError naming the pattern.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from bolide.errors import ConfigError

_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


def host_of(remote_addr: str) -> str:
    """The host of a peer address ``"host:port"`` or ``"[v6]:port"`` (as channels name their
    peers); text without a port is returned as it is."""
    if remote_addr.startswith("["):
        return remote_addr[1:].partition("]")[0]
    host, sep, port = remote_addr.rpartition(":")
    return host if sep and port.isdigit() and ":" not in host else remote_addr


def _canonical(text: str) -> str | None:
    """One spelling per address (IPv6 fully written out), or None when ``text`` is not one."""
    try:
        return ipaddress.ip_address(text.strip()).exploded.upper()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """A compiled pattern; :meth:`matches` takes a host (no port)."""

    text: str
    everything: bool = False
    addresses: frozenset[str] = frozenset()
    prefix: tuple[int, ...] = ()  # a range: the parts before the ranged one
    low: int = 0
    high: int = -1
    v6: bool = False

    def matches(self, host: str) -> bool:
        if self.everything:
            return True
        if self.addresses:
            return _canonical(host) in self.addresses
        if self.high < 0:
            return False
        parts = _parts(host, self.v6)
        if parts is None:
            return False
        index = len(self.prefix)
        return parts[:index] == self.prefix and self.low <= parts[index] <= self.high


def _parts(host: str, v6: bool) -> tuple[int, ...] | None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if (address.version == 6) != v6:
        return None
    if v6:
        return tuple(int(group, 16) for group in address.exploded.split(":"))
    return tuple(int(part) for part in address.exploded.split("."))


def compile_pattern(text: str | None) -> AddressPattern:
    """The pattern ``text`` as RocketMQ reads it (see the module's docstring)."""
    if text is None or not str(text).strip():
        return AddressPattern("")
    text = str(text).strip()
    if text in _ALL:
        return AddressPattern(text, everything=True)
    if text.endswith("}"):
        return _braces(text)
    if "," in text:
        return _listed(text, [a for a in text.split(",") if a.strip()])
    if "*" in text or "-" in text:
        return _ranged(text)
    return _listed(text, [text])


def _bad(text: str, why: str) -> ConfigError:
    return ConfigError(f"white remote address {text!r} {why}: use one address, several joined by "
                       "commas, 192.168.1.{1,2} or a range such as 192.168.*.* or 10.0.1-20.*")


def _listed(text: str, items: list[str]) -> AddressPattern:
    addresses = set()
    for item in items:
        canonical = _canonical(item)
        if canonical is None:
            raise _bad(text, f"has {item.strip()!r}, which is not an IP address")
        addresses.add(canonical)
    return AddressPattern(text, addresses=frozenset(addresses))


def _braces(text: str) -> AddressPattern:
    sep = ":" if ":" in text else "."
    parts = [p for p in text.split(sep) if p]
    if sep == "." and len(parts) < 4:
        raise _bad(text, "has fewer than four parts")
    if not parts[-1].startswith("{"):
        raise _bad(text, "has braces that are not its last part")
    head = text[:text.index("{")]
    return _listed(text, [head + item for item in parts[-1][1:-1].split(",") if item])


def _ranged(text: str) -> AddressPattern:
    v6 = ":" in text
    if v6 and "::" in text:
        raise _bad(text, "shortens an IPv6 range with '::'; write every group out")
    parts = [p.strip() for p in text.split(":" if v6 else ".")]
    if len(parts) != (8 if v6 else 4):
        raise _bad(text, "does not have " + ("eight groups" if v6 else "four parts"))
    base, top = (16, 0xFFFF) if v6 else (10, 255)
    for index in range(1, len(parts)):
        part = parts[index]
        if part == "*":
            low, high = 0, top
        elif "-" in part and not part.startswith("-"):
            low, high = (_number(text, p, base, top) for p in part.split("-", 1))
            if low > high:
                raise _bad(text, f"has the empty range {part}")
        else:
            continue
        if any(p != "*" for p in parts[index + 1:]):
            raise _bad(text, "has parts other than '*' after its range")
        prefix = tuple(_number(text, p, base, top) for p in parts[:index])
        return AddressPattern(text, prefix=prefix, low=low, high=high, v6=v6)
    raise _bad(text, "has a range in its first part or none")


def _number(text: str, part: str, base: int, top: int) -> int:
    try:
        value = int(part, base)
    except ValueError:
        raise _bad(text, f"has {part!r}, which is not a number") from None
    if not 0 <= value <= top:
        raise _bad(text, f"has {part!r}, out of range")
    return value
