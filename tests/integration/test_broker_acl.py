"""A broker with ``aclEnable=true``: every request checked against ``plain_acl.yml`` as RocketMQ
checks it, the ACL admin requests rewriting the file, and edits of the file taking effect
while the broker runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from bolide.broker import BrokerConfig, BrokerController
from bolide.client import (
    AclRefusedError,
    Admin,
    ClientConfig,
    Message,
    MQBrokerError,
    Producer,
)
from bolide.errors import ConfigError
from bolide.protocol.bodies.broker import SubscriptionGroupConfig, TopicConfig
from bolide.store import StoreConfig
from bolide.testing.servers import Servers
from conftest import run_with_servers, send_then_push_consume

ACCOUNTS = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: acl-admin
    secretKey: acl-admin-secret
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
  - accessKey: acl-reader
    secretKey: acl-reader-secret
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
ADMIN = {"access_key": "acl-admin", "secret_key": "acl-admin-secret"}
READER = {"access_key": "acl-reader", "secret_key": "acl-reader-secret"}


def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "conf" / "plain_acl.yml"
    path.parent.mkdir()
    path.write_text(ACCOUNTS)
    return path


async def refused(config: ClientConfig, topic: str, why: str) -> None:
    async with Producer(config, "acl-pg") as producer:
        with pytest.raises(AclRefusedError, match=why) as refusal:
            await producer.send(Message(topic, b"refused"))
    assert "sign with ClientConfig(access_key=..., secret_key=...)" in str(refusal.value)


def test_requests_are_checked_against_the_accounts(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        ns = s.namesrv_addr
        # the read-only account consumes: heartbeat, pulls and offset commits need SUB only
        got = await send_then_push_consume(ClientConfig(ns, **ADMIN), ClientConfig(ns, **READER),
                                           "AclOrders")
        assert got == [b"m%d" % i for i in range(4)]

        await refused(ClientConfig(ns, **READER), "AclOrders",
                      "No default permission for topic:AclOrders")
        await refused(ClientConfig(ns), "AclOrders", "No accessKey is configured")
        await refused(ClientConfig(ns, access_key="acl-admin", secret_key="wrong-secret"),
                      "AclOrders", "Check signature failed for accessKey=acl-admin")
        await refused(ClientConfig(ns, access_key="nobody-at-all", secret_key="whatever"),
                      "AclOrders", "No acl config for nobody-at-all")
        async with Admin(ClientConfig(ns, **READER)) as reader:
            with pytest.raises(MQBrokerError, match="Need admin permission for request code=17"):
                await reader.create_topic("AclOther")
            # RocketMQ 5's list forms of the creations too
            with pytest.raises(MQBrokerError, match="Need admin permission for request code=18"):
                await reader.create_topic_list([TopicConfig(topic_name="AclOther")])
            with pytest.raises(MQBrokerError, match="Need admin permission for request code=225"):
                await reader.create_subscription_group_list([SubscriptionGroupConfig(group_name="acl-g")])
            # unlike RocketMQ, changing ACL and reading the secrets need admin too
            with pytest.raises(MQBrokerError, match="Need admin permission for request code=50"):
                await reader.update_acl_account("acl-reader", "acl-reader-secret", admin=True)
            with pytest.raises(MQBrokerError, match="Need admin permission for request code=54"):
                await reader.acl_config()
            # reads that name no topic or group pass with a valid signature
            assert await reader.broker_runtime_info(s.broker_addr)

    run_with_servers(tmp_path, test, acl_enable=True, acl_file=str(acl_file(tmp_path)))


def test_acl_admin_requests_and_edits_of_the_file(tmp_path: Path) -> None:
    path = acl_file(tmp_path)

    async def test(s: Servers) -> None:
        ns, broker = s.namesrv_addr, s.broker_addr
        async with Admin(ClientConfig(ns, **ADMIN)) as admin:
            await admin.create_topic("AclAudit", read_queue_nums=1, write_queue_nums=1)
            before = (await admin.acl_versions())[0]
            assert before.broker_addr == broker and str(path) in before.files

            # a new account through UPDATE_AND_CREATE_ACL_CONFIG works at once
            await admin.update_acl_account("acl-writer", "acl-writer-secret",
                                           default_topic_perm="DENY",
                                           topic_perms=["AclAudit=PUB"])
            writer = ClientConfig(ns, access_key="acl-writer", secret_key="acl-writer-secret")
            async with Producer(writer, "acl-pg") as producer:
                await producer.send(Message("AclAudit", b"by the writer"))
            await refused(writer, "AclOrders", "No default permission for topic:AclOrders")
            after = (await admin.acl_versions())[0]
            assert after.version.counter == before.version.counter + 1
            written = yaml.safe_load(path.read_text())
            assert written["accounts"][-1]["topicPerms"] == ["AclAudit=PUB"]
            config = (await admin.acl_config())[broker]
            assert [c.access_key for c in config.plain_access_configs] == [
                "acl-admin", "acl-reader", "acl-writer"]

            with pytest.raises(MQBrokerError, match="length should longer than 6") as bad:
                await admin.update_acl_account("short", "acl-writer-secret")
            assert bad.value.code == 209
            await admin.delete_acl_account("acl-writer")
            await refused(writer, "AclAudit", "No acl config for acl-writer")
            with pytest.raises(MQBrokerError, match="deleted failed") as gone:
                await admin.delete_acl_account("acl-writer")
            assert gone.value.code == 210

            # the global white list lets unsigned clients from 127.0.0.* in
            await admin.update_global_white_addrs(["127.0.0.*"])
            async with Producer(ns, "acl-pg") as producer:
                await producer.send(Message("AclAudit", b"white listed"))
            await admin.update_global_white_addrs([])
            await refused(ClientConfig(ns), "AclAudit", "No accessKey is configured")

        # an edit of the file by hand is read within the watcher's next check
        text = path.read_text().replace("defaultTopicPerm: SUB", "defaultTopicPerm: PUB|SUB")
        path.write_text(text)
        reader = ClientConfig(ns, **READER)

        async def reader_can_send() -> bool:
            async with Producer(reader, "acl-pg") as producer:
                try:
                    await producer.send(Message("AclAudit", b"after the edit"))
                except MQBrokerError:
                    return False
            return True

        async with asyncio.timeout(15):
            while not await reader_can_send():
                await asyncio.sleep(0.1)

    run_with_servers(tmp_path, test, acl_enable=True, acl_file=str(path))


def test_acl_settings_that_cannot_work_are_refused_at_start(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    with pytest.raises(ConfigError, match="set bolideAclFile"):
        BrokerController(BrokerConfig(acl_enable=True))
    with pytest.raises(ConfigError, match="does not exist"):
        BrokerController(BrokerConfig(acl_enable=True, acl_file=str(tmp_path / "none.yml")))
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    acl_file(tmp_path)
    assert BrokerController(BrokerConfig(acl_enable=True)).acl.main_file == (  # type: ignore[union-attr]
        tmp_path / "conf" / "plain_acl.yml")
    bad = tmp_path / "bad.yml"
    bad.write_text("accounts:\n  - accessKey: ab\n    secretKey: cd\n")

    async def start() -> None:
        broker = BrokerController(BrokerConfig(acl_enable=True, acl_file=str(bad), listen_port=0),
                                  StoreConfig(store_path_root_dir=str(tmp_path / "store")))
        with pytest.raises(ConfigError, match=r"bad\.yml: The accessKey=ab"):
            await broker.start()

    asyncio.run(start())


def test_acl_admin_requests_on_a_broker_without_acl_say_how_to_turn_it_on(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            with pytest.raises(MQBrokerError, match="ACL is off on this broker: set aclEnable=true"):
                await admin.update_acl_account("acl-writer", "acl-writer-secret")
            with pytest.raises(MQBrokerError, match="ACL is off"):
                await admin.acl_versions()

    run_with_servers(tmp_path, test)
