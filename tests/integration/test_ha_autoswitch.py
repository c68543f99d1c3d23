"""AutoSwitch HA (controller mode) between Bolide replicas over loopback: a master and a
slave replicate, the sync state set grows and shrinks, the confirm offset limits what pulls
see, and after a role switch the old master truncates its divergent tail."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from bolide.broker.ha.autoswitch import AutoSwitchHA, AutoSwitchHAConfig
from bolide.common.message import Message
from bolide.store import BrokerRole, MessageStore, StoreConfig
from bolide.store.epoch_file import EpochEntry
from conftest import assert_consistent, wait_until

SEGMENT = 64 * 1024


def store_config(root: Path) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT,
                       mapped_file_size_consume_queue=500 * 20, enable_controller_mode=True,
                       broker_role=BrokerRole.SLAVE)


def ha_config(broker_id: int, **options: object) -> AutoSwitchHAConfig:
    values: dict[str, object] = {
        "ha_host": "127.0.0.1", "local_broker_id": broker_id,
        "ha_send_heartbeat_interval_ms": 100, "ha_housekeeping_interval_ms": 3000,
        "reconnect_interval_ms": 100, "check_sync_state_set_interval_ms": 100,
        "ha_max_time_slave_not_catchup_ms": 1000, "slave_timeout_ms": 2000}
    values.update(options)
    return AutoSwitchHAConfig(**values)  # type: ignore[arg-type]


class Replica:
    def __init__(self, root: Path, broker_id: int, **options: object) -> None:
        self.config = store_config(root)
        self.store = MessageStore(self.config).open()
        self.ha = AutoSwitchHA(self.store, ha_config(broker_id, **options))
        self.asked: list[set[int]] = []  # ALTER_SYNC_STATE_SET requests the broker would send
        self.ha.on_sync_state_set_change = self.asked.append

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.ha.port}"

    def put(self, n: int, prefix: str) -> None:
        for i in range(n):
            r = self.store.put_message(Message("TopicA", f"{prefix}{i}:".encode() * 40,
                                               keys=f"{prefix}{i}"), 0)
            assert r.ok, r.remark

    def visible(self) -> int:
        self.store.wait_dispatched(5)
        return self.store.get_max_offset_in_queue("TopicA", 0)

    def bodies(self) -> list[bytes]:
        self.store.wait_dispatched(5)
        out: list[bytes] = []
        while True:
            got = self.store.get_message("g", "TopicA", 0, len(out), 32)
            if not got.messages:
                return out
            out += [m.body.split(b":")[0] for m in got.messages]

    async def close(self) -> None:
        await self.ha.close()
        self.store.close()


def run(tmp_path: Path, test: Callable[[Replica, Replica], Awaitable[None]],
        **options: object) -> None:
    async def main() -> None:
        a = Replica(tmp_path / "a", 1, **options)
        b = Replica(tmp_path / "b", 2, **options)
        try:
            await a.ha.start()
            await b.ha.start()
            await test(a, b)
        finally:
            await a.close()
            await b.close()
        assert_consistent(a.config)
        assert_consistent(b.config)
    asyncio.run(main())


def test_slave_replicates_and_joins_the_sync_state_set(tmp_path: Path) -> None:
    async def test(a: Replica, b: Replica) -> None:
        await a.ha.change_to_master(1, {1}, 1)
        a.put(150, "a")
        await b.ha.change_to_slave(a.addr, 1, 1, 2)
        await wait_until(lambda: b.store.max_phy_offset == a.store.max_phy_offset)
        assert b.ha.epoch_entries() == [EpochEntry(1, 0)]
        await wait_until(lambda: {1, 2} in a.asked)  # the master asks the controller
        a.ha.set_sync_state_set({1, 2}, 2)  # which agrees
        assert a.ha.sync_state_set == {1, 2}
        await wait_until(lambda: b.visible() == 150)  # confirmed up to the master's end
        info = a.ha.runtime_info()  # GET_BROKER_HA_STATUS
        assert info.master and info.in_sync_slave_nums == 1
        assert [c.in_sync for c in info.ha_connection_info] == [True]
        assert info.ha_connection_info[0].slave_ack_offset == a.store.max_phy_offset
        client = b.ha.runtime_info()
        assert not client.master and client.ha_client_runtime_info.master_addr == a.addr
        assert client.ha_client_runtime_info.is_activated
        assert b.bodies()[-1] == b"a149"
        assert (b.config.root / "epochFileCheckpoint").read_bytes() == \
            (a.config.root / "epochFileCheckpoint").read_bytes()
    run(tmp_path, test)


def test_confirm_offset_limits_pulls_until_the_set_shrinks(tmp_path: Path) -> None:
    async def test(a: Replica, b: Replica) -> None:
        await a.ha.change_to_master(1, {1, 2}, 1)
        await b.ha.change_to_slave(a.addr, 1, 1, 2)
        a.put(20, "a")
        await wait_until(lambda: b.store.max_phy_offset == a.store.max_phy_offset)
        await wait_until(lambda: a.ha.confirm_offset == a.store.max_phy_offset)
        assert a.visible() == 20
        await wait_until(lambda: b.visible() == 20)
        result = a.store.put_message(Message("TopicA", b"sync"), 0)
        await a.ha.wait_replicated(result)
        assert result.ok, result.remark
        assert b.store.max_phy_offset >= result.end_offset
        # the slave stops: what the master takes now is not confirmed, pulls do not see it
        assert b.ha.slave is not None
        await b.ha.slave.close()
        a.put(5, "late")
        result = a.store.put_message(Message("TopicA", b"sync2"), 0)
        await a.ha.wait_replicated(result)
        assert result.status.name == "FLUSH_SLAVE_TIMEOUT"
        assert a.visible() == 21
        # the master asks to drop the slave; once the controller agrees, all is readable
        await wait_until(lambda: {1} in a.asked)
        a.ha.set_sync_state_set({1}, 2)
        await wait_until(lambda: a.visible() == 27)
    run(tmp_path, test, all_ack_in_sync_state_set=True)


def test_old_master_truncates_its_divergent_tail(tmp_path: Path) -> None:
    async def test(a: Replica, b: Replica) -> None:
        await a.ha.change_to_master(1, {1}, 1)
        a.put(100, "a")
        await b.ha.change_to_slave(a.addr, 1, 1, 2)
        await wait_until(lambda: b.store.max_phy_offset == a.store.max_phy_offset)
        await wait_until(lambda: b.visible() == 100)
        assert b.ha.slave is not None
        await b.ha.slave.close()  # partitioned: a goes on alone
        a.put(30, "lost")
        lost_end = a.store.max_phy_offset
        # the controller elects b (epoch 2); it takes its own writes
        await b.ha.change_to_master(2, {2}, 2)
        split = b.store.max_phy_offset
        assert split < lost_end
        b.put(40, "b")
        # a comes back as b's slave: its 30 messages after `split` go
        await a.ha.change_to_slave(b.addr, 2, 2, 1)
        await wait_until(lambda: a.store.max_phy_offset == b.store.max_phy_offset)
        assert a.ha.slave is not None and a.ha.slave.truncations == 1
        assert a.ha.epoch_entries() == [EpochEntry(1, 0, split), EpochEntry(2, split)]
        await wait_until(lambda: a.visible() == 140)
        assert a.bodies() == b.bodies()
        assert a.bodies()[100] == b"b0"
        assert a.store.query_message("TopicA", "lost3") == []
        assert [m.keys for m in a.store.query_message("TopicA", "b3")] == [["b3"]]
        end = b.store.max_phy_offset
        for start in range(0, end, SEGMENT):  # byte-identical CommitLogs
            n = min(SEGMENT, end - start)
            assert bytes(a.store.commit_log.read(start, n) or b"") == \
                bytes(b.store.commit_log.read(start, n) or b"x")
    run(tmp_path, test)


def test_stale_role_change_is_refused(tmp_path: Path) -> None:
    async def test(a: Replica, b: Replica) -> None:
        from bolide.broker.ha.autoswitch import HAStateError
        # the controller assigns the id after start: the new config reaches both sides
        a.ha.config = ha_config(5)
        assert a.ha.master.config.local_broker_id == 5
        await a.ha.change_to_master(3, {1}, 1)
        assert a.ha.sync_state_set == {1, 5}
        try:
            await a.ha.change_to_slave(b.addr, 2, 2, 1)
        except HAStateError as exc:
            assert "older than" in str(exc)
        else:
            raise AssertionError("a stale epoch was taken")
    run(tmp_path, test)


def test_reelected_master_streams_its_new_epoch(tmp_path: Path) -> None:
    async def test(a: Replica, b: Replica) -> None:
        await a.ha.change_to_master(1, {1}, 1)
        a.put(30, "a")
        await b.ha.change_to_slave(a.addr, 1, 1, 2)
        await wait_until(lambda: b.store.max_phy_offset == a.store.max_phy_offset)
        assert b.ha.slave is not None
        connects = b.ha.slave.connects
        split = a.store.max_phy_offset
        await a.ha.change_to_master(2, {1}, 2)  # re-elected: slaves stay connected
        await b.ha.change_to_slave(a.addr, 2, 1, 2)  # the same master, a new epoch
        a.put(30, "b")
        await wait_until(lambda: b.store.max_phy_offset == a.store.max_phy_offset)
        assert b.ha.slave.connects == connects
        assert a.ha.epoch_entries() == [EpochEntry(1, 0, split), EpochEntry(2, split)]
        assert b.ha.epoch_entries() == a.ha.epoch_entries()
        assert b.ha.last_epoch == 2
    run(tmp_path, test)


def test_a_store_outside_controller_mode_is_refused(tmp_path: Path) -> None:
    from bolide.broker.ha.autoswitch import HAStateError
    cfg = store_config(tmp_path).replace(enable_controller_mode=False)
    with MessageStore(cfg) as store:
        try:
            AutoSwitchHA(store, ha_config(1))
        except HAStateError as exc:
            assert "enableControllerMode=true" in str(exc)
        else:
            raise AssertionError("a store outside controller mode was taken")
