"""RocketMQ 5's ACL 2.0 model: users, resources (``Topic:orders``, ``Group:app*``, ``*``),
policy entries, ACLs, and the pick of the entry that decides a request.

Names are RocketMQ's, parsed case-insensitively and written in its case: user types
``Super``/``Normal``, statuses ``enable``/``disable``, resource types ``Any``, ``Cluster``,
``Namespace``, ``Topic``, ``Group``, actions ``All``, ``Pub``, ``Sub``, ``Create``, ``Update``,
``Delete``, ``Get``, ``List``, decisions ``Allow``/``Deny``, policy types ``Custom``/``Default``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

SUPER, NORMAL = "Super", "Normal"
ENABLE, DISABLE = "enable", "disable"
ALLOW, DENY = "Allow", "Deny"
CUSTOM, DEFAULT = "Custom", "Default"
ANY_TYPE, CLUSTER, NAMESPACE, TOPIC, GROUP = "Any", "Cluster", "Namespace", "Topic", "Group"
ANY, LITERAL, PREFIXED = "ANY", "LITERAL", "PREFIXED"  # resource patterns
ALL = "All"
ACTIONS = (ALL, "Any", "Pub", "Sub", "Create", "Update", "Delete", "Get", "List")
RETRY_PREFIX = "%RETRY%"


def _names(*names: str) -> dict[str, str]:
    return {name.lower(): name for name in names}


_USER_TYPES = _names(SUPER, NORMAL)
_STATUSES = _names(ENABLE, DISABLE)
_DECISIONS = _names(ALLOW, DENY)
_POLICY_TYPES = _names(CUSTOM, DEFAULT)
_TYPES = _names(ANY_TYPE, CLUSTER, NAMESPACE, TOPIC, GROUP)
_ACTIONS = _names(*ACTIONS)


def _by_name(table: dict[str, str], text: str | None) -> str | None:
    return None if text is None else table.get(text.strip().lower())


def user_type(text: str | None) -> str | None:
    return _by_name(_USER_TYPES, text)


def user_status(text: str | None) -> str | None:
    return _by_name(_STATUSES, text)


def decision(text: str | None) -> str | None:
    return _by_name(_DECISIONS, text)


def policy_type(text: str | None) -> str | None:
    return _by_name(_POLICY_TYPES, text)


def action(text: str | None) -> str | None:
    return _by_name(_ACTIONS, text)


def subject_name(subject: str | None) -> str | None:
    """The user of a subject ``User:<name>`` (the type case-insensitive), None for others."""
    if subject is None:
        return None
    kind, sep, name = subject.partition(":")
    return name if sep and kind.strip().lower() == "user" else None


def subject_key(username: str) -> str:
    return f"User:{username}"


def group_of_retry(topic: str) -> str:
    """The group a ``%RETRY%`` topic belongs to (ACL 2.0 checks it as that group)."""
    return topic[len(RETRY_PREFIX):] if topic.startswith(RETRY_PREFIX) else topic


@dataclass
class User:
    username: str
    password: str
    user_type: str = NORMAL
    status: str = ENABLE

    @property
    def is_super(self) -> bool:
        return self.user_type == SUPER


@dataclass(frozen=True, slots=True)
class Resource:
    """What an entry covers or a request touches; requests name LITERAL resources."""

    type: str
    name: str | None
    pattern: str

    @classmethod
    def parse(cls, text: str | None) -> Resource | None:
        """``*``, ``Type:*``, ``Type:prefix*`` or ``Type:name``; None for an unknown type."""
        if text is None or not text.strip():
            return None
        text = text.strip()
        if text == "*":
            return cls(ANY_TYPE, None, ANY)
        kind, _, name = text.partition(":")
        rtype = _TYPES.get(kind.strip().lower())
        if rtype is None:
            return None
        if name == "*":
            return cls(rtype, None, ANY)
        if name.endswith("*"):
            return cls(rtype, name[:name.index("*")], PREFIXED)
        return cls(rtype, name, LITERAL)

    @classmethod
    def literal(cls, rtype: str, name: str) -> Resource:
        return cls(rtype, name, LITERAL)

    @property
    def key(self) -> str:
        if self.type == ANY_TYPE:
            return "*"
        if self.pattern == ANY:
            return f"{self.type}:*"
        return f"{self.type}:{self.name}{'*' if self.pattern == PREFIXED else ''}"

    def covers(self, wanted: Resource) -> bool:
        if self.type == ANY_TYPE:
            return True
        if self.type != wanted.type:
            return False
        if self.pattern == ANY:
            return True
        if self.pattern == PREFIXED:
            return (wanted.name or "").startswith(self.name or "")
        return self.name == wanted.name


def valid_source_ip(text: str) -> bool:
    try:
        if "/" in text:
            ipaddress.ip_network(text, strict=False)
        else:
            ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _ip_matches(pattern: str, ip: str) -> bool:
    if "/" not in pattern:
        return pattern == ip
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(pattern, strict=False)
    except ValueError:
        return False


@dataclass
class PolicyEntry:
    resource: Resource
    actions: list[str]
    decision: str
    source_ips: list[str] | None = None

    def matches(self, wanted: Resource, actions: Sequence[str], ip: str) -> bool:
        if not self.resource.covers(wanted):
            return False
        if ALL not in self.actions and not any(a in self.actions for a in actions):
            return False
        return not self.source_ips or any(_ip_matches(p, ip) for p in self.source_ips)


@dataclass
class Policy:
    policy_type: str
    entries: list[PolicyEntry] = field(default_factory=list)


@dataclass
class Acl:
    subject: str
    policies: list[Policy] = field(default_factory=list)

    def policy(self, ptype: str) -> Policy | None:
        return next((p for p in self.policies if p.policy_type == ptype), None)

    def merge(self, other: Acl) -> None:
        """RocketMQ's update: an entry on the same resource is replaced in place, others are
        appended, per policy type."""
        for incoming in other.policies:
            mine = self.policy(incoming.policy_type)
            if mine is None:
                self.policies.append(Policy(incoming.policy_type, list(incoming.entries)))
                continue
            for entry in incoming.entries:
                at = next((i for i, e in enumerate(mine.entries) if e.resource == entry.resource), None)
                if at is None:
                    mine.entries.append(entry)
                else:
                    mine.entries[at] = entry


def _compare(e1: PolicyEntry, e2: PolicyEntry) -> int:
    """RocketMQ 5.3's ordering of matching entries, as it is (the first after sorting decides):
    the Any type last, a shorter prefix first, a literal or prefixed entry before the other of
    a pair, then Allow before Deny."""
    r1, r2 = e1.resource, e2.resource
    compare = 0
    if r1.type != r2.type:
        if r1.type == ANY_TYPE:
            compare = 1
        if r2.type == ANY_TYPE:
            compare = -1
    elif r1.pattern == r2.pattern:
        if r1.pattern == PREFIXED:
            n1, n2 = len(r1.name or ""), len(r2.name or "")
            compare = (n1 > n2) - (n1 < n2)
    elif r1.pattern in (LITERAL, PREFIXED):
        compare = -1
    if compare:
        return compare
    return 1 if e1.decision == DENY else -1 if e2.decision == DENY else 0


def java_small_sort(items: list[PolicyEntry], cmp: Callable[[PolicyEntry, PolicyEntry], int]) -> None:
    """Sort as Java's ``List.sort`` sorts fewer than 32 items (a leading run, then binary
    insertion): with an ordering that is not consistent, as RocketMQ's entry order is not, the
    result depends on the algorithm, and the winner must be the one a RocketMQ broker picks."""
    n = len(items)
    if n < 2:
        return
    run = 1
    if cmp(items[1], items[0]) < 0:
        run = 2
        while run < n and cmp(items[run], items[run - 1]) < 0:
            run += 1
        items[:run] = items[:run][::-1]
    else:
        run = 2
        while run < n and cmp(items[run], items[run - 1]) >= 0:
            run += 1
    for start in range(run, n):
        pivot = items[start]
        left, right = 0, start
        while left < right:
            mid = (left + right) >> 1
            if cmp(pivot, items[mid]) < 0:
                right = mid
            else:
                left = mid + 1
        items[left + 1 : start + 1] = items[left:start]
        items[left] = pivot


def deciding_entry(acl: Acl, wanted: Resource, actions: Sequence[str], ip: str) -> PolicyEntry | None:
    """The entry that decides: among the Custom policy's matching entries (the Default
    policy's when none match), the first in RocketMQ's order; None when nothing matches."""
    for ptype in (CUSTOM, DEFAULT):
        policy = acl.policy(ptype)
        if policy is None:
            continue
        found = [e for e in policy.entries if e.matches(wanted, actions, ip)]
        if found:
            java_small_sort(found, _compare)
            return found[0]
    return None
