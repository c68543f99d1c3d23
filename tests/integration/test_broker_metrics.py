"""The broker's Prometheus endpoint (``metricsExporterType=PROM``) over loopback: what sends,
pulls, pops, dead letters and clients show under RocketMQ 5's names, the text parsed by
prometheus_client's parser; requests it does not serve; a taken port and a bad setting."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bolide.broker import BrokerConfig
from bolide.broker.dead_letter import store_dead_letter
from bolide.client import (
    Admin,
    ConsumeContext,
    ConsumeFrom,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
)
from bolide.errors import ConfigError
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.testing.servers import Servers, running_servers
from bolide.testing.v5calls import V5Calls, message, receive_request
from conftest import wait_until

TIMEOUT = 40.0
PROM = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0, "metrics_label": "env:test,dc:a1"}
FAST = {"rebalance_interval_ms": 200, "suspend_ms": 1000, "pull_timeout_ms": 3000}


async def http(port: int, request: bytes) -> bytes:
    """The whole answer to ``request`` (the server closes the connection after it)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


async def scrape(s: Servers) -> dict[str, Any]:
    """Family name (as the parser names it) -> [(labels, value)] of every sample."""
    endpoint = s.broker.metrics_endpoint
    assert endpoint is not None
    answer = await http(endpoint.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"text/plain; version=0.0.4" in head
    found: dict[str, Any] = {}
    for family in text_string_to_metric_families(body.decode()):
        found[family.name] = [(s.labels, s.value) for s in family.samples]
    return found


def one(found: dict[str, Any], name: str, **labels: str) -> float:
    """The value of the one sample of ``name`` whose labels include ``labels``."""
    values = [v for got, v in found[name] if labels.items() <= got.items()]
    assert len(values) == 1, (name, labels, found.get(name))
    return float(values[0])


def run(tmp_path: Path, test: Any, **options: Any) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", **{**PROM, **options}) as s:
            await asyncio.wait_for(test(s), TIMEOUT)

    asyncio.run(main())


def test_sends_pulls_and_clients_show_under_rocketmqs_names(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        got: list[MessageExt] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        async with Producer(s.namesrv_addr, "metrics_pg") as producer:
            sizes = [(await producer.send(Message("Metered", b"x" * 100, tags="A"))) for _ in range(6)]
            fifo = Message("Metered", b"ordered")
            fifo.properties["__SHARDINGKEY"] = "g1"
            await producer.send(fifo)
        assert len(sizes) == 6
        consumer = PushConsumer(s.namesrv_addr, "metrics_cg", listener=listener,
                                consume_from=ConsumeFrom.FIRST_OFFSET, **FAST)
        consumer.subscribe("Metered")
        async with consumer:
            await wait_until(lambda: len(got) == 7, timeout=20)

            async def lag_is_zero() -> bool:
                found = await scrape(s)
                return one(found, "rocketmq_consumer_lag_messages", consumer_group="metrics_cg",
                           topic="Metered") == 0

            async with asyncio.timeout(20):  # once the consumer committed its offsets
                while not await lag_is_zero():
                    await asyncio.sleep(0.1)
            found = await scrape(s)
        common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a", "env": "test",
                  "dc": "a1"}
        assert one(found, "rocketmq_messages_in", topic="Metered", message_type="normal", is_system="false",
                   **common) == 6
        assert one(found, "rocketmq_messages_in", topic="Metered", message_type="fifo") == 1
        normal_bytes = one(found, "rocketmq_throughput_in", topic="Metered", message_type="normal")
        assert 6 * 100 < normal_bytes < 6 * 400  # whole records: body, properties and header
        assert one(found, "rocketmq_messages_out", topic="Metered", consumer_group="metrics_cg",
                   is_system="false", **common) == 7
        assert one(found, "rocketmq_throughput_out", topic="Metered", consumer_group="metrics_cg") > 700
        sizes_seen = {labels["le"]: v for labels, v in found["rocketmq_message_size"]
                      if labels.get("message_type") == "normal" and "le" in labels}
        assert sizes_seen["1024.0"] == 6 and sizes_seen["+Inf"] == 6
        assert one(found, "rocketmq_consumer_connections", consumer_group="metrics_cg", language="python",
                   version="v4_9_8", consume_mode="push", protocol_type="remoting") == 1
        for name in ("rocketmq_consumer_inflight_messages", "rocketmq_consumer_ready_messages",
                     "rocketmq_consumer_lag_latency_milliseconds"):
            assert one(found, name, consumer_group="metrics_cg", topic="Metered") == 0
        rpc = {(labels["request_code"], labels["response_code"], labels["is_long_polling"]): v
               for labels, v in found["rocketmq_rpc_latency_milliseconds"]
               if labels.get("protocol_type") == "remoting" and "le" not in labels
               and labels.get("result") == "success" and v >= 0}
        sends = [v for labels, v in found["rocketmq_rpc_latency_milliseconds"]
                 if labels.get("request_code") == "send_message_v2" and labels.get("le") == "+Inf"]
        assert sends == [7]  # every send, answered at once with success
        assert any(code == "heart_beat" for code, _, _ in rpc)
        assert all(polling == "false" for code, _, polling in rpc if code != "pull_message")
        assert one(found, "rocketmq_topic_number", **common) == len(s.broker.topics.table)
        assert one(found, "rocketmq_broker_permission") == 6
        assert one(found, "rocketmq_storage_dispatch_behind_bytes") >= 0
        assert one(found, "rocketmq_storage_size_bytes", storage_medium="disk", storage_type="local") > 0
        assert one(found, "process_resident_memory_bytes") > one(found, "bolide_anonymous_memory_bytes") > 0
        assert all({"cluster", "node_id", "env"} <= labels.keys() for name, samples in found.items()
                   if name.startswith("rocketmq_") for labels, _ in samples)
        # a message out of retries, to the dead letter queue
        assert store_dead_letter(s.broker, "metrics_cg", got[0])
        found = await scrape(s)
        assert one(found, "rocketmq_send_to_dlq_messages", consumer_group="metrics_cg", topic="Metered") == 1

    run(tmp_path, test)


def test_the_lag_gauges_count_what_is_out_and_what_waits(tmp_path: Path) -> None:
    """Five messages, two popped and not acknowledged: lag 5, in flight 2, ready 3, and both
    latencies the age of the messages; then a pull consumer's offsets the same way."""
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            await admin.create_topic("Waiting", read_queue_nums=1, write_queue_nums=1)
        async with Producer(s.namesrv_addr, "metrics_pg") as producer:
            for i in range(5):
                await producer.send(Message("Waiting", b"w%d" % i))
        stored = s.broker.store.get_message_store_timestamp("Waiting", 0, 0)
        # the gauges cover the groups online (their heartbeats put them in the broker's
        # consumer table, as RocketMQ's do)
        async with SimpleConsumer(s.namesrv_addr, "popping", {"Waiting": "*"},
                                  consume_from=ConsumeFrom.FIRST_OFFSET) as consumer:
            got = await consumer.receive(2, invisible_duration_ms=60_000, await_duration_ms=2000)
            assert len(got) == 2
            found = await scrape(s)
        assert one(found, "rocketmq_consumer_connections", consumer_group="popping", consume_mode="pop") == 1
        labels = {"consumer_group": "popping", "topic": "Waiting"}
        assert one(found, "rocketmq_consumer_lag_messages", **labels) == 5
        assert one(found, "rocketmq_consumer_inflight_messages", **labels) == 2
        assert one(found, "rocketmq_consumer_ready_messages", **labels) == 3
        for name in ("rocketmq_consumer_lag_latency_milliseconds",
                     "rocketmq_consumer_queueing_latency_milliseconds"):
            assert 0 < one(found, name, **labels) <= time.time() * 1000 - stored + 1000
        # a pull consumer that took three (a batch of three, holding no more) and committed
        # none since offset 0: three in flight, two ready
        s.broker.offsets.commit("pulling", "Waiting", 0, 0)
        pulling = PullConsumer(s.namesrv_addr, "pulling", auto_commit=False, pull_batch_size=3,
                               pull_threshold_for_queue=3, consume_from=ConsumeFrom.FIRST_OFFSET,
                               rebalance_interval_ms=200, suspend_ms=1000, pull_timeout_ms=3000)
        pulling.subscribe("Waiting")
        labels = {"consumer_group": "pulling", "topic": "Waiting"}
        async with pulling:
            async with asyncio.timeout(20):
                while True:
                    found = await scrape(s)
                    if [v for got, v in found.get("rocketmq_consumer_inflight_messages", [])
                            if labels.items() <= got.items()] == [3]:
                        break
                    await asyncio.sleep(0.05)
        assert [one(found, f"rocketmq_consumer_{name}_messages", **labels)
                for name in ("lag", "inflight", "ready")] == [5, 3, 2]

    run(tmp_path, test)


def test_grpc_sends_and_receives_are_counted_as_remoting_ones(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        assert s.broker.grpc is not None
        port = s.broker.grpc.port
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            v5 = V5Calls(channel)
            here = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)])
            asked = pb.QueryRouteRequest(topic=pb.Resource(name="Grpc5"), endpoints=here)
            route = await v5("QueryRoute", asked)
            assert route.status.code == pb.OK
            for i in range(3):
                one_message = pb.SendMessageRequest(messages=[message("Grpc5", b"g" * 50, f"ID-{i}")])
                sent = await v5("SendMessage", one_message)
                assert sent.status.code == pb.OK
            assert await asyncio.to_thread(s.broker.store.wait_dispatched, 10)
            code, got = await v5.receive(receive_request("Grpc5", "grpc_cg"))
            assert code == pb.OK and len(got) == 3
        found = await scrape(s)
        stored = one(found, "rocketmq_throughput_in", topic="Grpc5", message_type="normal")
        assert one(found, "rocketmq_messages_in", topic="Grpc5", message_type="normal") == 3
        assert one(found, "rocketmq_messages_out", topic="Grpc5", consumer_group="grpc_cg") == 3
        # the bytes handed out are the records as stored, as for pulls and pops
        assert one(found, "rocketmq_throughput_out", topic="Grpc5", consumer_group="grpc_cg") == stored

    run(tmp_path, test, grpc_server_port=0)


def test_the_endpoint_answers_only_what_it_serves(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        endpoint = s.broker.metrics_endpoint
        assert endpoint is not None
        port = endpoint.port
        assert (await http(port, b"GET /nope HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await http(port, b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert (await http(port, b"\x16\x03\x01garbage\r\n\r\n")).startswith(b"HTTP/1.1 400")
        head = await http(port, b"HEAD /metrics HTTP/1.0\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
        assert (await http(port, b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 2000 + b"\r\n")).startswith(
            b"HTTP/1.1 400")
        # two scrapes on one kept-alive connection, and a client that sends nothing is let go
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(2):
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            assert b"rocketmq_topic_number" in await reader.readexactly(length)
        writer.close()
        silent = await asyncio.open_connection("127.0.0.1", port)
        assert (await http(port, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")).startswith(
            b"HTTP/1.1 200")  # served meanwhile
        silent[1].close()

    run(tmp_path, test)


def test_a_taken_port_and_bad_settings_are_refused_by_name(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        async def start() -> None:
            async with running_servers(tmp_path / "store", **{**PROM, "metrics_prom_exporter_port": port}):
                pass

        with pytest.raises(OSError, match="metricsPromExporterPort"):
            asyncio.run(start())
    with pytest.raises(ConfigError, match="metricsLabel"):
        BrokerConfig(metrics_label="env")
    with pytest.raises(ConfigError, match="metricsExporterType"):
        BrokerConfig(metrics_exporter_type="STATSD")
    assert BrokerConfig(metrics_exporter_type="2").metrics_exporter() == "PROM"
