"""A slave's copy of its master's older records of compacted topics (RocketMQ 5's
CompactionLog.pullMessageFromMaster): a slave's CommitLog copy starts where it first connected
(the start of the master's last segment), so the records a compacted topic keeps from before
that are only in the master's compaction log. For each compacted queue whose copy starts past
offset 0 and whose compaction log is empty, the slave pulls offsets 0 to that start from the
master (served from its compaction log) into its own compaction log, before it copies in the
queue's own records (:meth:`CompactionStore.heads_needed`)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bolide.errors import BolideError
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.consumer import PullMessageRequestHeader
from bolide.store.record import RecordError, parse_record, read_total_size

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

TIMEOUT_MS = 30_000  # as RocketMQ's MessageFetcher
BATCH = 32
FLAG_SUBSCRIPTION = 0x4


class HeadFetchError(BolideError):
    """The master refused a pull of a compacted queue's older records."""


def group_name(topic: str, queue_id: int) -> str:
    """The consumer group the pulls go under: RocketMQ's ``<topic>-<queueId>-pull-group``."""
    return f"{topic}-{queue_id}-pull-group"


def split_records(body: bytes) -> list[tuple[int, bytes]]:
    """A pull answer's records as (queue offset, record bytes); stops at a malformed one."""
    out = []
    pos = 0
    while pos + 4 <= len(body):
        size = read_total_size(body, pos)
        if size <= 0 or pos + size > len(body):
            break
        record = body[pos:pos + size]
        info = parse_record(record, 0, False)
        if isinstance(info, RecordError):
            break
        out.append((info.queue_offset, record))
        pos += size
    return out


async def fetch_head(broker: BrokerController, master_addr: str, topic: str, queue_id: int,
                     end: int) -> int:
    """Pull the master's records of ``topic``/``queue_id`` below queue offset ``end`` into the
    compaction log; the number copied. Raises HeadFetchError or a RemotingError."""
    compaction = broker.store.compaction
    assert compaction is not None
    offset = copied = 0
    while offset < end:
        header = PullMessageRequestHeader(
            consumer_group=group_name(topic, queue_id), topic=topic, queue_id=queue_id,
            queue_offset=offset, max_msg_nums=BATCH, sys_flag=FLAG_SUBSCRIPTION, commit_offset=0,
            suspend_timeout_millis=0, subscription="*", sub_version=0)
        response = await broker.namesrv_client.invoke(
            master_addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header), TIMEOUT_MS)
        try:
            next_begin = int(response.ext_fields["nextBeginOffset"])
        except (KeyError, ValueError):
            raise HeadFetchError(f"the master answered the pull of {topic}-{queue_id} from {offset} "
                                 f"with {response.code} ({response.remark or 'no remark'})") from None
        if response.code == ResponseCode.SUCCESS:
            records = [r for off, r in split_records(response.body_bytes()) if off < end]
            if records:
                copied += await asyncio.to_thread(compaction.put_head, topic, queue_id, records)
        elif response.code not in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED):
            break  # PULL_NOT_FOUND: nothing more on the master
        if next_begin <= offset:
            break
        offset = next_begin
    return copied


async def fetch_heads(broker: BrokerController, master_addr: str) -> int:
    """Fetch every waiting compacted queue's older records from the master; the number of
    queues done. A queue whose fetch fails waits for the next round."""
    compaction = broker.store.compaction
    if compaction is None or not compaction.hold_heads:
        return 0
    done = 0
    for topic, queue_id, end in compaction.heads_needed():
        try:
            copied = await fetch_head(broker, master_addr, topic, queue_id, end)
        except (BolideError, OSError) as exc:
            log.warning("compacted queue %s-%d: its records before offset %d could not be copied "
                        "from the master %s (%s); trying again at the next slave sync",
                        topic, queue_id, end, master_addr, exc)
            continue
        log.info("compacted queue %s-%d: %d records before offset %d copied from the master %s",
                 topic, queue_id, copied, end, master_addr)
        compaction.head_done(topic, queue_id)
        done += 1
    return done
