"""``bolide admin`` commands for messages: queryMsgById, queryMsgByUniqueKey, queryMsgByKey,
queryMsgByOffset, queryMsgTraceById, sendMessage, consumeMessage, printMsg, printMsgByQueue."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click

from bolide.cli.admin_common import (
    admin_options,
    client_config,
    emit,
    fmt_time,
    output_option,
    parse_time,
    run,
    table,
    with_admin,
)
from bolide.client.admin import Admin
from bolide.client.admin_trace import TraceView
from bolide.client.admin_types import body_text, message_dict
from bolide.client.errors import ClientConfigError, MessageNotFoundError, MQBrokerError
from bolide.client.producer import Producer
from bolide.common.message import Message, MessageExt
from bolide.common.msgid import decode_uniq_msg_id
from bolide.protocol.bodies.admin import ConsumeMessageDirectlyResult
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.trace import TRACE_TOPIC

ADMIN_PRODUCER_GROUP = "bolide-admin-producer"


def short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def message_table(msg: MessageExt) -> Any:
    body, encoding = body_text(msg.body)
    rows = [("Topic", msg.topic), ("Tags", msg.tags or ""), ("Keys", " ".join(msg.keys)),
            ("Msg Id", msg.msg_id or ""), ("Offset Msg Id", msg.offset_msg_id), ("Queue ID", msg.queue_id),
            ("Queue Offset", msg.queue_offset), ("CommitLog Offset", msg.commit_log_offset),
            ("Reconsume Times", msg.reconsume_times), ("Born Timestamp", fmt_time(msg.born_timestamp)),
            ("Store Timestamp", fmt_time(msg.store_timestamp)), ("Born Host", msg.born_host),
            ("Store Host", msg.store_host), ("System Flag", msg.sys_flag),
            ("Properties", ", ".join(f"{k}={v}" for k, v in sorted(msg.properties.items()))),
            (f"Body ({encoding}, {len(msg.body)} bytes)", body)]
    return table(f"Message {msg.msg_id or msg.offset_msg_id}", ["field", "value"], rows)


def messages_table(title: str, msgs: list[MessageExt], with_body: bool = True) -> Any:
    return table(title, ["msgId", "queueId", "queueOffset", "tags", "keys", "storeTime", "body"],
                 ([m.msg_id or m.offset_msg_id, m.queue_id, m.queue_offset, m.tags or "", " ".join(m.keys),
                   fmt_time(m.store_timestamp), short(body_text(m.body)[0]) if with_body else ""]
                  for m in msgs))


def emit_messages(output: str, title: str, msgs: list[MessageExt], with_body: bool = True,
                  empty: str | None = None) -> None:
    emit(output, {"count": len(msgs), "messages": [message_dict(m, with_body=with_body) for m in msgs]},
         messages_table(title, msgs, with_body),
         note=f"{len(msgs)} message(s)" if msgs or empty is None else empty)


GROUP = click.option("-g", "--group", help="With -d: have this group's consumer consume the message again.")
CLIENT_ID = click.option("-d", "--client-id",
                         help="With -g: the consumer (client id, see consumerConnection).")


@click.command("queryMsgById")
@admin_options
@click.option("-i", "--msg-id", required=True, help="Offset message id, or client id (UNIQ_KEY) with -t.")
@click.option("-t", "--topic", help="Topic of a client message id.")
@GROUP
@CLIENT_ID
def query_msg_by_id(namesrv: str, output: str, msg_id: str, topic: str | None, group: str | None,
                    client_id: str | None) -> None:
    """A message by id: VIEW_MESSAGE_BY_ID (33), else QUERY_MESSAGE by unique key (12); with
    -g and -d also pushed to that consumer's listener (CONSUME_MESSAGE_DIRECTLY, 309)."""
    show_message(namesrv, output, msg_id, topic, group, client_id)


@click.command("queryMsgByUniqueKey")
@admin_options
@click.option("-i", "--msg-id", required=True, help="The message's client id (UNIQ_KEY, as a send returns).")
@click.option("-t", "--topic", required=True)
@GROUP
@CLIENT_ID
def query_msg_by_unique_key(namesrv: str, output: str, msg_id: str, topic: str, group: str | None,
                            client_id: str | None) -> None:
    """A message of a topic by its client id (QUERY_MESSAGE by unique key, 12); with -g and -d
    also pushed to that consumer's listener (309)."""
    show_message(namesrv, output, msg_id, topic, group, client_id)


def show_message(namesrv: str, output: str, msg_id: str, topic: str | None, group: str | None,
                 client_id: str | None) -> None:
    """Print a message by id, and with ``group`` and ``client_id`` what that consumer made of it."""
    if (group is None) != (client_id is None):
        raise click.UsageError("give both -g GROUP and -d CLIENT_ID to push the message to a consumer")

    async def job(admin: Admin) -> tuple[MessageExt, ConsumeMessageDirectlyResult | None]:
        msg = await admin.view_message(msg_id, topic)
        if group is None or client_id is None:
            return msg, None
        try:
            return msg, await admin.consume_message_directly(group, client_id, msg_id, topic)
        except MQBrokerError as exc:
            raise click.ClickException(f"{exc.remark or exc}: check the client id with "
                                       f"consumerConnection -g {group}") from None

    msg, result = with_admin(namesrv, job)
    if result is None:
        emit(output, message_dict(msg), message_table(msg))
        return
    emit(output, {"message": message_dict(msg), "consumeResult": result.to_json_obj()}, message_table(msg),
         table(f"Consumed directly by {client_id}", ["consumeResult", "order", "spentTimeMills", "remark"],
               [[result.consume_result, result.order, result.spent_time_mills, result.remark]]))


@click.command("queryMsgByKey")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-k", "--key", required=True, help="A message key (KEYS property).")
@click.option("--max-num", default=64, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--begin", help="Stored at or after this time (default: any).")
@click.option("--end", help="Stored before this time (default: now).")
def query_msg_by_key(namesrv: str, output: str, topic: str, key: str, max_num: int, begin: str | None,
                     end: str | None) -> None:
    """Messages by key through the brokers' indexes (105, then 12 per broker)."""
    msgs = with_admin(namesrv, lambda admin: admin.query_by_key(
        topic, key, max_num=max_num, begin_ms=parse_time(begin) if begin else 0,
        end_ms=parse_time(end) if end else None))
    emit_messages(output, f"Messages of {topic} with key {key}", msgs,
                  empty=f"no message of {topic} has key {key!r} in that time range: check the key and "
                        "topic, or widen --begin/--end")


async def pick_queue(admin: Admin, topic: str, broker: str | None, queue_id: int) -> tuple[MessageQueue, str]:
    """The queue (and address) ``queue_id`` of ``topic`` on ``broker`` (may be omitted when the
    topic is on one broker)."""
    queues = [(mq, addr) for mq, addr in await admin.queues(topic)
              if mq.queue_id == queue_id and (broker is None or mq.broker_name == broker)]
    names = sorted({mq.broker_name for mq, _ in queues})
    if not queues:
        raise ClientConfigError(f"topic {topic!r} has no readable queue {queue_id}"
                                f"{' on broker ' + broker if broker else ''}: see topicRoute for its queues")
    if len(names) > 1:
        raise ClientConfigError(f"topic {topic!r} is on brokers {', '.join(names)}: choose one with -b")
    return queues[0]


@click.command("queryMsgByOffset")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-b", "--broker-name", help="Broker name (needed when the topic is on several brokers).")
@click.option("-i", "--queue-id", required=True, type=int)
@click.option("-o", "--offset", required=True, type=click.IntRange(0))
def query_msg_by_offset(namesrv: str, output: str, topic: str, broker_name: str | None, queue_id: int,
                        offset: int) -> None:
    """The message at a queue offset (a pull of one message, nothing committed)."""
    async def job(admin: Admin) -> MessageExt:
        mq, _ = await pick_queue(admin, topic, broker_name, queue_id)
        msgs = await admin.read_messages(mq, offset, 1)
        if not msgs or msgs[0].queue_offset != offset:
            raise MessageNotFoundError(f"queue {queue_id} of {topic} on {mq.broker_name} has no message at "
                                       f"offset {offset}: see topicStatus for its min and max offsets")
        return msgs[0]

    msg = with_admin(namesrv, job)
    emit(output, message_dict(msg), message_table(msg))


@click.command("sendMessage")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-p", "--body", required=True, help="Message body (UTF-8 text).")
@click.option("-k", "--keys", help="Keys, separated by spaces.")
@click.option("-c", "--tags")
@click.option("-b", "--broker-name", help="Send to this broker (with -i).")
@click.option("-i", "--queue-id", type=int, help="Send to this queue.")
def send_message(namesrv: str, output: str, topic: str, body: str, keys: str | None, tags: str | None,
                 broker_name: str | None, queue_id: int | None) -> None:
    """Send one message (the producer's flow: 105, then 310)."""
    async def main() -> Any:
        async with Producer(client_config(namesrv), group=ADMIN_PRODUCER_GROUP) as producer:
            queue = None
            if queue_id is not None:
                queues = [q for q in await producer.publish_queues(topic)
                          if q.queue_id == queue_id and (broker_name is None or q.broker_name == broker_name)]
                if not queues:
                    raise ClientConfigError(f"topic {topic!r} has no writable queue {queue_id}: "
                                            "see topicRoute")
                queue = queues[0]
            return await producer.send(Message(topic, body.encode(), tags=tags, keys=keys), queue=queue)

    r = run(main())
    doc = {"status": r.status.value, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id, "topic": topic,
           "brokerName": r.queue.broker_name, "queueId": r.queue.queue_id, "queueOffset": r.queue_offset}
    emit(output, doc, table("Sent", list(doc), [list(doc.values())]))


async def read_topic(admin: Admin, topic: str, *, broker: str | None, queue_id: int | None,
                     offset: int | None, count: int, begin_ms: int | None, end_ms: int | None,
                     expression: str = "*") -> list[MessageExt]:
    """Messages of the chosen queues from ``offset`` (or the first stored at ``begin_ms``, or the
    queue's start) up to ``end_ms`` (or the queue's end); at most ``count``; nothing committed."""
    out: list[MessageExt] = []
    for mq, addr in await admin.queues(topic):
        if (broker and mq.broker_name != broker) or (queue_id is not None and mq.queue_id != queue_id):
            continue
        low, high = await admin.min_max_offset(mq, addr)
        start = offset if offset is not None else (
            await admin.search_offset(mq, addr, begin_ms) if begin_ms else low)
        stop = await admin.search_offset(mq, addr, end_ms) if end_ms else high
        if len(out) >= count:
            break
        out += await admin.read_messages(mq, start, count - len(out), end_offset=stop, expression=expression)
    return out


@click.command("consumeMessage")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-b", "--broker-name", help="Only this broker.")
@click.option("-i", "--queue-id", type=int, help="Only this queue.")
@click.option("-o", "--offset", type=click.IntRange(0), help="Start offset (default: each queue's start).")
@click.option("-c", "--count", default=128, show_default=True, type=click.IntRange(1))
@click.option("-s", "--begin", help="Start at the first message stored at or after this time.")
@click.option("-e", "--end", help="Stop before the first message stored at or after this time.")
def consume_message(namesrv: str, output: str, topic: str, broker_name: str | None, queue_id: int | None,
                    offset: int | None, count: int, begin: str | None, end: str | None) -> None:
    """Read messages of a topic without a group's offsets (pulls as TOOLS_CONSUMER, no commit)."""
    msgs = with_admin(namesrv, lambda admin: read_topic(
        admin, topic, broker=broker_name, queue_id=queue_id, offset=offset, count=count,
        begin_ms=parse_time(begin) if begin else None, end_ms=parse_time(end) if end else None))
    emit_messages(output, f"Messages of {topic}", msgs)


@click.command("printMsg")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-s", "--sub-expression", default="*", show_default=True, help="Tag expression.")
@click.option("-b", "--begin", help="From the first message stored at or after this time.")
@click.option("-e", "--end", help="Up to this time.")
@click.option("-d/-D", "--print-body/--no-print-body", default=True, show_default=True)
@click.option("--max", "max_count", default=100_000, show_default=True, type=click.IntRange(1))
def print_msg(namesrv: str, output: str, topic: str, sub_expression: str, begin: str | None, end: str | None,
              print_body: bool, max_count: int) -> None:
    """Every message of every queue of a topic (in a time range), nothing committed."""
    msgs = with_admin(namesrv, lambda admin: read_topic(
        admin, topic, broker=None, queue_id=None, offset=None, count=max_count,
        begin_ms=parse_time(begin) if begin else None, end_ms=parse_time(end) if end else None,
        expression=sub_expression))
    emit_messages(output, f"Messages of {topic}", msgs, with_body=print_body)


@click.command("printMsgByQueue")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-a", "--broker-name", required=True, help="The queue's broker.")
@click.option("-i", "--queue-id", required=True, type=click.IntRange(0))
@click.option("-s", "--sub-expression", default="*", show_default=True, help="Tag expression.")
@click.option("-b", "--begin", help="From the first message stored at or after this time.")
@click.option("-e", "--end", help="Up to this time.")
@click.option("-d", "--print-body", is_flag=True, help="Print the bodies too.")
@click.option("-f", "--count-tags", is_flag=True, help="Count the messages per tag, most frequent first.")
@click.option("--max", "max_count", default=100_000, show_default=True, type=click.IntRange(1))
def print_msg_by_queue(namesrv: str, output: str, topic: str, broker_name: str, queue_id: int,
                       sub_expression: str, begin: str | None, end: str | None, print_body: bool,
                       count_tags: bool, max_count: int) -> None:
    """The messages of one queue (in a time range), nothing committed; -f counts them per tag."""
    async def job(admin: Admin) -> list[MessageExt]:
        await pick_queue(admin, topic, broker_name, queue_id)  # a clear error for a queue it lacks
        return await read_topic(admin, topic, broker=broker_name, queue_id=queue_id, offset=None,
                                count=max_count, begin_ms=parse_time(begin) if begin else None,
                                end_ms=parse_time(end) if end else None, expression=sub_expression)

    msgs = with_admin(namesrv, job)
    title = f"Messages of {topic} queue {queue_id} on {broker_name}"
    if not count_tags:
        emit_messages(output, title, msgs, with_body=print_body)
        return
    counts = Counter(m.tags or "" for m in msgs).most_common()
    emit(output, {"count": len(msgs), "tags": dict(counts)},
         table(f"Tags of {title}", ["tag", "messages"], counts), note=f"{len(msgs)} message(s)")


@click.command("queryMsgTraceById")
@admin_options
@click.option("-i", "--msg-id", required=True, help="The message's client id (UNIQ_KEY, as a send returns).")
@click.option("-t", "--trace-topic", default=TRACE_TOPIC, show_default=True,
              help="The topic the clients write their traces to.")
@click.option("--max-num", default=64, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--begin", help="Traces stored at or after this time (default: any).")
@click.option("--end", help="Traces stored before this time (default: now).")
def query_msg_trace_by_id(namesrv: str, output: str, msg_id: str, trace_topic: str, max_num: int,
                          begin: str | None, end: str | None) -> None:
    """A message's trace: who sent it and when, which groups consumed it, how long each took and
    whether it succeeded (the trace messages of the trace topic indexed under its id, 105, 12)."""
    views: list[TraceView] = with_admin(namesrv, lambda admin: admin.message_trace(
        msg_id, trace_topic=trace_topic, max_num=max_num, begin_ms=parse_time(begin) if begin else 0,
        end_ms=parse_time(end) if end else None))
    rows = [[v.type, v.group, v.client_host, fmt_time(v.timestamp_ms), f"{v.cost_ms}ms", v.status]
            for v in views]
    emit(output, [v.to_dict() for v in views],
         table(f"Trace of {msg_id}", ["type", "group", "clientHost", "time", "costTime", "status"], rows),
         note=None if views else f"no trace of {msg_id} in {trace_topic}: were the producer and "
                                 "consumers tracing (e.g. enableMsgTrace), and is the id the client id a "
                                 "send returned?")


@click.command("decodeMessageId")
@output_option
@click.option("-i", "--msg-id", "msg_ids", required=True, multiple=True,
              help="A unique message id (UNIQ_KEY, as a send returns); repeat -i for more.")
def decode_message_id(output: str, msg_ids: tuple[str, ...]) -> None:
    """Where and about when unique message ids were made: the sending client's address and
    process id, and the time (to the millisecond, within the last month); no server is asked."""
    rows = []
    for msg_id in msg_ids:
        try:
            ip, pid, ms = decode_uniq_msg_id(msg_id.strip())
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="-i") from None
        rows.append({"msgId": msg_id.strip(), "ip": ip, "pid": pid, "timestamp": ms, "date": fmt_time(ms)})
    emit(output, rows if len(rows) > 1 else rows[0],
         table("Unique message ids", ["msgId", "ip", "pid", "date"],
               ([r["msgId"], r["ip"], r["pid"], r["date"]] for r in rows)))


COMMANDS = (decode_message_id, query_msg_by_id, query_msg_by_unique_key, query_msg_by_key,
            query_msg_by_offset, send_message, consume_message, print_msg, print_msg_by_queue,
            query_msg_trace_by_id)
