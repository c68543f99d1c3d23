"""A master and a slave as two real ``bolide broker`` processes behind a NameServer: the slave
copies the master's topic and CommitLog; the master is SIGKILLed while a push consumer reads,
and the consumer goes on from the slave; the master restarts on its store and the slave
resumes; at the end both CommitLogs are byte-identical and the slave's store passes
``bolide store verify``."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bolide.client import (
    Admin,
    ClientConfig,
    ConsumeContext,
    ConsumeFrom,
    ConsumeStatus,
    MessageExt,
    Producer,
    PushConsumer,
)
from bolide.client import Message as ClientMessage
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.remoting import RemotingClient

SEGMENT = 128 * 1024
TOPIC = "Failover"
TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_conf(tmp_path: Path, name: str, props: dict[str, object]) -> Path:
    conf = tmp_path / f"{name}.conf"
    common = {"brokerName": "broker-a", "brokerIP1": "127.0.0.1", "bolideBindAddress": "127.0.0.1",
              "bolideVipChannelEnabled": "false", "mappedFileSizeCommitLog": SEGMENT,
              "mappedFileSizeConsumeQueue": 20 * 1000, "storePathRootDir": tmp_path / name,
              "registerNameServerPeriod": 1000, "bolideSlaveSyncInterval": 500,
              "bolideHaReconnectInterval": 200, "haSendHeartbeatInterval": 500}
    conf.write_text("".join(f"{k}={v}\n" for k, v in {**common, **props}.items()))
    return conf


def start_broker(tmp_path: Path, name: str, conf: Path) -> subprocess.Popen[str]:
    log = (tmp_path / f"{name}.log").open("a")
    proc = subprocess.Popen(
        [sys.executable, "-c", "from bolide.cli.main import main; main()", "broker", "-c", str(conf)],
        stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the broker listens (or exits)
    assert "listening on" in line, (line, (tmp_path / f"{name}.log").read_text())
    return proc


async def wait_until(cond: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def max_offsets(client: RemotingClient, addr: str) -> list[int]:
    from bolide.protocol.headers import GetMaxOffsetRequestHeader

    out = []
    for q in (0, 1):
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=TOPIC, queue_id=q)))
        out.append(int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1)
    return out


def test_consumers_follow_a_killed_master_to_its_slave_and_back(tmp_path: Path) -> None:
    port, ha_port, slave_port = free_port(), free_port(), free_port()
    procs: dict[str, subprocess.Popen[str]] = {}
    codes: dict[str, int] = {}

    async def main() -> None:
        namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                    host="127.0.0.1", port=0)
        await namesrv.start()
        ns = f"127.0.0.1:{namesrv.port}"
        master_conf = write_conf(tmp_path, "master", {
            "namesrvAddr": ns, "listenPort": port, "haListenPort": ha_port, "brokerId": 0,
            "brokerRole": "ASYNC_MASTER"})
        slave_conf = write_conf(tmp_path, "slave", {
            "namesrvAddr": ns, "listenPort": slave_port, "brokerId": 1, "brokerRole": "SLAVE"})
        master_addr, slave_addr = f"127.0.0.1:{port}", f"127.0.0.1:{slave_port}"
        fast = ClientConfig(namesrv_addr=ns, poll_name_server_interval_ms=300,
                            heartbeat_broker_interval_ms=500)
        bodies: list[bytes] = []
        try:
            # started from a thread: the NameServer serves on this loop meanwhile
            procs["master"] = await asyncio.to_thread(start_broker, tmp_path, "master", master_conf)
            procs["slave"] = await asyncio.to_thread(start_broker, tmp_path, "slave", slave_conf)
            async with RemotingClient() as client, Admin(fast) as admin:
                # the slave learns the master's HA address from its registration and connects
                deadline = time.monotonic() + 20
                while not (await admin.ha_status(master_addr)).ha_connection_info:
                    assert time.monotonic() < deadline, "the slave did not connect"
                    await asyncio.sleep(0.05)
                header = CreateTopicRequestHeader(topic=TOPIC, default_topic="TBW102", read_queue_nums=2,
                                                  write_queue_nums=2, perm=6)
                r = await client.invoke(master_addr, RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC, header))
                assert r.code == ResponseCode.SUCCESS, r
                async with Producer(fast, "pg") as producer:
                    for i in range(200):
                        await producer.send(ClientMessage(TOPIC, b"m%04d:" % i + bytes(600)))
                # the slave learnt the topic from the master (slave sync) and has every message
                deadline = time.monotonic() + 20
                while await max_offsets(client, slave_addr) != await max_offsets(client, master_addr):
                    assert time.monotonic() < deadline, "the slave did not catch up"
                    await asyncio.sleep(0.05)
                assert sum(await max_offsets(client, slave_addr)) == 200
                deadline = time.monotonic() + 20  # and the topic's config (slave sync)
                while TOPIC.encode() not in (await client.invoke(slave_addr, RemotingCommand.request(
                        RequestCode.GET_ALL_TOPIC_CONFIG))).body_bytes():
                    assert time.monotonic() < deadline, "the slave did not sync the topic"
                    await asyncio.sleep(0.05)

                got: list[bytes] = []
                gate = asyncio.Event()

                async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
                    got.extend(m.body for m in msgs)
                    if len(got) >= 20:
                        await gate.wait()  # hold the consumer while the master is killed
                    return ConsumeStatus.CONSUME_SUCCESS

                consumer = PushConsumer(fast, "cg", listener=listener,
                                        consume_from=ConsumeFrom.FIRST_OFFSET, pull_batch_size=4,
                                        pull_threshold_for_queue=4, consume_concurrency=1,
                                        rebalance_interval_ms=300, suspend_ms=1000,
                                        pull_timeout_ms=3000, pull_retry_delay_ms=200)
                consumer.subscribe(TOPIC, "*")
                async with consumer:
                    await wait_until(lambda: len(got) >= 20, "the first messages")
                    assert len(got) < 60  # most messages are still to be pulled
                    procs["master"].send_signal(signal.SIGKILL)
                    assert procs["master"].wait(10) == -signal.SIGKILL
                    gate.set()
                    await wait_until(lambda: len(set(got)) >= 200, "every message from the slave")
                    bodies = [b"m%04d:" % i + bytes(600) for i in range(200)]
                    assert set(got) == set(bodies)

                    # the master comes back on its store: the slave resumes, new messages flow
                    procs["master"] = await asyncio.to_thread(start_broker, tmp_path, "master",
                                                              master_conf)
                    async with Producer(fast, "pg2") as producer:
                        more = [b"n%04d:" % i + bytes(600) for i in range(50)]
                        for body in more:
                            await producer.send(ClientMessage(TOPIC, body))
                    await wait_until(lambda: set(bodies + more) <= set(got), "the new messages")
                deadline = time.monotonic() + 20
                while await max_offsets(client, slave_addr) != await max_offsets(client, master_addr):
                    assert time.monotonic() < deadline, "the slave did not resume"
                    await asyncio.sleep(0.05)
        finally:  # a clean stop of whatever runs; the exit codes are checked below
            for proc in procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for name, proc in procs.items():
                try:
                    codes[name] = proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    codes[name] = proc.wait()
            await namesrv.close()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    for name, code in codes.items():
        assert code == 0, (name, code, (tmp_path / f"{name}.log").read_text()[-3000:])
    m_dir, s_dir = tmp_path / "master" / "commitlog", tmp_path / "slave" / "commitlog"
    names = sorted(p.name for p in m_dir.iterdir() if p.read_bytes().strip(b"\0"))
    assert len(names) >= 2 and names == sorted(p.name for p in s_dir.iterdir()
                                               if p.read_bytes().strip(b"\0"))
    for name in names:  # (a file made ahead of need and still empty may exist on one side)
        assert (m_dir / name).read_bytes() == (s_dir / name).read_bytes(), f"segment {name} differs"
    verify = subprocess.run(
        [sys.executable, "-c", "from bolide.cli.main import main; main()", "store", "verify",
         str(tmp_path / "slave"), "-c", str(tmp_path / "slave.conf")],
        capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
