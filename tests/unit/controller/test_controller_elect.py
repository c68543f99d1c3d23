"""DefaultElectPolicy: alive in-sync brokers first, then epoch, max offset, priority."""

from __future__ import annotations

from bolide.controller.elect import elect
from bolide.controller.heartbeat import BrokerLiveInfo, HeartbeatManager


def _info(broker_id: int, epoch: int, max_offset: int, priority: int = 2**31 - 1) -> BrokerLiveInfo:
    return BrokerLiveInfo("b", f"h:{broker_id}", broker_id, 0, 10_000, None, epoch, max_offset, -1, priority)


def _run(infos: list[BrokerLiveInfo], sync: set[int], all_ids: set[int] | None = None,
         old: int | None = None, prefer: int | None = None) -> int | None:
    table = {i.broker_id: i for i in infos}
    return elect(sync, all_ids, old, prefer, alive=lambda b: b in table, live_info=table.get)


def test_prefers_epoch_then_offset_then_priority() -> None:
    assert _run([_info(1, 1, 900), _info(2, 2, 100)], {1, 2}) == 2
    assert _run([_info(1, 2, 900), _info(2, 2, 100)], {1, 2}) == 1
    assert _run([_info(1, 2, 100, 5), _info(2, 2, 100, 1)], {1, 2}) == 2
    assert _run([_info(1, 2, 100), _info(2, 2, 100)], {1, 2}) == 1  # a full tie: lowest id


def test_old_master_stays_and_designation() -> None:
    infos = [_info(1, 1, 10), _info(2, 5, 99)]
    assert _run(infos, {1, 2}, old=1) == 1
    assert _run(infos, {1, 2}, old=1, prefer=2) == 2
    assert _run(infos, {1}, old=None, prefer=2) is None  # designated, not a candidate


def test_dead_and_unclean() -> None:
    infos = [_info(3, 1, 10)]
    assert _run(infos, {1, 2}) is None
    assert _run(infos, {1, 2}, all_ids={1, 2, 3}) == 3


def test_heartbeat_keeps_the_best_figures_and_expires() -> None:
    now = [0]
    hb = HeartbeatManager(clock=lambda: now[0])
    hb.on_heartbeat("C", "b", "h:1", 1, timeout_ms=1000, epoch=2, max_offset=50)
    hb.on_heartbeat("C", "b", "h:1", 1, timeout_ms=1000, epoch=1, max_offset=90)  # older epoch
    info = hb.live_info("C", "b", 1)
    assert info is not None and (info.epoch, info.max_offset) == (2, 50)
    now[0] = 1000
    assert hb.is_active("C", "b", 1)
    assert hb.scan_not_active() == []
    now[0] = 1001
    assert not hb.is_active("C", "b", 1)
    assert [key for key, _ in hb.scan_not_active()] == [("C", "b", 1)]
    chan = object()
    hb.on_heartbeat("C", "b", "h:2", 2, channel=chan)
    assert hb.on_channel_close(chan) == ("C", "b", 2)
    assert hb.live_info("C", "b", 2) is None
