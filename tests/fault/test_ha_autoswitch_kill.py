"""A Bolide AutoSwitch slave process SIGKILLed while it receives a master's CommitLog: its
store recovers to a prefix of the master's bytes (no torn record served), its epoch file is
intact, and the slave resumes from its own end to a byte-identical copy."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
from pathlib import Path

from bolide.broker.ha.autoswitch import AutoSwitchHA, AutoSwitchHAConfig
from bolide.common.message import Message
from bolide.store import BrokerRole, MessageStore, StoreConfig
from bolide.store.epoch_file import EpochEntry
from conftest import assert_consistent, wait_until

SEGMENT = 128 * 1024

CHILD = textwrap.dedent("""
    import asyncio, sys
    from bolide.broker.ha.autoswitch import AutoSwitchHA, AutoSwitchHAConfig
    from bolide.store import BrokerRole, MessageStore, StoreConfig

    async def main() -> None:
        store = MessageStore(StoreConfig(
            store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=int(sys.argv[3]),
            mapped_file_size_consume_queue=20 * 500, enable_controller_mode=True,
            broker_role=BrokerRole.SLAVE)).open()
        ha = AutoSwitchHA(store, AutoSwitchHAConfig(ha_host="127.0.0.1", local_broker_id=2))
        await ha.start()
        await ha.change_to_slave(sys.argv[2], 1, 1, 2)
        last = -1
        while True:
            if store.max_phy_offset != last:
                last = store.max_phy_offset
                print(last, flush=True)
            await asyncio.sleep(0.002)

    asyncio.run(main())
""")


def config(root: Path, role: BrokerRole) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT,
                       mapped_file_size_consume_queue=20 * 500, enable_controller_mode=True,
                       broker_role=role)


def test_slave_killed_mid_stream_recovers_and_resumes(tmp_path: Path) -> None:
    mcfg = config(tmp_path / "m", BrokerRole.SLAVE)
    scfg = config(tmp_path / "s", BrokerRole.SLAVE)

    async def test() -> None:
        master = MessageStore(mcfg).open()
        ha = AutoSwitchHA(master, AutoSwitchHAConfig(ha_host="127.0.0.1", local_broker_id=1))
        try:
            await ha.start()
            await ha.change_to_master(1, {1}, 1)
            for i in range(1500):  # ~1.2 MB: several segments to stream
                assert master.put_message(Message("T", b"%05d:" % i + bytes(800)), i % 4).ok
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CHILD, str(scfg.root), f"127.0.0.1:{ha.port}", str(SEGMENT),
                stdout=asyncio.subprocess.PIPE, stderr=(tmp_path / "child.log").open("w"))
            assert child.stdout is not None
            seen = 0
            while seen < master.max_phy_offset // 3:  # a third copied: kill it mid-stream
                line = await asyncio.wait_for(child.stdout.readline(), 30)
                assert line, (tmp_path / "child.log").read_text()
                seen = int(line)
            child.send_signal(signal.SIGKILL)
            await child.wait()
            assert (scfg.root / "abort").exists()
            slave = MessageStore(scfg).open()  # crash recovery
            try:
                assert 0 < slave.max_phy_offset < master.max_phy_offset
                end = slave.max_phy_offset
                assert bytes(slave.commit_log.read(0, min(end, SEGMENT)) or b"") == \
                    bytes(master.commit_log.read(0, min(end, SEGMENT)) or b"x")
                other = AutoSwitchHA(slave, AutoSwitchHAConfig(ha_host="127.0.0.1",
                                                               local_broker_id=2))
                assert other.epoch_entries() == [EpochEntry(1, 0)]
                await other.start()
                await other.change_to_slave(f"127.0.0.1:{ha.port}", 1, 1, 2)
                await wait_until(lambda: slave.max_phy_offset == master.max_phy_offset)
                await wait_until(lambda: slave.confirm_offset == master.max_phy_offset)
                assert other.slave is not None and other.slave.truncations == 1  # a no-op cut
                for start in range(0, master.max_phy_offset, SEGMENT):
                    n = min(SEGMENT, master.max_phy_offset - start)
                    assert bytes(slave.commit_log.read(start, n) or b"") == \
                        bytes(master.commit_log.read(start, n) or b"x")
                slave.wait_dispatched(10)
                assert sum(slave.get_max_offset_in_queue("T", q) for q in range(4)) == 1500
                await other.close()
            finally:
                slave.close()
        finally:
            await ha.close()
            master.close()

    asyncio.run(test())
    assert_consistent(scfg)
    assert_consistent(mcfg)
