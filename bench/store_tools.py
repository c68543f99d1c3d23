"""Benchmark of the offline store tools: ``verify`` MiB/s, index build keys/s, key query latency.

    .venv/bin/python bench/store_tools.py --dir ./bench-data/tools          # build + measure
    .venv/bin/python bench/store_tools.py --dir ./bench-data/tools --reuse  # measure again

Builds (once) a store of 1 GiB of 1 KiB messages (1 GiB CommitLog segments, 8 queues, a key
per message), then prints one JSON document: ``verify_mib_s`` (``bolide store verify`` without
index files: CommitLog and ConsumeQueues, page cache warm), ``index_build_keys_s`` (every
record's UNIQ_KEY and key put into fresh index files through ``IndexService.build``),
``verify_with_index_mib_s`` (verify again, now with the index chains) and ``query_*_us``
(``bolide store query --key`` lookups on those files).
Figures are never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

from bolide.common import Message
from bolide.store import MessageStore, StoreConfig
from bolide.store.checkpoint import Checkpoint
from bolide.store.index_service import IndexService
from bolide.store.offline import iter_records
from bolide.store.query import query_by_key
from bolide.store.verify import VerifyReport, verify_store

GIB = 1024 * 1024 * 1024
TOPIC = "BenchTools"
QUEUES = 8
BATCH = 32


def build(root: Path, size: int) -> StoreConfig:
    config = StoreConfig(store_path_root_dir=str(root), message_index_enable=False)
    rng = random.Random(1)
    bodies = [rng.randbytes(1024) for _ in range(256)]
    written = i = 0
    with MessageStore(config) as store:
        while written < size - 64 * 1024:
            msgs = [Message(TOPIC, bodies[(i + k) % 256], tags="T", keys=[f"key-{i + k}"])
                    for k in range(BATCH)]
            r = store.put_messages(msgs, queue_id=(i // BATCH) % QUEUES)
            assert r.ok, r
            written = r.end_offset
            i += BATCH
        store.wait_dispatched(600)
    return config


def timed_verify(root: Path, config: StoreConfig) -> tuple[VerifyReport, float]:
    t = time.perf_counter()
    report = verify_store(root, config)
    elapsed = time.perf_counter() - t
    assert report.ok, report.problems[:5]
    return report, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="./bench-data/tools")
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run")
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args()
    root = Path(args.dir)
    if not (args.reuse and (root / "commitlog").is_dir()):
        shutil.rmtree(root, ignore_errors=True)
        t = time.perf_counter()
        build(root, args.size_mib * 1024 * 1024)
        print(f"built in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    config = StoreConfig(store_path_root_dir=str(root))
    out: dict[str, object] = {"load_average": os.getloadavg()[0]}

    index_dir = root / "index"
    shutil.rmtree(index_dir, ignore_errors=True)  # first without an index: CommitLog + queues
    verify_store(root, config)  # warm the page cache
    report, elapsed = timed_verify(root, config)
    out |= {"verify_records": report.records, "verify_bytes": report.bytes_checked,
            "verify_s": round(elapsed, 2),
            "verify_mib_s": round(report.bytes_checked / elapsed / 2**20, 1)}

    checkpoint = Checkpoint(root / "checkpoint.bench")
    service = IndexService(index_dir, config.max_hash_slot_num, config.max_index_num, checkpoint)
    keys = 0
    t = time.perf_counter()
    for info in iter_records(config):
        service.build(info)
        keys += 2
    service.flush()
    elapsed = time.perf_counter() - t
    service.close()
    checkpoint.close()
    (root / "checkpoint.bench").unlink()
    out |= {"index_keys": keys, "index_build_s": round(elapsed, 2),
            "index_build_keys_s": round(keys / elapsed)}

    report, elapsed = timed_verify(root, config)
    out |= {"verify_with_index_s": round(elapsed, 2), "index_entries": report.index_entries,
            "verify_with_index_mib_s": round(report.bytes_checked / elapsed / 2**20, 1)}

    rng = random.Random(2)
    count = report.records
    lat = []
    for _ in range(args.queries):
        key = f"key-{rng.randrange(count)}"
        t = time.perf_counter()
        found = query_by_key(config, TOPIC, key)
        lat.append((time.perf_counter() - t) * 1e6)
        assert len(found) == 1, (key, found)
    lat.sort()
    out |= {"queries": args.queries, "query_p50_us": round(statistics.median(lat)),
            "query_p99_us": round(lat[int(len(lat) * 0.99)])}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
