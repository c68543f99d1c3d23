"""Message traces for :class:`~bolide.client.admin.Admin` (mqadmin queryMsgTraceById): the
trace messages clients wrote to the trace topic for a message id, found through the brokers'
index, decoded into one view per step (sent, consumed by each group, transaction ended,
recalled)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bolide.client.errors import TopicNotExistError
from bolide.protocol.trace import MESSAGE_TYPES, SUB_BEFORE, TRACE_TOPIC, decode_trace_data

if TYPE_CHECKING:
    from bolide.common.message import MessageExt


def _shown(text: str) -> str:
    return "" if text == "null" else text  # Java writes a missing value as "null"


@dataclass(slots=True)
class TraceView:
    """One traced step of a message, as mqadmin queryMsgTraceById shows it: ``type`` Pub,
    SubAfter, EndTransaction or Recall; ``group`` the producer or consumer group;
    ``client_host`` where the trace came from; ``status`` success or failed."""

    type: str
    msg_id: str
    group: str
    client_host: str
    timestamp_ms: int
    cost_ms: int
    status: str
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    offset_msg_id: str = ""
    msg_type: str = ""
    transaction_state: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "msgId": self.msg_id, "group": self.group, "clientHost": self.client_host,
                "timestamp": self.timestamp_ms, "costMs": self.cost_ms, "status": self.status,
                "topic": self.topic, "tags": self.tags, "keys": self.keys, "storeHost": self.store_host,
                "offsetMsgId": self.offset_msg_id, "msgType": self.msg_type,
                "transactionState": self.transaction_state}


def trace_views(msg_id: str, trace_messages: list[MessageExt]) -> list[TraceView]:
    """The steps of ``msg_id`` in trace messages, in time order (SubBefore contexts, which
    their SubAfter completes, are left out as mqadmin does)."""
    views = []
    for trace in trace_messages:
        for ctx in decode_trace_data(trace.body.decode("utf-8", "replace")):
            bean = ctx.beans[0]
            if bean.msg_id != msg_id or ctx.type == SUB_BEFORE:
                continue
            kind = MESSAGE_TYPES[bean.msg_type] if 0 <= bean.msg_type < len(MESSAGE_TYPES) else ""
            views.append(TraceView(
                ctx.type, bean.msg_id, ctx.group, trace.born_host, ctx.timestamp, ctx.cost_ms,
                "success" if ctx.success else "failed", _shown(bean.topic), _shown(bean.tags),
                _shown(bean.keys), _shown(bean.store_host), _shown(bean.offset_msg_id), kind,
                bean.transaction_state))
    return sorted(views, key=lambda v: v.timestamp_ms)


class TraceAdminCalls:
    """Mixed into Admin: needs its ``query_by_key``."""

    if TYPE_CHECKING:
        async def query_by_key(self, topic: str, key: str, *, max_num: int = 64, begin_ms: int = 0,
                               end_ms: int | None = None) -> list[MessageExt]: ...

    async def message_trace(self, msg_id: str, *, trace_topic: str = TRACE_TOPIC, max_num: int = 64,
                            begin_ms: int = 0, end_ms: int | None = None) -> list[TraceView]:
        """The traced steps of a message (its client id, as a send returns it): the trace
        messages of ``trace_topic`` indexed under that id (mqadmin queryMsgTraceById). Empty
        when the producer and consumers did not trace, or the brokers have no trace topic
        (``traceTopicEnable``)."""
        try:
            found = await self.query_by_key(trace_topic, msg_id, max_num=max_num, begin_ms=begin_ms,
                                            end_ms=end_ms)
        except TopicNotExistError as exc:
            raise TopicNotExistError(
                f"no broker serves the trace topic {trace_topic!r}: set traceTopicEnable=true on the "
                "brokers (and enable tracing in the clients), or name the clients' trace topic",
                exc.code) from None
        return trace_views(msg_id, found)
