"""ACL 2.0 users and ACLs carried over from a real RocketMQ 5.3.3 broker: RocketMQ keeps them in
RocksDB (``config/users``, ``config/acls``); a Bolide broker with authentication and
authorization on, opening that store, enforces them as RocketMQ did.

Needs java, javac and mvn (the jars come from Maven Central once, into ``interop/.m2``):
without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from bolide.client import Admin, AuthRefusedError, ClientConfig, Producer, SendStatus
from bolide.common import Message
from bolide.store import StoreConfig
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable
from bolide.testing.servers import running_servers
from conftest import unavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

PROVIDERS = "org.apache.rocketmq.auth.{0}.provider.{1}"
AUTH = {"authenticationEnabled": "true", "authorizationEnabled": "true",
        "authenticationProvider": PROVIDERS.format("authentication", "DefaultAuthenticationProvider"),
        "authenticationMetadataProvider": PROVIDERS.format("authentication",
                                                           "LocalAuthenticationMetadataProvider"),
        "authorizationProvider": PROVIDERS.format("authorization", "DefaultAuthorizationProvider"),
        "authorizationMetadataProvider": PROVIDERS.format("authorization",
                                                          "LocalAuthorizationMetadataProvider"),
        "initAuthenticationUser": '{"username":"rmq-root","password":"rmq-root-secret"}',
        "innerClientAuthenticationCredentials": '{"accessKey":"rmq-root","secretKey":"rmq-root-secret"}'}


async def _retrying(call: object, timeout: float = 30) -> None:
    """A 5.x broker may take a moment after boot before its admin calls authenticate."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                await call()  # type: ignore[operator]
                return
            except (AuthRefusedError, ConnectionError, OSError):
                await asyncio.sleep(0.2)


def test_bolide_enforces_the_users_and_acls_rocketmq_left(tmp_path: Path) -> None:
    try:
        rmq = RocketMQ("5.3.3", tmp_path / "rocketmq")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    root = tmp_path / "store"

    async def rocketmq_side() -> None:
        admin_config = ClientConfig(rmq.namesrv_addr, access_key="rmq-root", secret_key="rmq-root-secret")
        async with Admin(admin_config) as admin:
            await _retrying(lambda: admin.create_user("rmq-app", "rmq-app-secret"))
            await admin.create_user("rmq-off", "rmq-off-secret")
            await admin.update_user("rmq-off", user_status="disable")
            await admin.put_acl("User:rmq-app", ["Topic:Granted", "Group:app*"], ["Pub", "Sub"])
            await admin.put_acl("User:rmq-app", ["Topic:Denied"], ["Pub"], decision="Deny")

    try:
        rmq.start_namesrv()
        rmq.start_broker(BrokerSettings(root, extra=AUTH))
        asyncio.run(asyncio.wait_for(rocketmq_side(), 90))
    finally:
        code = rmq.stop_broker()
        rmq.stop()
    assert (root / "config" / "users" / "CURRENT").is_file(), f"RocketMQ wrote no users (exit {code})"
    written = StoreConfig.from_properties(rmq.broker_conf_path)
    store_options = {f.name: getattr(written, f.name) for f in dataclasses.fields(written)}

    async def bolide_side() -> None:
        async with running_servers(root, store_options=store_options, authentication_enabled=True,
                                   authorization_enabled=True) as s:
            auth = s.broker.auth
            assert sorted(auth.users) == ["rmq-app", "rmq-off", "rmq-root"]
            assert auth.users["rmq-root"].is_super and not auth.users["rmq-app"].is_super
            saved = json.loads((root / "config" / "authMetadata.json").read_text())
            assert saved  # taken over once: Bolide's own file from now on
            root_config = ClientConfig(s.namesrv_addr, access_key="rmq-root", secret_key="rmq-root-secret")
            async with Admin(root_config) as admin:
                for topic in ("Granted", "Denied", "Other"):
                    await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
                acl = await admin.get_acl("User:rmq-app")
                assert acl is not None
                entries = {e.resource: (sorted(e.actions or []), e.decision)
                           for p in acl.policies or [] for e in p.entries or []}
                assert entries == {"Topic:Granted": (["Pub", "Sub"], "Allow"),
                                   "Group:app*": (["Pub", "Sub"], "Allow"),
                                   "Topic:Denied": (["Pub"], "Deny")}
            app = ClientConfig(s.namesrv_addr, access_key="rmq-app", secret_key="rmq-app-secret")
            async with Producer(app, "app-pg") as producer:
                sent = await producer.send(Message("Granted", b"allowed"))
                assert sent.status is SendStatus.SEND_OK
                for topic in ("Denied", "Other"):
                    with pytest.raises(AuthRefusedError):
                        await producer.send(Message(topic, b"refused"))
            off = ClientConfig(s.namesrv_addr, access_key="rmq-off", secret_key="rmq-off-secret")
            async with Producer(off, "off-pg") as producer:
                with pytest.raises(AuthRefusedError, match="disabled"):
                    await producer.send(Message("Granted", b"refused"))

    asyncio.run(asyncio.wait_for(bolide_side(), 90))
