"""Message traces written by Bolide's producers and push consumers (``ClientConfig(...,
enable_trace=True)``), as RocketMQ's clients write them: a ``Pub`` context per stored send (per
message of a batch; a oneway send has no result, so no trace, as with the Java client), an
``EndTransaction`` per transaction a transactional producer ends (at once or when the broker
checks), a ``Recall`` per timer message recall answered, a ``SubBefore`` and a ``SubAfter`` per
batch handed to a listener (a simple consumer: a SubBefore per receive, a SubAfter per message
acknowledged), sent in batches to the trace topic (``RMQ_SYS_TRACE_TOPIC``, or ``trace_topic``)
by an inner producer of group ``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>``, each trace
message keyed by the traced messages' ids and keys so that ``queryMsgTraceById`` finds it.

Traces are advice: they are sent after the sends they trace, at most :data:`BATCH` contexts or
:data:`FLUSH_S` seconds later; at most :data:`MAX_PENDING` wait, later ones are dropped and
counted, and a failed trace send is logged, not raised. Unlike the Java client, closing the
producer or consumer sends the traces still waiting before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bolide.client.results import SendResult, SendStatus
from bolide.common import properties as P
from bolide.common.message import Message, MessageExt
from bolide.common.waiting import wait_for
from bolide.protocol.headers.send import DEFAULT_REGION
from bolide.protocol.trace import (
    END_TRANSACTION,
    PUB,
    RECALL,
    SUB_AFTER,
    SUB_BEFORE,
    TRACE_TOPIC,
    TraceBean,
    TraceContext,
    encode_trace_context,
)

if TYPE_CHECKING:
    from bolide.client.config import ClientConfig
    from bolide.client.producer import Producer

log = logging.getLogger(__name__)

BATCH = 20  # contexts that make a batch go at once
FLUSH_S = 1.0  # the longest a context waits for its batch
MAX_PENDING = 2048
MAX_TRACE_BYTES = 118_000  # trace data per trace message (RocketMQ: 128,000 less a margin)
NORMAL, HALF, COMMIT, DELAY = 0, 1, 2, 3  # RocketMQ's MessageType ordinals
_DELAY_KEYS = (P.DELAY_TIME_LEVEL, P.TIMER_DELIVER_MS, P.TIMER_DELAY_MS, P.TIMER_DELAY_SEC)
SUCCESS_CODE, FAILED_CODE = 0, 4  # RocketMQ's ConsumeReturnType ordinals


def _keys(msg: Message) -> str:
    return " ".join(msg.keys)


def message_type(msg: Message) -> int:
    """RocketMQ's MessageType of a send: a transaction's half message, delayed (a level or a
    timer) or normal."""
    if msg.properties.get(P.TRANSACTION_PREPARED) == "true":
        return HALF
    return DELAY if any(k in msg.properties for k in _DELAY_KEYS) else NORMAL


class TraceDispatcher:
    """Collects a client's trace contexts and sends them to the trace topic in batches."""

    def __init__(self, config: ClientConfig, group: str, kind: str) -> None:
        self.group = group
        self.trace_topic = config.trace_topic or TRACE_TOPIC
        self._config = config.replace(enable_trace=False,
                                      instance_name=f"PID_CLIENT_INNER_TRACE_PRODUCER-{os.getpid()}")
        self._producer_group = f"_INNER_TRACE_PRODUCER-{group}-{kind}"
        self._pending: list[TraceContext] = []
        self._producer: Producer | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._closed = False
        self.dropped = 0  # contexts left out: too many waiting, or the client closing
        self.failed = 0  # trace messages whose send failed

    # -- contexts -------------------------------------------------------------------------
    def on_send(self, msg: Message, result: SendResult, started_ms: int, cost_ms: int, *,
                store_host: str) -> None:
        """A send of ``msg`` was answered with ``result`` (a Pub context)."""
        if msg.topic == self.trace_topic:
            return
        bean = TraceBean(result.msg_id, msg.topic, msg.tags or "", _keys(msg), store_host, len(msg.body),
                         message_type(msg), result.offset_msg_id)
        self._append(TraceContext(PUB, started_ms, result.region_id or DEFAULT_REGION, self.group,
                                  cost_ms=cost_ms, success=result.status is SendStatus.SEND_OK,
                                  beans=[bean]))

    def on_send_batch(self, messages: Sequence[Message], result: SendResult, started_ms: int, cost_ms: int,
                      *, store_host: str) -> None:
        """A batch send was answered with ``result``: a Pub context per message, each with its
        own ids (the result's offset ids come comma-separated, in the batch's order), so that
        each message's trace is found by its id (the Java client writes one context for the
        whole batch, under the joined ids)."""
        if not messages or messages[0].topic == self.trace_topic:
            return
        offset_ids = result.offset_msg_id.split(",")
        success = result.status is SendStatus.SEND_OK
        region = result.region_id or DEFAULT_REGION
        for i, msg in enumerate(messages):
            msg_id = msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
            bean = TraceBean(msg_id, msg.topic, msg.tags or "", _keys(msg), store_host, len(msg.body),
                             message_type(msg), offset_ids[i] if i < len(offset_ids) else "")
            self._append(TraceContext(PUB, started_ms, region, self.group, cost_ms=cost_ms, success=success,
                                      beans=[bean]))

    def on_recall(self, topic: str, msg_id: str, success: bool, region: str | None) -> None:
        """The broker answered a recall of timer message ``msg_id`` (a Recall context)."""
        self._append(TraceContext(RECALL, int(time.time() * 1000), region or DEFAULT_REGION, self.group,
                                  success=success, beans=[TraceBean(msg_id, topic)]))

    def on_end_transaction(self, msg: Message, msg_id: str, state: str, *, region: str | None,
                           store_host: str, from_check: bool) -> None:
        """A transaction's end was sent for half message ``msg_id`` (an EndTransaction
        context; ``state`` is RocketMQ's name: COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW)."""
        bean = TraceBean(msg_id, msg.topic, msg.tags or "", _keys(msg), store_host, msg_type=COMMIT,
                         transaction_id=msg_id, transaction_state=state, from_transaction_check=from_check)
        self._append(TraceContext(END_TRANSACTION, int(time.time() * 1000), region or DEFAULT_REGION,
                                  self.group, beans=[bean]))

    def before_consume(self, msgs: Sequence[MessageExt]) -> TraceContext | None:
        """A batch is handed to the listener (a SubBefore context); what :meth:`after_consume`
        needs, or None when no message of it is traced (``TRACE_ON=false``)."""
        beans = [TraceBean(m.msg_id or m.offset_msg_id, m.topic, m.tags or "", _keys(m),
                           retry_times=m.reconsume_times)
                 for m in msgs if m.properties.get(P.TRACE_SWITCH) != "false" and m.topic != self.trace_topic]
        if not beans:
            return None
        region = next((m.properties[P.MSG_REGION] for m in msgs if P.MSG_REGION in m.properties),
                      DEFAULT_REGION)
        ctx = TraceContext(SUB_BEFORE, int(time.time() * 1000), region, self.group,
                           request_id=uuid.uuid4().hex.upper(), beans=beans)
        self._append(ctx)
        return ctx

    def after_consume(self, before: TraceContext, success: bool, cost_ms: float, count: int) -> None:
        """The listener is done with the batch of ``before`` (a SubAfter context; the time is
        per message, as RocketMQ records it)."""
        self._append(TraceContext(SUB_AFTER, int(time.time() * 1000), before.region_id, self.group,
                                  request_id=before.request_id, cost_ms=int(cost_ms / max(count, 1)),
                                  success=success, context_code=SUCCESS_CODE if success else FAILED_CODE,
                                  beans=before.beans))

    def after_consume_one(self, before: TraceContext, msg_id: str, cost_ms: float) -> None:
        """A message of the batch of ``before`` was acknowledged (a simple consumer's ack: a
        successful SubAfter of that message alone)."""
        beans = [b for b in before.beans if b.msg_id == msg_id]
        if beans:
            self._append(TraceContext(SUB_AFTER, int(time.time() * 1000), before.region_id, self.group,
                                      request_id=before.request_id, cost_ms=int(cost_ms), success=True,
                                      context_code=SUCCESS_CODE, beans=beans))

    def _append(self, ctx: TraceContext) -> None:
        if self._closed or len(self._pending) >= MAX_PENDING:
            self.dropped += 1
            return
        self._pending.append(ctx)
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())
        if len(self._pending) >= BATCH and self._wake is not None:
            self._wake.set()

    # -- sending ------------------------------------------------------------------------------
    async def _run(self) -> None:
        assert self._wake is not None
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await wait_for(self._wake.wait(), FLUSH_S)
            self._wake.clear()
            await self._flush()

    async def _flush(self) -> None:
        """Send every waiting context, packed into as few trace messages as fit."""
        while self._pending:
            batch, self._pending = self._pending, []
            data: list[str] = []
            keys: list[str] = []
            size = 0
            for ctx in batch:
                text, ctx_keys = encode_trace_context(ctx)
                if data and size + len(text) > MAX_TRACE_BYTES:
                    await self._send("".join(data), keys)
                    data, keys, size = [], [], 0
                data.append(text)
                keys += [k for k in ctx_keys if k not in keys]
                size += len(text)
            if data:
                await self._send("".join(data), keys)

    async def _send(self, data: str, keys: list[str]) -> None:
        from bolide.client.producer import Producer  # the producer module imports this one

        try:
            if self._producer is None:
                self._producer = Producer(self._config, group=self._producer_group, retry_times=1)
            msg = Message(self.trace_topic, data.encode("utf-8"))
            msg.properties[P.KEYS] = " ".join(keys)
            await self._producer.send(msg)
        except Exception as exc:  # a trace never fails the client
            self.failed += 1
            log.warning("sending a trace message to %s failed: %s", self.trace_topic, exc)

    async def close(self) -> None:
        """Send the contexts still waiting, then stop (the client is closing)."""
        if self._closed:
            return
        task, self._task = self._task, None
        self._closed = True
        if task is not None:
            assert self._wake is not None
            self._wake.set()
            await asyncio.gather(task, return_exceptions=True)
        await self._flush()
        if self._producer is not None:
            await self._producer.close()
