"""The delay service on a ConsumeQueue whose entries hold ConsumeQueueExt addresses instead of
delivery times (a store RocketMQ wrote with enableConsumeQueueExt): a message is delivered when
its record says it is due, not at once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from bolide.broker.schedule import ScheduleService
from bolide.common import properties as P
from bolide.common.message import Message
from bolide.store import MessageStore, StoreConfig
from bolide.store.config_files import DelayOffsetManager
from bolide.store.consume_queue import ENTRY

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def test_an_ext_address_is_not_taken_for_a_delivery_time(tmp_path: Path) -> None:
    root = tmp_path / "store"
    # level 1 due in an hour, level 2 due already (its delay is 0)
    config = StoreConfig(store_path_root_dir=str(root), message_delay_level="1h 0s")
    with MessageStore(config) as store:
        store.put_message(Message("T", b"later", properties={P.DELAY_TIME_LEVEL: "1"}))
        store.put_message(Message("T", b"now", properties={P.DELAY_TIME_LEVEL: "2"}))
        assert store.wait_dispatched(10)
        for queue_id, unit in ((0, 0), (1, 24)):  # as RocketMQ writes them: unit offset + Long.MIN_VALUE
            cq_file = root / "consumequeue" / SCHEDULE / str(queue_id) / ("0" * 20)
            with open(cq_file, "r+b") as f:
                phys, size, _ = ENTRY.unpack(os.pread(f.fileno(), ENTRY.size, 0))
                os.pwrite(f.fileno(), ENTRY.pack(phys, size, -(2**63) + unit), 0)
        assert store.find_consume_queue(SCHEDULE, 0).entry(0)[2] < -(2**62)

        async def run() -> int:
            service = ScheduleService(asyncio.get_running_loop(), store,
                                      DelayOffsetManager(root / "config" / "delayOffset.json"))
            await service.deliver_due()
            return service.delivered

        assert asyncio.run(run()) == 1  # level 1's message waits for its hour
        assert store.wait_dispatched(10)
        assert store.get_max_offset_in_queue("T", 0) == 1
        got = store.get_message("g", "T", 0, 0)
        assert [m.body for m in got.messages] == [b"now"]
