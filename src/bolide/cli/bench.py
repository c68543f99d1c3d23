"""``bolide bench store``: throughput, latency and memory of the embedded store's hot paths.

Every case prints one row of a table on stderr; the whole run is one JSON document on
stdout (and in ``--output FILE``)::

    {"machine": {...}, "run": {...}, "cases": {"put_async_100b": {"msgs_s": ..., ...}, ...}}

Each case reports ``msgs_s``, ``mib_s`` (CommitLog bytes, or file bytes for the disk
cases), ``mib_s_vs_disk`` (``mib_s`` over the raw ``disk_write`` speed of the same run),
``peak_rss_mib`` (``VmHWM``, reset at the start of the case where the kernel allows) and
``anon_mib`` (``RssAnon`` sampled when the case's timing ends), plus case-specific figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import mmap
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import cycle, islice
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from bolide.broker.flush_waiters import FlushWaiters
from bolide.cli.bench_broker import broker_bench
from bolide.cli.bench_client import client_bench
from bolide.cli.bench_common import emit, machine_info, stderr_console
from bolide.cli.bench_common import load_avg as _load
from bolide.cli.bench_common import percentile as _percentile
from bolide.cli.bench_common import proc_status as _status
from bolide.cli.bench_common import r as _r
from bolide.cli.bench_common import reset_peak_rss as _reset_peak_rss
from bolide.common import Message
from bolide.store import FlushDiskType, GetStatus, MessageStore, PutMessageResult, PutStatus, StoreConfig

MiB = 1024 * 1024
TOPIC = "BenchTopic"
GROUP = "bench_group"
POOL_SIZE = 8192  # distinct pre-built messages cycled by the put cases
BATCH = 32


@dataclass(frozen=True)
class Plan:
    """Sizes of one run: the full run or the ``--quick`` smoke run."""

    quick: bool
    segment_size: int
    disk_mib: int
    put_counts: dict[int, int]  # body size -> messages
    put_runs: int  # runs of each put case; the best is reported (all in runs_msgs_s)
    sync_seconds: float
    get_count: int
    recovery_mib: int

    @classmethod
    def for_mode(cls, quick: bool) -> Plan:
        if quick:
            return cls(True, 64 * MiB, 32, {100: 20_000, 1024: 20_000}, 1, 1.0, 20_000, 64)
        return cls(False, 1024 * MiB, 256, {100: 2_000_000, 1024: 500_000}, 3, 10.0, 500_000, 1024)


GROUPS: dict[str, tuple[str, ...]] = {
    "disk": ("disk_write", "disk_mmap"),
    "put_async": ("put_async_100b", "put_async_1k", "put_async_batch32_100b",
                  "put_async_batch32_1k"),
    "put_sync": ("put_sync_1w", "put_sync_64w", "put_sync_64a"),
    "get": ("get_raw", "get_decoded"),
    "recovery": ("recovery_clean", "recovery_abnormal"),
}
CASES = tuple(name for names in GROUPS.values() for name in names)


# -- the run --------------------------------------------------------------------------------
class Bench:
    def __init__(self, scratch: Path, plan: Plan, wanted: set[str], console: Console) -> None:
        self.scratch = scratch
        self.plan = plan
        self.wanted = wanted
        self.console = console
        self.cases: dict[str, dict[str, Any]] = {}
        self.peak_reset = True

    # -- bookkeeping ----------------------------------------------------------------------
    def want(self, name: str) -> bool:
        return name in self.wanted

    @contextlib.contextmanager
    def case(self, name: str) -> Iterator[dict[str, Any]]:
        """Run one case: reset the peak RSS, collect the figures the body stores in the dict."""
        self.console.print(f"[dim]running {name}...[/]")
        gc.collect()
        self.peak_reset = _reset_peak_rss() and self.peak_reset
        figures: dict[str, Any] = {}
        yield figures
        mem = _status()
        anon = figures.pop("_anon", None)
        if anon is None:
            anon = mem.get("RssAnon")
        self.cases[name] = {
            "msgs_s": figures.pop("msgs_s", None),
            "mib_s": figures.pop("mib_s", None),
            "mib_s_vs_disk": None,
            "peak_rss_mib": _r(mem.get("VmHWM")),
            "anon_mib": _r(anon),
            **figures,
        }

    @staticmethod
    def memory_sample(figures: dict[str, Any]) -> None:
        """Sample ``RssAnon`` now, while the case's data is still alive."""
        figures["_anon"] = _status().get("RssAnon")

    def store(self, name: str, **changes: Any) -> MessageStore:
        root = self.scratch / name
        shutil.rmtree(root, ignore_errors=True)
        cfg = StoreConfig().replace(store_path_root_dir=str(root),
                                    mapped_file_size_commit_log=self.plan.segment_size, **changes)
        return MessageStore(cfg)

    def drop(self, st: MessageStore) -> None:
        st.close()
        shutil.rmtree(st.config.root, ignore_errors=True)

    def run(self) -> None:
        for group, names in GROUPS.items():
            if self.wanted.intersection(names):
                getattr(self, f"_{group}")()
                gc.collect()
        disk = self.cases.get("disk_write", {}).get("mib_s")
        for figures in self.cases.values():
            mib_s = figures.get("mib_s")
            figures["mib_s_vs_disk"] = _r(mib_s / disk, 3) if disk and mib_s else None

    # -- disk -----------------------------------------------------------------------------
    def _disk(self) -> None:
        size = self.plan.disk_mib * MiB
        chunk = os.urandom(MiB)
        path = self.scratch / "disk.bin"
        if self.want("disk_write"):
            with self.case("disk_write") as f:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    t0 = time.perf_counter()
                    for _ in range(self.plan.disk_mib):
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(fd, view):]
                    t_written = time.perf_counter()
                    os.fdatasync(fd)
                    elapsed = time.perf_counter() - t0
                finally:
                    os.close(fd)
                    path.unlink()
                f.update(mib_s=_r(size / MiB / elapsed), bytes=size, seconds=_r(elapsed, 3),
                         write_only_mib_s=_r(size / MiB / (t_written - t0)))
        if self.want("disk_mmap"):
            with self.case("disk_mmap") as f:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.posix_fallocate(fd, 0, size)
                    mm = mmap.mmap(fd, size)
                    try:
                        t0 = time.perf_counter()
                        for i in range(self.plan.disk_mib):
                            mm[i * MiB : (i + 1) * MiB] = chunk
                        t_copied = time.perf_counter()
                        mm.flush()
                        elapsed = time.perf_counter() - t0
                    finally:
                        mm.close()
                finally:
                    os.close(fd)
                    path.unlink()
                f.update(mib_s=_r(size / MiB / (t_copied - t0)), bytes=size,
                         seconds=_r(t_copied - t0, 3), with_msync_mib_s=_r(size / MiB / elapsed))

    # -- put, ASYNC_FLUSH -----------------------------------------------------------------
    def _put_async(self) -> None:
        for body_size, count in self.plan.put_counts.items():
            label = _size_label(body_size)
            for batch in (1, BATCH):
                name = f"put_async_{label}" if batch == 1 else f"put_async_batch{batch}_{label}"
                if not self.want(name):
                    continue
                pool = _message_pool(body_size)
                with self.case(name) as f:
                    runs = [self._put_async_run(name, pool, batch, count)
                            for _ in range(self.plan.put_runs)]
                    best = max(runs, key=lambda run: run["msgs_s"])
                    f["_anon"] = max(run.pop("_anon") for run in runs)
                    f.update(best, body_bytes=body_size,
                             runs_msgs_s=[run["msgs_s"] for run in runs])

    def _put_async_run(self, name: str, pool: list[Message], batch: int, count: int,
                       ) -> dict[str, Any]:
        """One timed run of a put case on a fresh store: its figures."""
        st = self.store(name).open()
        try:
            _warm_up(st, pool[0])
            if batch == 1:
                elapsed, nbytes = _timed_puts(st.put_message, islice(cycle(pool), count))
            else:
                groups = [pool[j : j + batch] for j in range(0, POOL_SIZE, batch)]
                elapsed, nbytes = _timed_puts(st.put_messages, islice(cycle(groups), count // batch))
            anon = _status().get("RssAnon")
            t0 = time.perf_counter()
            if not st.wait_dispatched(timeout=600, indexed=False):
                raise click.ClickException(f"{name}: dispatch did not catch up")
            catch_up = time.perf_counter() - t0
            if not st.wait_dispatched(timeout=600):
                raise click.ClickException(f"{name}: indexing did not catch up")
            index_catch_up = time.perf_counter() - t0
        finally:
            self.drop(st)
        sent = count // batch * batch
        return {"msgs_s": _r(sent / elapsed), "mib_s": _r(nbytes / MiB / elapsed), "count": sent,
                "record_bytes": round(nbytes / sent), "seconds": _r(elapsed, 3),
                "dispatch_catch_up_s": _r(catch_up, 3), "index_catch_up_s": _r(index_catch_up, 3),
                "msgs_s_incl_dispatch": _r(sent / (elapsed + catch_up)), "_anon": anon}

    # -- put, SYNC_FLUSH ------------------------------------------------------------------
    def _put_sync(self) -> None:
        for writers, kind in ((1, "w"), (64, "w"), (64, "a")):
            name = f"put_sync_{writers}{kind}"
            if not self.want(name):
                continue
            pool = _message_pool(100)
            st = self.store(name, flush_disk_type=FlushDiskType.SYNC_FLUSH).open()
            try:
                _warm_up(st, pool[0])
                with self.case(name) as f:
                    run = _sync_writers if kind == "w" else _sync_tasks
                    latencies, nbytes, elapsed = run(st, pool, writers, self.plan.sync_seconds)
                    self.memory_sample(f)
                    latencies.sort()
                    n = len(latencies)
                    f.update(
                        msgs_s=_r(n / elapsed), mib_s=_r(nbytes / MiB / elapsed), count=n,
                        writers=writers, body_bytes=100, seconds=_r(elapsed, 3),
                        p50_ms=_r(_percentile(latencies, 50) * 1000, 3),
                        p99_ms=_r(_percentile(latencies, 99) * 1000, 3),
                        max_ms=_r(latencies[-1] * 1000, 3) if latencies else None,
                    )
            finally:
                self.drop(st)

    # -- get_message ----------------------------------------------------------------------
    def _get(self) -> None:
        count = self.plan.get_count
        pool = _message_pool(100)
        st = self.store("get").open()
        try:
            groups = [pool[j : j + BATCH] for j in range(0, POOL_SIZE, BATCH)]
            _timed_puts(st.put_messages, [groups[k % len(groups)] for k in range(count // BATCH)])
            if not st.wait_dispatched(timeout=600):
                raise click.ClickException("get: dispatch did not catch up")
            total = st.get_max_offset_in_queue(TOPIC, 0)
            for name, decode in (("get_raw", False), ("get_decoded", True)):
                if not self.want(name):
                    continue
                with self.case(name) as f:
                    elapsed, n, nbytes = _read_queue(st, decode)
                    self.memory_sample(f)
                    if n != total:
                        raise click.ClickException(f"{name}: read {n} of {total} messages")
                    f.update(msgs_s=_r(n / elapsed), mib_s=_r(nbytes / MiB / elapsed), count=n,
                             per_call=BATCH, body_bytes=100, seconds=_r(elapsed, 3))
        finally:
            self.drop(st)

    # -- recovery -------------------------------------------------------------------------
    def _recovery(self) -> None:
        pool = _message_pool(1024)
        st = self.store("recovery").open()
        cfg = st.config
        try:
            try:
                t0 = time.perf_counter()
                written, end = _fill(st, pool, self.plan.recovery_mib * MiB)
                fill_s = time.perf_counter() - t0
            finally:
                st.close()
            common = {"commit_log_bytes": end, "segment_bytes": cfg.mapped_file_size_commit_log,
                      "fill_msgs_s": _r(written / fill_s)}
            if self.want("recovery_clean"):
                with self.case("recovery_clean") as f:
                    elapsed, report = _timed_open(cfg, f)
                    f.update(_recovery_figures(report, elapsed), **common)
            if self.want("recovery_abnormal"):
                # a crash with an all-zero checkpoint and no ConsumeQueues: full CRC scan + rebuild
                (cfg.root / "abort").touch()
                (cfg.root / "checkpoint").write_bytes(bytes(4096))
                shutil.rmtree(cfg.consume_queue_dir)
                with self.case("recovery_abnormal") as f:
                    elapsed, report = _timed_open(cfg, f)
                    if not report.abnormal or report.queue_entries_rebuilt != written:
                        raise click.ClickException(
                            f"recovery_abnormal: rebuilt {report.queue_entries_rebuilt} of "
                            f"{written} ConsumeQueue entries ({report.summary()})")
                    f.update(_recovery_figures(report, elapsed), **common)
        finally:
            shutil.rmtree(cfg.root, ignore_errors=True)


# -- helpers of the cases -------------------------------------------------------------------
def _size_label(size: int) -> str:
    return f"{size // 1024}k" if size % 1024 == 0 else f"{size}b"


def _message_pool(body_size: int) -> list[Message]:
    """POOL_SIZE messages with distinct bodies of ``body_size`` bytes and a tag."""
    noise = os.urandom(body_size + POOL_SIZE)
    return [Message(TOPIC, noise[i : i + body_size], tags="TagA") for i in range(POOL_SIZE)]


def _warm_up(st: MessageStore, msg: Message) -> None:
    """One put so that the first segment and ConsumeQueue file exist before timing."""
    r = st.put_message(msg, 0)
    if not r.ok:
        raise click.ClickException(f"warm-up put failed: {r.status.value}: {r.remark}")
    st.wait_dispatched()


def _timed_puts(put: Callable[[Any, int], PutMessageResult], items: Iterable[Any]
                ) -> tuple[float, int]:
    """Time ``put(item, 0)`` over ``items``; returns (seconds, bytes written)."""
    ok = PutStatus.PUT_OK
    nbytes = 0
    failed = None
    t0 = time.perf_counter()
    for item in items:
        r = put(item, 0)
        if r.status is not ok:
            failed = r
            break
        nbytes += r.wrote_bytes
    elapsed = time.perf_counter() - t0
    if failed is not None:
        raise click.ClickException(f"put failed: {failed.status.value}: {failed.remark}")
    return elapsed, nbytes


def _sync_writers(st: MessageStore, pool: list[Message], writers: int,
                  seconds: float) -> tuple[list[float], int, float]:
    """``writers`` threads put for ``seconds``; returns (latencies, bytes, elapsed)."""
    stop = threading.Event()
    start = threading.Barrier(writers + 1)
    latencies: list[list[float]] = [[] for _ in range(writers)]
    written = [0] * writers
    errors: list[str] = []

    def writer(k: int) -> None:
        put = st.put_message
        clock = time.perf_counter
        ok = PutStatus.PUT_OK
        mine = latencies[k]
        nbytes = 0
        i = k * (POOL_SIZE // writers)
        queue_id = k % 8
        start.wait()
        while not stop.is_set():
            m = pool[i % POOL_SIZE]
            i += 1
            t = clock()
            r = put(m, queue_id)
            mine.append(clock() - t)
            if r.status is not ok:
                errors.append(f"{r.status.value}: {r.remark}")
                break
            nbytes += r.wrote_bytes
        written[k] = nbytes

    threads = [threading.Thread(target=writer, args=(k,), name=f"bench-writer-{k}", daemon=True)
               for k in range(writers)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise click.ClickException(f"SYNC_FLUSH put failed: {errors[0]}")
    return [x for lat in latencies for x in lat], sum(written), elapsed


def _sync_tasks(st: MessageStore, pool: list[Message], tasks: int,
                seconds: float) -> tuple[list[float], int, float]:
    """``tasks`` asyncio tasks on one loop put for ``seconds``, each awaiting its group
    commit without blocking the loop (how a broker uses the store)."""

    async def main() -> tuple[list[float], int, float]:
        waiters = FlushWaiters(asyncio.get_running_loop(), st)
        clock = time.perf_counter
        latencies: list[float] = []
        written = [0]
        stop_at = clock() + seconds

        async def task(k: int) -> None:
            i = k * (POOL_SIZE // tasks)
            while clock() < stop_at:
                t = clock()
                r = st.put_message(pool[i % POOL_SIZE], k % 8, wait_store=False)
                if not r.ok:
                    raise click.ClickException(f"SYNC_FLUSH put failed: {r.status.value}: {r.remark}")
                await waiters.wait(r.end_offset)
                latencies.append(clock() - t)
                written[0] += r.wrote_bytes
                i += 1

        t0 = clock()
        await asyncio.gather(*(task(k) for k in range(tasks)))
        return latencies, written[0], clock() - t0

    return asyncio.run(main())


def _read_queue(st: MessageStore, decode: bool) -> tuple[float, int, int]:
    """Read queue 0 from offset 0 to its end, 32 per call; returns (elapsed, count, bytes)."""
    get = st.get_message
    found = GetStatus.FOUND
    offset = n = nbytes = 0
    t0 = time.perf_counter()
    while True:
        r = get(GROUP, TOPIC, 0, offset, BATCH)
        if r.status is not found:
            break
        n += len(r.messages) if decode else len(r.buffers)
        nbytes += r.buffer_total_size
        offset = r.next_begin_offset
    return time.perf_counter() - t0, n, nbytes


RECOVERY_QUEUES = 8


def _fill(st: MessageStore, pool: list[Message], target: int) -> tuple[int, int]:
    """Put batches over RECOVERY_QUEUES queues until the next would pass ``target`` bytes."""
    groups = [pool[j : j + BATCH] for j in range(0, POOL_SIZE, BATCH)]
    put = st.put_messages
    k = n = end = 0
    while True:
        r = put(groups[k % len(groups)], k % RECOVERY_QUEUES)
        if not r.ok:
            raise click.ClickException(f"filling the store failed: {r.status.value}: {r.remark}")
        k += 1
        n += r.msg_num
        end = r.end_offset
        if end + 2 * r.wrote_bytes + 8 > target:
            return n, end


def _timed_open(cfg: StoreConfig, figures: dict[str, Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    st = MessageStore(cfg).open()
    elapsed = time.perf_counter() - t0
    Bench.memory_sample(figures)
    report = st.recovery_report
    st.close()
    return elapsed, report


def _recovery_figures(report: Any, elapsed: float) -> dict[str, Any]:
    return {
        "msgs_s": _r(report.records_checked / elapsed),
        "mib_s": _r(report.bytes_checked / MiB / elapsed),
        "records": report.records_checked, "bytes_checked": report.bytes_checked,
        "queue_entries_rebuilt": report.queue_entries_rebuilt, "seconds": _r(elapsed, 3),
    }


# -- output ---------------------------------------------------------------------------------
def _notes(f: dict[str, Any]) -> str:
    if "p50_ms" in f:
        return f"{f['writers']} writer(s); p50 {f['p50_ms']} ms, p99 {f['p99_ms']} ms"
    if "dispatch_catch_up_s" in f:
        return f"{f['record_bytes']} B records; dispatch lag at end {f['dispatch_catch_up_s']} s"
    if "queue_entries_rebuilt" in f:
        return (f"{f['records']:,} records in {f['seconds']} s; "
                f"{f['queue_entries_rebuilt']:,} queue entries rebuilt")
    if "write_only_mib_s" in f:
        return f"{f['bytes'] // MiB} MiB; before fdatasync {f['write_only_mib_s']} MiB/s"
    if "with_msync_mib_s" in f:
        return f"{f['bytes'] // MiB} MiB; with msync {f['with_msync_mib_s']} MiB/s"
    if "per_call" in f:
        return f"{f['count']:,} messages, {f['per_call']} per call"
    return ""


def _table(cases: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="bolide bench store")
    for col in ("case", "msgs/s", "MiB/s", "x disk", "peak RSS MiB", "anon MiB"):
        table.add_column(col, justify="left" if col == "case" else "right", no_wrap=True)
    table.add_column("notes")

    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    for name, f in cases.items():
        table.add_row(name, num(f["msgs_s"], ",.0f"), num(f["mib_s"], ",.1f"),
                      num(f["mib_s_vs_disk"], ".2f"), num(f["peak_rss_mib"], ",.0f"),
                      num(f["anon_mib"], ",.0f"), _notes(f))
    return table


# -- the command ----------------------------------------------------------------------------
@click.group()
def bench() -> None:
    """Measure Bolide's hot paths."""


bench.add_command(broker_bench)
bench.add_command(client_bench)


@bench.command("store")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Scratch directory; a temporary directory is made in it and removed "
              "afterwards.  [default: ./bench-data]")
@click.option("--quick", is_flag=True, help="Small counts and 64 MiB segments: a smoke run.")
@click.option("--only", multiple=True, type=click.Choice([*GROUPS, *CASES]), metavar="NAME",
              help=f"Run only this case or group (repeatable): {', '.join([*GROUPS, *CASES])}.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the JSON document to this file.")
def store(directory: Path | None, quick: bool, only: tuple[str, ...], output: Path | None) -> None:
    """Measure the store: disk baseline, puts, gets and recovery; print JSON figures."""
    console = stderr_console()
    plan = Plan.for_mode(quick)
    wanted: set[str] = set()
    for name in only or CASES:
        wanted.update(GROUPS.get(name, (name,)))
    base = directory if directory is not None else Path.cwd() / "bench-data"
    made_base = not base.exists()
    base.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="store-", dir=base))
    load_start = _load()
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    runner = Bench(scratch, plan, wanted, console)
    try:
        runner.run()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if made_base:
            with contextlib.suppress(OSError):
                base.rmdir()
    doc = {
        "machine": machine_info(),
        "run": {
            "date": started.isoformat(timespec="seconds"),
            "mode": "quick" if quick else "full",
            "seconds": round(time.perf_counter() - t0, 1),
            "segment_bytes": plan.segment_size,
            "load_avg_start": load_start,
            "load_avg_end": _load(),
            "peak_rss_reset_per_case": runner.peak_reset,
        },
        "cases": runner.cases,
    }
    console.print(_table(runner.cases))
    emit(doc, output)
