"""A real controller on loopback: the broker registration sequence, heartbeats, expiry ->
re-election with NOTIFY_BROKER_ROLE_CHANGED received by a broker-side server, fenced epochs,
bad input, the NameServer embedding, and a SIGKILLed controller process keeping its state."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bolide.controller import ControllerConfig, ControllerServer
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.protocol.bodies.controller import (
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    SyncStateSet,
    encode_broker_names,
)
from bolide.protocol.codes import RequestCode as C
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import controller as h
from bolide.remoting import RemotingClient, run
from bolide.testing.controller import ControllerBroker
from bolide.testing.rocketmq import free_port
from conftest import wait_until

FAST = {"scanNotActiveBrokerInterval": "100", "scanInactiveMasterInterval": "100"}


def _config(tmp_path: Path, **extra: str) -> ControllerConfig:
    return ControllerConfig.from_mapping({"controllerStorePath": str(tmp_path / "ctrl"),
                                          "controllerDLegerPeers": "n0-127.0.0.1:0",
                                          "controllerDLegerSelfId": "n0", **FAST, **extra})


@asynccontextmanager
async def _running(config: ControllerConfig) -> AsyncIterator[tuple[ControllerServer, RemotingClient]]:
    async with ControllerServer(config, host="127.0.0.1") as server, RemotingClient() as client:
        yield server, client


async def _beating(broker: ControllerBroker, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await broker.beat()
        await asyncio.sleep(0.1)


def test_register_elect_expire_and_reelect(tmp_path: Path) -> None:
    run(_register_elect_expire_and_reelect(tmp_path))


async def _register_elect_expire_and_reelect(tmp_path: Path) -> None:
    async with _running(_config(tmp_path)) as (server, client):
        one, two = ControllerBroker(server.address), ControllerBroker(server.address)
        first = await one.join()
        assert first.read_header(h.RegisterBrokerToControllerResponseHeader).master_broker_id is None
        await two.join()
        assert (one.broker_id, two.broker_id) == (1, 2)
        stop_one, stop_two = asyncio.Event(), asyncio.Event()
        beats = [asyncio.create_task(_beating(one, stop_one)),
                 asyncio.create_task(_beating(two, stop_two))]
        elected = await one.elect()
        assert elected.code == RC.SUCCESS
        assert elected.read_header(h.ElectMasterResponseHeader).master_address == one.addr
        body = ElectMasterResponseBody.decode(elected.body_bytes())
        assert body.broker_member_group is not None and set(body.broker_member_group.broker_addrs) == {1, 2}
        await wait_until(lambda: len(two.notices) == 1)  # both live brokers are told
        await wait_until(lambda: len(one.notices) == 1)
        assert two.notices[0][0].master_broker_id == 1 and two.notices[0][0].master_epoch == 1
        assert (await two.elect()).code == RC.CONTROLLER_MASTER_STILL_EXIST

        # the master reports broker 2 in sync; a stale epoch is fenced
        def alter(master_epoch: int, set_epoch: int) -> RemotingCommand:
            return RemotingCommand.request(C.CONTROLLER_ALTER_SYNC_STATE_SET,
                                           h.AlterSyncStateSetRequestHeader(
                broker_name="b", master_broker_id=1, master_epoch=master_epoch),
                SyncStateSet({1, 2}, set_epoch).encode())
        fenced = await client.invoke(server.address, alter(0, 1))
        assert fenced.code == RC.CONTROLLER_FENCED_MASTER_EPOCH
        fenced = await client.invoke(server.address, alter(1, 0))
        assert fenced.code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        altered = await client.invoke(server.address, alter(1, 1))
        assert altered.code == RC.SUCCESS
        assert altered.read_header(h.AlterSyncStateSetResponseHeader).new_sync_state_set_epoch == 2

        # broker 2 keeps beating, the master falls silent: the scan elects broker 2
        stop_one.set()
        try:
            await wait_until(lambda: server.state.groups["b"].master_broker_id == 2, timeout=10)
            await wait_until(lambda: len(two.notices) == 2)
        finally:
            stop_two.set()
            await asyncio.gather(*beats)
        notice, sync_set = two.notices[1]
        assert (notice.master_broker_id, notice.master_address, notice.master_epoch) == (2, two.addr, 2)
        assert sync_set == SyncStateSet({2}, 3)
        assert len(one.notices) == 1  # the dead master is not told
        replica = await two.call(C.CONTROLLER_GET_REPLICA_INFO,
                                 h.GetReplicaInfoRequestHeader(broker_name="b"))
        assert replica.read_header(h.GetReplicaInfoResponseHeader).master_broker_id == 2
        data = await client.invoke(server.address, RemotingCommand.request(
            C.CONTROLLER_GET_SYNC_STATE_DATA, body=encode_broker_names(["b"])))
        info = BrokerReplicasInfo.decode(data.body_bytes()).replicas_info_table["b"]
        assert info.master_broker_id == 2 and [r.broker_id for r in info.not_in_sync_replicas] == [1]
        for broker in (one, two):
            await broker.close()


def test_metadata_config_and_bad_input(tmp_path: Path) -> None:
    run(_metadata_config_and_bad_input(tmp_path))


async def _metadata_config_and_bad_input(tmp_path: Path) -> None:
    async with _running(_config(tmp_path)) as (server, client):
        meta = await client.invoke(server.address, RemotingCommand.request(C.CONTROLLER_GET_METADATA_INFO))
        header = meta.read_header(h.GetMetaDataResponseHeader)
        assert (header.controller_leader_id, header.controller_leader_address, header.is_leader) \
            == ("n0", server.address, True)
        assert header.peers == f"n0:{server.address};"
        update = RemotingCommand.request(C.UPDATE_CONTROLLER_CONFIG, body=b"enableElectUncleanMaster=true\n")
        assert (await client.invoke(server.address, update)).code == RC.SUCCESS
        conf = await client.invoke(server.address, RemotingCommand.request(C.GET_CONTROLLER_CONFIG))
        assert "enableElectUncleanMaster=true\n" in conf.body_bytes().decode()
        refused = RemotingCommand.request(C.UPDATE_CONTROLLER_CONFIG, body=b"configStorePath=/x\n")
        assert (await client.invoke(server.address, refused)).code == RC.NO_PERMISSION
        several = RemotingCommand.request(C.UPDATE_CONTROLLER_CONFIG,
                                          body=b"controllerDLegerPeers=n0-a:1;n0-b:2\n")
        answer = await client.invoke(server.address, several)
        assert answer.code == RC.CONTROLLER_INVALID_REQUEST and "names a peer twice" in (answer.remark or "")
        no_id = await client.invoke(server.address, RemotingCommand.request(
            C.BROKER_HEARTBEAT, ext_fields={"clusterName": "C", "brokerAddr": "a", "brokerName": "b"}))
        assert no_id.code == RC.CONTROLLER_INVALID_REQUEST
        bad_body = await client.invoke(server.address, RemotingCommand.request(
            C.CONTROLLER_ALTER_SYNC_STATE_SET, ext_fields={"brokerName": "b"}, body=b"{oops"))
        assert bad_body.code == RC.CONTROLLER_INVALID_REQUEST
        no_names = await client.invoke(server.address,
                                       RemotingCommand.request(C.CONTROLLER_GET_SYNC_STATE_DATA))
        assert no_names.code == RC.CONTROLLER_INVALID_REQUEST and "JSON array" in (no_names.remark or "")
        not_names = await client.invoke(server.address, RemotingCommand.request(
            C.CONTROLLER_GET_SYNC_STATE_DATA, body=b'{"a":1}'))
        assert not_names.code == RC.CONTROLLER_INVALID_REQUEST
        no_header = await client.invoke(server.address, RemotingCommand.request(
            C.CONTROLLER_GET_NEXT_BROKER_ID, ext_fields={}))
        assert no_header.code == RC.SUCCESS  # RocketMQ answers id 1 for an unknown group too
        no_code = await client.invoke(server.address, RemotingCommand.request(C.CONTROLLER_APPLY_BROKER_ID,
                                                                              ext_fields={"brokerName": "b"}))
        assert no_code.code == RC.CONTROLLER_INVALID_REQUEST and "registerCheckCode" in (no_code.remark or "")
        missing = await client.invoke(server.address, RemotingCommand.request(
            C.CONTROLLER_GET_REPLICA_INFO, h.GetReplicaInfoRequestHeader(broker_name="nope")))
        assert missing.code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST


def test_namesrv_embeds_a_controller(tmp_path: Path) -> None:
    run(_namesrv_embeds_a_controller(tmp_path))


async def _namesrv_embeds_a_controller(tmp_path: Path) -> None:
    namesrv = NamesrvController(NamesrvConfig(enable_controller_in_namesrv=True,
                                              kv_config_path=str(tmp_path / "kv.json")),
                                host="127.0.0.1", port=0, controller_config=_config(tmp_path))
    await namesrv.start()
    try:
        assert namesrv.controller is not None and namesrv.controller.port != namesrv.port
        async with RemotingClient() as client:
            meta = await client.invoke(namesrv.controller.address,
                                       RemotingCommand.request(C.CONTROLLER_GET_METADATA_INFO))
            assert meta.code == RC.SUCCESS
            on_namesrv = await client.invoke(f"127.0.0.1:{namesrv.port}",
                                             RemotingCommand.request(C.CONTROLLER_GET_METADATA_INFO))
            assert on_namesrv.code == RC.REQUEST_CODE_NOT_SUPPORTED  # as RocketMQ: its own port
    finally:
        await namesrv.close()


def _start_process(conf: Path, command: str = "controller") -> tuple[subprocess.Popen[str], str, str]:
    """The process, its controller's address and what it printed up to that."""
    proc = subprocess.Popen([sys.executable, "-c", "from bolide.cli.main import main; main()", command,
                             "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("Controller listening on "):
            return proc, line.split()[3], "".join(lines)
    proc.wait()
    raise AssertionError(f"the controller did not start (exit {proc.returncode})")


def test_sigkilled_controller_keeps_masters_epochs_and_ids(tmp_path: Path) -> None:
    run(_sigkilled_controller_keeps_masters_epochs_and_ids(tmp_path))


async def _sigkilled_controller_keeps_masters_epochs_and_ids(tmp_path: Path) -> None:
    conf = tmp_path / "controller.conf"
    conf.write_text(f"controllerDLegerGroup=g1\ncontrollerDLegerPeers=n0-127.0.0.1:{free_port()}\n"
                    f"controllerDLegerSelfId=n0\ncontrollerStorePath={tmp_path / 'ctrl'}\n")
    proc, addr, _ = _start_process(conf)
    try:
        one, two = ControllerBroker(addr), ControllerBroker(addr)
        await one.join()
        await two.join()
        assert (await one.elect()).code == RC.SUCCESS
        update = await one.call(C.UPDATE_CONTROLLER_CONFIG, body=b"enableElectUncleanMaster=true\n")
        assert update.code == RC.SUCCESS
        assert "enableElectUncleanMaster=true\n" in conf.read_text()  # written to its config file
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # a torn record at the tail, as a crash in the middle of a write leaves
        log = tmp_path / "ctrl" / "n0" / "controller-events.log"
        with log.open("ab") as f:
            f.write(b"\x00\x00\x01\x00garbage")
        proc, addr2, printed = _start_process(conf)
        assert addr2 == addr
        assert "Cut off a torn tail of 11 bytes from the controller's log (a record cut short)" in printed
        for broker in (one, two):
            broker.client.close_channel(addr)
        replica = await one.call(C.CONTROLLER_GET_REPLICA_INFO,
                                 h.GetReplicaInfoRequestHeader(broker_name="b"))
        header = replica.read_header(h.GetReplicaInfoResponseHeader)
        assert (header.master_broker_id, header.master_address, header.master_epoch) == (1, one.addr, 1)
        nxt = await one.call(C.CONTROLLER_GET_NEXT_BROKER_ID,
                             h.GetNextBrokerIdRequestHeader(cluster_name="C", broker_name="b"))
        assert nxt.read_header(h.GetNextBrokerIdResponseHeader).next_broker_id == 3
        meta = await one.call(C.CONTROLLER_GET_METADATA_INFO)
        assert meta.read_header(h.GetMetaDataResponseHeader).group == "g1"
        config = await one.call(C.GET_CONTROLLER_CONFIG)
        assert "enableElectUncleanMaster=true\n" in config.body_bytes().decode()
        for broker in (one, two):
            await broker.close()
    finally:
        proc.kill()
        proc.communicate()


def test_bolide_namesrv_runs_an_embedded_controller(tmp_path: Path) -> None:
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={free_port()}\nkvConfigPath={tmp_path / 'kv.json'}\n"
                    "enableControllerInNamesrv=true\n"
                    f"controllerDLegerPeers=n0-127.0.0.1:{port}\ncontrollerDLegerSelfId=n0\n"
                    f"controllerStorePath={tmp_path / 'ctrl'}\n")
    proc, addr, printed = _start_process(conf, "namesrv")
    try:
        assert addr == f"127.0.0.1:{port}" and "NameServer listening on port" in printed

        async def ask() -> RemotingCommand:
            async with RemotingClient() as client:
                return await client.invoke(addr, RemotingCommand.request(C.CONTROLLER_GET_METADATA_INFO))
        assert run(ask()).read_header(h.GetMetaDataResponseHeader).controller_leader_address == addr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
