"""The broker's ACL 2.0 users and ACLs, kept in ``config/authMetadata.json`` (RocketMQ keeps
them in RocksDB under ``config/users`` and ``config/acls``; like RocketMQ's, they belong to
one broker and are not replicated: ``mqadmin`` writes them to every broker of a cluster).

The wire forms (:class:`UserInfo`, :class:`AclInfo`) convert to the model here, with
RocketMQ's validation and its refusal texts (:class:`AuthRefused`, answered NO_PERMISSION)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bolide.broker.auth.model import (
    CUSTOM,
    ENABLE,
    NORMAL,
    Acl,
    Policy,
    PolicyEntry,
    Resource,
    User,
    action,
    decision,
    policy_type,
    subject_key,
    subject_name,
    user_status,
    user_type,
    valid_source_ip,
)
from bolide.errors import BolideError, ConfigError, ProtocolError
from bolide.protocol.bodies.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from bolide.store.config_files import JsonConfigFile


class AuthRefused(BolideError):
    """A request ACL 2.0 refuses, or an administration request it cannot carry out: answered
    NO_PERMISSION (16) with RocketMQ's text as remark."""

    response_code = 16


def user_info(user: User) -> UserInfo:
    return UserInfo(username=user.username, password=user.password, user_type=user.user_type,
                    user_status=user.status)


def acl_info(acl: Acl) -> AclInfo:
    return AclInfo(subject=acl.subject, policies=[
        PolicyInfo(policy_type=p.policy_type, entries=[
            PolicyEntryInfo(resource=e.resource.key, actions=list(e.actions),
                            source_ips=list(e.source_ips) if e.source_ips else None,
                            decision=e.decision)
            for e in p.entries])
        for p in acl.policies])


def acl_from_info(info: AclInfo, subject: str) -> Acl:
    """The ACL ``info`` describes for ``subject``, checked as RocketMQ checks it."""
    policies = []
    for p in info.policies or []:
        if not p.entries:
            continue
        entries = []
        for e in p.entries:
            resource = Resource.parse(e.resource)
            if resource is None:
                raise AuthRefused("The resource is null.")
            actions = [a for a in (action(t) for t in e.actions or []) if a is not None]
            if not actions:
                raise AuthRefused("The actions is empty.")
            if "Any" in actions:
                raise AuthRefused("The actions can not be Any.")
            for ip in e.source_ips or []:
                if not ip.strip():
                    raise AuthRefused("The source ip is empty.")
                if not valid_source_ip(ip.strip()):
                    raise AuthRefused("The source ip is invalid.")
            verdict = decision(e.decision)
            if verdict is None:
                raise AuthRefused("The decision is null or illegal.")
            entries.append(PolicyEntry(resource, actions, verdict,
                                       [ip.strip() for ip in e.source_ips or []] or None))
        policies.append(Policy(policy_type(p.policy_type) or CUSTOM, entries))
    if not policies:
        raise AuthRefused("The policies is empty.")
    return Acl(subject, policies)


class AuthMetadata(JsonConfigFile):
    """Users by name and ACLs by subject (``User:<name>``); replaced, never changed in
    place, so the per-request checks read them without a lock."""

    FILE_NAME = "authMetadata.json"
    WHAT = "the ACL 2.0 users and ACLs"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        self.version = 0  # bumped by every change: the checks' cached decisions key on it
        # called by persist() before the file is written: writes the users and ACLs elsewhere too
        # (RocketMQ's databases) and returns the digest of what it wrote, None when it could not
        self.mirror: Callable[[AuthMetadata], str | None] | None = None
        self.mirror_digest: str | None = None  # of what the mirror last wrote, kept in the file
        self._mirror_lock = threading.Lock()

    def _set(self, users: dict[str, User] | None = None, acls: dict[str, Acl] | None = None) -> None:
        if users is not None:
            self.users = users
        if acls is not None:
            self.acls = acls
        self.version += 1

    # -- users ------------------------------------------------------------------------------
    def create_user(self, info: UserInfo) -> User:
        name, password = info.username, info.password
        if not name or not name.strip():
            raise AuthRefused("username can not be blank")
        if not password or not password.strip():
            raise AuthRefused("password can not be blank")
        with self._lock:
            if name in self.users:
                raise AuthRefused("The user is existed")
            user = User(name, password, user_type(info.user_type) or NORMAL,
                        user_status(info.user_status) or ENABLE)
            self._set(users={**self.users, name: user})
        return user

    def update_user(self, info: UserInfo) -> None:
        with self._lock:
            old = self.users.get(info.username or "")
            if old is None:
                raise AuthRefused("The user is not exist")
            new = User(old.username, info.password if info.password and info.password.strip()
                       else old.password, user_type(info.user_type) or old.user_type,
                       user_status(info.user_status) or old.status)
            self._set(users={**self.users, new.username: new})

    def delete_user(self, name: str) -> None:
        """The user and its ACL (a user that does not exist: nothing to do)."""
        with self._lock:
            self._set({k: v for k, v in self.users.items() if k != name},
                      {k: v for k, v in self.acls.items() if k != subject_key(name)})

    def list_users(self, part: str | None) -> list[User]:
        return [u for name, u in sorted(self.users.items()) if not part or part in name]

    # -- ACLs -------------------------------------------------------------------------------
    def _subject_user(self, subject: str | None) -> str:
        name = subject_name(subject)
        if name is None:
            raise AuthRefused("The subject is null.")
        if name not in self.users:
            raise AuthRefused(f"The subject of {subject_key(name)} is not exist.")
        return name

    def put_acl(self, info: AclInfo, header_subject: str | None) -> None:
        """Create or merge (RocketMQ's create and update do the same): the body's subject,
        else the header's."""
        subject = info.subject if subject_name(info.subject) is not None else header_subject
        if not info.policies:
            raise AuthRefused("The body of acl is null")
        with self._lock:
            key = subject_key(self._subject_user(subject))
            incoming = acl_from_info(info, key)
            old = self.acls.get(key)
            acl = Acl(key, [Policy(p.policy_type, list(p.entries)) for p in old.policies] if old else [])
            acl.merge(incoming)
            self._set(acls={**self.acls, key: acl})

    def delete_acl(self, subject: str | None, ptype: str | None, resource: str | None) -> None:
        name = subject_name(subject)
        if name is None:
            raise AuthRefused("The subject is null.")
        with self._lock:
            if name not in self.users:
                raise AuthRefused("The subject is not exist.")
            key = subject_key(name)
            acl = self.acls.get(key)
            if acl is None:
                raise AuthRefused("The acl is not exist.")
            target = Resource.parse(resource)
            acls = dict(self.acls)
            if target is None:
                del acls[key]
            else:
                kind = policy_type(ptype) or CUSTOM
                policies = []
                for p in acl.policies:
                    entries = p.entries if p.policy_type != kind else [
                        e for e in p.entries if e.resource != target]
                    if entries:
                        policies.append(Policy(p.policy_type, entries))
                if policies:
                    acls[key] = Acl(key, policies)
                else:
                    del acls[key]
            self._set(acls=acls)

    def get_acl(self, subject: str | None) -> Acl | None:
        name = subject_name(subject)
        if name is None or name not in self.users:
            raise AuthRefused("The subject is not exist.")
        return self.acls.get(subject_key(name))

    def list_acls(self, subject_part: str | None, resource_part: str | None) -> list[Acl]:
        found = []
        for key, acl in sorted(self.acls.items()):
            if subject_part and subject_part not in key:
                continue
            if resource_part and resource_part not in key:
                policies = [Policy(p.policy_type, kept) for p in acl.policies
                            if (kept := [e for e in p.entries if resource_part in e.resource.key])]
                if not policies:
                    continue
                acl = Acl(key, policies)
            found.append(acl)
        return found

    def clear(self) -> None:
        """No users and no ACLs (before taking over another broker's)."""
        with self._lock:
            self._set({}, {})

    # -- file -------------------------------------------------------------------------------
    def persist(self) -> None:
        """Mirror the users and ACLs (:attr:`mirror`), then write the file with the mirror's
        digest; one persist at a time (requests persist from worker threads)."""
        with self._mirror_lock:
            if self.mirror is not None:
                self.mirror_digest = self.mirror(self)
            super().persist()

    def to_json_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "users": {name: user_info(u).to_json_obj() for name, u in self.users.items()},
            "acls": {key: acl_info(a).to_json_obj() for key, a in self.acls.items()}}
        if self.mirror_digest is not None:
            obj["rocketmqDigest"] = self.mirror_digest
        return obj

    def _apply(self, obj: dict[str, Any] | None) -> None:
        obj = obj or {}
        users: dict[str, User] = {}
        acls: dict[str, Acl] = {}
        try:
            for name, raw in (obj.get("users") or {}).items():
                info = UserInfo.from_json_obj(raw, f"users.{name}")
                users[name] = User(name, info.password or "", user_type(info.user_type) or NORMAL,
                                   user_status(info.user_status) or ENABLE)
            for key, raw in (obj.get("acls") or {}).items():
                acls[key] = acl_from_info(AclInfo.from_json_obj(raw, f"acls.{key}"), key)
        except (ProtocolError, AuthRefused, AttributeError) as exc:
            raise ConfigError(f"{self.WHAT}: {exc}") from None
        digest = obj.get("rocketmqDigest")
        self.mirror_digest = digest if isinstance(digest, str) else None
        self._set(users, acls)

