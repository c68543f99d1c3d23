"""``bolide bench broker``: end-to-end throughput, latency and memory of a NameServer + Broker
over the remoting protocol.

The server runs as ``bolide start`` in a child process with a temporary store; the load comes
from worker processes (:mod:`bolide.cli.bench_load`). A table goes to stderr and one JSON
document to stdout (and ``--output FILE``), shaped like ``bolide bench store``'s::

    {"machine": {...}, "run": {...}, "cases": {"send_1k": {"msgs_s": ..., ...}, ...},
     "targets": [...]}

Every case reports ``msgs_s``, ``mib_s`` (message bodies), the latency percentiles of its
requests, the broker's CPU use (``broker_cpu_pct``, 100 = one core) and the load generators'
(``load_cpu_pct``), and the broker's ``peak_rss_mib`` (``VmHWM``, reset when the case starts;
it counts the mapped store pages touched), ``anon_mib`` (the highest ``RssAnon`` sampled
during the case: the Python heap) and ``file_mib`` (``RssFile`` at the end: mapped files).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import shutil
import tempfile
import time
from array import array
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from bolide.broker.loop_lag import BUCKETS as LAG_BUCKETS
from bolide.broker.loop_lag import parse_distribution
from bolide.cli.bench_broker_report import case_table, target_rows, target_table
from bolide.cli.bench_common import (
    MiB,
    emit,
    load_avg,
    machine_info,
    percentile,
    r,
    stderr_console,
)
from bolide.cli.bench_load import PRODUCER_GROUP, LoadSpec, worker_main
from bolide.cli.bench_server import ServerProcess
from bolide.common import Message
from bolide.errors import BolideError
from bolide.protocol.bodies import KVTable, TopicRouteData, encode_batch_body
from bolide.protocol.codes import RequestCode, ResponseCode, SerializeType
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    SendMessageRequestHeader,
)
from bolide.remoting import RemotingClient, run

TOPIC = "BenchTopic"
PULL_TOPIC = "BenchPullTopic"
QUEUES = 8
BATCH = 64
PULL_BATCH = 32
RATE_LIMIT = 10_000
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Case:
    kind: str  # "send", "batch" or "pull"
    body_size: int
    rate: float | None = None  # total messages per second; None: as fast as possible


CASES: dict[str, Case] = {
    "send_100b": Case("send", 100),
    "send_1k": Case("send", 1024),
    "send_batch_100b": Case("batch", 100),
    "send_1k_at_10k": Case("send", 1024, RATE_LIMIT),
    "pull_100b": Case("pull", 100),
}

@dataclass(frozen=True)
class Plan:
    """Sizes of one run."""

    quick: bool
    producers: int
    concurrency: int  # outstanding requests per producer process
    connections: int  # per producer process
    warmup_s: float
    duration_s: float
    pull_messages: int  # pre-filled into PULL_TOPIC for pull_100b
    codec: SerializeType

    @classmethod
    def make(cls, quick: bool, producers: int, concurrency: int, connections: int,
             duration: float | None, codec: SerializeType) -> Plan:
        if quick:
            return cls(True, producers, concurrency, connections, 0.3, duration or 1.0,
                       QUEUES * BATCH * 16, codec)
        return cls(False, producers, concurrency, connections, 2.0, duration or 10.0,
                   QUEUES * BATCH * 512, codec)


# -- control requests (NameServer and Broker) ------------------------------------------------
async def _prepare(server: ServerProcess) -> None:
    """Create both topics with QUEUES queues, then wait until the NameServer routes them."""
    async with RemotingClient() as client:
        for topic in (TOPIC, PULL_TOPIC):
            header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102",
                                              read_queue_nums=QUEUES, write_queue_nums=QUEUES, perm=6)
            response = await client.invoke(server.broker_addr, RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, header), timeout_ms=10_000)
            if response.code != ResponseCode.SUCCESS:
                raise click.ClickException(f"creating topic {topic} failed: {response.remark}")
        deadline = time.monotonic() + READY_TIMEOUT_S
        for topic in (TOPIC, PULL_TOPIC):
            while not await _routed(client, server.namesrv_addr, topic):
                if time.monotonic() > deadline:
                    raise click.ClickException(
                        f"the NameServer has no route to {topic} after {READY_TIMEOUT_S:.0f} s: "
                        f"the broker did not register; server log:\n{server.log_tail()}")
                await asyncio.sleep(0.05)


async def _routed(client: RemotingClient, namesrv: str, topic: str) -> bool:
    response = await client.invoke(namesrv, RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic)))
    if response.code != ResponseCode.SUCCESS:
        return False
    route = TopicRouteData.decode(response.body_bytes())
    return bool(route.broker_datas) and any(q.write_queue_nums == QUEUES for q in route.queue_datas)


async def _max_offsets(client: RemotingClient, broker: str, topic: str) -> list[int]:
    offsets = []
    for queue in range(QUEUES):
        response = await client.invoke(broker, RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=topic, queue_id=queue)))
        if response.code != ResponseCode.SUCCESS:
            raise click.ClickException(f"GET_MAX_OFFSET of {topic}/{queue} failed: {response.remark}")
        offsets.append(int(response.ext_fields["offset"]))
    return offsets


async def _dispatched(broker: str, topic: str, expected: int, timeout_s: float) -> float:
    """Wait until the topic's ConsumeQueues hold ``expected`` entries; returns the wait."""
    t0 = time.monotonic()
    async with RemotingClient() as client:
        while sum(await _max_offsets(client, broker, topic)) < expected:
            if time.monotonic() - t0 > timeout_s:
                raise click.ClickException(
                    f"{topic}: dispatch did not reach {expected} entries within {timeout_s:.0f} s")
            await asyncio.sleep(0.05)
    return time.monotonic() - t0


async def _indexed(broker: str, timeout_s: float) -> float:
    """Wait until the broker's index has caught up with dispatch (``indexBehindBytes`` 0 in its
    runtime info); returns the wait."""
    t0 = time.monotonic()
    async with RemotingClient() as client:
        while True:
            response = await client.invoke(broker, RemotingCommand.request(
                RequestCode.GET_BROKER_RUNTIME_INFO, None))
            table = KVTable.decode(response.body_bytes()).table
            if int(table.get("indexBehindBytes", "0")) == 0:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout_s:
                raise click.ClickException(f"the index did not catch up within {timeout_s:.0f} s")
            await asyncio.sleep(0.05)


async def _loop_lag(broker: str) -> dict[str, int]:
    """The broker's event-loop lateness counts per bucket (``bolideLoopLagDistribution``, since
    it started; empty for a broker without it)."""
    async with RemotingClient() as client:
        response = await client.invoke(broker, RemotingCommand.request(
            RequestCode.GET_BROKER_RUNTIME_INFO, None))
    table = KVTable.decode(response.body_bytes()).table
    return parse_distribution(table.get("bolideLoopLagDistribution", ""))


LAG_OVER_5MS = tuple(name for bound, name in LAG_BUCKETS if bound > 5)


async def _fill(broker: str, total: int) -> list[int]:
    """Put ``total`` messages of 100 B into PULL_TOPIC (batches over all queues, untimed);
    returns each queue's max offset once dispatched."""
    body = encode_batch_body([Message(PULL_TOPIC, bytes(100), tags="TagA") for _ in range(BATCH)])
    window = asyncio.Semaphore(16)

    async def put(client: RemotingClient, queue: int) -> None:
        header = SendMessageRequestHeader(
            producer_group=PRODUCER_GROUP, topic=PULL_TOPIC, default_topic="TBW102",
            default_topic_queue_nums=4, queue_id=queue, sys_flag=0,
            born_timestamp=int(time.time() * 1000), flag=0, batch=True).to_v2()
        async with window:
            response = await client.invoke(broker, RemotingCommand.request(
                RequestCode.SEND_BATCH_MESSAGE, header, body), timeout_ms=30_000)
        if response.code != ResponseCode.SUCCESS:
            raise click.ClickException(f"filling {PULL_TOPIC} failed: {response.remark}")

    async with RemotingClient() as client:
        before = sum(await _max_offsets(client, broker, PULL_TOPIC))
        await asyncio.gather(*(put(client, k % QUEUES) for k in range(total // BATCH)))
    await _dispatched(broker, PULL_TOPIC, before + total // BATCH * BATCH, 300)
    async with RemotingClient() as client:
        return await _max_offsets(client, broker, PULL_TOPIC)


# -- load -------------------------------------------------------------------------------------
def _specs(case: Case, plan: Plan, server: ServerProcess, pull_ends: list[int]) -> list[LoadSpec]:
    base = LoadSpec(kind=case.kind, worker=0, host="127.0.0.1", port=server.broker_port,
                    topic=PULL_TOPIC if case.kind == "pull" else TOPIC,
                    queues=tuple(range(QUEUES)), body_size=case.body_size,
                    batch=BATCH if case.kind == "batch" else 1, window=plan.concurrency,
                    connections=plan.connections, warmup_s=plan.warmup_s,
                    duration_s=plan.duration_s, codec=plan.codec, pull_batch=PULL_BATCH)
    if case.kind == "pull":  # each puller reads its own queues
        n = min(plan.producers, QUEUES)
        return [replace(base, worker=w, queues=tuple(range(w, QUEUES, n)),
                        pull_ends=tuple(pull_ends[w::n])) for w in range(n)]
    if case.rate is not None:  # open loop: the window only bounds a broker that falls behind
        base = replace(base, rate=case.rate / plan.producers, window=max(plan.concurrency, 1024))
    return [replace(base, worker=w) for w in range(plan.producers)]


def _receive(pipe: Connection, proc: Any, timeout_s: float, expect: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while not pipe.poll(0.1):
        if not proc.is_alive() and not pipe.poll(0):
            raise click.ClickException(f"load worker {proc.name} exited with status {proc.exitcode}")
        if time.monotonic() > deadline:
            raise click.ClickException(f"load worker {proc.name} sent nothing within {timeout_s:.0f} s")
    kind, value = pipe.recv()
    if kind != expect:
        raise click.ClickException(str(value))
    return value


_END_GRACE_S = 0.5  # a worker done this close to the window's end is on time


def _check(server: ServerProcess, pipes: list[Connection], procs: list[Any], end: float) -> None:
    """Raise at once when the server died or a worker reported an error before the window's
    ``end``. A worker reaches the end on its own and reports its figures, which may come while
    the caller is still busy (reading the broker's memory); near the end, those stay in the
    pipe for the caller to collect."""
    if not server.alive():
        raise click.ClickException(f"the server died during the case:\n{server.log_tail()}")
    if time.monotonic() >= end - _END_GRACE_S:
        return
    for pipe, proc in zip(pipes, procs, strict=True):
        if pipe.poll(0) or not proc.is_alive():
            _receive(pipe, proc, 1.0, "done")  # a worker is done early only when it failed
            raise click.ClickException(f"load worker {proc.name} stopped before the end")


def start_workers(specs: list[LoadSpec], procs: list[Any], pipes: list[Connection]) -> None:
    """Start one load worker process per spec (spawn start method) and wait until each is
    ready; each goes into ``procs`` and its pipe into ``pipes`` as it starts, so that the
    caller's :func:`stop_workers` also ends those started before a failure."""
    ctx = multiprocessing.get_context("spawn")
    for spec in specs:
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=worker_main, args=(spec, theirs), daemon=True,
                           name=f"bench-{spec.kind}-{spec.worker}")
        proc.start()
        theirs.close()
        procs.append(proc)
        pipes.append(mine)
    for pipe, proc in zip(pipes, procs, strict=True):
        _receive(pipe, proc, READY_TIMEOUT_S, "ready")


def stop_workers(procs: list[Any], pipes: list[Connection]) -> None:
    """Close the pipes (a worker still waiting for its start time gets EOF and exits) and end
    the processes."""
    for pipe in pipes:
        pipe.close()
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
        proc.join(5)


def _run_load(specs: list[LoadSpec], server: ServerProcess) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the workers once; their results and the broker's CPU and memory over the window."""
    procs: list[Any] = []
    pipes: list[Connection] = []
    try:
        start_workers(specs, procs, pipes)
        reset = server.reset_peak_rss()
        start = time.monotonic() + 0.05
        for pipe in pipes:
            pipe.send(start)
        begin = start + specs[0].warmup_s
        end = begin + specs[0].duration_s
        time.sleep(max(0.0, begin - time.monotonic()))
        cpu0 = server.cpu_seconds()
        lag0 = run(_loop_lag(server.broker_addr))
        anon = 0.0
        while (now := time.monotonic()) < end:
            anon = max(anon, server.memory().get("RssAnon", 0.0))
            _check(server, pipes, procs, end)
            time.sleep(min(0.1, end - now))
        cpu1 = server.cpu_seconds()
        lag1 = run(_loop_lag(server.broker_addr))
        mem = server.memory()
        anon = max(anon, mem.get("RssAnon", 0.0))
        results = [_receive(pipe, proc, specs[0].duration_s + 60, "done")
                   for pipe, proc in zip(pipes, procs, strict=True)]
        for proc in procs:
            proc.join(10)
    except click.ClickException:
        if not server.alive():  # the cause, whatever a worker saw
            raise click.ClickException(
                f"the server died during the case:\n{server.log_tail()}") from None
        raise
    finally:
        stop_workers(procs, pipes)
    if not server.alive():
        raise click.ClickException(f"the server died during the case:\n{server.log_tail()}")
    broker = {
        "cpu_pct": r(100 * (cpu1 - cpu0) / specs[0].duration_s) if cpu0 is not None and cpu1 else None,
        "peak_rss_mib": r(mem.get("VmHWM")), "anon_mib": r(anon or None),
        "file_mib": r(mem.get("RssFile")), "peak_reset": reset,
        # wake-ups of the broker's 10 ms timer more than 5 ms late within the window
        "loop_late_over_5ms": sum(lag1.get(k, 0) - lag0.get(k, 0) for k in LAG_OVER_5MS) if lag1 else None,
    }
    return results, broker


def _figures(case: Case, plan: Plan, spec: LoadSpec, results: list[dict[str, Any]],
             broker: dict[str, Any]) -> dict[str, Any]:
    seconds = plan.duration_s
    count = sum(x["count"] for x in results)
    requests = sum(x["requests"] for x in results)
    latencies = array("d")
    for x in results:
        latencies.frombytes(x["latencies"])
    lat = sorted(latencies)
    errors: dict[str, int] = {}
    for x in results:
        for code, n in x["errors"].items():
            errors[str(code)] = errors.get(str(code), 0) + n
    body_bytes = sum(x["bytes"] for x in results) if case.kind == "pull" else count * case.body_size

    def ms(pct: float) -> float | None:
        value = percentile(lat, pct)
        return r(value * 1000, 3) if value is not None else None

    figures: dict[str, Any] = {
        "msgs_s": r(count / seconds), "mib_s": r(body_bytes / MiB / seconds, 2),
        "requests_s": r(requests / seconds),
        "p50_ms": ms(50), "p99_ms": ms(99), "p999_ms": ms(99.9),
        "max_ms": r(lat[-1] * 1000, 3) if lat else None,
        "broker_cpu_pct": broker["cpu_pct"],
        "load_cpu_pct": r(100 * sum(x["cpu_s"] for x in results) / seconds),
        "peak_rss_mib": broker["peak_rss_mib"], "anon_mib": broker["anon_mib"],
        "file_mib": broker["file_mib"], "loop_late_over_5ms": broker.get("loop_late_over_5ms"),
        "count": count, "seconds": seconds, "body_bytes": case.body_size,
        "workers": len(results), "window": spec.window, "connections": spec.connections,
        "per_request": PULL_BATCH if case.kind == "pull" else BATCH if case.kind == "batch" else 1,
        "errors": errors,
    }
    if case.rate is not None:
        figures["target_msgs_s"] = case.rate
        figures["skipped"] = sum(x["skipped"] for x in results)
    first = next((x["first_error"] for x in results if x["first_error"]), None)
    if first:
        figures["first_error"] = first
    return figures


# -- the run -------------------------------------------------------------------------------------
def _run(server: ServerProcess, plan: Plan, names: list[str], console: Console,
         cases: dict[str, dict[str, Any]]) -> bool:
    """Run the cases into ``cases``; whether the peak RSS could be reset for every case."""
    reset = True
    sent = 0  # messages in TOPIC so far
    pull_ends: list[int] = []
    for name in names:
        case = CASES[name]
        if case.kind == "pull" and not pull_ends:
            console.print(f"[dim]filling {PULL_TOPIC} with {plan.pull_messages:,} messages...[/]")
            pull_ends = run(_fill(server.broker_addr, plan.pull_messages))
        console.print(f"[dim]running {name}...[/]")
        specs = _specs(case, plan, server, pull_ends)
        results, broker = _run_load(specs, server)
        reset = reset and broker["peak_reset"]
        figures = _figures(case, plan, specs[0], results, broker)
        if case.kind != "pull":  # let dispatch catch up so the next case starts even
            sent += sum(x["total"] for x in results)
            figures["dispatch_catch_up_s"] = r(
                run(_dispatched(server.broker_addr, TOPIC, sent, 600)), 3)
            figures["index_catch_up_s"] = r(run(_indexed(server.broker_addr, 600)), 3)
        cases[name] = figures
    return reset


def _check_settings(ctx: click.Context, param: click.Parameter, values: tuple[str, ...],
                    ) -> tuple[str, ...]:
    for value in values:
        key, eq, _ = value.partition("=")
        if not eq or not key.strip():
            raise click.BadParameter(f"{value!r} is not KEY=VALUE (e.g. messageIndexEnable=false)")
    return values


@click.command("broker")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Scratch directory; a temporary directory (the server's store) is made in it "
              "and removed afterwards.  [default: ./bench-data]")
@click.option("--quick", is_flag=True, help="About a second per case: a smoke run.")
@click.option("--only", multiple=True, type=click.Choice(list(CASES)), metavar="CASE",
              help=f"Run only this case (repeatable): {', '.join(CASES)}.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the JSON document to this file.")
@click.option("--producers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Load worker processes (pullers too, at most one per queue).")
@click.option("--concurrency", default=64, show_default=True, type=click.IntRange(1, 100_000),
              help="Requests outstanding per worker process.")
@click.option("--connections", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Connections per worker process.")
@click.option("--duration", type=click.FloatRange(0.1, 3600),
              help="Measured seconds per case.  [default: 10, --quick: 1]")
@click.option("--flush", type=click.Choice(["async", "sync"]), default="async", show_default=True,
              help="The broker's flushDiskType: ASYNC_FLUSH or SYNC_FLUSH.")
@click.option("--codec", type=click.Choice(["json", "rocketmq"]), default="json", show_default=True,
              help="Request header codec (Java clients send JSON by default).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", callback=_check_settings,
              help="A broker.conf line for the server (repeatable), e.g. messageIndexEnable=false.")
def broker_bench(directory: Path | None, quick: bool, only: tuple[str, ...], output: Path | None,
                 producers: int, concurrency: int, connections: int, duration: float | None,
                 flush: str, codec: str, settings: tuple[str, ...]) -> None:
    """Measure a NameServer + Broker end to end over TCP: sends, batches, paced sends, pulls."""
    console = stderr_console()
    plan = Plan.make(quick, producers, concurrency, connections, duration,
                     SerializeType.JSON if codec == "json" else SerializeType.ROCKETMQ)
    names = [name for name in CASES if name in only] if only else list(CASES)
    flush_type = "SYNC_FLUSH" if flush == "sync" else "ASYNC_FLUSH"
    base = directory if directory is not None else Path.cwd() / "bench-data"
    made_base = not base.exists()
    base.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="broker-", dir=base))
    load_start = load_avg()
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    server = ServerProcess(scratch, flush_type, settings)
    status = None
    cases: dict[str, dict[str, Any]] = {}
    try:
        console.print(f"[dim]starting bolide start ({flush_type}) in {scratch}...[/]")
        server.start(READY_TIMEOUT_S)
        run(_prepare(server))
        reset = _run(server, plan, names, console, cases)
    except BolideError as exc:
        raise click.ClickException(f"{exc}\nserver log:\n{server.log_tail()}") from exc
    finally:
        status = server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        if made_base:
            with contextlib.suppress(OSError):
                base.rmdir()
    targets = target_rows(cases)
    doc = {
        "machine": machine_info(),
        "run": {
            "date": started.isoformat(timespec="seconds"),
            "mode": "quick" if quick else "full",
            "seconds": round(time.perf_counter() - t0, 1),
            "flush_disk_type": flush_type, "codec": codec, "settings": list(settings),
            "producers": producers,
            "concurrency": concurrency, "connections": connections,
            "warmup_s": plan.warmup_s, "duration_s": plan.duration_s,
            "pull_messages": plan.pull_messages if "pull_100b" in names else None,
            "load_avg_start": load_start, "load_avg_end": load_avg(),
            "peak_rss_reset_per_case": reset, "server_exit_status": status,
        },
        "cases": cases,
        "targets": targets,
    }
    console.print(case_table(cases, f"bolide bench broker ({flush_type}, {codec} headers)"))
    console.print(target_table(targets))
    emit(doc, output)
