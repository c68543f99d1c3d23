"""QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33): mqadmin's queryMsgByKey, queryMsgByUniqueKey
and queryMsgById (spec 3.7). Both answer with raw CommitLog records (spec 4.2).
QUERY_CONSUME_QUEUE (321, mqadmin queryCq): the entries of one ConsumeQueue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.protocol.bodies.admin import ConsumeQueueData, QueryConsumeQueueResponseBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import (
    QueryConsumeQueueRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from bolide.remoting import RequestContext
from bolide.store import MessageStore

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

UNIQUE_KEY_QUERY_MAX = 32  # Java's defaultQueryMaxNum, used for every unique-key query
QUERY_CQ_MAX = 10_000  # entries one QUERY_CONSUME_QUEUE answers at most


def record_bytes(store: MessageStore, commit_log_offset: int) -> bytes | None:
    """A copy of the whole record that starts at ``commit_log_offset``; None when no record
    starts there (an offset inside a record, past the end, or already deleted)."""
    msg = store.look_message_by_offset(commit_log_offset)
    if msg is None or msg.commit_log_offset != commit_log_offset or msg.store_size <= 0:
        return None
    view = store.commit_log.read(commit_log_offset, msg.store_size)
    return bytes(view) if view is not None else None


class QueryProcessor:
    """Finds messages by key through the index files, and by CommitLog offset."""

    CODES = (RequestCode.QUERY_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.QUERY_CONSUME_QUEUE)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.VIEW_MESSAGE_BY_ID:
            return self.view_message(request)
        if request.code == RequestCode.QUERY_CONSUME_QUEUE:
            return self.query_consume_queue(request)
        return self.query_message(request)

    def query_message(self, request: RemotingCommand) -> RemotingCommand:
        """Records of ``topic`` whose KEYS hold ``key`` (or whose UNIQ_KEY is ``key`` when
        ``_UNIQUE_KEY_QUERY`` is true) stored within the time range; 22 when there are none."""
        header = request.read_header(QueryMessageRequestHeader)
        store = self.broker.store
        max_num = UNIQUE_KEY_QUERY_MAX if header.unique_key_query else header.max_num
        found = store.query_message(header.topic, header.key, max(max_num, 0),
                                    header.begin_timestamp, header.end_timestamp)
        if header.unique_key_query:
            found = [m for m in found if m.msg_id == header.key]
        records = [r for r in (record_bytes(store, m.commit_log_offset) for m in found) if r is not None]
        index = store.index
        last = index.files[-1] if index is not None and index.files else None
        answer = QueryMessageResponseHeader(
            index_last_update_timestamp=last.end_timestamp if last is not None else 0,
            index_last_update_phyoffset=last.end_phy_offset if last is not None else 0)
        if not records:
            return request.make_response(ResponseCode.QUERY_NOT_FOUND,
                                         "can not find message, maybe time range not correct",
                                         answer)
        return request.make_response(header=answer, body=b"".join(records))

    def view_message(self, request: RemotingCommand) -> RemotingCommand:
        """The record at a CommitLog offset (decoded from an offset message id); 1 when none."""
        header = request.read_header(ViewMessageRequestHeader)
        record = record_bytes(self.broker.store, header.offset)
        if record is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"can not find message by the offset, {header.offset}")
        return request.make_response(body=record)

    def query_consume_queue(self, request: RemotingCommand) -> RemotingCommand:
        """Up to ``count`` (at most 10,000) entries of a ConsumeQueue from ``index``, with the
        queue's bounds and, when ``consumerGroup`` is given, that group's subscription; 1 when
        the store has no such queue. An index outside the queue answers no entries and a remark
        saying so, as Java does."""
        header = request.read_header(QueryConsumeQueueRequestHeader)
        store = self.broker.store
        entries = store.queue_entries(header.topic, header.queue_id, header.index,
                                      max(0, min(header.count, QUERY_CQ_MAX)))
        if entries is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"{header.queue_id}@{header.topic} is not exist!")
        body = QueryConsumeQueueResponseBody(
            max_queue_index=store.get_max_offset_in_queue(header.topic, header.queue_id),
            min_queue_index=store.get_min_offset_in_queue(header.topic, header.queue_id),
            queue_data=[ConsumeQueueData(physic_offset=p, physic_size=n, tags_code=t) for p, n, t in entries])
        if header.consumer_group is not None:
            body.subscription_data = self.broker.clients.subscription(header.consumer_group, header.topic)
            if body.subscription_data is None:
                body.filter_data = f"{header.consumer_group}@{header.topic} is not online!"
        remark = None if entries else (f"Index {header.index} of {header.queue_id}@{header.topic} "
                                       "is not exist!")
        return request.make_response(remark=remark, body=body.encode())
