"""Transactional messages through the remoting protocol: half messages stay invisible, commit
and rollback (END_TRANSACTION 37), and the broker's CHECK_TRANSACTION_STATE (39) to a producer
connection registered by HEART_BEAT, also after a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bolide.broker.transaction import CHECK_GROUP, TRANS_CHECK_MAX_TIME_TOPIC
from bolide.common.message import MessageExt
from bolide.common.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import HeartbeatData, ProducerData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from bolide.remoting import RemotingClient, RequestContext
from bolide.store.record import decode_record, read_total_size
from bolide.testing.servers import Servers, running_servers

TIMEOUT = 20.0
GROUP = "tx_pg"
TOPIC = "TxOrders"
COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0


def run(tmp_path: Path, test: Callable[[Servers, RemotingClient], Awaitable[None]],
        **broker_options: object) -> None:
    async def main() -> None:
        async with (running_servers(tmp_path / "store", **broker_options) as servers,
                    RemotingClient() as client):
            await asyncio.wait_for(test(servers, client), TIMEOUT)

    asyncio.run(main())


def tx_props(i: int, *, tran: str = "true") -> str:
    return (f"TRAN_MSG\x01{tran}\x02PGROUP\x01{GROUP}\x02TAGS\x01TagTx\x02KEYS\x01k{i}\x02"
            f"UNIQ_KEY\x01{i:032X}\x02WAIT\x01true\x02")


def born(i: int) -> int:
    """A born timestamp of now (a half message older than fileReservedTime is discarded)."""
    return int(time.time() * 1000) // 1000 * 1000 + i


async def send_half(client: RemotingClient, addr: str, i: int, queue_id: int = 1,
                    tran: str = "true", extra: str = "") -> RemotingCommand:
    header = SendMessageRequestHeader(producer_group=GROUP, topic=TOPIC, default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=queue_id,
                                      sys_flag=4 if tran == "true" else 0,
                                      born_timestamp=born(i), flag=7,
                                      properties=tx_props(i, tran=tran) + extra)
    return await client.invoke(addr, RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, header.to_v2(), b"tx-%d" % i))


def end_request(state: int, *, tran_state_table_offset: int, commit_log_offset: int, msg_id: str,
                group: str = GROUP, from_check: bool = False) -> RemotingCommand:
    header = EndTransactionRequestHeader(producer_group=group,
                                         tran_state_table_offset=tran_state_table_offset,
                                         commit_log_offset=commit_log_offset,
                                         commit_or_rollback=state, from_transaction_check=from_check,
                                         msg_id=msg_id, transaction_id=msg_id)
    return RemotingCommand.request(RequestCode.END_TRANSACTION, header)


def end_for_send(state: int, sent: RemotingCommand, **changes: object) -> RemotingCommand:
    """END_TRANSACTION as the Java producer builds it from the send response."""
    offset = int(sent.ext_fields["msgId"][16:], 16)  # the offset msgId's CommitLog offset
    fields: dict = dict(tran_state_table_offset=int(sent.ext_fields["queueOffset"]),
                        commit_log_offset=offset, msg_id=sent.ext_fields["msgId"])
    fields.update(changes)
    return end_request(state, **fields)


def records(body: bytes) -> list[MessageExt]:
    out, pos = [], 0
    while pos < len(body):
        out.append(decode_record(body, pos))
        pos += read_total_size(body, pos)
    return out


async def pull(client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int = 0,
               suspend_ms: int = 0) -> RemotingCommand:
    header = PullMessageRequestHeader(consumer_group="tx_cg", topic=topic, queue_id=queue_id,
                                      queue_offset=offset, max_msg_nums=32,
                                      sys_flag=6 if suspend_ms else 4, commit_offset=0,
                                      suspend_timeout_millis=suspend_ms, subscription="*",
                                      sub_version=0)
    return await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header),
                               suspend_ms + 5000)


async def dispatched(s: Servers) -> None:
    """Every message is in its queue, and the wall clock is past the store time of the last
    one: a check run only looks at messages stored before the millisecond it starts."""
    assert await asyncio.to_thread(s.broker.store.wait_dispatched, 10.0)
    last_ms = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 <= last_ms:
        await asyncio.sleep(0.001)


async def heartbeat(client: RemotingClient, addr: str) -> None:
    beat = HeartbeatData(client_id="127.0.0.1@tx", producer_data_set=[ProducerData(group_name=GROUP)])
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=beat.encode()))
    assert r.code == ResponseCode.SUCCESS, r


def checking_client() -> tuple[RemotingClient, asyncio.Queue[RemotingCommand]]:
    """A client that records the CHECK_TRANSACTION_STATE requests the broker sends it."""
    checks: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    async def on_check(ctx: RequestContext, request: RemotingCommand) -> None:
        assert request.is_oneway
        checks.put_nowait(request)

    client = RemotingClient()
    client.register(RequestCode.CHECK_TRANSACTION_STATE, on_check)
    return client, checks


async def answer_check(client: RemotingClient, addr: str, check: RemotingCommand,
                       state: int) -> RemotingCommand:
    """END_TRANSACTION from a check, as the Java producer sends it."""
    header = check.read_header(CheckTransactionStateRequestHeader)
    msg = decode_record(check.body_bytes())
    request = end_request(state, tran_state_table_offset=header.tran_state_table_offset,
                          commit_log_offset=header.commit_log_offset,
                          msg_id=msg.properties["UNIQ_KEY"], from_check=True)
    return await client.invoke(addr, request)


def test_half_message_is_invisible_until_commit(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        addr = s.broker_addr
        sent = await send_half(client, addr, 1)
        assert sent.code == ResponseCode.SUCCESS, sent
        assert sent.ext_fields["queueId"] == "1" and sent.ext_fields["queueOffset"] == "0"
        assert sent.ext_fields["transactionId"] == f"{1:032X}"  # its UNIQ_KEY, as RocketMQ answers
        half_offset = int(sent.ext_fields["msgId"][16:], 16)
        half = s.broker.store.look_message_by_offset(half_offset)
        assert half is not None and (half.topic, half.queue_id) == (TRANS_HALF_TOPIC, 0)
        assert half.properties["REAL_TOPIC"] == TOPIC and half.properties["REAL_QID"] == "1"
        assert half.sys_flag & 0xC == 0 and "WAIT" not in half.properties
        await dispatched(s)
        assert (await pull(client, addr, TOPIC, 1)).code == ResponseCode.PULL_NOT_FOUND

        for wrong, remark in ((dict(group="other_pg"), "The producer group wrong"),
                              (dict(tran_state_table_offset=5), "The transaction state table offset wrong"),
                              (dict(commit_log_offset=half_offset + 1),
                               "Find prepared transaction message failed")):
            r = await client.invoke(addr, end_for_send(COMMIT, sent, **wrong))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        await dispatched(s)
        assert (await pull(client, addr, TOPIC, 1)).code == ResponseCode.PULL_NOT_FOUND

        r = await client.invoke(addr, end_for_send(COMMIT, sent))
        assert r.code == ResponseCode.SUCCESS, r
        got = await pull(client, addr, TOPIC, 1, suspend_ms=5000)
        assert got.code == ResponseCode.SUCCESS, got
        [msg] = records(got.body_bytes())
        assert (msg.topic, msg.queue_id, msg.queue_offset, msg.body) == (TOPIC, 1, 0, b"tx-1")
        assert msg.sys_flag & 0xC == 8 and msg.prepared_transaction_offset == half_offset
        assert msg.flag == 7 and msg.born_timestamp % 1000 == 1
        props = msg.properties
        assert props["UNIQ_KEY"] == f"{1:032X}" and props["TAGS"] == "TagTx" and props["KEYS"] == "k1"
        assert props["TRAN_MSG"] == "true" and props["PGROUP"] == GROUP  # kept, as RocketMQ does
        await dispatched(s)
        ops = s.broker.store.get_message(CHECK_GROUP, TRANS_OP_HALF_TOPIC, 0, 0)
        assert [(m.body, m.tags) for m in ops.messages] == [(b"0", "d")]

    run(tmp_path, test)


def test_rollback_never_shows_and_ended_messages_are_not_checked(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        addr = s.broker_addr
        first, second = await send_half(client, addr, 1), await send_half(client, addr, 2)
        assert (await client.invoke(addr, end_for_send(ROLLBACK, first))).code == ResponseCode.SUCCESS
        assert (await client.invoke(addr, end_for_send(COMMIT, second))).code == ResponseCode.SUCCESS
        got = await pull(client, addr, TOPIC, 1, suspend_ms=5000)
        assert [m.body for m in records(got.body_bytes())] == [b"tx-2"]
        await dispatched(s)
        assert s.broker.store.get_max_offset_in_queue(TOPIC, 1) == 1
        report = await s.broker.transaction_check.check_once()  # timeout 0: everything is due
        assert (report.checked, report.skipped_done, report.discarded) == (0, 2, 0)
        assert s.broker.offsets.query(CHECK_GROUP, TRANS_HALF_TOPIC, 0) == 2
        assert s.broker.offsets.query(CHECK_GROUP, TRANS_OP_HALF_TOPIC, 0) == 2
        assert s.broker.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 2  # nothing put back

    run(tmp_path, test, transaction_timeout_ms=0)


def test_unknown_state_is_checked_and_committed_from_the_check(tmp_path: Path) -> None:
    async def test(s: Servers, _: RemotingClient) -> None:
        addr = s.broker_addr
        producer, checks = checking_client()
        async with producer:
            await heartbeat(producer, addr)
            sent = await send_half(producer, addr, 3, queue_id=2)
            await producer.invoke_oneway(addr, end_for_send(UNKNOWN, sent))  # no answer to 0
            check = await checks.get()  # the service runs every 100 ms
            header = check.read_header(CheckTransactionStateRequestHeader)
            msg = decode_record(check.body_bytes())
            assert (msg.topic, msg.queue_id, msg.body) == (TOPIC, 2, b"tx-3")
            assert msg.properties["PGROUP"] == GROUP and msg.properties["TRANSACTION_CHECK_TIMES"] == "1"
            assert header.msg_id == header.transaction_id == f"{3:032X}"
            # it is about the copy put back in the half queue, not the original
            assert header.tran_state_table_offset == msg.queue_offset == 1
            assert header.commit_log_offset == msg.commit_log_offset > int(sent.ext_fields["msgId"][16:], 16)
            assert header.offset_msg_id[16:] == f"{header.commit_log_offset:016X}"
            r = await answer_check(producer, addr, check, COMMIT)
            assert r.code == ResponseCode.SUCCESS, r
            got = await pull(producer, addr, TOPIC, 2, suspend_ms=5000)
            assert [m.body for m in records(got.body_bytes())] == [b"tx-3"]
        assert checks.empty()  # transactionCheckMax=1: asked once

    run(tmp_path, test, transaction_timeout_ms=200, transaction_check_interval_ms=100,
        transaction_check_max=1)


def test_unanswered_checks_end_in_the_check_max_topic(tmp_path: Path) -> None:
    async def test(s: Servers, _: RemotingClient) -> None:
        addr = s.broker_addr
        producer, checks = checking_client()
        async with producer:
            await heartbeat(producer, addr)
            sent = await send_half(producer, addr, 4)
            assert sent.code == ResponseCode.SUCCESS
            store = s.broker.store
            while store.get_max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0) == 0:
                await dispatched(s)
                await s.broker.transaction_check.check_once()
                await asyncio.sleep(0)
            # the checks are oneway: the second may still be on its way when the message moves
            received = [await checks.get(), await checks.get()]
            received += [checks.get_nowait() for _ in range(checks.qsize())]
            assert (await pull(producer, addr, TOPIC, 1)).code != ResponseCode.SUCCESS
        assert [decode_record(c.body_bytes()).properties["TRANSACTION_CHECK_TIMES"]
                for c in received] == ["1", "2"]
        moved = store.get_message("x", TRANS_CHECK_MAX_TIME_TOPIC, 0, 0).messages
        assert [(m.body, m.properties["REAL_TOPIC"]) for m in moved] == [(b"tx-4", TOPIC)]

    run(tmp_path, test, transaction_timeout_ms=0, transaction_check_max=2)


def test_custom_first_check_time_defers_only_that_message(tmp_path: Path) -> None:
    async def test(s: Servers, _: RemotingClient) -> None:
        addr = s.broker_addr
        producer, checks = checking_client()
        async with producer:
            await heartbeat(producer, addr)
            patient = await send_half(producer, addr, 8, extra="CHECK_IMMUNITY_TIME_IN_SECONDS\x013600\x02")
            await send_half(producer, addr, 9)
            await dispatched(s)
            report = await s.broker.transaction_check.check_once()
            assert report.checked == 1
            check = await checks.get()
            assert decode_record(check.body_bytes()).body == b"tx-9"
            r = await answer_check(producer, addr, check, ROLLBACK)
            assert r.code == ResponseCode.SUCCESS
            # the patient one was put back for later; its producer commits the original
            r = await producer.invoke(addr, end_for_send(COMMIT, patient))
            assert r.code == ResponseCode.SUCCESS
            await dispatched(s)
            while s.broker.offsets.query(CHECK_GROUP, TRANS_HALF_TOPIC, 0) != 4:
                report = await s.broker.transaction_check.check_once()
                assert report.checked == 0 and report.discarded == 0
                await dispatched(s)
            assert checks.empty()
            assert s.broker.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 4

    run(tmp_path, test, transaction_timeout_ms=0)


def test_pending_half_messages_are_checked_after_a_restart(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"

    async def first_run() -> None:
        async with running_servers(store_dir) as s, RemotingClient() as client:
            sent = await send_half(client, s.broker_addr, 5)
            assert sent.code == ResponseCode.SUCCESS

    async def second_run() -> None:
        async with running_servers(store_dir, transaction_timeout_ms=0,
                                   transaction_check_interval_ms=100,
                                   transaction_check_max=1) as s:
            producer, checks = checking_client()
            async with producer:
                await heartbeat(producer, s.broker_addr)
                check = await checks.get()
                assert decode_record(check.body_bytes()).body == b"tx-5"
                r = await answer_check(producer, s.broker_addr, check, COMMIT)
                assert r.code == ResponseCode.SUCCESS
                got = await pull(producer, s.broker_addr, TOPIC, 1, suspend_ms=5000)
                assert [m.body for m in records(got.body_bytes())] == [b"tx-5"]

    asyncio.run(asyncio.wait_for(first_run(), TIMEOUT))
    asyncio.run(asyncio.wait_for(second_run(), TIMEOUT))
    offsets = (store_dir / "config" / "consumerOffset.json").read_text()  # the check's progress
    assert f'"{TRANS_HALF_TOPIC}@{CHECK_GROUP}"' in offsets


def test_rejected_or_not_transactional(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        r = await send_half(client, s.broker_addr, 6)
        assert r.code == ResponseCode.NO_PERMISSION and "transaction" in (r.remark or "")
        plain = await send_half(client, s.broker_addr, 7, tran="false")  # TRAN_MSG=false: normal
        assert plain.code == ResponseCode.SUCCESS
        got = await pull(client, s.broker_addr, TOPIC, 1, suspend_ms=5000)
        assert [m.body for m in records(got.body_bytes())] == [b"tx-7"]
        assert s.broker.topics.get(TRANS_HALF_TOPIC) is None

    run(tmp_path, test, reject_transaction_message=True)
