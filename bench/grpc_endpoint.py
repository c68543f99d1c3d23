"""Benchmark of the broker's gRPC endpoint (RocketMQ 5 clients): SendMessage msgs/s and latency
with 1 KiB bodies from loader processes, then receive-and-acknowledge msgs/s (ReceiveMessage of
32 and one AckMessage per batch), with the broker's peak RSS and anonymous memory.

    .venv/bin/python bench/grpc_endpoint.py [--seconds 10] [--loaders 2] [--concurrency 64]
        [--mode default|disabled|permissive|enforcing] [--tls] [--no-floor]

The broker is ``bolide start`` in a child process with ASYNC_FLUSH; the loaders call it with
Bolide's own v5 messages over grpc.aio, as the official clients do (one message per send).
``grpcio_floor`` is the same load against a server whose SendMessage does nothing: what grpcio
itself costs per call on the machine. ``--mode`` sets the broker's ``tls.server.mode`` (default:
not set, so the gRPC port is permissive: the first-byte relay in front of grpcio; ``disabled``:
grpcio's plain port alone); ``--tls``: the loaders call over TLS (the broker given
tests/data/tls's certificate). Prints one JSON document. Figures are never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from bolide.cli.bench_common import machine_info, r
from bolide.cli.bench_server import AnonPeak, ServerProcess
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.testing.v5calls import V5Calls, message, receive_request

TOPIC, GROUP = "GrpcBench", "grpc_bench_g"
TLS_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "tls"


def _channel(port: int, tls: bool) -> grpc.aio.Channel:
    target = f"127.0.0.1:{port}"
    if not tls:
        return grpc.aio.insecure_channel(target)
    cert = (TLS_DIR / "server.crt").read_bytes()
    return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(cert))


async def _send_loop(
    port: int, seconds: float, concurrency: int, size: int, loader: int, tls: bool = False
) -> list[float]:
    latencies: list[float] = []
    body = b"x" * size
    async with _channel(port, tls) as channel:
        calls = V5Calls(channel)
        stop = time.perf_counter() + seconds
        counter = 0

        async def worker(w: int) -> None:
            nonlocal counter
            while time.perf_counter() < stop:
                counter += 1
                request = pb.SendMessageRequest(messages=[message(TOPIC, body, f"B{loader}-{w}-{counter}")])
                started = time.perf_counter()
                response = await calls("SendMessage", request)
                assert response.status.code == pb.OK, response.status
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return latencies


def _loader(port: int, seconds: float, concurrency: int, size: int, loader: int, tls: bool, out: Any) -> None:
    out.put(asyncio.run(_send_loop(port, seconds, concurrency, size, loader, tls)))


async def _receive_all(port: int, expected: int, concurrency: int, tls: bool) -> tuple[int, float]:
    async with _channel(port, tls) as channel:
        calls = V5Calls(channel)
        request = receive_request(TOPIC, GROUP, invisible_s=60, poll_s=1)
        got = 0
        started = time.perf_counter()

        async def worker() -> None:
            nonlocal got
            while got < expected:
                _, messages = await calls.receive(request)
                if not messages:
                    return
                got += len(messages)
                answer = await calls.ack(GROUP, TOPIC, messages)
                assert answer.status.code == pb.OK, answer.status

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return got, time.perf_counter() - started


async def _floor_server(ports: Any, seconds: float, relay: bool) -> None:
    """A gRPC server whose SendMessage does nothing: what grpcio alone costs per call (with
    ``relay``: behind the permissive gRPC port's first-byte relay, on the same loop)."""
    import uvloop  # noqa: F401 - the broker's loop too

    server = grpc.aio.server()

    async def send(request: pb.SendMessageRequest, context: Any) -> pb.SendMessageResponse:
        return pb.SendMessageResponse(status=pb.Status(code=pb.OK))

    handler = grpc.unary_unary_rpc_method_handler(
        send,
        request_deserializer=pb.SendMessageRequest.FromString,
        response_serializer=pb.SendMessageResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "apache.rocketmq.v2.MessagingService", {"SendMessage": handler}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    if relay:
        from bolide.broker.proxy.front import GrpcFront

        port = await GrpcFront(port, port).start("127.0.0.1", 0)
    ports.put(port)
    await asyncio.sleep(seconds)
    await server.stop(0)


def _floor_main(ports: Any, seconds: float, relay: bool) -> None:
    import uvloop

    uvloop.run(_floor_server(ports, seconds, relay))


def _load(port: int, args: argparse.Namespace, tls: bool = False) -> list[float]:
    """Run the loader processes against ``port``; every send's latency."""
    ctx = multiprocessing.get_context("spawn")
    out: Any = ctx.Queue()
    procs = [
        ctx.Process(target=_loader, args=(port, args.seconds, args.concurrency, args.size, i, tls, out))
        for i in range(args.loaders)
    ]
    for proc in procs:
        proc.start()
    latencies = [lat for _ in procs for lat in out.get()]
    for proc in procs:
        proc.join()
    return latencies


def _floor(args: argparse.Namespace, relay: bool = False) -> dict[str, Any]:
    """The same load against a SendMessage that does nothing (grpcio's own cost; with
    ``relay``: through the first-byte relay of a permissive gRPC port)."""
    ctx = multiprocessing.get_context("spawn")
    ports: Any = ctx.Queue()
    server = ctx.Process(target=_floor_main, args=(ports, args.seconds + 30, relay))
    server.start()
    try:
        port = ports.get(timeout=30)
        before = _cpu_seconds(server.pid)
        latencies = _load(port, args)
        cpu = _cpu_seconds(server.pid) - before
    finally:
        server.terminate()
        server.join()
    return {
        "msgs_s": r(len(latencies) / args.seconds, 0),
        "server_cpu_us_per_call": r(cpu / len(latencies) * 1e6),
    }


def _cpu_seconds(pid: int | None) -> float:
    import os

    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--loaders", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=64, help="sends in flight per loader")
    parser.add_argument("--size", type=int, default=1024)
    modes = ("default", "disabled", "permissive", "enforcing")
    parser.add_argument("--mode", choices=modes, default="default",
                        help="the broker's tls.server.mode (default: not set, the gRPC port permissive)")
    parser.add_argument("--tls", action="store_true", help="the loaders call over TLS")
    parser.add_argument("--no-floor", action="store_true", help="skip the grpcio floor")
    args = parser.parse_args()
    if args.tls and args.mode == "disabled":
        parser.error("--tls needs a mode that serves TLS")
    settings = ["grpcServerPort=0"]
    if args.mode != "default":
        settings.append(f"tls.server.mode={args.mode}")
    if args.tls:
        settings += [f"tls.server.certPath={TLS_DIR / 'server.crt'}",
                     f"tls.server.keyPath={TLS_DIR / 'server.key'}"]
    with tempfile.TemporaryDirectory(prefix="bolide-grpc-bench-") as tmp:
        server = ServerProcess(Path(tmp), "ASYNC_FLUSH", tuple(settings))
        server.start()
        try:
            port = server.grpc_port()
            with AnonPeak(server) as peak:
                asyncio.run(_send_loop(port, 1.0, 4, args.size, 99, args.tls))  # topic made, warm
                cpu_before = server.cpu_seconds() or 0.0
                latencies = _load(port, args, args.tls)
                sent = len(latencies)
                send_cpu = (server.cpu_seconds() or 0.0) - cpu_before
                received, receive_s = asyncio.run(_receive_all(port, sent, 4, args.tls))
            memory = server.memory()
        finally:
            server.stop()
    floor = None if args.no_floor else {**_floor(args), "relayed": _floor(args, relay=True)}
    print(
        json.dumps(
            {
                "machine": machine_info(),
                "mode": args.mode,
                "tls": args.tls,
                "send_1k": {
                    "messages": sent,
                    "msgs_s": r(sent / args.seconds, 0),
                    "p50_ms": r(_percentile(latencies, 50) * 1000, 2),
                    "p99_ms": r(_percentile(latencies, 99) * 1000, 2),
                    "loaders": args.loaders,
                    "concurrency_per_loader": args.concurrency,
                    "broker_cpu_us_per_msg": r(send_cpu / max(sent, 1) * 1e6),
                },
                "receive_ack": {"msgs": received, "msgs_s": r(received / receive_s, 0)},
                "grpcio_floor": floor,
                "broker": {"peak_rss_mib": r(memory.get("VmHWM")), "anon_peak_mib": r(peak.mib)},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
