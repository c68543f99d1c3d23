"""``Admin.pull_records``: several pulls of one queue written together, answered in order
(found, short at the end, past the end), against an in-process NameServer + Broker."""

from __future__ import annotations

from pathlib import Path

from bolide.client import Admin, PullStatus
from bolide.common.records import decode_records
from bolide.testing.servers import Servers
from conftest import run_with_servers, send_to_first_queue, wait_until


def test_pull_records_answers_each_window_in_order(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        queue = await send_to_first_queue(s.namesrv_addr, "Windows", [b"m%d" % i for i in range(70)])
        await wait_until(lambda: s.broker.store.get_max_offset_in_queue("Windows", queue.queue_id) == 70)
        async with Admin(s.namesrv_addr) as admin:
            answers = await admin.pull_records(queue, [0, 32, 64, 70, 90], max_nums=32)
        statuses = [result.status for result, _ in answers]
        assert statuses[:3] == [PullStatus.FOUND] * 3
        assert statuses[3] is PullStatus.NO_NEW_MSG and statuses[4] is PullStatus.OFFSET_ILLEGAL
        assert [result.next_begin_offset for result, _ in answers[:3]] == [32, 64, 70]
        bodies = [m.body for _, body in answers[:3] for m in decode_records(body)]
        assert bodies == [b"m%d" % i for i in range(70)]
        assert all(body == b"" for _, body in answers[3:])

    run_with_servers(tmp_path, test)
