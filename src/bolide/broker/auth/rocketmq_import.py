"""ACL 2.0 users and ACLs in RocketMQ 5.3's form: its Local*MetadataProvider keeps them in two
RocksDB databases, ``config/users`` (user name -> the user as JSON) and ``config/acls``
(``User:<name>`` -> the ACL as JSON), enums written as their codes. A Bolide broker that opens
such a store takes them over (:mod:`bolide.broker.auth.rocketmq_sync`): once when it has no
``config/authMetadata.json`` yet, and again when RocketMQ changed them after Bolide last wrote
them. Bolide writes its users and ACLs back into them on every change
(:func:`write_rocketmq_auth`), so RocketMQ opening the store finds them. RocksDB needs
``rocksdict`` (``pip install 'bolide[rocksdb]'``); reads go through a copy of the databases."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
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
    Acl,
    Resource,
    User,
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


# RocketMQ's ConfigRocksDBStorage opens these column families beside the default one
_FAMILIES = ("kvDataVersion", "forbidden")
# SST format 5: RocketMQ 5.3's RocksDB (rocketmq-rocksdb 1.0.2) reads up to it; newer RocksDB
# writes 6 by default
_TABLE_FORMAT = 5


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


def _inverse(table: Mapping[int, str]) -> dict[str, int]:
    return {name: code for code, name in table.items()}


_USER_TYPE_CODES, _USER_STATUS_CODES = _inverse(_USER_TYPES), _inverse(_USER_STATUS)
_DECISION_CODES, _POLICY_TYPE_CODES = _inverse(_DECISIONS), _inverse(_POLICY_TYPES)
_ACTION_CODES, _RESOURCE_TYPE_CODES = _inverse(_ACTIONS), _inverse(_RESOURCE_TYPES)
_PATTERN_CODES = _inverse(_PATTERNS)


def user_to_rocketmq(user: User) -> dict[str, Any]:
    """A user as RocketMQ's User JSON (fastjson2 of its getters)."""
    return {"password": user.password, "subjectType": 1, "userStatus": _USER_STATUS_CODES[user.status],
            "userType": _USER_TYPE_CODES[user.user_type], "username": user.username}


def acl_to_rocketmq(acl: Acl) -> dict[str, Any]:
    """An ACL as RocketMQ's Acl JSON (its subject a user)."""
    policies = []
    for policy in acl.policies:
        entries = []
        for e in policy.entries:
            resource: dict[str, Any] = {"resourcePattern": _PATTERN_CODES[e.resource.pattern],
                                        "resourceType": _RESOURCE_TYPE_CODES[e.resource.type]}
            if e.resource.name is not None:
                resource["resourceName"] = e.resource.name
            entry: dict[str, Any] = {"actions": [_ACTION_CODES[a] for a in e.actions],
                                     "decision": _DECISION_CODES[e.decision], "resource": resource}
            if e.source_ips:
                entry["environment"] = {"sourceIps": list(e.source_ips)}
            entries.append(entry)
        policies.append({"entries": entries, "policyType": _POLICY_TYPE_CODES[policy.policy_type]})
    name = acl.subject.partition(":")[2]
    return {"policies": policies, "subject": {"subjectType": 1, "username": name}}


def _encode(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")


def rocketmq_auth_digest(users: Mapping[str, bytes], acls: Mapping[str, bytes]) -> str:
    """A digest of the databases' contents (what Bolide wrote, or what it reads back)."""
    h = hashlib.sha256()
    for table in (users, acls):
        for key, value in sorted(table.items()):
            h.update(len(key).to_bytes(4, "big") + key.encode() + len(value).to_bytes(4, "big") + value)
        h.update(b"|")
    return h.hexdigest()


def read_rocketmq_auth_raw(config_dir: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The databases' (key, value) pairs, users and ACLs (empty for a missing database)."""
    return tuple(dict(_items(config_dir / name)) if (config_dir / name / "CURRENT").is_file() else {}
                 for name in (USERS_DB, ACLS_DB))  # type: ignore[return-value]


def write_rocketmq_auth(config_dir: Path, users: Iterable[User], acls: Iterable[Acl]) -> str:
    """Make RocketMQ's databases hold exactly ``users`` and ``acls`` (created when missing,
    other keys deleted) and return :func:`rocketmq_auth_digest` of what they hold. The store
    must not be open in RocketMQ meanwhile. RocketMQAuthUnreadable without rocksdict or when a
    database does not open."""
    try:
        from rocksdict import BlockBasedOptions, Options, Rdict
    except ImportError:
        raise RocketMQAuthUnreadable("writing RocketMQ's RocksDB needs the rocksdict package: "
                                     "pip install 'bolide[rocksdb]'") from None

    def options() -> Any:
        opts = Options(raw_mode=True)
        table = BlockBasedOptions()
        table.set_format_version(_TABLE_FORMAT)
        opts.set_block_based_table_factory(table)
        return opts

    wanted = ({u.username: _encode(user_to_rocketmq(u)) for u in users},
              {a.subject: _encode(acl_to_rocketmq(a)) for a in acls})
    for name, items in zip((USERS_DB, ACLS_DB), wanted, strict=True):
        path = config_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        opts = options()
        opts.create_if_missing(True)
        opts.create_missing_column_families(True)
        try:
            existing = Rdict.list_cf(str(path)) if (path / "CURRENT").is_file() else []
            families = {cf: options() for cf in {*existing, *_FAMILIES} - {"default"}}
            db = Rdict(str(path), options=opts, column_families=families)
        except Exception as exc:  # rocksdict raises plain Exceptions
            raise RocketMQAuthUnreadable(f"{path} does not open as a RocksDB database: {exc}") from None
        try:
            keys = db.keys()
            stale = [key for key in keys if isinstance(key, bytes) and key.decode("utf-8") not in items]
            for key in stale:
                del db[key]
            for name_key, value in items.items():
                db[name_key.encode("utf-8")] = value
            db.flush()
        finally:
            db.close()
    return rocketmq_auth_digest(*wanted)
