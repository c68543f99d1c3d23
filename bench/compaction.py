"""Compacted topics: how fast the store copies a compacted topic's records into its compaction
log and compacts them, with this process's memory beside it.

Puts MESSAGES keyed messages of 100 B to one queue of a compacted topic (ASYNC_FLUSH, queue files
of 20,000 units, so every file but the last is compacted), then times ``ingest_now`` (the copy
the compaction thread makes as dispatch goes on) and ``compact_now`` (every pass), for a few keys
and for many.

    .venv/bin/python bench/compaction.py                     # 200,000 messages per case
    .venv/bin/python bench/compaction.py --messages 4000 --file-units 1000   # smoke run
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from bolide.cli.bench_common import proc_status, reset_peak_rss
from bolide.common import Message
from bolide.store import MessageStore, StoreConfig

TOPIC = "Compacted"


def run(messages: int, keys: int, file_units: int) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory() as root:
        cfg = StoreConfig(store_path_root_dir=root, compaction_cq_mapped_file_size=46 * file_units,
                          compaction_schedule_interval_ms=3_600_000)
        with MessageStore(cfg) as store:
            store.set_topic_compaction(TOPIC, True)
            assert store.compaction is not None
            body = b"x" * 100
            for n in range(messages):
                assert store.put_message(Message(TOPIC, body, keys=f"key-{n % keys}"), 0).ok
            store.wait_dispatched(120)
            reset_peak_rss()
            before = proc_status()
            started = time.perf_counter()
            store.compaction.ingest_now()
            ingest_s = time.perf_counter() - started
            started = time.perf_counter()
            passes = store.compact_now()
            compact_s = time.perf_counter() - started
            after = proc_status()
            kept = store.compaction.logs[(TOPIC, 0)].current
            return {"messages": messages, "keys": keys, "passes": passes,
                    "ingest_msgs_per_s": round(messages / ingest_s),
                    "compact_msgs_per_s": round(messages / compact_s),
                    "units_left": sum(seg.units for seg in kept.segments),
                    "anon_mib_before": round(before.get("RssAnon", 0), 1),
                    "anon_mib_after": round(after.get("RssAnon", 0), 1),
                    "peak_rss_mib": round(after.get("VmHWM", 0), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--file-units", type=int, default=20_000, help="records per compaction file")
    args = parser.parse_args()
    for keys in (100, args.messages // 2):
        print(json.dumps(run(args.messages, keys, args.file_units)), flush=True)


if __name__ == "__main__":
    main()
