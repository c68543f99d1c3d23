"""ACL 2.0 users and ACLs a RocketMQ 5.3 broker left in a store: its Local*MetadataProvider keeps
them in two RocksDB databases, ``config/users`` (user name -> the user as JSON) and
``config/acls`` (``User:<name>`` -> the ACL as JSON), enums written as their codes. A Bolide
broker that opens such a store without ``config/authMetadata.json`` takes them over once
(:meth:`BrokerController._load_config_files`). Reading RocksDB needs ``rocksdict``
(``pip install 'bolide[rocksdb]'``); the databases are read from a copy, left as they are."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bolide.broker.auth.model import (
    ACTIONS,
    ALLOW,
    ANY,
    ANY_TYPE,
    CLUSTER,
    CUSTOM,
    DEFAULT,
    DENY,
    DISABLE,
    ENABLE,
    GROUP,
    LITERAL,
    NAMESPACE,
    NORMAL,
    PREFIXED,
    SUPER,
    TOPIC,
    Resource,
)
from bolide.protocol.bodies.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo

USERS_DB, ACLS_DB = "users", "acls"

# RocketMQ's enum codes (org.apache.rocketmq.auth... and common.action / common.resource)
_USER_TYPES = {1: SUPER, 2: NORMAL}
_USER_STATUS = {1: ENABLE, 2: DISABLE}
_DECISIONS = {1: ALLOW, 2: DENY}
_POLICY_TYPES = {1: CUSTOM, 2: DEFAULT}
_ACTIONS = dict(enumerate(ACTIONS, start=1))  # 1 All, 2 Any, 3 Pub, ... 9 List
_RESOURCE_TYPES = dict(enumerate((ANY_TYPE, CLUSTER, NAMESPACE, TOPIC, GROUP), start=1))
_PATTERNS = dict(enumerate((ANY, LITERAL, PREFIXED), start=1))


class RocketMQAuthUnreadable(Exception):
    """The databases are there but cannot be read; the message names the fix."""


def has_rocketmq_auth(config_dir: Path) -> bool:
    """Whether ``config_dir`` holds RocketMQ's ACL 2.0 databases."""
    return any((config_dir / name / "CURRENT").is_file() for name in (USERS_DB, ACLS_DB))


def _code(table: Mapping[int, str], value: Any, what: str) -> str:
    try:
        return table[int(value)]
    except (KeyError, TypeError, ValueError):
        raise RocketMQAuthUnreadable(f"unknown {what} code {value!r}") from None


def user_from_rocketmq(obj: Mapping[str, Any]) -> UserInfo:
    """A user as RocketMQ's User JSON has it."""
    return UserInfo(username=obj.get("username"), password=obj.get("password"),
                    user_type=_code(_USER_TYPES, obj.get("userType", 2), "user type"),
                    user_status=_code(_USER_STATUS, obj.get("userStatus", 1), "user status"))


def resource_key(obj: Mapping[str, Any]) -> str:
    """``*``, ``Type:*``, ``Type:name*`` or ``Type:name``, as RocketMQ's Resource.getResourceKey."""
    rtype = _code(_RESOURCE_TYPES, obj.get("resourceType"), "resource type")
    if rtype == ANY_TYPE:
        return Resource(ANY_TYPE, None, ANY).key
    pattern = _code(_PATTERNS, obj.get("resourcePattern"), "resource pattern")
    return Resource(rtype, obj.get("resourceName") or "", pattern).key


def acl_from_rocketmq(subject: str, obj: Mapping[str, Any]) -> AclInfo:
    """An ACL as RocketMQ's Acl JSON has it, for ``subject`` (its key)."""
    policies = []
    for policy in obj.get("policies") or []:
        entries = [
            PolicyEntryInfo(resource=resource_key(entry.get("resource") or {}),
                            actions=[_code(_ACTIONS, a, "action") for a in entry.get("actions") or []],
                            source_ips=list((entry.get("environment") or {}).get("sourceIps") or []) or None,
                            decision=_code(_DECISIONS, entry.get("decision", 1), "decision"))
            for entry in policy.get("entries") or []
        ]
        policies.append(PolicyInfo(policy_type=_code(_POLICY_TYPES, policy.get("policyType", 1),
                                                     "policy type"), entries=entries))
    return AclInfo(subject=subject, policies=policies)


def _items(db_dir: Path) -> Iterator[tuple[str, bytes]]:
    """The (key, value) pairs of the default column family of the RocksDB at ``db_dir``, read
    from a copy (opening writes beside the files)."""
    try:
        from rocksdict import AccessType, Options, Rdict
    except ImportError:
        raise RocketMQAuthUnreadable("reading RocketMQ's RocksDB needs the rocksdict package: "
                                     "pip install 'bolide[rocksdb]'") from None
    with tempfile.TemporaryDirectory(prefix="bolide-rocksdb-") as tmp:
        copy = Path(tmp) / db_dir.name
        shutil.copytree(db_dir, copy, ignore=shutil.ignore_patterns("LOCK"))
        try:
            families = {name: Options(raw_mode=True) for name in Rdict.list_cf(str(copy))}
            db = Rdict(str(copy), options=Options(raw_mode=True), column_families=families,
                       access_type=AccessType.read_only())
        except Exception as exc:  # rocksdict raises plain Exceptions
            raise RocketMQAuthUnreadable(f"{db_dir} does not open as a RocksDB database: {exc}") from None
        try:
            for key, value in db.items():  # raw mode: bytes both
                if not isinstance(key, bytes) or not isinstance(value, bytes):
                    raise RocketMQAuthUnreadable(f"{db_dir} holds a key or value that is not bytes")
                yield key.decode("utf-8"), value
        finally:
            db.close()


def read_rocketmq_auth(config_dir: Path) -> tuple[list[UserInfo], list[AclInfo]]:
    """The users and ACLs of RocketMQ's databases in ``config_dir`` (either may be missing)."""
    users: list[UserInfo] = []
    acls: list[AclInfo] = []
    try:
        if (config_dir / USERS_DB / "CURRENT").is_file():
            users = [user_from_rocketmq(json.loads(value)) for _, value in _items(config_dir / USERS_DB)]
        if (config_dir / ACLS_DB / "CURRENT").is_file():
            acls = [acl_from_rocketmq(key, json.loads(value)) for key, value in _items(config_dir / ACLS_DB)]
    except (ValueError, AttributeError, TypeError) as exc:
        raise RocketMQAuthUnreadable(f"a user or ACL in {config_dir} is not RocketMQ's JSON: {exc}") from None
    return users, acls
