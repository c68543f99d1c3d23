"""``migrateAuthFromV1Enabled``: plain-ACL accounts (``plain_acl.yml``) as ACL 2.0 users and
ACLs, as RocketMQ 5.3's AuthMigrator makes them: an admin account becomes a super user, others
normal users whose ``topicPerms``/``groupPerms`` become entries of their Custom policy and whose
default permissions become ``Topic:*``/``Group:*`` entries of their Default policy. Address
white lists have no counterpart and are not carried over."""

from __future__ import annotations

from bolide.broker.auth.model import CUSTOM, DEFAULT, NORMAL, SUPER, subject_key
from bolide.protocol.bodies.admin import PlainAccessConfig
from bolide.protocol.bodies.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo

_ACTIONS = {"PUB": ["Pub"], "SUB": ["Sub"], "PUB|SUB": ["Pub", "Sub"], "SUB|PUB": ["Pub", "Sub"]}


def _entry(resource: str, perm: str) -> PolicyEntryInfo:
    perm = perm.strip()
    return PolicyEntryInfo(resource=resource, actions=_ACTIONS.get(perm, ["All"]),
                           decision="Deny" if perm == "DENY" else "Allow")


def _named(kind: str, perms: list[str] | None) -> list[PolicyEntryInfo]:
    entries = []
    for item in perms or []:
        name, sep, perm = item.partition("=")
        if sep and name.strip():
            entries.append(_entry(f"{kind}:{name.strip()}", perm))
    return entries


def migrated(account: PlainAccessConfig) -> tuple[UserInfo, AclInfo | None]:
    """The user and (when it has any entry) the ACL a plain-ACL account becomes."""
    name = account.access_key or ""
    user = UserInfo(username=name, password=account.secret_key,
                    user_type=SUPER if account.admin else NORMAL)
    policies = []
    custom = _named("Topic", account.topic_perms) + _named("Group", account.group_perms)
    if custom:
        policies.append(PolicyInfo(policy_type=CUSTOM, entries=custom))
    default = [_entry(resource, perm) for resource, perm in (
        ("Topic:*", account.default_topic_perm), ("Group:*", account.default_group_perm)) if perm]
    if default:
        policies.append(PolicyInfo(policy_type=DEFAULT, entries=default))
    acl = AclInfo(subject=subject_key(name), policies=policies) if policies else None
    return user, acl
