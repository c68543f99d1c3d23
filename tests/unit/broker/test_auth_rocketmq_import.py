"""RocketMQ 5.3's ACL 2.0 databases (RocksDB, written here with RocketMQ's column families and
the JSON its broker wrote) read into users and ACLs, taken over by a broker opening the store,
written back with the broker's users and ACLs, and taken over again when RocketMQ changed them.
The interop test does the same with a real RocketMQ broker on both sides."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import pytest

from bolide.broker.auth.rocketmq_import import (
    RocketMQAuthUnreadable,
    acl_from_rocketmq,
    has_rocketmq_auth,
    read_rocketmq_auth,
    read_rocketmq_auth_raw,
    resource_key,
    rocketmq_auth_digest,
    write_rocketmq_auth,
)
from bolide.protocol.bodies.auth import UserInfo
from bolide.testing.servers import running_servers

rocksdict = pytest.importorskip("rocksdict")

USERS = {  # as RocketMQ 5.3.3 wrote them
    "rmq-app": {"password": "rmq-app-secret", "subjectType": 1, "userStatus": 1, "userType": 2,
                "username": "rmq-app"},
    "rmq-root": {"password": "rmq-root-secret", "subjectType": 1, "userStatus": 1, "userType": 1,
                 "username": "rmq-root"},
}
APP_ACL = {"policies": [{"entries": [
    {"actions": [3, 4], "decision": 1, "environment": {"sourceIps": ["10.0.0.0/8"]},
     "resource": {"resourceName": "ItAuth2", "resourcePattern": 2, "resourceType": 4}},
    {"actions": [3], "decision": 2,
     "resource": {"resourceName": "g", "resourcePattern": 3, "resourceType": 5}}],
    "policyType": 1}], "subject": {"subjectType": 1, "username": "rmq-app"}}


def write_db(path: Path, items: dict[str, object]) -> None:
    """A RocksDB database laid out as RocketMQ's ConfigRocksDBStorage makes it."""
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    db = rocksdict.Rdict(str(path), options=opts, column_families={
        "kvDataVersion": rocksdict.Options(raw_mode=True), "forbidden": rocksdict.Options(raw_mode=True)})
    for key, value in items.items():
        db[key.encode()] = json.dumps(value).encode()
    db.close()


def rocketmq_config(root: Path) -> Path:
    config = root / "config"
    config.mkdir(parents=True)
    write_db(config / "users", USERS)
    write_db(config / "acls", {"User:rmq-app": APP_ACL})
    return config


def test_the_databases_read_as_users_and_acls(tmp_path: Path) -> None:
    config = rocketmq_config(tmp_path)
    before = sorted(p.name for p in (config / "acls").iterdir())
    assert has_rocketmq_auth(config) and not has_rocketmq_auth(tmp_path)
    users, acls = read_rocketmq_auth(config)
    assert sorted(users, key=lambda u: u.username or "") == [
        UserInfo(username="rmq-app", password="rmq-app-secret", user_type="Normal", user_status="enable"),
        UserInfo(username="rmq-root", password="rmq-root-secret", user_type="Super", user_status="enable")]
    [acl] = acls
    assert acl.subject == "User:rmq-app"
    [policy] = acl.policies or []
    assert policy.policy_type == "Custom"
    assert [(e.resource, e.actions, e.source_ips, e.decision) for e in policy.entries or []] == [
        ("Topic:ItAuth2", ["Pub", "Sub"], ["10.0.0.0/8"], "Allow"), ("Group:g*", ["Pub"], None, "Deny")]
    assert sorted(p.name for p in (config / "acls").iterdir()) == before  # read from a copy


def test_resource_keys_and_unknown_codes() -> None:
    assert resource_key({"resourceType": 1, "resourcePattern": 1}) == "*"
    assert resource_key({"resourceType": 4, "resourcePattern": 1}) == "Topic:*"
    assert resource_key({"resourceType": 5, "resourcePattern": 2, "resourceName": "g1"}) == "Group:g1"
    with pytest.raises(RocketMQAuthUnreadable, match="unknown resource type code 9"):
        resource_key({"resourceType": 9, "resourcePattern": 2, "resourceName": "x"})
    with pytest.raises(RocketMQAuthUnreadable, match="unknown action code 42"):
        acl_from_rocketmq("User:x", {"policies": [{"entries": [
            {"actions": [42], "resource": {"resourceType": 4, "resourcePattern": 1}}]}]})


def test_without_rocksdict_the_error_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = rocketmq_config(tmp_path)
    monkeypatch.setitem(sys.modules, "rocksdict", None)  # as if not installed
    with pytest.raises(RocketMQAuthUnreadable, match=r"pip install 'bolide\[rocksdb\]'"):
        read_rocketmq_auth(config)


def test_a_broker_takes_them_over_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "store"
    rocketmq_config(root)

    async def start(expect_users: list[str]) -> None:
        async with running_servers(root, authentication_enabled=True) as s:
            assert sorted(s.broker.auth.users) == expect_users
            assert s.broker.auth.get_acl("User:rmq-app") is not None

    caplog.set_level(logging.INFO, logger="bolide.broker")
    asyncio.run(start(["rmq-app", "rmq-root"]))
    assert "took over 2 users and 1 ACLs" in caplog.text
    assert (root / "config" / "authMetadata.json").is_file()
    # later changes are Bolide's own: a user deleted from its file stays deleted
    doc = json.loads((root / "config" / "authMetadata.json").read_text())
    del doc["users"]["rmq-root"]
    (root / "config" / "authMetadata.json").write_text(json.dumps(doc))
    caplog.clear()
    asyncio.run(start(["rmq-app"]))
    assert "took over" not in caplog.text


def test_unreadable_databases_are_logged_and_the_broker_starts(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "store"
    (root / "config" / "users").mkdir(parents=True)
    (root / "config" / "users" / "CURRENT").write_text("MANIFEST-000099\n")  # its manifest is gone

    async def start() -> None:
        async with running_servers(root, authentication_enabled=True) as s:
            assert s.broker.auth.users == {}

    asyncio.run(start())
    assert "are not taken over" in caplog.text and "does not open as a RocksDB database" in caplog.text


def test_written_databases_read_back_the_same(tmp_path: Path) -> None:
    """Users and ACLs written in RocketMQ's JSON read back equal, keys no longer wanted are
    deleted, the digest is that of what the databases hold, and RocketMQ's column families
    are there."""
    from bolide.broker.auth.metadata import acl_from_info
    from bolide.broker.auth.model import User

    config = rocketmq_config(tmp_path)
    users, acls = read_rocketmq_auth(config)
    model_users = [User(u.username or "", u.password or "", u.user_type or "", u.user_status or "")
                   for u in users if u.username == "rmq-app"]
    model_acls = [acl_from_info(a, a.subject or "") for a in acls]
    digest = write_rocketmq_auth(config, model_users, model_acls)
    again_users, again_acls = read_rocketmq_auth(config)
    assert again_users == [u for u in users if u.username == "rmq-app"] and again_acls == acls
    assert rocketmq_auth_digest(*read_rocketmq_auth_raw(config)) == digest
    for name in ("users", "acls"):
        assert set(rocksdict.Rdict.list_cf(str(config / name))) == {"default", "kvDataVersion", "forbidden"}
    fresh = tmp_path / "fresh"
    write_rocketmq_auth(fresh, model_users, [])  # created where missing
    assert [u.username for u in read_rocketmq_auth(fresh)[0]] == ["rmq-app"]


def test_a_broker_writes_them_back_and_takes_rocketmqs_changes_over_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "store"
    config = rocketmq_config(root)

    async def change(add: str | None = None, delete: str | None = None) -> list[str]:
        async with running_servers(root, authentication_enabled=True) as s:
            if add:
                s.broker.auth.create_user(UserInfo(username=add, password="pw"))
            if delete:
                s.broker.auth.delete_user(delete)
            if add or delete:
                s.broker.auth.persist()  # as the admin requests do
            return sorted(s.broker.auth.users)

    assert asyncio.run(change(add="bolide-made", delete="rmq-root")) == ["bolide-made", "rmq-app"]
    assert sorted(u.username or "" for u in read_rocketmq_auth(config)[0]) == ["bolide-made", "rmq-app"]
    assert asyncio.run(change()) == ["bolide-made", "rmq-app"]  # unchanged by RocketMQ: kept
    # RocketMQ (here: its JSON written into its database) adds a user while the store is its own
    db = rocksdict.Rdict(str(config / "users"), options=rocksdict.Options(raw_mode=True), column_families={
        "kvDataVersion": rocksdict.Options(raw_mode=True), "forbidden": rocksdict.Options(raw_mode=True)})
    db[b"rmq-later"] = json.dumps({**USERS["rmq-app"], "username": "rmq-later"}).encode()
    db.close()
    caplog.set_level(logging.INFO, logger="bolide.broker")
    assert asyncio.run(change()) == ["bolide-made", "rmq-app", "rmq-later"]
    assert "RocketMQ changed the users and ACLs" in caplog.text


def test_without_rocksdict_a_broker_keeps_its_file_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "store"
    rocketmq_config(root)
    asyncio.run(_start(root))  # takes them over, writes them back
    monkeypatch.setitem(sys.modules, "rocksdict", None)  # as if not installed

    async def add() -> None:
        async with running_servers(root, authentication_enabled=True) as s:
            s.broker.auth.create_user(UserInfo(username="later", password="pw"))
            s.broker.auth.persist()

    asyncio.run(add())
    assert "not written into RocketMQ's databases" in caplog.text and "bolide[rocksdb]" in caplog.text
    doc = json.loads((root / "config" / "authMetadata.json").read_text())
    assert "later" in doc["users"] and "rocketmqDigest" not in doc  # not taken over again later


async def _start(root: Path) -> None:
    async with running_servers(root, authentication_enabled=True):
        pass


def test_databases_unreadable_at_first_are_taken_over_once_readable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first start without rocksdict writes no file of its own, so a later start with it
    still takes RocketMQ's users over."""
    root = tmp_path / "store"
    rocketmq_config(root)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "rocksdict", None)  # as if not installed
        asyncio.run(_start(root))
    assert not (root / "config" / "authMetadata.json").exists()

    async def start() -> list[str]:
        async with running_servers(root, authentication_enabled=True) as s:
            return sorted(s.broker.auth.users)

    assert asyncio.run(start()) == ["rmq-app", "rmq-root"]
