"""Two real ``bolide broker`` processes, a SYNC_MASTER and its SLAVE: the master is SIGKILLed
under send load, and every message it answered SEND_OK is on the slave, intact."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from pathlib import Path

from bolide.common.msgid import decode_offset_msg_id
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.remoting import RemotingClient, RemotingError
from bolide.store import BrokerRole, MessageStore, StoreConfig
from conftest import assert_consistent

SEGMENT = 256 * 1024
TARGET = 400  # SEND_OK answers before the kill
SENDERS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(tmp_path: Path, name: str, props: dict[str, object]) -> subprocess.Popen[str]:
    conf = tmp_path / f"{name}.conf"
    common = {"brokerName": "broker-a", "brokerIP1": "127.0.0.1", "bolideBindAddress": "127.0.0.1",
              "bolideVipChannelEnabled": "false", "mappedFileSizeCommitLog": SEGMENT,
              "mappedFileSizeConsumeQueue": 20 * 1000, "storePathRootDir": tmp_path / name}
    conf.write_text("".join(f"{k}={v}\n" for k, v in {**common, **props}.items()))
    proc = subprocess.Popen(
        [sys.executable, "-c", "from bolide.cli.main import main; main()", "broker", "-c", str(conf)],
        stdout=subprocess.PIPE, stderr=(tmp_path / f"{name}.log").open("w"), text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the broker listens (or exits)
    assert "listening on" in line, (line, (tmp_path / f"{name}.log").read_text())
    return proc


def send_request(i: int) -> RemotingCommand:
    header = SendMessageRequestHeader(producer_group="pg", topic="HaKill", default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=i % 4, sys_flag=0,
                                      born_timestamp=1_700_000_000_000, flag=0,
                                      properties="WAIT\x01true\x02")
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2(), body_of(i))


def body_of(i: int) -> bytes:
    return b"ha-%06d:" % i + bytes([i % 251]) * (i * 37 % 2000)


async def load_then_kill(master_addr: str, master: subprocess.Popen[str]) -> dict[int, int]:
    """Send from several tasks; SIGKILL the master once TARGET sends got SEND_OK (the others
    still sending). Returns {message number: CommitLog offset} of every SEND_OK."""
    acked: dict[int, int] = {}
    counter = iter(range(1_000_000))
    killed = asyncio.Event()

    async def sender(client: RemotingClient) -> None:
        while True:
            i = next(counter)
            try:
                r = await client.invoke(master_addr, send_request(i), 5000)
            except RemotingError:
                if killed.is_set():
                    return
                continue
            if r.code == ResponseCode.SUCCESS:
                acked[i] = decode_offset_msg_id(r.ext_fields["msgId"])[1]
                if len(acked) >= TARGET and not killed.is_set():
                    master.send_signal(signal.SIGKILL)
                    killed.set()
            elif r.code == ResponseCode.SLAVE_NOT_AVAILABLE:  # the slave is not in sync yet
                await asyncio.sleep(0.05)
            else:  # stored on the master only: not promised to be on the slave
                assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, r

    async with RemotingClient() as client:
        await asyncio.wait_for(asyncio.gather(*(sender(client) for _ in range(SENDERS))), 60)
    return acked


def test_every_send_ok_of_a_killed_sync_master_is_on_the_slave(tmp_path: Path) -> None:
    port, ha_port, slave_port = free_port(), free_port(), free_port()
    master = start_broker(tmp_path, "master", {
        "listenPort": port, "haListenPort": ha_port, "brokerId": 0, "brokerRole": "SYNC_MASTER"})
    slave: subprocess.Popen[str] | None = None
    try:
        slave = start_broker(tmp_path, "slave", {
            "listenPort": slave_port, "brokerId": 1, "brokerRole": "SLAVE",
            "haMasterAddress": f"127.0.0.1:{ha_port}", "bolideHaReconnectInterval": 200})
        acked = asyncio.run(load_then_kill(f"127.0.0.1:{port}", master))
        assert master.wait(10) == -signal.SIGKILL
        slave.send_signal(signal.SIGTERM)
        assert slave.wait(20) == 0, (tmp_path / "slave.log").read_text()
    finally:
        for proc in (master, slave):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert len(acked) >= TARGET
    config = StoreConfig(store_path_root_dir=str(tmp_path / "slave"),
                         mapped_file_size_commit_log=SEGMENT,
                         mapped_file_size_consume_queue=20 * 1000, broker_role=BrokerRole.SLAVE)
    with MessageStore(config) as store:
        for i, offset in sorted(acked.items()):
            msg = store.look_message_by_offset(offset)
            assert msg is not None, f"message {i} at {offset} is missing on the slave"
            assert msg.body == body_of(i) and msg.topic == "HaKill"
        assert store.max_phy_offset > SEGMENT  # the load crossed segments
    assert_consistent(config)
