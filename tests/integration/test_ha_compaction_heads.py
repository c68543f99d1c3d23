"""A slave started after its master compacted a topic: its CommitLog copy starts at the master's
last segment, so it pulls the older records the master keeps in its compaction log into its own
(RocketMQ's slave does the same), and a consumer failing over to it reads the topic from offset 0
as from the master: the newest value per key."""

from __future__ import annotations

import asyncio
from pathlib import Path

import ha_cluster
from ha_cluster import Cluster, wait_until

from bolide.client import Admin, Message, Producer
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import PullMessageRequestHeader
from bolide.store.record import decode_record, read_total_size

TOPIC = "CompactedOnSlave"
KEYS, ROUNDS = 4, 8


async def read_all(c: Cluster, addr: str, end: int) -> list[tuple[int, bytes]]:
    """Every record a broker answers for queue 0 from offset 0, as (queue offset, body)."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while offset < end:
        header = PullMessageRequestHeader(
            consumer_group="cg", topic=TOPIC, queue_id=0, queue_offset=offset, max_msg_nums=32,
            sys_flag=4, commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0)
        r = await c.client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header))
        assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY), r
        body, pos = r.body_bytes(), 0
        while pos < len(body):
            msg = decode_record(body, pos)
            out.append((msg.queue_offset, msg.body))
            pos += read_total_size(body, pos)
        offset = int(r.ext_fields["nextBeginOffset"])
    return out


def test_a_late_slave_copies_the_compacted_records_before_its_commitlog(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        master = c.master.store
        async with Admin(c.namesrv_addr) as admin:
            await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1,
                                     attributes="+cleanup.policy=COMPACTION")
        async with Producer(c.namesrv_addr, "compacted-writers") as producer:
            for r in range(ROUNDS):
                for k in range(KEYS):
                    await producer.send(Message(TOPIC, b"v-%d-%d" % (k, r) + b"." * 200, keys=f"k{k}"))
        end = ROUNDS * KEYS
        assert await asyncio.to_thread(master.compact_now) >= 1
        slave = (await c.start_slave(slave_sync_interval_ms=200)).store
        await wait_until(lambda: slave.get_max_offset_in_queue(TOPIC, 0) == end, 20)
        start = slave.get_min_offset_in_queue(TOPIC, 0)
        assert start > 0  # the slave's copy begins at the master's last segment
        compaction = slave.compaction
        assert compaction is not None
        await wait_until(lambda: compaction.ingested_end(TOPIC, 0) == end, 20)
        from_master = await read_all(c, c.master.broker_addr, end)
        from_slave = await read_all(c, c.the_slave.broker_addr, end)
        assert from_slave == from_master
        assert from_slave[0][0] < start and len(from_slave) < end  # compacted, from before the copy
        newest = {body[:4]: body for _, body in from_slave}
        assert newest == {b"v-%d-" % k: b"v-%d-%d" % (k, ROUNDS - 1) + b"." * 200 for k in range(KEYS)}

    ha_cluster.run(tmp_path, test, with_slave=False,
                   store_options={"mapped_file_size_commit_log": 4096,
                                  "compaction_cq_mapped_file_size": 46 * 8,
                                  "compaction_mapped_file_size": 64 * 1024})
