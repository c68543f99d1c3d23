"""CPU time of one ``MessageStore.get_message`` of 32 messages of 100 B, without and with a tag
filter, and with a SQL92 selector (the broker's record filter with enablePropertyFilter) that
keeps every message or none, on a temporary store of 65,536 messages over 8 queues (best of 5
passes; a get that keeps none scans up to its entry limit).

    .venv/bin/python bench/get_loop.py                       # compiled entry loop
    BOLIDE_PURE_PYTHON=1 .venv/bin/python bench/get_loop.py  # pure-Python loop
"""

from __future__ import annotations

import tempfile
import time

from bolide.broker.processors.pull import sql_filter
from bolide.common import Message
from bolide.common.sql92 import compile_selector
from bolide.store import MessageStore, StoreConfig, entry_select

QUEUES = 8
MESSAGES = QUEUES * 8192


def main() -> None:
    with tempfile.TemporaryDirectory() as root, \
            MessageStore(StoreConfig(store_path_root_dir=root)) as store:
        for n in range(MESSAGES):
            msg = Message(topic="GetLoop", body=b"x" * 100, tags="TagA")
            msg.properties["n"] = str(n)
            store.put_message(msg, queue_id=n % QUEUES)
        store.wait_dispatched(60)
        print(f"entry loop: {'compiled' if entry_select.COMPILED else 'pure Python'}")
        cases = [("no filter", None, None), ("tags=['TagA']", ["TagA"], None)]
        for expression in ("TAGS = 'TagA' AND n >= 0", "n < 0"):
            cases.append((f"sql {expression!r}", None, sql_filter(compile_selector(expression))))
        for name, tags, record_filter in cases:
            best = float("inf")
            for _ in range(5):
                started, scanned = time.process_time(), 0
                for q in range(QUEUES):
                    offset = 0
                    while offset < MESSAGES // QUEUES:
                        got = store.get_message("g", "GetLoop", q, offset, 32, tags=tags,
                                                record_filter=record_filter).next_begin_offset
                        scanned += got - offset
                        offset = got
                best = min(best, (time.process_time() - started) / scanned * 32 * 1e6)
            print(f"{name}: {best:.1f} µs per 32 entries read")


if __name__ == "__main__":
    main()
