"""Benchmark: master/slave replication under the send benchmark, and a slave's catch-up.

    .venv/bin/python bench/ha_replication.py --dir ./bench-data          # full run, a few minutes
    .venv/bin/python bench/ha_replication.py --quick --dir ./bench-data  # smoke run, ~20 s

Starts ``bolide namesrv`` and, for ASYNC_MASTER then SYNC_MASTER, a master and a slave as
separate ``bolide broker -c CONF`` processes on free ports, with new stores under ``--dir``
(the slave learns the master's HA address from the NameServer). For each role:

1. ``send``: single sends of 1 KiB from worker processes at full speed (the ``send_1k`` case
   of ``bolide bench broker``): sends/s and latency percentiles; the slave's CommitLog growth
   over the measured window (replication MiB/s); the lag (master max offset minus the offset
   the slave acknowledged, from the master's GET_BROKER_HA_STATUS) sampled every 100 ms; and
   the time from the end of the window until the slave holds the master's last byte.
2. ``catch_up``: the slave is stopped, the master filled with ``--catchup-mib`` of 1 KiB
   messages (batches of 64) and left to finish dispatching them (so that its own dispatch
   does not compete), the slave started again: seconds and MiB/s from its start until its
   CommitLog has everything, and until it has dispatched everything too.

Beside each phase: CPU, peak RSS (``VmHWM``, reset when the phase starts) and the highest
anonymous memory sampled of the master and the slave processes, and the machine's busy and
stolen shares of its CPU time (``machine_busy_pct``, ``machine_steal_pct``: 100 = every CPU),
which tell how much else ran on a shared machine.
Prints one JSON document on stdout (a summary table goes to stderr). Figures are never
asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import click

from bolide.cli.bench_broker import (
    BATCH,
    CASES,
    READY_TIMEOUT_S,
    TOPIC,
    Plan,
    _check,
    _figures,
    _prepare,
    _receive,
    _specs,
    start_workers,
    stop_workers,
)
from bolide.cli.bench_common import (
    MiB,
    emit,
    load_avg,
    machine_info,
    percentile,
    proc_status,
    r,
    stderr_console,
)
from bolide.cli.bench_load import PRODUCER_GROUP, _body
from bolide.cli.bench_server import ServerProcess
from bolide.client import Admin
from bolide.common import Message
from bolide.protocol.bodies import encode_batch_body
from bolide.protocol.bodies.ha import HARuntimeInfo
from bolide.protocol.codes import RequestCode, ResponseCode, SerializeType
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.remoting import RemotingClient

ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
SAMPLE_S = 0.1  # the lag sampling period
POLL_S = 0.005  # while waiting for the slave to catch up
CATCH_UP_TIMEOUT_S = 900.0
BODY = 1024
STORED = (ResponseCode.SUCCESS, ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT)


class BenchError(RuntimeError):
    """The run cannot go on (a process died or did not start); the message says which."""


_LAUNCH = "import sys; sys.argv[0] = 'bolide'; from bolide.cli.main import main; main()"


# -- the processes ---------------------------------------------------------------------------------
class Child(ServerProcess):
    """A ``bolide`` command as a child process (its output in ``root/server.log``, appended
    across restarts) that prints the port it listens on; stop, CPU and memory as for the
    server of ``bolide bench broker``."""

    ready = re.compile(rb"listening on (?:port |\S+:)(\d+)")

    def __init__(self, root: Path, args: list[str]) -> None:
        super().__init__(root, "ASYNC_FLUSH")
        self.args = args
        self.port = 0

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        skip = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, *self.args], stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True)  # Ctrl-C reaches the bench only; it stops the children
        deadline = time.monotonic() + timeout_s
        while not (found := self.ready.search(self.log_path.read_bytes()[skip:])):
            if self.proc.poll() is not None:
                raise BenchError(f"{self.args[0]} exited with status {self.proc.returncode} while "
                                 f"starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"{self.args[0]} did not report its port within {timeout_s:.0f} s:"
                                 f"\n{self.log_tail()}")
            time.sleep(0.02)
        self.port = self.broker_port = int(found.group(1))

    def cpu(self) -> float:
        return self.cpu_seconds() or 0.0


def namesrv_process(root: Path) -> Child:
    conf = root / "namesrv.conf"
    root.mkdir(parents=True, exist_ok=True)
    conf.write_text(f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={root / 'kv.json'}\n"
                    f"configStorePath={root / 'namesrv.properties'}\n", encoding="utf-8")
    return Child(root, ["namesrv", "-c", str(conf)])


def broker_process(root: Path, role: str, namesrv_port: int, segment_mib: int) -> Child:
    """A master (brokerId 0, HA port chosen by the kernel) or a SLAVE (brokerId 1)."""
    props = {
        "brokerClusterName": "BenchHA", "brokerName": "bench-ha",
        "brokerId": 1 if role == "SLAVE" else 0, "brokerRole": role,
        "brokerIP1": "127.0.0.1", "bolideBindAddress": "127.0.0.1", "bolideVipChannelEnabled": "false",
        "listenPort": 0, "haListenPort": 0, "namesrvAddr": f"127.0.0.1:{namesrv_port}",
        "storePathRootDir": root / "store", "flushDiskType": "ASYNC_FLUSH",
        "mappedFileSizeCommitLog": segment_mib * MiB, "bolideHaReconnectInterval": 200,
    }
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    child = Child(root, ["broker", "-c", str(conf)])
    child.namesrv_port = namesrv_port
    return child


# -- samples ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    t: float  # time.monotonic()
    master_max: int  # the master's CommitLog max offset
    acked: int  # the offset the slave last acknowledged, as the master saw it (-1: none)
    slave_max: int  # the slave's CommitLog max offset
    master_cpu: float
    slave_cpu: float
    master_anon: float
    slave_anon: float
    machine: tuple[int, int, int] = (0, 0, 0)  # (steal, busy, all) CPU ticks of the machine

    @property
    def lag(self) -> int:
        return self.master_max - max(self.acked, 0)


def machine_ticks() -> tuple[int, int, int]:
    """(steal, busy, all) CPU ticks of the machine since boot, from /proc/stat ((0, 0, 0) off
    Linux). Steal is time this VM's CPUs were ready but the host ran another VM; busy is time
    not idle nor waiting for I/O, this benchmark's processes and everyone else's."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0, 0, 0
    fields += [0] * (8 - len(fields))
    return fields[7], sum(fields) - fields[3] - fields[4] - fields[7], sum(fields)


def machine_pct(first: Sample, last: Sample) -> dict[str, float | None]:
    """The machine's busy and stolen shares of all its CPU time between two samples (100 =
    every CPU), to compare with the CPU of the master, the slave and the load."""
    ticks = last.machine[2] - first.machine[2]
    if ticks <= 0:
        return {"machine_busy_pct": None, "machine_steal_pct": None}
    return {"machine_busy_pct": r(100 * (last.machine[1] - first.machine[1]) / ticks),
            "machine_steal_pct": r(100 * (last.machine[0] - first.machine[0]) / ticks)}


class Watch:
    """GET_BROKER_HA_STATUS of the master and the slave, with their CPU and memory."""

    def __init__(self, admin: Admin, master: Child, slave: Child) -> None:
        self.admin = admin
        self.master = master
        self.slave = slave

    async def master_info(self) -> HARuntimeInfo:
        return await self.admin.ha_status(self.master.broker_addr)

    async def slave_max(self) -> int:
        info = await self.admin.ha_status(self.slave.broker_addr)
        return info.ha_client_runtime_info.max_offset

    async def sample(self) -> Sample:
        m, s = await asyncio.gather(self.master_info(), self.slave_max())
        acked = max((c.slave_ack_offset for c in m.ha_connection_info), default=-1)
        return Sample(time.monotonic(), m.master_commit_log_max_offset, acked, s,
                      self.master.cpu(), self.slave.cpu(),
                      proc_status(self.master.pid).get("RssAnon", 0.0),
                      proc_status(self.slave.pid).get("RssAnon", 0.0), machine_ticks())

    async def connected(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Wait until the master counts the slave in sync (connected and acknowledging)."""
        deadline = time.monotonic() + timeout_s
        while (await self.master_info()).in_sync_slave_nums < 1:
            if time.monotonic() > deadline:
                raise BenchError(f"the slave did not connect to the master within {timeout_s:.0f} s:"
                                 f"\n{self.slave.log_tail()}")
            await asyncio.sleep(0.05)

    async def dispatched(self, child: Child, timeout_s: float = CATCH_UP_TIMEOUT_S,
                         every_s: float = 0.05) -> float:
        """Wait until ``child`` has dispatched its whole CommitLog (dispatchBehindBytes 0 in
        GET_BROKER_RUNTIME_INFO); returns the wait in seconds."""
        t0 = time.monotonic()
        while int((await self.admin.broker_runtime_info(child.broker_addr))["dispatchBehindBytes"]):
            if time.monotonic() - t0 > timeout_s:
                raise BenchError(f"{child.root.name}: dispatch did not finish within {timeout_s:.0f} s")
            await asyncio.sleep(every_s)
        return time.monotonic() - t0

    async def disconnected(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while (await self.master_info()).ha_connection_info:
            if time.monotonic() > deadline:
                raise BenchError("the master still lists the stopped slave's connection")
            await asyncio.sleep(0.05)


def memory(child: Child, samples: list[Sample], anon_of: str) -> dict[str, Any]:
    mem = child.memory()
    anon = max([getattr(s, anon_of) for s in samples] + [mem.get("RssAnon", 0.0)])
    return {"peak_rss_mib": r(mem.get("VmHWM")), "anon_mib": r(anon or None),
            "file_mib": r(mem.get("RssFile"))}


def window(samples: list[Sample], begin: float, end: float) -> tuple[Sample, Sample]:
    """The first sample at or after ``begin`` and the last one at or before ``end``."""
    inside = [s for s in samples if begin <= s.t <= end] or samples
    return inside[0], inside[-1]


def rate(first: Sample, last: Sample, field: str) -> float | None:
    seconds = last.t - first.t
    return None if seconds <= 0 else (getattr(last, field) - getattr(first, field)) / seconds


def cpu_pct(first: Sample, last: Sample, field: str) -> float | None:
    """CPU use between two samples, 100 = one core (None when they are at the same time)."""
    value = rate(first, last, field)
    return None if value is None else r(100 * value)


# -- phase 1: sends ----------------------------------------------------------------------------------
async def send_phase(watch: Watch, plan: Plan) -> dict[str, Any]:
    master, slave = watch.master, watch.slave
    case = CASES["send_1k"]
    specs = _specs(case, plan, master, [])
    procs: list[Any] = []
    pipes: list[Connection] = []
    samples: list[Sample] = []
    try:
        start_workers(specs, procs, pipes)
        reset = all([master.reset_peak_rss(), slave.reset_peak_rss()])
        start = time.monotonic() + 0.05
        for pipe in pipes:
            pipe.send(start)
        begin = start + plan.warmup_s
        end = begin + plan.duration_s
        tick = start
        while time.monotonic() < end:
            samples.append(await watch.sample())
            _check(master, pipes, procs, end)
            if not slave.alive():
                raise BenchError(f"the slave died during the load:\n{slave.log_tail()}")
            tick += SAMPLE_S
            await asyncio.sleep(max(0.0, tick - time.monotonic()))
        caught_at, final = await settle(watch, pipes, procs, end)
        results = [_receive(pipe, proc, 60, "done") for pipe, proc in zip(pipes, procs, strict=True)]
    finally:
        stop_workers(procs, pipes)
    first, last = window(samples, begin, end)
    lags = sorted(s.lag for s in samples if begin <= s.t <= end)
    master_mem = memory(master, samples, "master_anon")
    fig = _figures(case, plan, specs[0], results, {
        "cpu_pct": cpu_pct(first, last, "master_cpu"), **master_mem})
    slave_max = await watch.slave_max()
    return {
        **{k: fig[k] for k in ("msgs_s", "mib_s", "p50_ms", "p99_ms", "p999_ms", "max_ms", "count",
                               "errors", "load_cpu_pct", "workers", "window")},
        **({"first_error": fig["first_error"]} if "first_error" in fig else {}),
        "commit_log_mib_s": r((rate(first, last, "master_max") or 0) / MiB, 2),
        "replication_mib_s": r((rate(first, last, "slave_max") or 0) / MiB, 2),
        "lag_max_bytes": lags[-1] if lags else None,
        "lag_p99_bytes": percentile(lags, 99), "lag_p50_bytes": percentile(lags, 50),
        "lag_samples": len(lags),
        "catch_up_after_load_s": r(caught_at - end, 3) if caught_at is not None else None,
        "caught_up": caught_at is not None and slave_max == final,
        "master_max_offset": final, "slave_max_offset": slave_max,
        "master": {"cpu_pct": fig["broker_cpu_pct"], **master_mem},
        "slave": {"cpu_pct": cpu_pct(first, last, "slave_cpu"),
                  **memory(slave, samples, "slave_anon")},
        **machine_pct(first, last),
        "peak_rss_reset": reset,
    }


async def settle(watch: Watch, pipes: list[Connection], procs: list[Any],
                 end: float) -> tuple[float | None, int]:
    """After the window: wait until every worker is done (its last requests answered), read
    the master's final max offset, then poll the slave until it has it. Returns when it did
    (None: not within CATCH_UP_TIMEOUT_S) and that offset."""
    deadline = end + CATCH_UP_TIMEOUT_S
    while not all(p.poll(0) or not proc.is_alive() for p, proc in zip(pipes, procs, strict=True)):
        if time.monotonic() > deadline:
            raise BenchError("the load workers did not finish")
        await asyncio.sleep(POLL_S)
    final = (await watch.master_info()).master_commit_log_max_offset
    while await watch.slave_max() < final:
        if time.monotonic() > deadline:
            return None, final
        await asyncio.sleep(POLL_S)
    return time.monotonic(), final


# -- phase 2: catch-up ------------------------------------------------------------------------------
async def fill(broker: str, total_bytes: int, in_flight: int = 8) -> tuple[int, float]:
    """Put ``total_bytes`` of 1 KiB bodies into TOPIC as batches of BATCH, ``in_flight`` at a
    time; any answer that says stored counts (a SYNC_MASTER without its slave answers
    SLAVE_NOT_AVAILABLE). Returns (messages, seconds)."""
    body = encode_batch_body([Message(TOPIC, _body(BODY), tags="TagA") for _ in range(BATCH)])
    batches = math.ceil(total_bytes / (BATCH * BODY))
    todo = iter(range(batches))

    async def putter(client: RemotingClient) -> None:
        for k in todo:
            header = SendMessageRequestHeader(
                producer_group=PRODUCER_GROUP, topic=TOPIC, default_topic="TBW102",
                default_topic_queue_nums=4, queue_id=k % 8, sys_flag=0,
                born_timestamp=int(time.time() * 1000), flag=0, batch=True).to_v2()
            response = await client.invoke(broker, RemotingCommand.request(
                RequestCode.SEND_BATCH_MESSAGE, header, body), timeout_ms=60_000)
            if response.code not in STORED:
                raise BenchError(f"filling the master failed: code {response.code}: {response.remark}")

    t0 = time.perf_counter()
    async with RemotingClient() as client:
        await asyncio.gather(*(putter(client) for _ in range(in_flight)))
    return batches * BATCH, time.perf_counter() - t0


async def catch_up_phase(watch: Watch, fill_mib: int, restart: Any) -> dict[str, Any]:
    """Stop the slave, fill the master, start the slave (``restart()`` returns the new
    process) and time it until it has the master's max offset."""
    slave_from = await watch.slave_max()
    watch.slave.stop()
    await watch.disconnected()
    messages, fill_s = await fill(watch.master.broker_addr, fill_mib * MiB)
    master_dispatch_s = await watch.dispatched(watch.master)  # no dispatch backlog competes
    target = (await watch.master_info()).master_commit_log_max_offset
    reset = watch.master.reset_peak_rss()
    spawned = time.monotonic()
    watch.slave = restart()
    up = time.monotonic()
    master, slave = watch.master, watch.slave
    samples = [Sample(up, target, slave_from, slave_from, master.cpu(), slave.cpu(), 0.0, 0.0,
                      machine_ticks())]
    done: float | None = None
    while True:
        sample = await watch.sample()
        samples.append(sample)
        if sample.slave_max >= target:
            done = sample.t
            break
        if not slave.alive():
            raise BenchError(f"the slave died while catching up:\n{slave.log_tail()}")
        if time.monotonic() - up > CATCH_UP_TIMEOUT_S:
            break
        await asyncio.sleep(0.02)
    slave_dispatch_s = None
    if done is not None:
        slave_dispatch_s = done - up + await watch.dispatched(slave, every_s=0.02)
    moved = target - slave_from
    seconds = None if done is None else done - up
    first, last = samples[0], samples[-1]  # CPU from the slave's start to its catching up
    return {
        "fill_messages": messages, "fill_mib_s": r(messages * BODY / MiB / fill_s, 1),
        "bytes": moved, "mib": r(moved / MiB, 1),
        "seconds": r(seconds, 3), "mib_s": r(moved / MiB / seconds, 1) if seconds else None,
        "seconds_from_spawn": r(done - spawned, 3) if done is not None else None,
        "slave_start_s": r(up - spawned, 3),
        "slave_dispatched_s": r(slave_dispatch_s, 3),
        "master_dispatch_wait_s": r(master_dispatch_s, 3),
        "caught_up": done is not None, "master_max_offset": target,
        "slave_max_offset": samples[-1].slave_max,
        "master": {"cpu_pct": cpu_pct(first, last, "master_cpu"),
                   **memory(master, samples, "master_anon")},
        "slave": {"cpu_pct": cpu_pct(first, last, "slave_cpu"),
                  **memory(slave, samples, "slave_anon")},
        **machine_pct(first, last),
        "peak_rss_reset": reset,
    }


# -- the run ------------------------------------------------------------------------------------------
async def run_role(role: str, root: Path, namesrv: Child, args: argparse.Namespace,
                   plan: Plan, console: Any) -> dict[str, Any]:
    master = broker_process(root / "master", role, namesrv.port, args.segment_mib)
    slave = broker_process(root / "slave", "SLAVE", namesrv.port, args.segment_mib)
    running = [master]
    try:
        console.print(f"[dim]{role}: starting the master and the slave in {root}...[/]")
        master.start()
        slave.start()
        running.append(slave)
        await _prepare(master)
        async with Admin(namesrv.broker_addr) as admin:
            watch = Watch(admin, master, slave)
            await watch.connected()
            console.print(f"[dim]{role}: send load for {plan.warmup_s + plan.duration_s:.1f} s...[/]")
            send = await send_phase(watch, plan)
            console.print(f"[dim]{role}: catch-up of {args.catchup_mib} MiB...[/]")

            def restart() -> Child:
                again = broker_process(root / "slave", "SLAVE", namesrv.port, args.segment_mib)
                again.start()
                running.append(again)
                return again

            catch_up = await catch_up_phase(watch, args.catchup_mib, restart)
        return {"send": send, "catch_up": catch_up,
                "exit_status": {"master": master.stop(), "slave": running[-1].stop()}}
    finally:
        for child in running:
            child.stop()


def summary_table(roles: dict[str, dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title="bench/ha_replication.py (1 KiB sends)")
    cols = ("role", "sends/s", "p50 ms", "p99 ms", "p99.9 ms", "repl MiB/s", "lag max B", "lag p99 B",
            "catch-up after load s", "catch-up MiB/s", "master anon MiB", "slave anon MiB")
    for col in cols:
        table.add_column(col, justify="left" if col == "role" else "right")
    for role, f in roles.items():
        s, c = f["send"], f["catch_up"]
        table.add_row(role, *("-" if v is None else f"{v:,}" for v in (
            s["msgs_s"], s["p50_ms"], s["p99_ms"], s["p999_ms"], s["replication_mib_s"],
            s["lag_max_bytes"], s["lag_p99_bytes"], s["catch_up_after_load_s"], c["mib_s"],
            max(s["master"]["anon_mib"] or 0, c["master"]["anon_mib"] or 0),
            max(s["slave"]["anon_mib"] or 0, c["slave"]["anon_mib"] or 0))))
    return table


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("bench-data"),
                        help="scratch directory (a temporary directory in it is removed afterwards)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 s of load, 16 MiB catch-up")
    parser.add_argument("--duration", type=float, help="measured seconds of load (default 10, quick 1)")
    parser.add_argument("--producers", type=int, default=2, help="load worker processes")
    parser.add_argument("--concurrency", type=int, default=64, help="requests outstanding per worker")
    parser.add_argument("--catchup-mib", type=int, help="bytes filled while the slave is stopped "
                        "(default 1024, quick 16)")
    parser.add_argument("--segment-mib", type=int, help="mappedFileSizeCommitLog in MiB "
                        "(default 1024, the broker's; quick 4, so segments are crossed)")
    parser.add_argument("--roles", nargs="+", choices=ROLES, default=list(ROLES))
    parser.add_argument("--output", type=Path, help="also write the JSON document here")
    args = parser.parse_args(argv)
    if args.catchup_mib is None:
        args.catchup_mib = 16 if args.quick else 1024
    if args.segment_mib is None:
        args.segment_mib = 4 if args.quick else 1024
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    console = stderr_console()
    plan = Plan.make(args.quick, args.producers, args.concurrency, 1, args.duration, SerializeType.JSON)
    args.dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="ha-", dir=args.dir))
    started = datetime.now(UTC)
    load_start = load_avg()
    t0 = time.perf_counter()
    namesrv = namesrv_process(scratch / "namesrv")
    roles: dict[str, dict[str, Any]] = {}
    try:
        namesrv.start()
        for role in args.roles:
            roles[role] = asyncio.run(run_role(role, scratch / role, namesrv, args, plan, console))
            shutil.rmtree(scratch / role, ignore_errors=True)
    finally:
        namesrv.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    doc = {
        "benchmark": "ha_replication",
        "command": "bench/ha_replication.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine_info(),
        "run": {
            "date": started.isoformat(timespec="seconds"), "mode": "quick" if args.quick else "full",
            "seconds": r(time.perf_counter() - t0), "producers": args.producers,
            "concurrency": args.concurrency, "warmup_s": plan.warmup_s, "duration_s": plan.duration_s,
            "body_bytes": BODY, "sample_interval_ms": int(SAMPLE_S * 1000),
            "catchup_mib": args.catchup_mib, "segment_mib": args.segment_mib,
            "flush_disk_type": "ASYNC_FLUSH", "load_avg_start": load_start, "load_avg_end": load_avg(),
        },
        "roles": roles,
    }
    console.print(summary_table(roles))
    emit(doc, args.output)


if __name__ == "__main__":
    try:
        main()
    except (BenchError, click.ClickException) as exc:
        sys.exit(f"bench/ha_replication.py: {exc}")
    except KeyboardInterrupt:
        sys.exit(130)
