"""The produce-then-consume round trip that every official-client interop test runs: a client
driver (``produce``/``consume`` commands printing tab-separated ``SEND``/``MSG`` lines) against an
in-process NameServer + Broker, then checks of what was sent and received and of the store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bolide.client import (
    AclRefusedError,
    ClientConfig,
    ConsumeFrom,
    Message,
    Producer,
    PullConsumer,
    SendStatus,
)
from bolide.client.admin import Admin
from bolide.client.errors import MQBrokerError, MQClientError
from bolide.common.message import MessageExt
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies.admin import PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import CreateTopicRequestHeader, GetRouteInfoRequestHeader
from bolide.remoting import RemotingClient
from bolide.store import StoreConfig
from bolide.store.record import decode_record, read_total_size
from bolide.testing.servers import Servers, running_servers
from conftest import assert_consistent
from conftest import unavailable as unavailable  # the interop tests' import of it

COUNT = 20
CLIENT_TIMEOUT = 120.0  # seconds for one client run, start-up included
# what running_servers gives the store
COMMIT_LOG = 1024 * 1024
CONSUME_QUEUE = 1000 * 20


@dataclass(frozen=True)
class Sent:
    status: str
    msg_id: str
    broker: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True)
class Received:
    body: str
    tags: str
    keys: str
    queue_id: int
    queue_offset: int
    msg_id: str


def expected(i: int) -> tuple[str, str, str]:
    """body, tags and keys of message ``i`` as every driver's ``produce`` builds them."""
    return f"body-{i}", f"tag{i % 3}", f"key-{i} k{i % 2}"


async def run_driver(cmd: list[str], log: Path, env: dict[str, str] | None = None,
                     prefixes: tuple[str, ...] = ("SEND", "MSG")) -> list[list[str]]:
    """Run a client driver; its protocol lines (tab-split, first field in ``prefixes``);
    stdout+stderr go to ``log``."""
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, env=env)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CLIENT_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{cmd[-6:]} did not finish in {CLIENT_TIMEOUT}s") from None
    except asyncio.CancelledError:
        proc.kill()
        await proc.wait()
        raise
    text = out.decode(errors="replace")
    errors = err.decode(errors="replace")
    log.write_text(text + "\n--- stderr ---\n" + errors)
    lines = [fields for fields in (line.split("\t") for line in text.splitlines())
             if len(fields) > 1 and fields[0] in prefixes]
    assert proc.returncode == 0, (f"{cmd[-6:]} exited {proc.returncode}; see {log}:\n"
                                  f"{text[-3000:]}\n{errors[-3000:]}")
    return lines


def round_trip(client: list[str], tmp_path: Path, topic: str, group: str, consume_timeout_sec: int,
               env: dict[str, str] | None = None,
               before: Callable[[Servers, str], Awaitable[None]] | None = None,
               while_consuming: Callable[[Servers, str, str], Awaitable[None]] | None = None,
               after: Callable[[Servers, list[Sent]], Awaitable[None]] | None = None,
               **server_options: Any) -> None:
    """Produce COUNT messages and consume them with ``client``; check both sides and the store.
    ``before(servers, topic)``, if given, runs once the servers are up (e.g. to create the topic).
    ``while_consuming(servers, topic, group)``, if given, runs once the consumer is started and before
    anything is produced (so the consumer is still waiting for messages). ``after(servers,
    sent)``, if given, runs once both clients exited, before the servers stop. ``server_options``
    go to :func:`running_servers` (e.g. ``tls=``)."""
    store_dir = tmp_path / "store"

    async def main() -> tuple[list[Sent], list[Received]]:
        async with running_servers(store_dir, auto_create_topic_enable=True, **server_options) as servers:
            ns = servers.namesrv_addr
            if before is not None:
                await before(servers, topic)
            consume = [*client, "consume", ns, topic, group, str(COUNT), str(consume_timeout_sec)]
            consuming = None
            if while_consuming is not None:
                consuming = asyncio.ensure_future(run_driver(consume, tmp_path / "consume.log", env))
                try:
                    await while_consuming(servers, topic, group)
                except BaseException:
                    consuming.cancel()
                    await asyncio.gather(consuming, return_exceptions=True)
                    raise
            produced = await run_driver([*client, "produce", ns, topic, str(COUNT)],
                                        tmp_path / "produce.log", env)
            sent = [Sent(f[1], f[2], f[3], int(f[4]), int(f[5])) for f in produced]
            if consuming is not None:
                consumed = await consuming
            else:
                consumed = await run_driver(consume, tmp_path / "consume.log", env)
            received = [Received(f[1], f[2], f[3], int(f[4]), int(f[5]), f[6]) for f in consumed]
            if after is not None:
                await after(servers, sent)
            return sent, received

    sent, received = asyncio.run(main())

    assert len(sent) == COUNT
    assert all(s.status == "SEND_OK" for s in sent), sent
    assert len({s.msg_id for s in sent}) == COUNT
    assert len({(s.queue_id, s.queue_offset) for s in sent}) == COUNT
    assert {s.broker for s in sent} == {"broker-a"}

    by_id = {r.msg_id: r for r in received}  # at-least-once: a redelivery is allowed, a loss is not
    assert set(by_id) == {s.msg_id for s in sent}
    for i, s in enumerate(sent):
        r = by_id[s.msg_id]
        assert (r.body, r.tags, r.keys) == expected(i), (i, r)
        assert (r.queue_id, r.queue_offset) == (s.queue_id, s.queue_offset), (i, r, s)

    assert_consistent(StoreConfig(store_path_root_dir=str(store_dir), mapped_file_size_commit_log=COMMIT_LOG,
                                  mapped_file_size_consume_queue=CONSUME_QUEUE))


async def consumer_reports_itself(s: Servers, topic: str, group: str, jstack: bool = True) -> None:
    """Wait for ``group``'s one consumer of ``topic`` to come online, then check what it answers
    to GET_CONSUMER_RUNNING_INFO, relayed by the broker (mqadmin consumerStatus)."""
    async with Admin(s.namesrv_addr) as admin:
        async with asyncio.timeout(60):
            while True:
                try:
                    conn = await admin.consumer_connection(group)
                    break
                except MQBrokerError as exc:
                    assert exc.code == ResponseCode.CONSUMER_NOT_ONLINE, exc
                    await asyncio.sleep(0.2)
        [client_id] = [c.client_id for c in conn.connection_set]
        info = await admin.consumer_running_info(group, client_id, jstack=jstack)
    assert info.properties[PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY", info.properties
    assert info.properties[PROP_NAMESERVER_ADDR].startswith(s.namesrv_addr), info.properties
    assert {sd.topic for sd in info.subscription_set} == {topic, f"%RETRY%{group}"}, info.subscription_set
    assert (info.jstack or "") != "" if jstack else not info.jstack


# -- helpers of the scenario tests (Java, Go) ---------------------------------------------------
FAST_RETRIES = {"message_delay_level": "1s 1s 1s 1s 1s 1s"}  # retry delays 3 + n stay at 1 s


def with_servers(tmp_path: Path, test: Callable[[Servers], Awaitable[Any]],
                 store: dict[str, Any] | None = None, **broker: Any) -> Any:
    """Run ``test(servers)`` against a NameServer + Broker (``store``: StoreConfig fields,
    ``broker``: BrokerConfig fields); its result."""
    async def main() -> Any:
        async with running_servers(tmp_path / "store", store_options=store, **broker) as servers:
            return await test(servers)

    return asyncio.run(main())


async def create_topic(s: Servers, topic: str, queues: int = 4, attributes: str | None = None) -> None:
    """Create ``topic`` (``attributes``: RocketMQ 5's, ``+cleanup.policy=COMPACTION``) and wait
    until the NameServer routes it."""
    header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=queues,
                                      write_queue_nums=queues, perm=6, attributes=attributes)
    async with RemotingClient() as client:
        r = await client.invoke(s.broker_addr,
                                RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))
        assert r.code == ResponseCode.SUCCESS, r
        registration = s.broker.registration
        assert registration is not None
        await registration.wait_pending()
        route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                        GetRouteInfoRequestHeader(topic=topic))
        async with asyncio.timeout(30):  # a registration can time out on a loaded machine
            while (await client.invoke(s.namesrv_addr, route)).code != ResponseCode.SUCCESS:
                registration.request_register()
                await registration.wait_pending()


def stored(s: Servers, topic: str) -> list[MessageExt]:
    """Every message of ``topic`` in the store, queue by queue."""
    store = s.broker.store
    out = []
    for queue_id in store.topics().get(topic, []):
        cq = store.find_consume_queue(topic, queue_id)
        for index in range(cq.min_offset, cq.max_offset):
            entry = cq.entry(index)
            assert entry is not None
            buf = store.commit_log.read(entry[0], entry[1])
            assert buf is not None and read_total_size(buf, 0) == entry[1]
            out.append(decode_record(buf, 0))
    return out


async def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` until it holds; TimeoutError after ``timeout`` seconds."""
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)


async def acl_scenario(namesrv: str, topic: str) -> None:
    """The accounts of interop/rocketmq/home/conf/plain_acl.yml against a broker with
    ``aclEnable=true`` (RocketMQ's or Bolide's, with the same answers): the admin account
    creates ``topic``, sends and consumes; the read-only account's send, an unsigned one and
    one with a wrong secret are refused with RocketMQ's texts."""
    signed = ClientConfig(namesrv, access_key="bolide-admin", secret_key="bolide-admin-secret")
    async with Admin(signed) as admin:
        await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
        async with asyncio.timeout(30):  # the route reaches the NameServer with a registration
            while True:
                try:
                    await admin.topic_route(topic)
                    break
                except MQClientError:
                    await asyncio.sleep(0.1)
    async with Producer(signed, "acl-pg") as producer:
        sent = [await producer.send(Message(topic, b"acl-%d" % i)) for i in range(4)]
    assert all(r.status is SendStatus.SEND_OK for r in sent)
    consumer = PullConsumer(signed, "acl-cg", consume_from=ConsumeFrom.FIRST_OFFSET,
                            rebalance_interval_ms=300, suspend_ms=1000, pull_timeout_ms=5000)
    consumer.subscribe(topic)
    got: list[MessageExt] = []
    async with consumer:
        while len(got) < 4:
            got += await consumer.poll(3000)
        got += await consumer.poll(500)  # and nothing more
    assert sorted(m.body for m in got) == [b"acl-%d" % i for i in range(4)]
    reader = ClientConfig(namesrv, access_key="bolide-reader", secret_key="bolide-reader-secret")
    for config, why in ((reader, f"No default permission for topic:{topic}"),
                        (ClientConfig(namesrv), "No accessKey is configured"),
                        (ClientConfig(namesrv, access_key="bolide-admin", secret_key="wrong"),
                         "Check signature failed for accessKey=bolide-admin")):
        async with Producer(config, "acl-pg") as producer:
            with pytest.raises(AclRefusedError, match=why):
                await producer.send(Message(topic, b"refused"))


async def acl_admin_scenario(namesrv: str, topic: str) -> None:
    """The ACL admin calls of ``Admin`` (mqadmin updateAclConfig, clusterAclConfigVersion,
    getAclConfig, deleteAclConfig) signed by the admin account of the interop accounts file,
    against a broker with ``aclEnable=true`` (RocketMQ's or Bolide's, with the same results): a
    new account works at once for what it was given, the files' versions move, and once
    deleted it is refused."""
    admin_config = ClientConfig(namesrv, access_key="bolide-admin", secret_key="bolide-admin-secret")
    writer = ClientConfig(namesrv, access_key="bolide-writer", secret_key="bolide-writer-secret")
    async with Admin(admin_config) as admin:
        [addr] = await admin.master_addrs()
        before = sum(v.counter for v in (await admin.acl_versions())[0].files.values())
        await admin.update_acl_account("bolide-writer", "bolide-writer-secret",
                                       default_topic_perm="DENY", default_group_perm="SUB",
                                       topic_perms=[f"{topic}=PUB"])
        async with Producer(writer, "acl-pg") as producer:
            assert (await producer.send(Message(topic, b"by the writer"))).status is SendStatus.SEND_OK
        after = sum(v.counter for v in (await admin.acl_versions())[0].files.values())
        assert after > before
        accounts = {c.access_key: c for c in (await admin.acl_config())[addr].plain_access_configs}
        assert accounts["bolide-writer"].topic_perms == [f"{topic}=PUB"]
        with pytest.raises(MQBrokerError, match="length should longer than 6") as short:
            await admin.update_acl_account("short", "bolide-writer-secret")
        assert short.value.code == 209
        await admin.delete_acl_account("bolide-writer")
    async with Producer(writer, "acl-pg") as producer:
        with pytest.raises(AclRefusedError, match="No acl config for bolide-writer"):
            await producer.send(Message(topic, b"refused"))
