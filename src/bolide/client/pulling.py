"""One PULL_MESSAGE for a queue and what a consumer does with the answer (Java PullAPIWrapper):
pull from the broker id the previous answer suggested (``suggestWhichBrokerId``: a slave when
the consumer is far behind and the broker has slaveReadEnable; any address of the broker name
when that one is not in the route, e.g. a slave while the master is down), decode the records,
decompress bodies, drop messages the tag filter does not want, put the original topic back on
messages of the group's retry topic."""

from __future__ import annotations

from collections.abc import Sequence

from bolide.client.errors import NoRouteError
from bolide.client.filtering import matches
from bolide.client.instance import ClientInstance
from bolide.client.results import PullResult, PullStatus
from bolide.common import properties as P
from bolide.common.compression import decompress_message
from bolide.common.message import MessageExt
from bolide.common.records import RecordFormatError, decode_records
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.errors import ProtocolError
from bolide.protocol import RemotingCommand, ResponseCode
from bolide.protocol.bodies.client import MessageQueue, SubscriptionData
from bolide.protocol.bodies.route import MASTER_ID
from bolide.protocol.headers.consumer import (
    PULL_COMMIT_OFFSET,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    PullMessageRequestHeader,
)

_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def restore_retry_topic(msg: MessageExt, group: str) -> None:
    """A message of ``%RETRY%<group>`` gets back the topic it was first sent to."""
    original = msg.properties.get(P.RETRY_TOPIC)
    if original and msg.topic == RETRY_GROUP_TOPIC_PREFIX + group:
        msg.topic = original


async def pull_raw(instance: ClientInstance, group: str, mq: MessageQueue, offset: int,
                   sub: SubscriptionData, *, max_nums: int, suspend_ms: int, timeout_ms: int,
                   commit_offset: int | None = None) -> tuple[PullResult, bytes]:
    """Pull from ``offset`` of ``mq``; the broker may hold the call up to ``suspend_ms``.
    ``commit_offset`` rides along to a master (slaves do not store it). Returns the result
    (no messages) and the records as the broker sent them (empty unless FOUND): they are
    not decoded, decompressed or filtered by tag."""
    addr, slave = await _pull_address(instance, mq)
    sys_flag = PULL_SUBSCRIPTION
    if suspend_ms > 0:
        sys_flag |= PULL_SUSPEND
    if commit_offset is not None and commit_offset > 0 and not slave:
        sys_flag |= PULL_COMMIT_OFFSET
    header = _pull_header(group, mq, offset, sub, max_nums, sys_flag,
                          commit_offset if commit_offset is not None and sys_flag & PULL_COMMIT_OFFSET else 0,
                          suspend_ms)
    return _raw_result(instance, mq, offset, await instance.api.pull(addr, header, timeout_ms))


async def pull_raw_many(instance: ClientInstance, group: str, mq: MessageQueue,
                        offsets: Sequence[int], sub: SubscriptionData, *, max_nums: int,
                        timeout_ms: int) -> list[tuple[PullResult, bytes]]:
    """:func:`pull_raw` from each of ``offsets`` (no suspension, no commit): the requests are
    written together and answered in order, without a task each."""
    if not offsets:
        return []
    addr, _ = await _pull_address(instance, mq)
    header = _pull_header(group, mq, offsets[0], sub, max_nums, PULL_SUBSCRIPTION, 0, 0)
    responses = await instance.api.pull_many(addr, header, offsets, timeout_ms)
    return [_raw_result(instance, mq, offset, response)
            for offset, response in zip(offsets, responses, strict=True)]


def _pull_header(group: str, mq: MessageQueue, offset: int, sub: SubscriptionData, max_nums: int,
                 sys_flag: int, commit_offset: int, suspend_ms: int) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
        max_msg_nums=max_nums, sys_flag=sys_flag, commit_offset=commit_offset,
        suspend_timeout_millis=suspend_ms, subscription=sub.sub_string, sub_version=sub.sub_version,
        expression_type=sub.expression_type, bname=mq.broker_name)


async def _pull_address(instance: ClientInstance, mq: MessageQueue) -> tuple[str, bool]:
    """Where to pull ``mq`` from (the node the broker last suggested), and whether a slave."""
    broker_id = instance.pull_from_which_node.get(mq, MASTER_ID)
    route = await instance.route(mq.topic)
    broker_name = route.broker_of(mq) if route is not None else mq.broker_name
    found = route.subscribe_addr(broker_name, broker_id) if route is not None else None
    if found is None:
        found = instance.subscribe_addr(broker_name, broker_id)
    if found is None:
        raise NoRouteError(f"no address for broker {broker_name!r} of topic {mq.topic!r}: "
                           "wait for the broker to register with the NameServer")
    return found


def _raw_result(instance: ClientInstance, mq: MessageQueue, offset: int,
                response: RemotingCommand) -> tuple[PullResult, bytes]:
    ext = response.ext_fields
    try:
        suggested = int(ext.get("suggestWhichBrokerId", MASTER_ID))
        result = PullResult(_STATUS[response.code], int(ext.get("nextBeginOffset", offset)),
                            int(ext.get("minOffset", 0)), int(ext.get("maxOffset", 0)))
        if ext.get("offsetDelta") is not None:
            result.offset_delta = int(ext["offsetDelta"])
    except ValueError:
        names = ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset", "offsetDelta")
        fields = {k: ext.get(k) for k in names}
        raise ProtocolError(f"the pull answer for {mq} has offsets that are not integers: {fields}") from None
    instance.pull_from_which_node[mq] = suggested
    return result, response.body_bytes() if result.status is PullStatus.FOUND else b""


async def pull(instance: ClientInstance, group: str, mq: MessageQueue, offset: int,
               sub: SubscriptionData, *, max_nums: int, suspend_ms: int, timeout_ms: int,
               commit_offset: int | None = None) -> PullResult:
    """:func:`pull_raw`, then the messages: decoded, decompressed, those the tag filter wants,
    with MIN_OFFSET / MAX_OFFSET and the retry topic restored, and the queue id and offset of
    ``mq`` (a static topic's logic queue: the broker's ``offsetDelta`` added), as the Java client."""
    result, body = await pull_raw(instance, group, mq, offset, sub, max_nums=max_nums,
                                  suspend_ms=suspend_ms, timeout_ms=timeout_ms,
                                  commit_offset=commit_offset)
    if result.status is PullStatus.FOUND:
        try:
            msgs = decode_records(body)
        except RecordFormatError as exc:
            raise ProtocolError(f"the pull answer of broker {mq.broker_name} is malformed: {exc}") from None
        kept = []
        for msg in msgs:
            if not matches(sub, msg):
                continue
            decompress_message(msg)
            msg.properties[P.MIN_OFFSET] = str(result.min_offset)
            msg.properties[P.MAX_OFFSET] = str(result.max_offset)
            restore_retry_topic(msg, group)
            msg.queue_id = mq.queue_id
            if result.offset_delta is not None:
                msg.queue_offset += result.offset_delta
            kept.append(msg)
        result.messages = kept
    return result
