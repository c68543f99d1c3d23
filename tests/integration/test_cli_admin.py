"""``bolide admin`` commands run through click against an in-process NameServer + Broker (in a
background thread), each in table and JSON output; resetOffsetByTime's dry run, and resets with
the group's consumer online (handed to it by the broker)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bolide.cli.main import cli
from bolide.client import ConsumeFrom, Message
from bolide.client.blocking import Admin, Producer, PullConsumer
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies.client import HeartbeatData, ProducerData
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers, running_servers


class ServerThread:
    """NameServer + Broker on an event loop in a background thread."""

    def __init__(self, store_dir: Any, **broker_options: Any) -> None:
        self.broker_options = broker_options
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.servers: Servers | None = None
        self.error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(store_dir),),
                                       daemon=True)

    async def _main(self, store_dir: Any) -> None:
        self._stop = asyncio.Event()
        try:
            async with running_servers(store_dir, **self.broker_options) as servers:
                self.servers = servers
                self.ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self.error = exc
            self.ready.set()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def ask(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        """``request``'s answer from ``addr``, over a connection of its own."""
        async def call() -> RemotingCommand:
            async with RemotingClient() as client:
                return await client.invoke(addr, request)

        return self.run(call())  # type: ignore[no-any-return]

    def stop(self) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)


@contextlib.contextmanager
def started(store_dir: Any, **broker_options: Any) -> Iterator[ServerThread]:
    """A ServerThread on ``store_dir``, up until the block ends."""
    st = ServerThread(store_dir, **broker_options)
    st.thread.start()
    assert st.ready.wait(30) and st.error is None, st.error
    try:
        yield st
    finally:
        st.stop()


def servers_fixture(name: str) -> Any:
    """A module-scoped ``servers`` fixture: a ServerThread on a fresh store named ``name``."""
    @pytest.fixture(scope="module")
    def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
        with started(tmp_path_factory.mktemp(name) / "store") as st:
            yield st
    return servers


servers = servers_fixture("admin")


@pytest.fixture
def ns(servers: ServerThread) -> str:
    assert servers.servers is not None
    return servers.servers.namesrv_addr


def bolide(*args: str, ok: bool = True, input: str | None = None) -> Result:
    result = CliRunner().invoke(cli, list(args), input=input)
    if ok:
        assert result.exit_code == 0, result.output + repr(result.exception)
    return result


def admin_json(ns: str, *args: str) -> Any:
    return json.loads(bolide("admin", *args, "-n", ns, "--output", "json").stdout)


def admin_table(ns: str, *args: str) -> str:
    out = bolide("admin", *args, "-n", ns).stdout
    assert "┃" in out  # a rich table
    return out


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_cluster_list_and_broker_status(ns: str, servers: ServerThread) -> None:
    assert servers.servers is not None
    addr = servers.servers.broker_addr
    doc = admin_json(ns, "clusterList")
    assert doc["brokers"][0] | {"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerId": 0,
                                "addr": addr} == doc["brokers"][0]
    assert doc["brokers"][0]["version"] == "V4_9_8"
    table = admin_table(ns, "clusterList")
    assert "DefaultCluster" in table and addr in table
    status = admin_json(ns, "brokerStatus", "-b", addr)
    assert status[addr]["brokerVersionDesc"] == "V4_9_8"
    assert "commitLogMaxOffset" in admin_table(ns, "brokerStatus")


def test_topic_lifecycle(ns: str) -> None:
    doc = admin_json(ns, "updateTopic", "-t", "AdmTopic", "-r", "3", "-w", "3")
    assert doc["routed"] is True and doc["writeQueueNums"] == 3 and len(doc["brokers"]) == 1
    assert "AdmTopic" in admin_table(ns, "updateTopic", "-t", "AdmTopic2", "-r", "2", "-w", "2")
    assert {"AdmTopic", "AdmTopic2"} <= set(admin_json(ns, "topicList")["topics"])
    assert "AdmTopic2" in admin_table(ns, "topicList")
    route = admin_json(ns, "topicRoute", "-t", "AdmTopic")
    assert route["queueDatas"][0]["writeQueueNums"] == 3
    assert "6 (RW)" in admin_table(ns, "topicRoute", "-t", "AdmTopic")
    with Producer(ns) as producer:
        for i in range(5):
            producer.send(Message("AdmTopic", b"m%d" % i))
    status = admin_json(ns, "topicStatus", "-t", "AdmTopic")
    assert sum(q["maxOffset"] for q in status["queues"]) == 5 and len(status["queues"]) == 3
    assert "lastUpdated" in admin_table(ns, "topicStatus", "-t", "AdmTopic")
    assert admin_json(ns, "deleteTopic", "-t", "AdmTopic")["deleted"] is True
    assert "deleted" in admin_table(ns, "deleteTopic", "-t", "AdmTopic2")
    result = bolide("admin", "topicRoute", "-t", "AdmTopic", "-n", ns, ok=False)
    assert result.exit_code == 1 and "create it with updateTopic" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback


def test_subscription_groups(ns: str) -> None:
    doc = admin_json(ns, "updateSubGroup", "-g", "adm-sub", "-r", "5", "--no-broadcast")
    assert doc["group"]["retryMaxTimes"] == 5 and doc["group"]["consumeBroadcastEnable"] is False
    assert "retryMaxTimes" in admin_table(ns, "updateSubGroup", "-g", "adm-sub2")
    admin_json(ns, "updateTopic", "-t", "AdmPop")
    doc = admin_json(ns, "setConsumeMode", "-t", "AdmPop", "-g", "adm-sub", "-m", "POP", "-q", "1")
    assert doc["mode"] == "POP" and doc["popShareQueueNum"] == 1 and len(doc["brokers"]) == 1
    refused = bolide("admin", "setConsumeMode", "-t", "NoSuchTopic", "-g", "adm-sub", "-m", "POP", "-n", ns,
                     ok=False)
    assert refused.exit_code == 1 and "NoSuchTopic" in refused.output
    assert admin_json(ns, "deleteSubGroup", "-g", "adm-sub")["offsetsRemoved"] is True
    assert "deleted" in admin_table(ns, "deleteSubGroup", "-g", "adm-sub2", "--keep-offsets")


def test_acl_2_users_and_acls(ns: str) -> None:
    """The ACL 2.0 commands on a broker whose checks are off (RocketMQ keeps and serves the
    users and ACLs all the same, so they can be set up before turning the checks on)."""
    assert admin_json(ns, "createUser", "-u", "cli-app", "-p", "cli-secret")["username"] == "cli-app"
    assert admin_json(ns, "getUser", "-u", "cli-app") == [
        {"password": "cli-secret", "userStatus": "enable", "userType": "Normal", "username": "cli-app"}]
    admin_json(ns, "updateUser", "-u", "cli-app", "-s", "disable")
    assert "disable" in admin_table(ns, "listUser", "-f", "cli-")
    admin_json(ns, "createAcl", "-s", "User:cli-app", "-r", "Topic:CliA,Group:cli-*", "-a", "Pub,Sub",
               "-d", "Allow", "-i", "10.0.0.0/8")
    acl = admin_json(ns, "getAcl", "-s", "User:cli-app")[0]
    assert [e["resource"] for e in acl["policies"][0]["entries"]] == ["Topic:CliA", "Group:cli-*"]
    assert acl["policies"][0]["entries"][0]["sourceIps"] == ["10.0.0.0/8"]
    assert "Group:cli-*" in admin_table(ns, "listAcl", "-r", "Group")
    admin_json(ns, "deleteAcl", "-s", "User:cli-app", "-r", "Group:cli-*")
    assert len(admin_json(ns, "getAcl", "-s", "User:cli-app")[0]["policies"][0]["entries"]) == 1
    refused = bolide("admin", "createAcl", "-s", "User:cli-app", "-r", "Queue:x", "-a", "Pub", "-d",
                     "Allow", "-n", ns, ok=False)
    assert refused.exit_code == 1 and "The resource is null." in refused.output
    admin_json(ns, "deleteUser", "-u", "cli-app")
    missing = bolide("admin", "getUser", "-u", "cli-app", "-n", ns, ok=False)
    assert missing.exit_code == 1 and "create it with createUser" in missing.output


def test_message_commands(ns: str) -> None:
    admin_json(ns, "updateTopic", "-t", "AdmMsg", "-r", "2", "-w", "2")
    sent = admin_json(ns, "sendMessage", "-t", "AdmMsg", "-p", "héllo", "-k", "order-1 order-2", "-c", "TagA",
                      "-i", "1")
    assert sent["status"] == "SEND_OK" and sent["queueId"] == 1
    assert "SEND_OK" in admin_table(ns, "sendMessage", "-t", "AdmMsg", "-p", "second", "-c", "TagB")

    by_offset_id = admin_json(ns, "queryMsgById", "-i", sent["offsetMsgId"])
    assert by_offset_id["body"] == "héllo" and by_offset_id["keys"] == ["order-1", "order-2"]
    by_client_id = admin_json(ns, "queryMsgById", "-i", sent["msgId"], "-t", "AdmMsg")
    assert by_client_id["queueOffset"] == sent["queueOffset"] and by_client_id["tags"] == "TagA"
    assert "héllo" in admin_table(ns, "queryMsgById", "-i", sent["msgId"], "-t", "AdmMsg")
    missing = bolide("admin", "queryMsgById", "-i", sent["msgId"], "-n", ns, ok=False)
    assert missing.exit_code == 1 and "give its topic with -t" in missing.output

    by_key = admin_json(ns, "queryMsgByKey", "-t", "AdmMsg", "-k", "order-2")
    assert by_key["count"] == 1 and by_key["messages"][0]["msgId"] == sent["msgId"]
    assert sent["msgId"] in admin_table(ns, "queryMsgByKey", "-t", "AdmMsg", "-k", "order-1")
    assert admin_json(ns, "queryMsgByKey", "-t", "AdmMsg", "-k", "nope")["count"] == 0

    at = admin_json(ns, "queryMsgByOffset", "-t", "AdmMsg", "-i", "1", "-o", str(sent["queueOffset"]))
    assert at["msgId"] == sent["msgId"] and "MIN_OFFSET" not in at["properties"]
    assert "héllo" in admin_table(ns, "queryMsgByOffset", "-t", "AdmMsg", "-i", "1", "-o", "0")
    beyond = bolide("admin", "queryMsgByOffset", "-t", "AdmMsg", "-i", "1", "-o", "99", "-n", ns, ok=False)
    assert "no message at offset 99" in beyond.output

    read = admin_json(ns, "consumeMessage", "-t", "AdmMsg", "-i", "1", "-o", "0", "-c", "5")
    assert [m["body"] for m in read["messages"]] == ["héllo"]
    assert "2 message(s)" in admin_table(ns, "consumeMessage", "-t", "AdmMsg")
    printed = admin_json(ns, "printMsg", "-t", "AdmMsg", "-s", "TagB")
    assert [m["body"] for m in printed["messages"]] == ["second"]
    no_body = admin_json(ns, "printMsg", "-t", "AdmMsg", "--no-print-body")
    assert no_body["count"] == 2 and all("body" not in m for m in no_body["messages"])
    assert "second" in admin_table(ns, "printMsg", "-t", "AdmMsg")


def test_progress_connections_and_reset(ns: str, servers: ServerThread) -> None:
    admin_json(ns, "updateTopic", "-t", "AdmProg", "-r", "2", "-w", "2")
    with Producer(ns, group="adm-pg") as producer:
        queues = producer.publish_queues("AdmProg")
        for i in range(6):
            producer.send(Message("AdmProg", b"%d" % i), queue=queues[i % 2])
    before_reset = int(time.time() * 1000)
    wait_for(lambda: int(time.time() * 1000) > before_reset)  # the next store time is later
    with Producer(ns, group="adm-pg") as producer:
        producer.send(Message("AdmProg", b"late"), queue=queues[0])

    consumer = PullConsumer(ns, "adm-cg", consume_from=ConsumeFrom.FIRST_OFFSET, auto_commit=False)
    consumer.subscribe("AdmProg")
    consumer.start()
    try:
        got: list[Any] = []
        wait_for(lambda: bool(got.extend(consumer.poll(timeout_ms=200))) or len(got) >= 7)
        consumer.commit({queues[0]: 2, queues[1]: 3})

        stats = admin_json(ns, "brokerConsumeStats", "-b", servers.servers.broker_addr)
        mine = {q["queueId"]: (q["brokerOffset"], q["consumerOffset"], q["diff"]) for q in stats["queues"]
                if q["group"] == "adm-cg"}
        assert mine == {0: (4, 2, 2), 1: (3, 3, 0)} and stats["totalDiff"] >= 2
        assert "adm-cg" in admin_table(ns, "brokerConsumeStats", "-b", servers.servers.broker_addr)
        cq = admin_json(ns, "queryCq", "-t", "AdmProg", "-q", "0", "-i", "1", "-c", "5", "-g", "adm-cg")
        assert (cq["minQueueIndex"], cq["maxQueueIndex"]) == (0, 4)
        assert [e["queueOffset"] for e in cq["entries"]] == [1, 2, 3]
        assert cq["subscription"]["topic"] == "AdmProg"
        assert "commitLogOffset" in admin_table(ns, "queryCq", "-t", "AdmProg", "-q", "1", "-i", "0")

        conn = admin_json(ns, "consumerConnection", "-g", "adm-cg")
        assert [c["clientId"] for c in conn["connectionSet"]] == [consumer.client_id]
        assert "AdmProg" in conn["subscriptionTable"]
        assert consumer.client_id in admin_table(ns, "consumerConnection", "-g", "adm-cg")

        plan = admin_json(ns, "resetOffsetByTime", "-g", "adm-cg", "-t", "AdmProg", "-s", "0", "--dry-run")
        assert plan["onlineConsumers"] == [consumer.client_id] and plan["dryRun"] is True
        assert plan["relayedBy"] == []
        # with the consumer online: committed, and the broker hands the offsets to the consumer
        skipped = admin_json(ns, "skipAccumulatedMessage", "-g", "adm-cg", "-t", "AdmProg")
        assert skipped["relayedBy"] == [servers.servers.broker_addr] and skipped["applied"] is True
        assert [(q["oldOffset"], q["newOffset"]) for q in skipped["queues"]] == [(2, 4), (3, 3)]
        with Admin(ns) as admin:
            assert [q.consumer_offset for q in admin.consumer_progress("adm-cg").queues] == [4, 3]
        assert "handed them to the 1 online consumer(s)" in admin_table(
            ns, "resetOffsetByTime", "-g", "adm-cg", "-t", "AdmProg", "-s", "0")
        again: list[Any] = []  # the consumer took the reset: it reads the topic from the start again
        wait_for(lambda: bool(again.extend(consumer.poll(timeout_ms=200))) or len(again) >= 7)
        assert sorted(m.body for m in again) == sorted(m.body for m in got)
        consumer.commit({queues[0]: 2, queues[1]: 3})  # where the rest of the test starts from
    finally:
        consumer.close()

    progress = admin_json(ns, "consumerProgress", "-g", "adm-cg")
    lags = {q["queueId"]: (q["consumerOffset"], q["lag"]) for q in progress["queues"]}
    assert lags == {queues[0].queue_id: (2, 2), queues[1].queue_id: (3, 0)}
    assert progress["totalLag"] == 2 and progress["maxLagMs"] is not None and progress["maxLagMs"] >= 0
    table = admin_table(ns, "consumerProgress", "-g", "adm-cg")
    assert "total lag 2 messages" in table
    summary = admin_json(ns, "consumerProgress")
    assert "adm-cg" in [g["group"] for g in summary["groups"]]
    assert "adm-cg" in admin_table(ns, "consumerProgress")

    dry = admin_json(ns, "resetOffsetByTime", "-g", "adm-cg", "-t", "AdmProg", "-s", "0", "--dry-run")
    assert [(q["oldOffset"], q["newOffset"]) for q in dry["queues"]] == [(2, 0), (3, 0)]
    assert "dry run" in admin_table(ns, "resetOffsetByTime", "-g", "adm-cg", "-t", "AdmProg", "-s", "0",
                                    "--dry-run")
    with Admin(ns) as admin:  # the blocking twin: nothing changed
        assert [q.consumer_offset for q in admin.consumer_progress("adm-cg").queues] == [2, 3]
        done = admin_json(ns, "resetOffsetByTime", "-g", "adm-cg", "-t", "AdmProg", "-s", str(before_reset))
        assert done["applied"] is True
        assert [q.consumer_offset for q in admin.consumer_progress("adm-cg").queues] == [3, 3]
        assert "committed 2 offsets" in admin_table(ns, "resetOffsetByTime", "-g", "adm-cg", "-t", "AdmProg",
                                                    "-s", "now")
        assert [q.consumer_offset for q in admin.consumer_progress("adm-cg").queues] == [4, 3]


def test_producer_connection(ns: str, servers: ServerThread) -> None:
    admin_json(ns, "updateTopic", "-t", "AdmPc", "-r", "1", "-w", "1")
    assert servers.servers is not None
    broker = servers.servers.broker_addr
    client = RemotingClient()

    async def heartbeat() -> int:
        data = HeartbeatData(client_id="127.0.0.1@adm-test",
                             producer_data_set=[ProducerData(group_name="adm-producers")])
        response = await client.invoke(broker, RemotingCommand.request(RequestCode.HEART_BEAT,
                                                                       body=data.encode()), 3000)
        return response.code

    assert servers.run(heartbeat()) == ResponseCode.SUCCESS
    try:
        conn = admin_json(ns, "producerConnection", "-g", "adm-producers", "-t", "AdmPc")
        assert [c["clientId"] for c in conn["connectionSet"]] == ["127.0.0.1@adm-test"]
        assert "127.0.0.1@adm-test" in admin_table(ns, "producerConnection", "-g", "adm-producers",
                                                   "-t", "AdmPc")
        table = admin_json(ns, "producer", "-b", broker)  # GET_ALL_PRODUCER_INFO
        assert [p["clientId"] for p in table["adm-producers"]] == ["127.0.0.1@adm-test"]
        assert "127.0.0.1@adm-test" in admin_table(ns, "producer", "-b", broker)
    finally:
        servers.run(client.close())
    gone = bolide("admin", "producerConnection", "-g", "nobody", "-t", "AdmPc", "-n", ns, ok=False)
    assert gone.exit_code == 1 and "no producer of group 'nobody'" in gone.output
    offline = bolide("admin", "consumerConnection", "-g", "nobody", "-n", ns, ok=False)
    assert "no consumer of group 'nobody' is online" in offline.output


def test_clean_expired_and_unused_consume_queues(ns: str, servers: ServerThread) -> None:
    """cleanExpiredCQ and cleanUnusedTopic: nothing expired here, each broker says so."""
    assert servers.servers is not None
    addr = servers.servers.broker_addr
    doc = admin_json(ns, "cleanExpiredCQ")
    assert doc == {"brokers": {addr: "deleted 0 ConsumeQueues whose messages are all gone"}}
    doc = admin_json(ns, "cleanUnusedTopic", "-b", addr)
    assert list(doc["brokers"]) == [addr]
    assert doc["brokers"][addr] == "deleted 0 ConsumeQueues of 0 unused topics"
    assert "cleanUnusedTopic" in admin_table(ns, "cleanUnusedTopic", "-c", "DefaultCluster")


def test_unreachable_namesrv_is_a_clear_error() -> None:
    result = bolide("admin", "topicList", "-n", "127.0.0.1:1", ok=False)
    assert result.exit_code == 1
    assert "could not connect to 127.0.0.1:1" in result.output and "-n host:port" in result.output
    bad_time = bolide("admin", "resetOffsetByTime", "-g", "g", "-t", "t", "-s", "yesterday", "-n",
                      "127.0.0.1:1", ok=False)
    assert bad_time.exit_code == 2 and "is not a time" in bad_time.output


ACL_YML = """\
accounts:
  - accessKey: cli-admin
    secretKey: cli-admin-secret
    admin: true
"""


def test_acl_commands_and_signed_cli_clients(tmp_path: Any) -> None:
    """The ACL commands against a broker with aclEnable=true, signed by ``bolide admin
    --access-key/--secret-key``; produce and consume signed with their own options."""
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL_YML)
    st = ServerThread(tmp_path / "store", acl_enable=True, acl_file=str(acl_file))
    st.thread.start()
    assert st.ready.wait(30) and st.error is None, st.error
    try:
        assert st.servers is not None
        ns, addr = st.servers.namesrv_addr, st.servers.broker_addr
        keys = ("--access-key", "cli-admin", "--secret-key", "cli-admin-secret")
        unsigned = bolide("admin", "topicList", "-n", ns, ok=True)  # the NameServer has no ACL
        assert unsigned.exit_code == 0
        refused = bolide("admin", "brokerStatus", "-b", addr, "-n", ns, ok=False)
        assert refused.exit_code == 1 and "No accessKey is configured" in refused.output
        half = bolide("admin", "--access-key", "cli-admin", "brokerStatus", "-b", addr, "-n", ns,
                      ok=False)
        assert half.exit_code == 2 and "give both --access-key and --secret-key" in half.output

        def signed(*args: str) -> Any:
            return json.loads(bolide("admin", *keys, *args, "-n", ns, "--output", "json").stdout)

        assert signed("updateAclConfig", "-a", "cli-writer", "-s", "cli-writer-secret", "-i", "DENY",
                      "-t", "CliAcl=PUB|SUB", "-u", "SUB")["brokers"] == [addr]
        signed("updateTopic", "-t", "CliAcl", "-r", "1", "-w", "1")
        [config] = signed("getAclConfig")
        writer = next(a for a in config["plainAccessConfigs"] if a["accessKey"] == "cli-writer")
        assert writer["topicPerms"] == ["CliAcl=PUB|SUB"] and writer["defaultTopicPerm"] == "DENY"
        [version] = signed("clusterAclConfigVersion")
        assert version["files"][str(acl_file)]["counter"] == 1
        assert "cli-writer" in bolide("admin", *keys, "getAclConfig", "-n", ns).stdout

        writer_keys = ("--access-key", "cli-writer", "--secret-key", "cli-writer-secret")
        bolide("produce", *writer_keys, "-t", "CliAcl", "-n", ns, input="one\ntwo\n")
        out = bolide("consume", *writer_keys, "-t", "CliAcl", "-g", "cli-acl-cg", "--from", "first",
                     "--count", "2", "-n", ns).stdout
        assert [json.loads(line)["body"] for line in out.splitlines()] == ["one", "two"]
        denied = bolide("produce", *writer_keys, "-t", "Elsewhere", "-n", ns, input="x\n", ok=False)
        assert "No default permission for topic:Elsewhere" in denied.output

        signed("updateGlobalWhiteAddr", "-g", "127.0.0.1")
        assert bolide("admin", "brokerStatus", "-b", addr, "-n", ns).exit_code == 0
        signed("updateGlobalWhiteAddr", "-g", "")
        assert signed("deleteAclConfig", "-a", "cli-writer")["accessKey"] == "cli-writer"
        gone = bolide("admin", *keys, "deleteAclConfig", "-a", "cli-writer", "-n", ns, ok=False)
        assert gone.exit_code == 1 and "deleted failed" in gone.output
    finally:
        st.stop()


def test_cli_clients_over_tls(tmp_path: Any) -> None:
    """``--tls`` on ``bolide admin``, produce and consume, against servers that enforce TLS."""
    from pathlib import Path

    from bolide.remoting.tls import TlsServerConfig

    tls_dir = Path(__file__).resolve().parents[1] / "data" / "tls"
    tls = TlsServerConfig(mode="enforcing", cert_path=str(tls_dir / "server.crt"),
                          key_path=str(tls_dir / "server.key"))
    st = ServerThread(tmp_path / "store", tls=tls, use_tls=True)
    st.thread.start()
    assert st.ready.wait(30) and st.error is None, st.error
    try:
        assert st.servers is not None
        ns = st.servers.namesrv_addr
        plain = bolide("admin", "topicList", "-n", ns, ok=False)
        assert plain.exit_code == 1
        bolide("produce", "--tls", "-t", "CliTls", "-n", ns, input="one\ntwo\n")
        out = bolide("consume", "--tls", "-t", "CliTls", "-g", "cli-tls-cg", "--from", "first",
                     "--count", "2", "-n", ns).stdout
        assert [json.loads(line)["body"] for line in out.splitlines()] == ["one", "two"]
        doc = json.loads(bolide("admin", "--tls", "topicList", "-n", ns, "-O", "json").stdout)
        assert "CliTls" in doc["topics"]
    finally:
        st.stop()
