"""Latency of the controller's changes: a lone ``bolide controller`` process (its event log
fsynced before each answer) against a group of three (each change in the Raft log of a
majority, fsynced there, before the answer). Two brokers (played by this process) register and
elect a master, then the master reports its in-sync set N times, alternating ``{1, 2}`` and
``{1}`` (ALTER_SYNC_STATE_SET, one at a time: each waits for the previous answer). Prints one
JSON document: per setup the p50 / p99 / mean latency, changes per second, and each controller
process's peak RSS and anonymous memory.

    .venv/bin/python bench/controller_writes.py [--changes 500] [--dir ./bench-data/controller]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bolide.protocol.bodies.controller import SyncStateSet
from bolide.protocol.codes import RequestCode as C
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import controller as h
from bolide.remoting import RemotingClient
from bolide.testing.controller import ControllerBroker, ControllerProcess, free_port


def _memory(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "RssAnon"):
            fields[key] = int(value.split()[0]) / 1024
    return {"peak_rss_mib": round(fields["VmHWM"], 1), "anon_mib": round(fields["RssAnon"], 1)}


async def _leader(client: RemotingClient, addresses: list[str]) -> str:
    async with asyncio.timeout(30):
        while True:
            for addr in addresses:
                try:
                    r = await client.invoke(
                        addr, RemotingCommand.request(C.CONTROLLER_GET_METADATA_INFO), 1000)
                except Exception:  # not listening yet
                    continue
                if r.read_header(h.GetMetaDataResponseHeader).is_leader:
                    return addr
            await asyncio.sleep(0.1)


async def _measure(addresses: list[str], changes: int) -> dict[str, float]:
    async with RemotingClient() as client:
        leader = await _leader(client, addresses)
        one = ControllerBroker(leader, beat_to=addresses)
        two = ControllerBroker(leader, beat_to=addresses)
        stop = asyncio.Event()

        async def beat() -> None:
            while not stop.is_set():
                for broker in (one, two):
                    await broker.beat(timeout_ms=30_000)
                await asyncio.sleep(0.5)
        try:
            await one.join()
            await two.join()
            beats = asyncio.create_task(beat())
            assert (await one.elect()).code == RC.SUCCESS
            epoch, latencies = 1, []
            for i in range(changes):
                members = {1, 2} if i % 2 == 0 else {1}
                started = time.perf_counter()
                header = h.AlterSyncStateSetRequestHeader(broker_name="b", master_broker_id=1, master_epoch=1)
                answer = await one.call(C.CONTROLLER_ALTER_SYNC_STATE_SET, header,
                                        SyncStateSet(members, epoch).encode())
                latencies.append((time.perf_counter() - started) * 1000)
                assert answer.code == RC.SUCCESS, answer.remark
                epoch = answer.read_header(h.AlterSyncStateSetResponseHeader).new_sync_state_set_epoch
            stop.set()
            await beats
        finally:
            await one.close()
            await two.close()
    latencies.sort()
    return {"changes": changes, "p50_ms": round(statistics.median(latencies), 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 3),
            "mean_ms": round(statistics.fmean(latencies), 3),
            "changes_per_s": round(1000 / statistics.fmean(latencies), 1)}


def _run(root: Path, size: int, changes: int) -> dict[str, object]:
    root.mkdir(parents=True)
    peers = ";".join(f"n{i}-127.0.0.1:{free_port()}" for i in range(size))
    processes = [ControllerProcess(root, f"n{i}", peers) for i in range(size)]
    try:
        for process in processes:
            process.start()
        figures: dict[str, object] = dict(asyncio.run(_measure([p.address for p in processes], changes)))
        figures["controllers"] = [_memory(p.proc.pid) for p in processes if p.proc is not None]
        return figures
    finally:
        for process in processes:
            process.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        out = {"lone": _run(Path(tmp) / "lone", 1, args.changes),
               "group_of_3": _run(Path(tmp) / "group", 3, args.changes)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
