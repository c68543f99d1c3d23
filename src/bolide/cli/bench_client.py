"""``bolide bench client``: what one process of Bolide's Python client does, in msgs/s.

Cases, each against every target server of the run (``bolide start`` as a child process,
and a RocketMQ NameServer given with ``--rocketmq``), after ``--warmup`` seconds of unmeasured
sends: ``sync_send`` (one send at a time), ``async_send`` (``--window`` sends in flight),
``batch_send`` (``--batch`` messages per request), ``push_consume`` (a PushConsumer reads
what the send cases wrote, from its first message to its last). Each case reports
``msgs_s`` and ``client_cpu_pct`` (this process's CPU time over the wall time: 100 = one
core busy). One row per case and target on stderr, one JSON document on stdout (and in
``--output FILE``). ``bench/run_client.py`` starts a real RocketMQ broker for ``--rocketmq``.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from bolide.cli.bench_common import emit, load_avg, machine_info, r, stderr_console
from bolide.cli.bench_server import ServerProcess
from bolide.client import Admin, ConsumeFrom, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from bolide.common.waiting import wait_for
from bolide.errors import BolideError

CASES = ("sync_send", "async_send", "batch_send", "push_consume")
READY_TIMEOUT_S = 60.0


async def _timed(duration_s: float, step: Callable[[], Awaitable[int]]) -> dict[str, Any]:
    """Run ``step`` (returns messages done) until ``duration_s`` passed; msgs/s and CPU."""
    count = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    end = t0 + duration_s
    while time.perf_counter() < end:
        count += await step()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"messages": count, "seconds": r(wall, 2), "msgs_s": r(count / wall),
            "client_cpu_pct": r(100 * cpu / wall)}


async def _send_cases(namesrv: str, topic: str, names: list[str], duration_s: float, body: bytes,
                      window: int, batch: int, warmup_s: float) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    errors = {"n": 0}

    async def window_of_sends() -> int:
        """``window`` sends in flight; a busy broker's refusals are counted, not fatal."""
        results = await asyncio.gather(*(producer.send_async(Message(topic, body)) for _ in range(window)),
                                       return_exceptions=True)
        failed = [x for x in results if isinstance(x, BaseException)]
        for exc in failed:
            if not isinstance(exc, BolideError):
                raise exc
        errors["n"] += len(failed)
        return window - len(failed)

    async with Producer(namesrv, "bench-client-pg") as producer:
        await producer.send(Message(topic, body))  # route, connection and topic in place
        if warmup_s > 0:  # a JVM broker needs its JIT warm before it shows its speed
            await _timed(warmup_s, window_of_sends)
        if "sync_send" in names:
            async def one() -> int:
                await producer.send(Message(topic, body))
                return 1
            out["sync_send"] = await _timed(duration_s, one)
        if "async_send" in names:
            errors["n"] = 0
            out["async_send"] = await _timed(duration_s, window_of_sends)
            out["async_send"].update(window=window, refused=errors["n"])
        if "batch_send" in names:
            async def batched() -> int:
                await producer.send_batch([Message(topic, body) for _ in range(batch)])
                return batch
            out["batch_send"] = await _timed(duration_s, batched)
            out["batch_send"]["batch"] = batch
    return out


async def _push_case(namesrv: str, topic: str, limit: int) -> dict[str, Any]:
    async with Admin(namesrv) as admin:
        stored = sum(o.max_offset - o.min_offset for o in (await admin.topic_stats(topic)).values())
    total = min(stored, limit)
    state: dict[str, float] = {"count": 0}
    done = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        if not state["count"]:
            state["t0"], state["cpu0"] = time.perf_counter(), time.process_time()
        state["count"] += len(msgs)
        if state["count"] >= total:
            state["t1"], state["cpu1"] = time.perf_counter(), time.process_time()
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(namesrv, f"bench-client-cg-{time.time_ns()}", listener=listener,
                            consume_from=ConsumeFrom.FIRST_OFFSET, rebalance_interval_ms=1000)
    consumer.subscribe(topic)
    async with consumer:
        await wait_for(done.wait(), 600)
    wall, cpu = state["t1"] - state["t0"], state["cpu1"] - state["cpu0"]
    count = int(state["count"])
    return {"messages": count, "seconds": r(wall, 2), "msgs_s": r(count / wall) if wall > 0 else None,
            "client_cpu_pct": r(100 * cpu / wall) if wall > 0 else None}


async def _run_target(namesrv: str, names: list[str], duration_s: float, body: bytes, window: int,
                      batch: int, push_limit: int, warmup_s: float) -> dict[str, dict[str, Any]]:
    topic = f"BenchClient{time.time_ns()}"
    cases = await _send_cases(namesrv, topic, names, duration_s, body, window, batch, warmup_s)
    if "push_consume" in names:
        cases["push_consume"] = await _push_case(namesrv, topic, push_limit)
    return cases


@click.command("client")
@click.option("--quick", is_flag=True, help="About a second per case: a smoke run.")
@click.option("--only", multiple=True, type=click.Choice(list(CASES)), metavar="CASE",
              help=f"Run only this case (repeatable): {', '.join(CASES)}.")
@click.option("--duration", type=click.FloatRange(0.1, 3600),
              help="Measured seconds per send case.  [default: 10, --quick: 1]")
@click.option("--warmup", type=click.FloatRange(0, 600),
              help="Seconds of pipelined sends (not measured) before each target's cases.  "
              "[default: 10, --quick: 0.5]")
@click.option("--body", "body_size", default=100, show_default=True, type=click.IntRange(1, 4096),
              help="Body bytes per message (at most 4096: larger bodies would be compressed).")
@click.option("--window", default=256, show_default=True, type=click.IntRange(1, 100_000),
              help="Sends in flight in async_send.")
@click.option("--batch", default=32, show_default=True, type=click.IntRange(1, 10_000),
              help="Messages per request in batch_send.")
@click.option("--push-limit", default=200_000, show_default=True, type=click.IntRange(1),
              help="At most this many messages consumed in push_consume.")
@click.option("--rocketmq", "rocketmq", metavar="HOST:PORT",
              help="Also measure against the RocketMQ NameServer at this address (its broker "
              "with autoCreateTopicEnable=true).")
@click.option("--no-bolide", is_flag=True, help="Do not start a Bolide server (needs --rocketmq).")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Scratch directory for the Bolide server's store.  [default: ./bench-data]")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the JSON document to this file.")
def client_bench(quick: bool, only: tuple[str, ...], duration: float | None, warmup: float | None,
                 body_size: int, window: int,
                 batch: int, push_limit: int, rocketmq: str | None, no_bolide: bool,
                 directory: Path | None, output: Path | None) -> None:
    """Client-side msgs/s of one process: sync, pipelined async and batch sends, push consumption."""
    if no_bolide and not rocketmq:
        raise click.UsageError("--no-bolide leaves nothing to measure: give --rocketmq HOST:PORT")
    console = stderr_console()
    names = [n for n in CASES if n in only] if only else list(CASES)
    duration_s = duration or (1.0 if quick else 10.0)
    warmup_s = warmup if warmup is not None else (0.5 if quick else 10.0)
    body = b"x" * body_size
    started, t0, load_start = datetime.now(UTC), time.perf_counter(), load_avg()
    targets: dict[str, dict[str, dict[str, Any]]] = {}

    def measure(label: str, namesrv: str) -> None:
        console.print(f"[dim]{label}: {', '.join(names)} ({duration_s:g} s per send case)...[/]")
        try:
            targets[label] = asyncio.run(_run_target(namesrv, names, duration_s, body, window, batch,
                                                     push_limit, warmup_s))
        except (BolideError, TimeoutError) as exc:
            raise click.ClickException(f"the {label} run failed: {exc}") from exc

    if not no_bolide:
        base = directory if directory is not None else Path.cwd() / "bench-data"
        made_base = not base.exists()
        base.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="client-", dir=base))
        server = ServerProcess(scratch, "ASYNC_FLUSH")
        try:
            server.start(READY_TIMEOUT_S)
            measure("bolide", server.namesrv_addr)
        finally:
            server.stop()
            shutil.rmtree(scratch, ignore_errors=True)
            if made_base:
                with contextlib.suppress(OSError):
                    base.rmdir()
    if rocketmq:
        measure("rocketmq", rocketmq)

    table = Table(title=f"bolide bench client ({body_size} B bodies)")
    for column in ("target", "case", "msgs/s", "client CPU %", "messages", "seconds"):
        table.add_column(column, justify="left" if column in ("target", "case") else "right")
    for label, cases in targets.items():
        for name, f in cases.items():
            table.add_row(label, name, str(f["msgs_s"]), str(f["client_cpu_pct"]), str(f["messages"]),
                          str(f["seconds"]))
    console.print(table)
    emit({
        "machine": machine_info(),
        "run": {"date": started.isoformat(timespec="seconds"), "mode": "quick" if quick else "full",
                "seconds": round(time.perf_counter() - t0, 1), "body_bytes": body_size,
                "duration_s": duration_s, "warmup_s": warmup_s, "window": window, "batch": batch,
                "rocketmq": rocketmq,
                "load_avg_start": load_start, "load_avg_end": load_avg()},
        "targets": targets,
    }, output)
