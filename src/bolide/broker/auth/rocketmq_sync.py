"""Keeping a broker's ACL 2.0 users and ACLs (:class:`AuthMetadata`) and RocketMQ 5.3's RocksDB
databases in its store (``config/users``, ``config/acls``, :mod:`rocketmq_import`) in step:
taken over from RocketMQ when the broker has no file of its own yet, or when RocketMQ changed
them since the broker last wrote them (the digest in ``authMetadata.json`` differs), and written
back on every change (:attr:`AuthMetadata.mirror`)."""

from __future__ import annotations

import logging
from pathlib import Path

from bolide.broker.auth.metadata import AuthMetadata, AuthRefused
from bolide.broker.auth.rocketmq_import import (
    RocketMQAuthUnreadable,
    has_rocketmq_auth,
    read_rocketmq_auth,
    read_rocketmq_auth_raw,
    rocketmq_auth_digest,
    write_rocketmq_auth,
)

log = logging.getLogger(__name__)


class RocketMQAuthSync:
    """The takeover and the write-back for one broker's ``auth`` and its store's ``config_dir``."""

    def __init__(self, auth: AuthMetadata, config_dir: Path) -> None:
        self.auth = auth
        self.config_dir = config_dir
        self._warned = False  # the missing rocksdict package logged once

    def load(self) -> list[str]:
        """Load the broker's file, taking RocketMQ's users and ACLs over when there is none or
        when RocketMQ changed them since; then mirror every later change. The names of the
        users taken over."""
        if self.auth.load():
            created = self.take_over(replace=True) if self.changed_by_rocketmq() else []
        else:
            created = self.take_over()
        self.auth.mirror = self.mirror
        return created

    def changed_by_rocketmq(self) -> bool:
        """Whether RocketMQ changed its databases since this broker last wrote them (a RocketMQ
        broker ran on the store in between)."""
        recorded = self.auth.mirror_digest
        if recorded is None or not has_rocketmq_auth(self.config_dir):
            return False
        try:
            changed = rocketmq_auth_digest(*read_rocketmq_auth_raw(self.config_dir)) != recorded
        except RocketMQAuthUnreadable as exc:
            log.error("ACL 2.0: RocketMQ's databases in %s are not read: %s", self.config_dir, exc)
            return False
        if changed:
            log.warning("ACL 2.0: RocketMQ changed the users and ACLs in %s since this store was last "
                        "open here: taking them over again", self.config_dir)
        return changed

    def take_over(self, replace: bool = False) -> list[str]:
        """RocketMQ's users and ACLs, added to the broker's (``replace``: instead of them, once
        they are read); the names of the users created. Unreadable databases are logged with the
        fix (nothing changes then)."""
        if not has_rocketmq_auth(self.config_dir):
            return []
        try:
            users, acls = read_rocketmq_auth(self.config_dir)
        except RocketMQAuthUnreadable as exc:
            log.error("ACL 2.0: the users and ACLs RocketMQ left in %s are not taken over: %s",
                      self.config_dir, exc)
            return []
        if replace:
            self.auth.clear()
        created = []
        for user in users:
            try:
                self.auth.create_user(user)
                created.append(user.username or "")
            except AuthRefused as exc:
                log.error("ACL 2.0: RocketMQ's user %s is not taken over: %s", user.username, exc)
        for acl in acls:
            try:
                self.auth.put_acl(acl, None)
            except AuthRefused as exc:
                log.error("ACL 2.0: RocketMQ's ACL of %s is not taken over: %s", acl.subject, exc)
        log.info("ACL 2.0: took over %d users and %d ACLs from RocketMQ's databases in %s",
                 len(created), len(acls), self.config_dir)
        return created

    def mirror(self, auth: AuthMetadata) -> str | None:
        """Write the users and ACLs into RocketMQ's databases so that a RocketMQ broker opening
        the store has them; their digest, or None (logged)."""
        try:
            return write_rocketmq_auth(self.config_dir, auth.users.values(), auth.acls.values())
        except RocketMQAuthUnreadable as exc:
            if has_rocketmq_auth(self.config_dir) or not self._warned:
                log.warning("ACL 2.0: the users and ACLs are not written into RocketMQ's databases in "
                            "%s (a RocketMQ broker opening this store would not have them): %s",
                            self.config_dir, exc)
                self._warned = True
            return None
