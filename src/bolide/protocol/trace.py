"""Message traces as RocketMQ's clients write them to the trace topic (``RMQ_SYS_TRACE_TOPIC``,
its TraceDataEncoder): each trace message's body holds contexts separated by ``\\x02``, each
context's fields separated by ``\\x01``, and its keys are the traced messages' ids and keys, so
a trace is found through the index by the message id (mqadmin queryMsgTraceById).

Context types: ``Pub`` (a send), ``SubBefore`` / ``SubAfter`` (before and after a consumer's
listener ran), ``EndTransaction`` and ``Recall``. Decoding takes the older layouts too (a Pub
without the offset message id; a SubAfter without the time and group).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
PUB, SUB_BEFORE, SUB_AFTER = "Pub", "SubBefore", "SubAfter"
END_TRANSACTION, RECALL = "EndTransaction", "Recall"
# RocketMQ's MessageType, by ordinal
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg")


@dataclass(slots=True)
class TraceBean:
    """The traced message as a context names it."""

    msg_id: str
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    body_length: int = 0
    msg_type: int = 0  # an ordinal of MESSAGE_TYPES
    offset_msg_id: str = ""
    client_host: str = ""
    retry_times: int = 0
    transaction_id: str = ""
    transaction_state: str = ""
    from_transaction_check: bool = False


@dataclass(slots=True)
class TraceContext:
    """One traced step: a send, a consumption's start or end, a transaction's end, a recall."""

    type: str
    timestamp: int = 0
    region_id: str = ""
    group: str = ""
    request_id: str = ""
    cost_ms: int = 0
    success: bool = True
    context_code: int = 0
    beans: list[TraceBean] = field(default_factory=list)


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


def _context(line: list[str]) -> TraceContext | None:
    kind = line[0]
    if kind == PUB and len(line) >= 12:
        bean = TraceBean(line[5], line[4], line[6], line[7], line[8], int(line[9]), msg_type=int(line[11]))
        ctx = TraceContext(PUB, int(line[1]), line[2], line[3], cost_ms=int(line[10]), beans=[bean])
        if len(line) == 13:
            ctx.success = _bool(line[12])
        elif len(line) >= 14:
            bean.offset_msg_id, ctx.success = line[12], _bool(line[13])
            if len(line) >= 15:
                bean.client_host = line[14]
        return ctx
    if kind == SUB_BEFORE and len(line) >= 8:
        bean = TraceBean(line[5], keys=line[7], retry_times=int(line[6]))
        return TraceContext(SUB_BEFORE, int(line[1]), line[2], line[3], request_id=line[4], beans=[bean])
    if kind == SUB_AFTER and len(line) >= 6:
        ctx = TraceContext(SUB_AFTER, request_id=line[1], cost_ms=int(line[3]), success=_bool(line[4]),
                           beans=[TraceBean(line[2], keys=line[5])])
        if len(line) >= 7 and line[6]:
            ctx.context_code = int(line[6])
        if len(line) >= 9:
            ctx.timestamp, ctx.group = int(line[7]), line[8]
        return ctx
    if kind == END_TRANSACTION and len(line) >= 13:
        bean = TraceBean(line[5], line[4], line[6], line[7], line[8], msg_type=int(line[9]),
                         transaction_id=line[10], transaction_state=line[11],
                         from_transaction_check=_bool(line[12]))
        return TraceContext(END_TRANSACTION, int(line[1]), line[2], line[3], beans=[bean])
    if kind == RECALL and len(line) >= 7:
        return TraceContext(RECALL, int(line[1]), line[2], line[3], success=_bool(line[6]),
                            beans=[TraceBean(line[5], line[4])])
    return None


def decode_trace_data(text: str) -> list[TraceContext]:
    """The contexts of a trace message's body; unknown types and malformed contexts are left
    out (a trace is advice, not data to fail on)."""
    out = []
    for part in text.split(FIELD_SPLITOR):
        if not part:
            continue
        try:
            ctx = _context(part.split(CONTENT_SPLITOR))
        except ValueError:
            continue
        if ctx is not None:
            out.append(ctx)
    return out


def _text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def encode_trace_context(ctx: TraceContext) -> tuple[str, list[str]]:
    """A context as trace data, and the keys its trace message is indexed by (each bean's
    message id and keys), as RocketMQ 5.3's clients encode them."""
    j = CONTENT_SPLITOR.join
    parts = []
    if ctx.type == PUB:
        b = ctx.beans[0]
        parts.append(j(_text(v) for v in (PUB, ctx.timestamp, ctx.region_id, ctx.group, b.topic, b.msg_id,
                                          b.tags, b.keys, b.store_host, b.body_length, ctx.cost_ms,
                                          b.msg_type, b.offset_msg_id, ctx.success)) + FIELD_SPLITOR)
    elif ctx.type == SUB_BEFORE:
        parts += [j(_text(v) for v in (SUB_BEFORE, ctx.timestamp, ctx.region_id, ctx.group, ctx.request_id,
                                       b.msg_id, b.retry_times, b.keys)) + FIELD_SPLITOR for b in ctx.beans]
    elif ctx.type == SUB_AFTER:
        parts += [j(_text(v) for v in (SUB_AFTER, ctx.request_id, b.msg_id, ctx.cost_ms, ctx.success, b.keys,
                                       ctx.context_code, ctx.timestamp, ctx.group)) + FIELD_SPLITOR
                  for b in ctx.beans]
    elif ctx.type == END_TRANSACTION:
        b = ctx.beans[0]
        parts.append(j(_text(v) for v in (END_TRANSACTION, ctx.timestamp, ctx.region_id, ctx.group, b.topic,
                                          b.msg_id, b.tags, b.keys, b.store_host, b.msg_type,
                                          b.transaction_id, b.transaction_state,
                                          b.from_transaction_check)) + FIELD_SPLITOR)
    elif ctx.type == RECALL:
        b = ctx.beans[0]
        parts.append(j(_text(v) for v in (RECALL, ctx.timestamp, ctx.region_id, ctx.group, b.topic, b.msg_id,
                                          ctx.success)) + FIELD_SPLITOR)
    else:
        raise ValueError(f"unknown trace context type {ctx.type!r}")
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(b.msg_id)
        keys += [k for k in b.keys.split(" ") if k]
    return "".join(parts), keys
