"""Bodies of RocketMQ 5's ACL 2.0 administration (codes 3001 to 3010): ``UserInfo`` and
``AclInfo`` as the broker and ``mqadmin`` exchange them."""

from __future__ import annotations

from bolide.protocol.bodies.bean import Bean, bean


@bean
class UserInfo(Bean):
    """A user: ``user_type`` ``Super``/``Normal``, ``user_status`` ``enable``/``disable``
    (absent fields: keep, or the defaults for a new user)."""

    username: str | None = None
    password: str | None = None
    user_type: str | None = None
    user_status: str | None = None


@bean
class PolicyEntryInfo(Bean):
    """One rule: a resource (``Topic:orders``, ``Group:app*``, ``*``), actions, an Allow or
    Deny decision, and optional source IPs or CIDRs."""

    resource: str | None = None
    actions: list[str] | None = None
    source_ips: list[str] | None = None
    decision: str | None = None


@bean
class PolicyInfo(Bean):
    policy_type: str | None = None  # Custom (absent) or Default
    entries: list[PolicyEntryInfo] | None = None


@bean
class AclInfo(Bean):
    subject: str | None = None  # User:<name>
    policies: list[PolicyInfo] | None = None
