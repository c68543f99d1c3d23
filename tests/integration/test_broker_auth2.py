"""A broker with RocketMQ 5's ACL 2.0 (``authenticationEnabled``, ``authorizationEnabled``):
users signing their requests, ACLs deciding what each may touch, the administration codes
changing both (kept in ``config/authMetadata.json`` across restarts), RocketMQ's texts in
the refusals, and the broker's own client signing with ``innerClientAuthenticationCredentials``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import ha_cluster
import pytest
from ha_cluster import Cluster, wait_until

from bolide.client import (
    Admin,
    AuthRefusedError,
    ClientConfig,
    ConsumeFrom,
    Message,
    MQBrokerError,
    Producer,
    PullConsumer,
)
from bolide.errors import ConfigError
from bolide.testing.servers import Servers, running_servers
from conftest import run_with_servers

ROOT = {"access_key": "root", "secret_key": "root-secret"}
APP = {"access_key": "app", "secret_key": "app-secret"}
AUTH = {"authentication_enabled": True, "authorization_enabled": True,
        "init_authentication_user": '{"username":"root","password":"root-secret"}'}


def signed(s: Servers, who: dict[str, str], **more: str) -> ClientConfig:
    return ClientConfig(s.namesrv_addr, **{**who, **more})


async def send(config: ClientConfig, topic: str) -> None:
    async with Producer(config, "auth2-pg") as producer:
        await producer.send(Message(topic, b"m"))


async def refused(config: ClientConfig, topic: str, remark: str) -> None:
    with pytest.raises(AuthRefusedError) as refusal:
        await send(config, topic)
    assert refusal.value.code == 16 and refusal.value.remark == remark
    assert "ACL 2.0" in str(refusal.value)


def test_users_sign_and_acls_decide(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        root, app = signed(s, ROOT), signed(s, APP)
        async with Admin(root) as admin:
            await admin.create_topic("Auth2T", read_queue_nums=1, write_queue_nums=1)
            await admin.create_user("app", "app-secret")
            assert (await admin.get_user("app")).user_type == "Normal"  # type: ignore[union-attr]
        await send(root, "Auth2T")  # a super user passes every check
        await refused(app, "Auth2T", "User:app has no permission to access Topic:Auth2T from "
                      "127.0.0.1, no matched policies.")
        async with Admin(root) as admin:
            await admin.put_acl("User:app", ["Topic:Auth2*", "Group:auth2_cg"], ["Pub", "Sub"])
            await admin.put_acl("User:app", ["Topic:Auth2Deny"], ["Pub"], "Deny")
            acl = await admin.get_acl("User:app")
            assert acl is not None and [e.resource for e in acl.policies[0].entries] == [  # type: ignore[index]
                "Topic:Auth2*", "Group:auth2_cg", "Topic:Auth2Deny"]
            assert [a.subject for a in await admin.list_acls(resource_part="Deny")] == ["User:app"]
        await send(app, "Auth2T")
        consumer = PullConsumer(app, "auth2_cg", consume_from=ConsumeFrom.FIRST_OFFSET)
        consumer.subscribe("Auth2T")
        async with consumer:
            got: list[bytes] = []
            while len(got) < 2:
                got += [m.body for m in await consumer.poll(1000)]
            assert got == [b"m", b"m"]
        await refused(app, "Auth2Deny", "User:app has no permission to access Topic:Auth2Deny from "
                      "127.0.0.1, the decision is deny.")
        await refused(signed(s, {"access_key": "app", "secret_key": "wrong"}), "Auth2T",
                      "check signature failed.")
        await refused(ClientConfig(s.namesrv_addr), "Auth2T", "username cannot be null.")
        async with Admin(app) as admin:  # a normal user without Cluster rights administers nothing
            with pytest.raises(AuthRefusedError, match="Cluster:"):
                await admin.create_user("other", "other-secret")
        async with Admin(root) as admin:
            await admin.update_user("app", user_status="disable")
        await refused(app, "Auth2T", "User:app is disabled.")

    run_with_servers(tmp_path, test, **AUTH)


def test_administration_answers_and_the_file_across_a_restart(tmp_path: Path) -> None:
    async def first(s: Servers) -> None:
        async with Admin(signed(s, ROOT)) as admin:
            await admin.create_user("app", "app-secret")
            with pytest.raises(MQBrokerError) as exists:
                await admin.create_user("app", "again")
            assert exists.value.code == 16 and exists.value.remark == "The user is existed"
            with pytest.raises(MQBrokerError) as bad:
                await admin.put_acl("User:app", ["Topic:T"], ["Pub"], source_ips=["300.1.1.1"])
            assert bad.value.remark == "The source ip is invalid."
            with pytest.raises(MQBrokerError) as ghost:
                await admin.delete_acl("User:app")
            assert ghost.value.remark == "The acl is not exist."
            await admin.put_acl("User:app", ["Topic:T"], ["Pub"], source_ips=["127.0.0.1"])
            await admin.put_acl("User:app", ["Cluster:DefaultCluster"], ["Update"])
            assert await admin.get_user("nobody") is None
            assert {u.username for u in await admin.list_users()} == {"root", "app"}
        async with Admin(signed(s, APP)) as admin:
            with pytest.raises(MQBrokerError, match="The super user can only be create by super user"):
                await admin.create_user("boss", "x", "Super", broker_addr=s.broker_addr)

    run_with_servers(tmp_path, first, **AUTH)
    assert (tmp_path / "store" / "config" / "authMetadata.json").is_file()

    async def again(s: Servers) -> None:
        assert s.broker.auth is not None and set(s.broker.auth.users) == {"root", "app"}
        async with Admin(signed(s, ROOT)) as admin:
            acl = await admin.get_acl("User:app")
            assert acl is not None and acl.policies[0].entries[0].source_ips == ["127.0.0.1"]  # type: ignore[index]
            assert acl.policies[0].entries[1].resource == "Cluster:DefaultCluster"  # type: ignore[index]
            await admin.delete_user("app")
            assert await admin.get_acl("User:root") is None

    run_with_servers(tmp_path, again, **AUTH)


def test_a_slave_signs_its_sync_with_the_inner_credentials(tmp_path: Path) -> None:
    """The master checks every request; its slave copies topics signed as the inner user,
    which each broker creates as a super user."""
    inner = {**AUTH, "inner_client_authentication_credentials":
             '{"accessKey":"inner","secretKey":"inner-secret"}'}

    async def test(c: Cluster) -> None:
        async with Admin(ClientConfig(c.namesrv_addr, **ROOT)) as admin:
            await admin.create_topic("Auth2Sync", read_queue_nums=1, write_queue_nums=1,
                                     broker_addr=c.master.broker_addr)
        assert c.master.auth is not None and c.master.auth.users["inner"].is_super
        await wait_until(lambda: c.the_slave.topics.get("Auth2Sync") is not None, 20)

    ha_cluster.run(tmp_path, test, options=inner)


def test_settings_that_cannot_work_are_refused_at_start(tmp_path: Path) -> None:
    async def start() -> None:
        async with running_servers(tmp_path / "store", **{**AUTH, "init_authentication_user": "{bad"}):
            pass

    with pytest.raises(ConfigError, match="initAuthenticationUser"):
        asyncio.run(start())


def test_plain_acl_accounts_are_migrated_at_start(tmp_path: Path) -> None:
    """migrateAuthFromV1Enabled: the accounts of plain_acl.yml become users and ACLs (users that
    exist already are left as they are), and the checks then use them."""
    accounts = tmp_path / "plain_acl.yml"
    accounts.write_text("accounts:\n"
                        "  - accessKey: v1-writer\n    secretKey: v1-writer-secret\n"
                        "    defaultTopicPerm: DENY\n    topicPerms: [V1Topic=PUB]\n"
                        "  - accessKey: ops-admin\n    secretKey: not-its-password\n    admin: true\n")
    ops = {"access_key": "ops-admin", "secret_key": "ops-admin-secret"}

    async def test(s: Servers) -> None:
        assert s.broker.auth.users["ops-admin"].password == "ops-admin-secret"  # users stay
        async with Admin(signed(s, ops)) as admin:
            await admin.create_topic("V1Topic", read_queue_nums=1, write_queue_nums=1)
            await admin.create_topic("V1Other", read_queue_nums=1, write_queue_nums=1)
        writer = signed(s, {"access_key": "v1-writer", "secret_key": "v1-writer-secret"})
        await send(writer, "V1Topic")
        await refused(writer, "V1Other", "User:v1-writer has no permission to access Topic:V1Other "
                      "from 127.0.0.1, the decision is deny.")

    init = '{"username":"ops-admin","password":"ops-admin-secret"}'
    run_with_servers(tmp_path, test, migrate_auth_from_v1_enabled=True, acl_file=str(accounts),
                     **{**AUTH, "init_authentication_user": init})


def test_the_spark_source_reads_with_what_the_docs_grant(tmp_path: Path) -> None:
    """The ``rocketmq`` data source's broker calls (:class:`bolide.spark.cluster.Cluster`, no
    Spark needed) as a user with Sub and Get on the topic and Sub on Group:TOOLS_CONSUMER, the
    group its reads pull as (docs/pipeline.md); without the group entry the pulls are refused."""
    pytest.importorskip("pyarrow")
    from bolide.spark.cluster import Cluster
    from bolide.spark.offsets import QueueRange

    reader = {"access_key": "reader", "secret_key": "reader-secret"}

    def read(config: ClientConfig) -> int:
        with Cluster(config) as cluster:
            (key,) = cluster.queues(["SparkAuth2"])
            low, high = cluster.bounds([key])[key]
            part = QueueRange(*key, low, high)
            return sum(batch.num_rows for batch in cluster.read_batches(part))

    async def test(s: Servers) -> None:
        async with Admin(signed(s, ROOT)) as admin:
            await admin.create_topic("SparkAuth2", read_queue_nums=1, write_queue_nums=1)
            await admin.create_user("reader", "reader-secret")
            await admin.put_acl("User:reader", ["Topic:SparkAuth2"], ["Sub", "Get"])
        for _ in range(3):
            await send(signed(s, ROOT), "SparkAuth2")
        with pytest.raises(AuthRefusedError, match="Group:TOOLS_CONSUMER"):
            await asyncio.to_thread(read, signed(s, reader))
        async with Admin(signed(s, ROOT)) as admin:
            await admin.put_acl("User:reader", ["Group:TOOLS_CONSUMER"], ["Sub"])
        assert await asyncio.to_thread(read, signed(s, reader)) == 3

    run_with_servers(tmp_path, test, **AUTH)


def test_users_and_acls_copy_from_one_broker_to_another(tmp_path: Path) -> None:
    """Users and ACLs belong to one broker: copyUser and copyAcl carry them to another (the
    second through the CLI, signed as the super user both brokers were started with)."""
    from click.testing import CliRunner

    from bolide.cli.main import cli

    async def test(a: Servers) -> None:
        async with running_servers(tmp_path / "b", **AUTH) as b:
            async with Admin(signed(a, ROOT)) as admin:
                await admin.create_user("app", "app-secret")
                await admin.create_user("other", "other-secret")
                await admin.put_acl("User:app", ["Topic:T"], ["Pub"])
                assert await admin.copy_users(a.broker_addr, b.broker_addr, ["app"]) == ["app"]
                assert await admin.get_user("other", broker_addr=b.broker_addr) is None
            env = {"BOLIDE_ACCESS_KEY": ROOT["access_key"], "BOLIDE_SECRET_KEY": ROOT["secret_key"]}
            result = await asyncio.to_thread(CliRunner().invoke, cli, [
                "admin", "copyAcl", "-n", a.namesrv_addr, "-f", a.broker_addr, "-t", b.broker_addr,
                "--output", "json"], env=env)
            assert result.exit_code == 0, result.output
            assert json.loads(result.stdout)["subjects"] == ["User:app"]
            copied = b.broker.auth
            assert copied.users["app"].password == "app-secret"
            assert copied.acls["User:app"].policies[0].entries[0].resource.key == "Topic:T"

    run_with_servers(tmp_path, test, **AUTH)
