"""``bolide produce`` and ``bolide consume``: messages from and to the shell, one per line
(like kcat). ``produce`` sends each line of stdin or a file as a message; ``consume`` prints a
group's messages as JSON lines and commits what it printed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from bolide.cli.admin_common import (
    client_config,
    connection_options,
    emit,
    namesrv_option,
    output_option,
    run,
    table,
)
from bolide.client.admin import Admin
from bolide.client.admin_types import message_dict
from bolide.client.errors import ClientConfigError, ClientStateError
from bolide.client.filtering import MessageSelector
from bolide.client.producer import Producer
from bolide.client.pull_consumer import PullConsumer
from bolide.client.results import ConsumeFrom, SendResult
from bolide.client.selector import select_by_hash
from bolide.common.message import Message, MessageExt
from bolide.protocol.bodies.client import MessageQueue

PRODUCE_GROUP = "bolide-cli-producer"


def key_of(line: str, field: str, lineno: int) -> str:
    """The value at ``field`` (dotted path) of a JSON-object line, as text."""
    try:
        value: Any = json.loads(line)
    except ValueError:
        raise ClientConfigError(f"line {lineno} is not JSON: --key-field needs one JSON object per line "
                                "(drop --key-field, or use --keys for a fixed key)") from None
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ClientConfigError(f"line {lineno} has no field {field!r}: fix the input or choose "
                                    "another --key-field")
        value = value[part]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def lines_of(stream: IO[bytes], advance: Any) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-empty line; ``advance(n)`` gets the bytes read."""
    for lineno, raw in enumerate(stream, 1):
        advance(len(raw))
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        if text:
            yield lineno, text


@click.command()
@namesrv_option
@connection_options
@output_option
@click.option("-t", "--topic", required=True)
@click.option("-f", "--file", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read lines from this file (default: stdin).")
@click.option("--tags", help="Tag of every message.")
@click.option("--keys", help="Fixed key(s) of every message (space-separated).")
@click.option("--key-field", help="Take each message's key from this field of the line, read as a JSON "
                                  "object (dotted path, e.g. order.id); same key, same queue.")
@click.option("-g", "--group", default=PRODUCE_GROUP, show_default=True, help="Producer group.")
@click.option("--in-flight", default=1, show_default=True, type=click.IntRange(1, 1024),
              help="Sends awaiting an answer at once (1 keeps the order of lines within each queue).")
def produce(namesrv: str, output: str, topic: str, path: Path | None, tags: str | None, keys: str | None,
            key_field: str | None, group: str, in_flight: int) -> None:
    """Send each line of stdin (or --file) to TOPIC as one message."""
    stream: IO[bytes] = path.open("rb") if path else sys.stdin.buffer
    progress = Progress(TextColumn("produce"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                        console=Console(stderr=True), transient=True, disable=path is None)
    results: list[SendResult] = []
    errors: list[BaseException] = []

    def finished(task: asyncio.Task[SendResult]) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:
            errors.append(task.exception())  # type: ignore[arg-type]
        else:
            results.append(task.result())

    async def main() -> None:
        async with Producer(client_config(namesrv), group=group) as producer:
            window = asyncio.Semaphore(in_flight)
            pending: set[asyncio.Task[SendResult]] = set()

            async def send(msg: Message, key: str | None) -> SendResult:
                try:
                    if key is not None:
                        return await producer.send(msg, selector=select_by_hash, arg=key)
                    return await producer.send(msg)
                finally:
                    window.release()

            task_id = progress.add_task("file", total=path.stat().st_size if path else None)
            try:
                for lineno, text in lines_of(stream, lambda n: progress.advance(task_id, n)):
                    key = key_of(text, key_field, lineno) if key_field else None
                    msg = Message(topic, text.encode(), tags=tags, keys=key if key is not None else keys)
                    await window.acquire()
                    if errors:
                        break
                    task = asyncio.ensure_future(send(msg, key))
                    task.add_done_callback(finished)
                    task.add_done_callback(pending.discard)
                    pending.add(task)
            finally:
                await asyncio.gather(*pending, return_exceptions=True)
            if errors:
                raise errors[0]

    try:
        with progress:
            run(main())
    except click.ClickException as exc:
        sent = len(results)
        raise click.ClickException(f"{exc.message} ({sent} message(s) were sent before this)") from None
    finally:
        if path:
            stream.close()
    per_queue = Counter((r.queue.broker_name, r.queue.queue_id) for r in results)
    doc = {"topic": topic, "sent": len(results),
           "queues": [{"brokerName": b, "queueId": q, "count": n} for (b, q), n in sorted(per_queue.items())]}
    emit(output, doc, table(f"Sent {len(results)} message(s) to {topic}", ["brokerName", "queueId", "count"],
                            ([b, q, n] for (b, q), n in sorted(per_queue.items()))))


def queue_of(owned: set[MessageQueue], addrs: dict[str, str], msg: MessageExt) -> MessageQueue | None:
    """The owned queue ``msg`` came from: same topic and queue id, and, when several brokers
    have that queue id, the broker whose address stored it (``addrs``: broker name -> address)."""
    found = [mq for mq in owned if mq.topic == msg.topic and mq.queue_id == msg.queue_id]
    if len(found) > 1:
        found = [mq for mq in found if addrs.get(mq.broker_name) == msg.store_host]
    return found[0] if len(found) == 1 else None


@click.command()
@namesrv_option
@connection_options
@click.option("-t", "--topic", required=True)
@click.option("-g", "--group", required=True, help="Consumer group (its offsets are committed).")
@click.option("--tags", "expression", default="*", show_default=True, help="Tag expression: '*' or 'A || B'.")
@click.option("--sql", help="Instead of tags, a SQL92 expression over the message properties, e.g. "
              "\"region = 'eu' AND n > 5\" (the broker needs enablePropertyFilter=true).")
@click.option("--from", "start", type=click.Choice(["first", "last"]), default="last", show_default=True,
              help="Where a group without a committed offset starts.")
@click.option("--count", type=click.IntRange(1), help="Exit after this many messages.")
@click.option("--timeout", type=click.FloatRange(0, min_open=True),
              help="Exit after this many seconds without a message (default: run until Ctrl+C).")
def consume(namesrv: str, topic: str, group: str, expression: str, sql: str | None, start: str,
            count: int | None, timeout: float | None) -> None:
    """Print TOPIC's messages for GROUP as JSON lines (topic, queueId, queueOffset, msgId, tags,
    keys, body, ...), committing the offsets of what was printed."""
    if sql is not None and expression != "*":
        raise click.UsageError("give --tags or --sql, not both")
    printed = 0
    cut: tuple[MessageQueue, int] | None = None  # the queue whose last batch was printed in part

    async def main() -> None:
        consumer = PullConsumer(client_config(namesrv), group, auto_commit=False, pull_batch_size=32,
                                consume_from=ConsumeFrom.FIRST_OFFSET if start == "first"
                                else ConsumeFrom.LAST_OFFSET)
        consumer.subscribe(topic, MessageSelector.by_sql(sql) if sql is not None else expression)
        async with Admin(client_config(namesrv)) as admin:  # TopicNotExistError names the fix
            addrs = {mq.broker_name: addr for mq, addr in await admin.queues(topic)}
        loop = asyncio.get_running_loop()
        async with consumer:
            try:
                await _print_messages(consumer, loop, addrs)
            except ClientStateError:
                raise  # nothing more is committed
            except BaseException:
                await consumer.commit()  # Ctrl+C: what was printed in full batches
                raise
            else:  # every owned queue gets an offset, so the next run continues from here
                await consumer.commit()
                if cut is not None:
                    await consumer.commit(dict([cut]))

    async def _print_messages(consumer: PullConsumer, loop: asyncio.AbstractEventLoop,
                              addrs: dict[str, str]) -> None:
        nonlocal printed, cut
        last = loop.time()
        while count is None or printed < count:
            wait = 1.0 if timeout is None else max(min(timeout - (loop.time() - last), 1.0), 0.0)
            msgs = await consumer.poll(timeout_ms=int(wait * 1000))
            if not msgs:
                if timeout is not None and loop.time() - last >= timeout:
                    break
                continue
            last = loop.time()
            take = msgs if count is None else msgs[:count - printed]
            for m in take:
                sys.stdout.write(json.dumps(message_dict(m), ensure_ascii=False) + "\n")
            sys.stdout.flush()
            printed += len(take)
            if len(take) < len(msgs):
                mq = queue_of(consumer.assignment(), addrs, take[-1])
                if mq is None:
                    raise ClientStateError(f"cannot tell which broker's queue {take[-1].queue_id} the last "
                                           "message came from, so its offset was not committed; run again "
                                           "without --count")
                cut = (mq, take[-1].queue_offset + 1)
            else:
                await consumer.commit()

    with contextlib.suppress(KeyboardInterrupt):
        run(main())
    click.echo(f"{printed} message(s) consumed from {topic} by {group}", err=True)
