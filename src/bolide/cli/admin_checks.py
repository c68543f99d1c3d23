"""``bolide admin`` checks that send or compute instead of asking: clusterRT (send round-trip time
of every broker), sendMsgStatus (sends to one broker, each timed), checkMsgSendRT (sends over a
topic's queues, each timed), and allocateMQ (how a group's consumers would share a topic)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import click

from bolide.cli.admin_common import admin_options, client_config, emit, run, table, with_admin
from bolide.client.admin import Admin
from bolide.client.errors import ClientConfigError, MQClientError
from bolide.client.producer import Producer
from bolide.client.results import SendResult
from bolide.common.message import Message
from bolide.errors import BolideError
from bolide.protocol.allocate import allocate_averagely
from bolide.protocol.bodies.client import MessageQueue

CHECK_PRODUCER_GROUP = "bolide-admin-check"
_FILLER = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def body_of(size: int) -> bytes:
    """A body of ``size`` bytes (mqadmin's letters and digits)."""
    return (_FILLER * (size // len(_FILLER) + 1))[:size]


@dataclass(slots=True)
class TimedSend:
    """One send: where it went, whether it was stored, how long it took (ms) and its result or
    error."""

    broker: str
    queue_id: int
    ok: bool
    rt_ms: float
    result: SendResult | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {"brokerName": self.broker, "queueId": self.queue_id, "ok": self.ok,
                "rtMs": round(self.rt_ms, 3), "status": r.status.value if r else None,
                "msgId": r.msg_id if r else None, "queueOffset": r.queue_offset if r else None,
                "error": self.error}


async def timed_send(producer: Producer, msg: Message, queue: MessageQueue | None) -> TimedSend:
    """Send ``msg`` (to ``queue``, else where the producer chooses) and time it; a failure is a
    result too."""
    start = time.perf_counter()
    try:
        result = await producer.send(msg, queue=queue)
    except BolideError as exc:
        return TimedSend(queue.broker_name if queue else "", queue.queue_id if queue else -1, False,
                         (time.perf_counter() - start) * 1000, error=str(exc))
    return TimedSend(result.queue.broker_name, result.queue.queue_id, True,
                     (time.perf_counter() - start) * 1000, result)


def average_rt(sends: list[TimedSend]) -> float:
    """Mean round trip of the sends after the first (which also looks up the route), as mqadmin."""
    rest = sends[1:] or sends
    return sum(s.rt_ms for s in rest) / len(rest) if rest else 0.0


@click.command("clusterRT")
@admin_options
@click.option("-c", "--cluster", help="Only this cluster (default: every cluster).")
@click.option("-a", "--amount", default=100, show_default=True, type=click.IntRange(1),
              help="Messages sent to each broker per round.")
@click.option("-s", "--size", default=128, show_default=True, type=click.IntRange(1), help="Body bytes.")
@click.option("-i", "--interval", default=10.0, show_default=True, type=click.FloatRange(0),
              help="Seconds between rounds.")
@click.option("--rounds", default=1, show_default=True, type=click.IntRange(0),
              help="Rounds to run (0: until interrupted, as mqadmin).")
def cluster_rt(namesrv: str, output: str, cluster: str | None, amount: int, size: int, interval: float,
               rounds: int) -> None:
    """Send round-trip time of every broker: ``amount`` messages to the topic named after each
    broker (brokerTopicEnable), the mean time of all but the first, successes and failures."""
    async def main() -> list[list[Any]]:
        async with Admin(client_config(namesrv)) as admin, \
                Producer(client_config(namesrv), group=CHECK_PRODUCER_GROUP) as producer:
            info = await admin.cluster_info()
            clusters = {cluster: info.cluster_addr_table.get(cluster)} if cluster else info.cluster_addr_table
            if cluster and clusters[cluster] is None:
                known = ", ".join(sorted(info.cluster_addr_table)) or "none"
                raise ClientConfigError(f"cluster {cluster!r} is unknown to the NameServer (known: {known})")
            rows: list[list[Any]] = []
            done = 0
            while True:
                for name, brokers in sorted(clusters.items()):
                    for broker in sorted(brokers or ()):
                        msg = Message(broker, body_of(size))
                        sends = [await timed_send(producer, msg, None) for _ in range(amount)]
                        ok = sum(s.ok for s in sends)
                        row = [name, broker, round(average_rt(sends), 3), ok, len(sends) - ok]
                        rows.append(row)
                        if output != "json" and rounds != 1:
                            click.echo("  ".join(str(v) for v in row))  # a line per broker per round
                done += 1
                if rounds and done >= rounds:
                    return rows
                await asyncio.sleep(interval)

    rows = run(main())
    emit(output, [dict(zip(["cluster", "brokerName", "rtMs", "successCount", "failCount"], r, strict=True))
                  for r in rows],
         table("Send round trip per broker", ["cluster", "brokerName", "rtMs", "successCount", "failCount"],
               rows))


@click.command("sendMsgStatus")
@admin_options
@click.option("-b", "--broker-name", required=True, help="Broker name: the messages go to its own topic.")
@click.option("-s", "--size", default=128, show_default=True, type=click.IntRange(1), help="Body bytes.")
@click.option("-c", "--count", default=50, show_default=True, type=click.IntRange(1))
def send_msg_status(namesrv: str, output: str, broker_name: str, size: int, count: int) -> None:
    """Send ``count`` messages to the topic named after a broker, each timed (after one small
    send that looks up the route)."""
    async def main() -> list[TimedSend]:
        async with Producer(client_config(namesrv), group=CHECK_PRODUCER_GROUP) as producer:
            first = await timed_send(producer, Message(broker_name, body_of(16)), None)
            if not first.ok:
                raise MQClientError(f"sending to broker {broker_name!r}'s own topic failed: {first.error} "
                                    "(check the broker name with clusterList, and that the broker has "
                                    "brokerTopicEnable=true)")
            return [await timed_send(producer, Message(broker_name, body_of(size)), None)
                    for _ in range(count)]

    sends = run(main())
    emit(output, [s.to_dict() for s in sends],
         table(f"Sends to {broker_name}", ["#", "rtMs", "status", "queueId", "queueOffset", "msgId"],
               ([i, f"{s.rt_ms:.2f}", s.result.status.value if s.result else s.error, s.queue_id,
                 s.result.queue_offset if s.result else "", s.result.msg_id if s.result else ""]
                for i, s in enumerate(sends))),
         note=f"mean round trip {average_rt(sends):.2f} ms")


@click.command("checkMsgSendRT")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-a", "--amount", default=100, show_default=True, type=click.IntRange(1))
@click.option("-s", "--size", default=128, show_default=True, type=click.IntRange(1), help="Body bytes.")
def check_msg_send_rt(namesrv: str, output: str, topic: str, amount: int, size: int) -> None:
    """Send ``amount`` messages to a topic, one queue after another, each timed; the mean round
    trip of all but the first."""
    async def main() -> list[TimedSend]:
        async with Producer(client_config(namesrv), group=CHECK_PRODUCER_GROUP) as producer:
            queues = await producer.publish_queues(topic)
            if not queues:
                raise ClientConfigError(f"topic {topic!r} has no writable queue: see topicRoute")
            msg = Message(topic, body_of(size))
            return [await timed_send(producer, msg, queues[i % len(queues)]) for i in range(amount)]

    sends = run(main())
    emit(output, {"averageRtMs": round(average_rt(sends), 3), "sends": [s.to_dict() for s in sends]},
         table(f"Sends to {topic}", ["brokerName", "queueId", "sent", "rtMs"],
               ([s.broker, s.queue_id, s.ok, f"{s.rt_ms:.2f}"] for s in sends)),
         note=f"Avg RT: {average_rt(sends):.2f} ms")


@click.command("allocateMQ")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-i", "--ip-list", "client_ids", required=True,
              help="Client ids (or IPs), comma-separated: the consumers of one group.")
def allocate_mq(namesrv: str, output: str, topic: str, client_ids: str) -> None:
    """How consumers would share a topic's readable queues under the default strategy
    (AllocateMessageQueueAveragely; queues and ids sorted, as consumers sort them)."""
    ids = sorted({c.strip() for c in client_ids.split(",") if c.strip()})
    if not ids:
        raise click.UsageError("give at least one client id with -i")

    async def job(admin: Admin) -> list[MessageQueue]:
        return [mq for mq, _ in await admin.queues(topic)]

    queues = sorted(with_admin(namesrv, job))
    shares = {cid: allocate_averagely("", cid, queues, ids) for cid in ids}
    emit(output, {"result": {cid: [mq.to_json_obj() for mq in share] for cid, share in shares.items()}},
         table(f"Queues of {topic} per consumer", ["clientId", "queues (broker:queueId)"],
               ([cid, " ".join(f"{mq.broker_name}:{mq.queue_id}" for mq in share)]
                for cid, share in shares.items())))


COMMANDS = [cluster_rt, send_msg_status, check_msg_send_rt, allocate_mq]
