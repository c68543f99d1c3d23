"""Benchmark: puts keep flowing while retention deletes a 1 GiB CommitLog file.

    .venv/bin/python bench/retention_pause.py --dir ./bench-data/retention

Fills a store with a little more than one 1 GiB CommitLog segment of 1 KiB messages (so the
first segment is full, flushed, dispatched and still in the page cache: the worst case for
unlink), then runs single puts in a thread and measures each one's latency while the
retention run deletes the first segment and, after the unmap grace, closes its mapping.
Prints one JSON document: the deletion and unmap durations, the longest put pause and the
put latency percentiles before and during the deletion, and the process's peak RSS and
anonymous memory. Figures are never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path

from bolide.cli.bench_common import machine_info, percentile, proc_status, r, reset_peak_rss
from bolide.common import Message
from bolide.store import MessageStore, StoreConfig

GIB = 1024 * 1024 * 1024
TOPIC = "BenchRetention"
BODY = b"r" * 1024
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))  # deleteWhen: the hour never blocks it


def fill(store: MessageStore, until: int) -> int:
    """Batches of 32 x 1 KiB until the CommitLog passes ``until`` bytes; returns the count."""
    batch = [Message(TOPIC, BODY) for _ in range(32)]
    count = 0
    while store.commit_log.max_offset < until:
        store.put_messages(batch, queue_id=count // 32 % 4)
        count += 32
    store.flush()
    store.wait_dispatched(60)
    return count


class Putter(threading.Thread):
    """Single 1 KiB puts as fast as they go; records (start, latency) of each in seconds."""

    def __init__(self, store: MessageStore) -> None:
        super().__init__(name="putter", daemon=True)
        self.store = store
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        msg = Message(TOPIC, BODY)
        clock = time.perf_counter
        while not self.stop.is_set():
            t = clock()
            self.store.put_message(msg, queue_id=0)
            self.samples.append((t, clock() - t))

    def window(self, start: float, end: float) -> tuple[list[float], float]:
        """Latencies of puts started in [start, end) and the longest gap between put
        completions in it (a stall shows as a gap even when no single put is slow)."""
        inside = [(t, lat) for t, lat in self.samples if start <= t < end]
        lats = sorted(lat for _, lat in inside)
        ends = [t + lat for t, lat in inside]
        gap = max((b - a for a, b in pairwise(ends)), default=0.0)
        return lats, gap


def summary(lats: list[float], gap: float) -> dict[str, float | int | None]:
    ms = 1000.0
    return {
        "puts": len(lats),
        "p50_ms": r(percentile(lats, 50) * ms if lats else None, 3),
        "p99_ms": r(percentile(lats, 99) * ms if lats else None, 3),
        "p999_ms": r(percentile(lats, 99.9) * ms if lats else None, 3),
        "max_put_ms": r(lats[-1] * ms if lats else None, 2),
        "longest_pause_ms": r(gap * ms, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("bench-data/retention"))
    parser.add_argument("--segment-mib", type=int, default=1024)
    parser.add_argument("--baseline-s", type=float, default=3.0)
    args = parser.parse_args()
    root = args.dir.resolve()
    shutil.rmtree(root, ignore_errors=True)
    segment = args.segment_mib * 1024 * 1024
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=segment,
                         delete_when=EVERY_HOUR, file_reserved_time_hours=1,
                         message_index_enable=False)
    try:
        with MessageStore(config) as store:
            t = time.perf_counter()
            filled = fill(store, segment + 8 * 1024 * 1024)
            fill_s = time.perf_counter() - t
            reset_peak_rss()
            putter = Putter(store)
            putter.start()
            time.sleep(args.baseline_s)  # the baseline window: puts with no deletion
            t0 = time.perf_counter()
            stats = store.run_retention(now_ms=int(time.time() * 1000) + 2 * 3600 * 1000)
            t1 = time.perf_counter()
            deadline = t1 + 30
            while store.retention_stats().unmaps_pending and time.perf_counter() < deadline:
                time.sleep(0.01)  # sampling a background thread's progress, not waiting on it
            t2 = time.perf_counter()
            time.sleep(0.5)
            putter.stop.set()
            putter.join()
            mem = proc_status()
            base = summary(*putter.window(t0 - args.baseline_s, t0))
            during = summary(*putter.window(t0, t2 + 0.5))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    doc = {
        "benchmark": "retention_pause",
        "command": "bench/retention_pause.py " + " ".join(sys.argv[1:]),
        "machine": machine_info(),
        "segment_mib": args.segment_mib,
        "fill_messages": filled,
        "fill_mib_s": r(filled * len(BODY) / fill_s / 2**20),
        "commit_log_files_deleted": stats.commit_log_files_deleted,
        "delete_run_ms": r((t1 - t0) * 1000, 2),
        "unmap_done_after_ms": r((t2 - t0) * 1000, 1),
        "baseline": base,
        "during_deletion": during,
        "peak_rss_mib": r(mem.get("VmHWM")),
        "anon_mib": r(mem.get("RssAnon")),
    }
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
