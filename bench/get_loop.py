"""CPU time of one ``MessageStore.get_message`` of 32 messages of 100 B, without and with a tag
filter, on a temporary store of 65,536 messages over 8 queues (best of 5 passes).

    .venv/bin/python bench/get_loop.py                       # compiled entry loop
    BOLIDE_PURE_PYTHON=1 .venv/bin/python bench/get_loop.py  # pure-Python loop
"""

from __future__ import annotations

import tempfile
import time

from bolide.common import Message
from bolide.store import MessageStore, StoreConfig, entry_select

QUEUES = 8
MESSAGES = QUEUES * 8192


def main() -> None:
    with tempfile.TemporaryDirectory() as root, \
            MessageStore(StoreConfig(store_path_root_dir=root)) as store:
        for n in range(MESSAGES):
            store.put_message(Message(topic="GetLoop", body=b"x" * 100, tags="TagA"), queue_id=n % QUEUES)
        store.wait_dispatched(60)
        print(f"entry loop: {'compiled' if entry_select.COMPILED else 'pure Python'}")
        for tags in (None, ["TagA"]):
            best = float("inf")
            for _ in range(5):
                started, calls = time.process_time(), 0
                for q in range(QUEUES):
                    offset = 0
                    while offset < MESSAGES // QUEUES:
                        offset = store.get_message("g", "GetLoop", q, offset, 32, tags=tags).next_begin_offset
                        calls += 1
                best = min(best, (time.process_time() - started) / calls * 1e6)
            print(f"tags={tags}: {best:.1f} µs per get of 32")


if __name__ == "__main__":
    main()
