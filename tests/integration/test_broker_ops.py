"""The broker's and NameServer's RocketMQ operations without an mqadmin command, through the
Admin (and raw requests for the error answers) against in-process servers: GET_TIMER_METRICS,
QUERY_CORRECTION_OFFSET, RESUME_CHECK_HALF_MESSAGE, UPDATE_AND_GET_GROUP_FORBIDDEN (and the
pulls it refuses) and GET_BROKER_MEMBER_GROUP."""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path

import pytest
from test_broker_admin_codes import call, create_topic, heartbeat
from test_broker_admin_codes import run as run_for
from test_broker_transactions import (
    COMMIT,
    answer_check,
    checking_client,
    dispatched,
    pull,
    records,
    send_half,
)
from test_broker_transactions import heartbeat as producer_heartbeat

from bolide.broker.transaction import TRANS_CHECK_MAX_TIME_TOPIC
from bolide.client import Admin, Producer
from bolide.client.errors import BrokerSystemError
from bolide.common import Message
from bolide.common.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import PullMessageRequestHeader
from bolide.protocol.headers.admin import QueryCorrectionOffsetHeader, ResumeCheckHalfMessageRequestHeader
from bolide.remoting import RemotingClient
from bolide.store.timer_metrics import TimerMetrics
from bolide.testing.servers import Servers
from conftest import run_with_servers, wait_until

TIMEOUT = 40.0


run = functools.partial(run_for, timeout=TIMEOUT)  # the broker option tests need longer


def counts(admin_answer: object) -> dict[str, int]:
    return {t: m.count for t, m in admin_answer.timing_count.items()}  # type: ignore[attr-defined]


def test_timer_metrics_count_the_waiting_timer_messages_and_persist(tmp_path: Path) -> None:
    config_file = tmp_path / "store" / "config" / "timermetrics"

    async def first(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin, Producer(s.namesrv_addr, "timer_pg") as producer:
            await admin.create_topic("Later", read_queue_nums=1, write_queue_nums=1)
            before = (await admin.timer_metrics(s.broker_addr)).data_version.counter
            soon, recalled, long = (Message("Later", b"soon"), Message("Later", b"recalled"),
                                    Message("Later", b"long"))
            soon.delay_time_ms, recalled.delay_time_ms, long.delay_time_ms = 1500, 2500, 600_000
            await producer.send(Message("Later", b"now"))  # no timer message: not counted
            sent = [await producer.send(m) for m in (soon, recalled, long)]
            metrics = await admin.timer_metrics(s.broker_addr)
            assert counts(metrics) == {"Later": 3}
            assert metrics.data_version.counter == before + 3
            assert metrics.timing_count["Later"].time_stamp > 0
            handle = sent[1].recall_handle
            assert handle is not None
            await producer.recall_message("Later", handle)
            schedule = s.broker.schedule
            assert schedule is not None
            await wait_until(lambda: schedule.delivered >= 1 and schedule.recalled == 1, timeout=20)
            assert counts(await admin.timer_metrics(s.broker_addr)) == {"Later": 1}  # the long one

    run_with_servers(tmp_path, first, timeout=TIMEOUT)
    on_disk = json.loads(config_file.read_text())  # RocketMQ's compact file
    assert on_disk["timingCount"]["Later"]["count"] == 1 and on_disk["dataVersion"]["counter"] == 5
    assert "\n" not in config_file.read_text()

    async def second(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            assert counts(await admin.timer_metrics(s.broker_addr)) == {"Later": 1}  # loaded
            await admin.delete_topic("Later")
            assert counts(await admin.timer_metrics(s.broker_addr)) == {}  # as RocketMQ's deleteTopic

    run_with_servers(tmp_path, second, timeout=TIMEOUT)


def test_timer_metrics_of_a_rocketmq_file_and_with_timers_off(tmp_path: Path) -> None:
    config_dir = tmp_path / "store" / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "timermetrics").write_text(  # as RocketMQ 5.3 writes it (BrowserCompatible)
        '{"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1700000000000},'
        '"timingCount":{"Later":{"count":2,"timeStamp":1700000000001},"Gone":{"count":-1,"timeStamp":5}}}')

    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            metrics = await admin.timer_metrics(s.broker_addr)
        assert counts(metrics) == {"Later": 2, "Gone": 0}  # never below zero
        assert (metrics.data_version.counter, metrics.data_version.timestamp) == (7, 1700000000000)
        assert metrics.timing_count["Later"].time_stamp == 1700000000001

    run_with_servers(tmp_path, test)

    async def off(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            with pytest.raises(BrokerSystemError, match="timerWheelEnable=false"):
                await admin.timer_metrics(s.broker_addr)

    run_with_servers(tmp_path, off, timer_wheel_enable=False)


def test_timer_metrics_file_round_trip(tmp_path: Path) -> None:
    metrics = TimerMetrics(tmp_path / "timermetrics")
    assert metrics.add("T", 2) == 2 and metrics.add("T", -5) == 0
    metrics.persist()
    again = TimerMetrics(tmp_path / "timermetrics")
    assert again.load() and again.snapshot() == metrics.snapshot()
    assert again.data_version.counter == 2 and again.data_version.state_version == 0


def test_correction_offset_is_the_smallest_offset_of_the_other_groups(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, "Fix")
        offsets = s.broker.offsets
        for group, q0, q1 in (("g1", 3, 1), ("g2", 2, 4), ("cmp", 5, 0)):
            offsets.commit(group, "Fix", 0, q0)
            offsets.commit(group, "Fix", 1, q1)
        offsets.commit("g3", "Other", 0, 0)  # another topic: left out
        async with Admin(s.namesrv_addr) as admin:
            addr = s.broker_addr
            assert await admin.query_correction_offset(addr, "Fix", "cmp") == {0: 2, 1: 0}
            assert await admin.query_correction_offset(addr, "Fix", "cmp", ["g2"]) == {0: 3, 1: 0}
            assert await admin.query_correction_offset(addr, "Fix", "cmp", ["g2", "cmp"]) == {0: 3, 1: 1}
            assert await admin.query_correction_offset(addr, "Nothing", "cmp") == {}
        assert offsets.query("g2", "Fix", 0) == 2  # the filtered groups keep their offsets
        header = QueryCorrectionOffsetHeader(compare_group="cmp", topic="Fix")
        raw = await call(client, s.broker_addr, RequestCode.QUERY_CORRECTION_OFFSET, header)
        assert raw.body_bytes() == b'{"correctionOffsets":{0:2,1:0}}'  # Java's bare Integer keys
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.QUERY_CORRECTION_OFFSET, ext_fields={"topic": "Fix"}))
        assert r.code == ResponseCode.SYSTEM_ERROR and "compareGroup" in (r.remark or ""), r

    run(tmp_path, test)


def test_resume_check_half_message_checks_a_discarded_transaction_again(tmp_path: Path) -> None:
    async def test(s: Servers, _: RemotingClient) -> None:
        addr, store = s.broker_addr, s.broker.store
        producer, checks = checking_client()
        async with producer, Admin(s.namesrv_addr) as admin:
            await producer_heartbeat(producer, addr)
            assert (await send_half(producer, addr, 21)).code == ResponseCode.SUCCESS
            while store.get_max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0) == 0:
                await dispatched(s)
                await s.broker.transaction_check.check_once()
                await asyncio.sleep(0)
            await checks.get()  # the one check transactionCheckMax=1 allows
            moved = store.get_message("x", TRANS_CHECK_MAX_TIME_TOPIC, 0, 0).messages[0]
            halves = store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)

            resumed = await admin.resume_check_half_message(TRANS_CHECK_MAX_TIME_TOPIC, moved.offset_msg_id)
            assert resumed == addr
            await dispatched(s)
            assert store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0) == halves + 1
            again = store.get_message("x", TRANS_HALF_TOPIC, 0, halves).messages[0]
            assert again.properties["TRANSACTION_CHECK_TIMES"] == "0" and again.body == b"tx-21"
            report = await s.broker.transaction_check.check_once()
            assert report.checked == 1
            check = await checks.get()
            assert records(check.body_bytes())[0].properties["TRANSACTION_CHECK_TIMES"] == "1"
            assert (await answer_check(producer, addr, check, COMMIT)).code == ResponseCode.SUCCESS
            got = await pull(producer, addr, "TxOrders", 1, suspend_ms=5000)
            assert [m.body for m in records(got.body_bytes())] == [b"tx-21"]

            # bad ids: a clear SYSTEM_ERROR
            await dispatched(s)
            op = store.get_message("x", TRANS_OP_HALF_TOPIC, 0, 0).messages[0]  # a commit's op message
            for msg_id, why in (("nonsense", "is not an offsetMsgId"),
                                (moved.offset_msg_id[:16] + "00000000FFFFFFFF", "no message at CommitLog"),
                                (op.offset_msg_id, "is no half message"), (None, "msgId is missing")):
                r = await producer.invoke(addr, RemotingCommand.request(
                    RequestCode.RESUME_CHECK_HALF_MESSAGE,
                    ResumeCheckHalfMessageRequestHeader(topic="TxOrders", msg_id=msg_id)))
                assert r.code == ResponseCode.SYSTEM_ERROR and why in (r.remark or ""), (msg_id, r)

    run(tmp_path, test, transaction_timeout_ms=0, transaction_check_max=1,
        transaction_check_interval_ms=3_600_000)


def _pull(group: str, topic: str, sys_flag: int) -> RemotingCommand:
    header = PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=0, queue_offset=0,
                                      max_msg_nums=32, sys_flag=sys_flag, commit_offset=0,
                                      suspend_timeout_millis=0, subscription="*", sub_version=0)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header)


def test_group_read_forbidden_refuses_pulls_and_is_kept_in_the_group_file(tmp_path: Path) -> None:
    groups_file = tmp_path / "store" / "config" / "subscriptionGroup.json"

    async def first(s: Servers, client: RemotingClient) -> None:
        addr = s.broker_addr
        await create_topic(client, addr, "Banned")
        await create_topic(client, addr, "Open")
        r = await call(client, addr, RequestCode.HEART_BEAT, body=heartbeat("c1", "cg", "Banned").encode())
        assert r.code == ResponseCode.SUCCESS
        async with Admin(s.namesrv_addr) as admin:
            asked = await admin.update_and_get_group_read_forbidden(addr, "cg", "Banned")
            assert (asked.group, asked.topic, asked.readable) == ("cg", "Banned", True)
            assert (await client.invoke(addr, _pull("cg", "Banned", 0))).code == ResponseCode.PULL_NOT_FOUND
            banned = await admin.update_and_get_group_read_forbidden(addr, "cg", "Banned", False)
            assert banned.readable is False
            await admin.update_and_get_group_read_forbidden(addr, "cg", "Open", False)
            await admin.update_and_get_group_read_forbidden(addr, "cg", "Open", True)  # cleared again
            assert (await admin.update_and_get_group_read_forbidden(addr, "cg", "Open")).readable is True
        refused = await client.invoke(addr, _pull("cg", "Banned", 0))
        assert refused.code == ResponseCode.NO_PERMISSION, refused
        assert refused.ext_fields["forbiddenType"] == "5"
        assert refused.remark == "the consumer group[cg] is forbidden for topic[Banned]"
        # as in RocketMQ, a pull that brings its subscription is not checked
        assert (await client.invoke(addr, _pull("cg", "Banned", 4))).code == ResponseCode.PULL_NOT_FOUND
        assert (await client.invoke(addr, _pull("other", "Banned", 4))).code == ResponseCode.PULL_NOT_FOUND
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN,
                                                              ext_fields={"group": "cg"}))
        assert r.code == ResponseCode.SYSTEM_ERROR and "topic" in (r.remark or ""), r

    run(tmp_path, first)
    on_disk = json.loads(groups_file.read_text())
    assert on_disk["forbiddenTable"] == {"cg": {"Banned": 4}}  # RocketMQ's bit 2 (PermName.INDEX_PERM_READ)

    # RocketMQ's file, as a 5.3 broker leaves it: the ban holds in Bolide
    on_disk["forbiddenTable"]["cg2"] = {"Banned": 4}
    groups_file.write_text(json.dumps(on_disk))

    async def second(s: Servers, client: RemotingClient) -> None:
        async with Admin(s.namesrv_addr) as admin:
            assert (await admin.update_and_get_group_read_forbidden(
                s.broker_addr, "cg2", "Banned")).readable is False
            assert (await admin.update_and_get_group_read_forbidden(
                s.broker_addr, "cg", "Banned", True)).readable is True
        refused = await client.invoke(s.broker_addr, _pull("cg2", "Banned", 0))
        assert refused.code == ResponseCode.NO_PERMISSION
        async with Admin(s.namesrv_addr) as admin:
            await admin.delete_subscription_group("cg2", broker_addr=s.broker_addr)  # takes its bans along
        await wait_until(lambda: s.broker.subscription_groups.file.forbidden == {})

    run(tmp_path, second)
    assert json.loads(groups_file.read_text())["forbiddenTable"] == {}


def test_broker_member_group_from_the_name_server(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        cfg = s.broker.config
        async with Admin(s.namesrv_addr) as admin:
            group = await admin.broker_member_group(cfg.broker_cluster_name, cfg.broker_name)
            assert (group.cluster, group.broker_name, group.broker_addrs) == (
                cfg.broker_cluster_name, cfg.broker_name, {0: s.broker_addr})
            unknown = await admin.broker_member_group("NoCluster", "no-broker")
            assert (unknown.cluster, unknown.broker_name, unknown.broker_addrs) == (
                "NoCluster", "no-broker", {})
        async with RemotingClient() as client:
            r = await client.invoke(s.namesrv_addr, RemotingCommand.request(
                RequestCode.GET_BROKER_MEMBER_GROUP, ext_fields={"clusterName": "c"}))
            assert r.code == ResponseCode.SYSTEM_ERROR and "brokerName" in (r.remark or ""), r
            r = await client.invoke(s.broker_addr, RemotingCommand.request(
                RequestCode.GET_BROKER_MEMBER_GROUP, ext_fields={"clusterName": "c", "brokerName": "b"}))
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED  # RocketMQ's broker has none either

    run_with_servers(tmp_path, test)
