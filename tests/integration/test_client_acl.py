"""The Python client signing its requests for RocketMQ's plain ACL (``ClientConfig(access_key,
secret_key)``), against an in-process broker that checks every request's signature with
``AclVerifyRPCHook``: sends, consumption and admin calls pass with the account's keys; a
wrong secret or no keys get the broker's refusal."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client import (
    ClientConfig,
    ClientConfigError,
    Message,
    MQBrokerError,
    Producer,
)
from bolide.remoting.hooks import AclVerifyRPCHook
from bolide.testing.servers import Servers
from conftest import run_with_servers, send_then_push_consume

ACCOUNTS = {"RocketMQ": "12345678"}


def test_signed_clients_pass_and_others_are_refused(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        s.broker.server.processors.add_hook(AclVerifyRPCHook(ACCOUNTS))
        signed = ClientConfig(s.namesrv_addr, access_key="RocketMQ", secret_key="12345678")
        assert await send_then_push_consume(signed, signed, "AclTopic") == [b"m%d" % i for i in range(4)]

        for config, why in ((signed.replace(secret_key="wrong"), "check signature failed"),
                            (ClientConfig(s.namesrv_addr), "has no AccessKey")):
            async with Producer(config, "acl-pg") as producer:
                with pytest.raises(MQBrokerError, match=why):
                    await producer.send(Message("AclTopic", b"refused"))

    run_with_servers(tmp_path, test)


def test_keys_come_in_pairs() -> None:
    with pytest.raises(ClientConfigError, match="both access_key and secret_key"):
        ClientConfig("127.0.0.1:9876", access_key="RocketMQ")
    assert "12345678" not in repr(ClientConfig("127.0.0.1:9876", access_key="a", secret_key="12345678"))


def test_the_spark_source_s_broker_calls_are_signed_with_its_acl_options(tmp_path: Path) -> None:
    """Options accessKey and secretKey of the ``rocketmq`` data source: its broker calls (queue
    bounds here) are signed; without them a broker that checks ACL refuses the read."""
    from bolide.spark.cluster import Cluster
    from bolide.spark.options import SparkOptionError, read_options, write_options

    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "acl-pg") as producer:
            await producer.send(Message("AclSpark", b"before ACL"))
        s.broker.server.processors.add_hook(AclVerifyRPCHook(ACCOUNTS))
        base = {"nameserver": s.namesrv_addr, "topic": "AclSpark"}
        signed = read_options({**base, "accesskey": "RocketMQ", "secretkey": "12345678"}, streaming=False)
        def bounds(cluster: Cluster) -> object:  # blocking calls: off the servers' loop
            return cluster.bounds(cluster.queues(["AclSpark"]))

        with Cluster(signed.nameserver) as cluster:
            found = await asyncio.to_thread(bounds, cluster)
        assert sum(hi for _, hi in found.values()) == 1  # type: ignore[attr-defined]
        with Cluster(read_options(base, streaming=False).nameserver) as cluster, \
                pytest.raises(MQBrokerError, match="has no AccessKey"):  # the broker's answer
            await asyncio.to_thread(bounds, cluster)
        sink = write_options({**base, "accesskey": "RocketMQ", "secretkey": "12345678"})
        assert isinstance(sink.nameserver, ClientConfig) and sink.nameserver.access_key == "RocketMQ"
        with pytest.raises(SparkOptionError, match="both accessKey and secretKey"):
            read_options({**base, "accesskey": "RocketMQ"}, streaming=False)

    run_with_servers(tmp_path, test)
