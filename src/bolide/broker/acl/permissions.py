"""Plain-ACL permissions (RocketMQ's ``Permission``): the bits an account holds on a topic or a
group, how ``plain_acl.yml`` spells them, and which request codes need an admin account."""

from __future__ import annotations

from collections.abc import Iterable

from bolide.errors import ConfigError
from bolide.protocol.codes import RequestCode

DENY = 1
ANY = 2
PUB = 4
SUB = 8

RETRY_PREFIX = "%RETRY%"

# The codes only an account with ``admin: true`` may send: RocketMQ's five, RocketMQ 5's list
# forms of the two creations, and the ACL changes and the read of every account's secret,
# which RocketMQ lets any account send (so that an account could make itself admin); also
# RocketMQ 5's other changes of how the broker serves groups, which plain ACL predates: a
# group's read ban, the cold data thresholds and the CommitLog's read mode.
ADMIN_CODES = frozenset({RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG,
                         RequestCode.DELETE_TOPIC_IN_BROKER,
                         RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                         RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
                         RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
                         RequestCode.DELETE_SUBSCRIPTIONGROUP,
                         RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
                         RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                         RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
                         RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN,
                         RequestCode.UPDATE_COLD_DATA_FLOW_CTR_CONFIG,
                         RequestCode.REMOVE_COLD_DATA_FLOW_CTR_CONFIG,
                         RequestCode.SET_COMMITLOG_READ_MODE})

_BY_NAME = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


def parse_perm(text: str | None) -> int:
    """The bits of ``PUB``, ``SUB``, ``PUB|SUB``, ``SUB|PUB`` or ``DENY``; anything else
    (or nothing) denies, as in RocketMQ."""
    if text is None:
        return DENY
    return _BY_NAME.get(text.strip(), DENY)


def perm_name(bits: int) -> str:
    """The ``plain_acl.yml`` spelling of ``bits``."""
    if bits & DENY:
        return "DENY"
    return {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(bits & (PUB | SUB), "DENY")


def allows(needed: int, owned: int) -> bool:
    """Whether ``owned`` grants ``needed``: DENY never does; ANY needs PUB or SUB."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def retry_topic(group: str) -> str:
    """The resource name of a consumer group: its retry topic."""
    return RETRY_PREFIX + group


def resource_label(resource: str) -> str:
    """``group:G`` for a retry topic, ``topic:T`` otherwise (RocketMQ's wording)."""
    if resource.startswith(RETRY_PREFIX):
        return "group:" + resource[len(RETRY_PREFIX):]
    return "topic:" + resource


def parse_resource_perms(entries: Iterable[str] | None, *, groups: bool) -> dict[str, int]:
    """``topicPerms`` / ``groupPerms`` entries (``name=PERM``) as resource -> bits; a group's
    resource is its retry topic. An entry without exactly one ``=`` is a ConfigError."""
    perms: dict[str, int] = {}
    for entry in entries or ():
        parts = [p for p in str(entry).split("=") if p]
        if len(parts) != 2:
            kind = "group" if groups else "topic"
            raise ConfigError(f"Parse resource permission failed for {kind}:{entry}: write it as "
                              f"{'groupA' if groups else 'topicA'}=SUB (PUB, SUB, PUB|SUB or DENY)")
        name = parts[0].strip()
        perms[retry_topic(name) if groups else name] = parse_perm(parts[1])
    return perms


def check_resource_perms(entries: Iterable[str] | None) -> None:
    """Refuse entries an admin request would write that RocketMQ refuses: ``Res=Perm`` with a
    permission other than PUB, SUB, PUB|SUB, SUB|PUB or DENY."""
    for entry in entries or ():
        parts = [p for p in str(entry).split("=") if p]
        if len(parts) != 2:
            raise ConfigError(f"Parse Resource format error for {entry}. The expected resource "
                              "format is 'Res=Perm'. For example: topicA=SUB")
        if parts[1].strip() not in _BY_NAME:
            raise ConfigError(f"Parse resource permission error for {entry}. The expected "
                              "permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")
