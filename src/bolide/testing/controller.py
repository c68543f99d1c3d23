"""For tests of controller mode: a broker's side of RocketMQ 5's controller protocol (the id
application and registration sequence, heartbeats, elections, and a server of its own that
records the controller's NOTIFY_BROKER_ROLE_CHANGED, 1008), and Bolide brokers and controllers
run as child processes (to be SIGKILLed)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from bolide.controller import ControllerConfig, ControllerServer
from bolide.controller.raft.core import Timing
from bolide.errors import RemotingError
from bolide.protocol.bodies.controller import SyncStateSet
from bolide.protocol.bodies.route import ClusterInfo
from bolide.protocol.codes import RequestCode as C
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.headers import controller as h
from bolide.protocol.headers.base import Header
from bolide.remoting import RemotingClient, RemotingServer, RequestContext
from bolide.store.broker_identity import read_identity


class ControllerRefused(AssertionError):
    """The controller refused a step of the registration."""


class ControllerBroker:
    """A broker's side of the protocol: its own server (for 1008) and connection to the
    controller (the controller closes an expired broker's connection)."""

    def __init__(self, controller: str, name: str = "b", cluster: str = "C", *,
                 beat_to: Sequence[str] = ()) -> None:
        """``controller``: where requests go (a group's leader); heartbeats also go to every
        controller of ``beat_to``, as brokers send them to each controller of a group."""
        self.client, self.controller, self.name, self.cluster = RemotingClient(), controller, name, cluster
        self.beat_to = list(beat_to)
        self.server = RemotingServer("127.0.0.1", 0)
        self.notices: list[tuple[h.NotifyBrokerRoleChangedRequestHeader, SyncStateSet]] = []
        self.server.register(C.NOTIFY_BROKER_ROLE_CHANGED, self._notified)
        self.broker_id = -1

    async def _notified(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.notices.append((request.read_header(h.NotifyBrokerRoleChangedRequestHeader),
                             SyncStateSet.decode(request.body_bytes())))
        return request.make_response()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def call(self, code: int, header: Header | None = None, body: bytes = b"") -> RemotingCommand:
        return await self.client.invoke(self.controller, RemotingCommand.request(code, header, body))

    async def close(self) -> None:
        await self.server.close()
        await self.client.close()

    async def join(self) -> RemotingCommand:
        """GET_NEXT_BROKER_ID -> APPLY_BROKER_ID -> REGISTER, then a heartbeat."""
        await self.server.start()
        nxt = await self.call(C.CONTROLLER_GET_NEXT_BROKER_ID, h.GetNextBrokerIdRequestHeader(
            cluster_name=self.cluster, broker_name=self.name))
        broker_id = nxt.read_header(h.GetNextBrokerIdResponseHeader).next_broker_id
        if broker_id is None:
            raise ControllerRefused(f"no next broker id: {nxt.code} {nxt.remark}")
        applied = await self.call(C.CONTROLLER_APPLY_BROKER_ID, h.ApplyBrokerIdRequestHeader(
            cluster_name=self.cluster, broker_name=self.name, applied_broker_id=broker_id,
            register_check_code=f"{self.addr};1"))
        if applied.code != RC.SUCCESS:
            raise ControllerRefused(f"APPLY_BROKER_ID: {applied.code} {applied.remark}")
        self.broker_id = broker_id
        reg = await self.call(C.CONTROLLER_REGISTER_BROKER, h.RegisterBrokerToControllerRequestHeader(
            cluster_name=self.cluster, broker_name=self.name, broker_id=broker_id, broker_address=self.addr))
        if reg.code != RC.SUCCESS:
            raise ControllerRefused(f"REGISTER_BROKER: {reg.code} {reg.remark}")
        await self.beat()
        return reg

    async def beat(self, timeout_ms: int = 600, **kw: int) -> None:
        hb = h.BrokerHeartbeatRequestHeader(cluster_name=self.cluster, broker_addr=self.addr,
                                            broker_name=self.name,
                                            broker_id=self.broker_id, heartbeat_timeout_mills=timeout_ms,
                                            **kw)
        if not self.beat_to:
            await self.client.invoke_oneway(self.controller, RemotingCommand.request(C.BROKER_HEARTBEAT, hb))
            return
        for addr in dict.fromkeys([self.controller, *self.beat_to]):
            with contextlib.suppress(RemotingError):  # a controller of the group that is down
                await self.client.invoke_oneway(addr, RemotingCommand.request(C.BROKER_HEARTBEAT, hb))

    async def elect(self) -> RemotingCommand:
        return await self.call(C.CONTROLLER_ELECT_MASTER, h.ElectMasterRequestHeader(
            cluster_name=self.cluster, broker_name=self.name, broker_id=self.broker_id))


class ServerProcess:
    """A ``bolide`` server command run as a child process, its output in ``<root>/<name>.log``."""

    def __init__(self, root: Path, name: str, args: Sequence[str]) -> None:
        self.root, self.name, self.args = root, name, list(args)
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Start it and wait until it says where it listens (AssertionError with its log when it
        exits first)."""
        log = (self.root / f"{self.name}.log").open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from bolide.cli.main import main; main()", *self.args],
            stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the server listens (or exits)
        assert "listening on" in line, (line, self.log())

    def log(self) -> str:
        return (self.root / f"{self.name}.log").read_text()

    def kill(self) -> None:
        """SIGKILL."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM (SIGKILL when it does not end within 15 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _write_conf(path: Path, props: dict[str, object]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


class BrokerProcess(ServerProcess):
    """A Bolide broker in controller mode, run as ``bolide broker -c <root>/<name>.conf``, its
    store in ``<root>/<name>``; ``controller``: its controllerAddr (``a;b;c`` for a group)."""

    def __init__(self, root: Path, name: str, namesrv: str, controller: str, *,
                 cluster: str = "CtrlCluster", group: str = "broker-a", **extra: object) -> None:
        self.port, self.ha_port = free_port(), free_port()
        conf = root / f"{name}.conf"
        _write_conf(conf, {
            "brokerClusterName": cluster, "brokerName": group, "brokerIP1": "127.0.0.1",
            "bolideBindAddress": "127.0.0.1", "bolideVipChannelEnabled": "false",
            "listenPort": self.port, "haListenPort": self.ha_port, "namesrvAddr": namesrv,
            "enableControllerMode": "true", "controllerAddr": controller,
            "controllerHeartBeatTimeoutMills": 3000, "syncBrokerMetadataPeriod": 1000,
            "brokerHeartbeatInterval": 500, "haSendHeartbeatInterval": 500,
            "mappedFileSizeCommitLog": 256 * 1024, "mappedFileSizeConsumeQueue": 20 * 1000,
            "storePathRootDir": root / name, **extra})
        self.store = root / name
        super().__init__(root, name, ["broker", "-c", str(conf)])

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


class ControllerProcess(ServerProcess):
    """``bolide controller -c <root>/<name>.conf``: peer ``peer_id`` of ``peers``
    (``n0-127.0.0.1:port;...``), its state under ``<root>/controller-store``."""

    def __init__(self, root: Path, peer_id: str, peers: str, **extra: object) -> None:
        conf = root / f"controller-{peer_id}.conf"
        _write_conf(conf, {"controllerDLegerGroup": "CtrlGroup", "controllerDLegerPeers": peers,
                           "controllerDLegerSelfId": peer_id, "bindAddress": "127.0.0.1",
                           "controllerStorePath": root / "controller-store",
                           "configStorePath": root / f"controller-{peer_id}.properties", **extra})
        self.peer_id = peer_id
        self.address = next(p.split("-", 1)[1] for p in peers.split(";") if p.startswith(f"{peer_id}-"))
        super().__init__(root, f"controller-{peer_id}", ["controller", "-c", str(conf)])


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControllerGroup:
    """Controllers of one Raft group in this process, on free loopback ports (``size`` peers,
    state under ``store``); peers can be stopped and started again from their files."""

    def __init__(self, store: Path, size: int = 3, *, timing: Timing | None = None,
                 heartbeat_grace_s: float = 0.5, **settings: str) -> None:
        peers = ";".join(f"n{i}-127.0.0.1:{free_port()}" for i in range(size))
        self.configs = [ControllerConfig.from_mapping({
            "controllerStorePath": str(store), "controllerDLegerPeers": peers,
            "controllerDLegerSelfId": f"n{i}", **settings}) for i in range(size)]
        self.timing = timing or Timing(heartbeat_ms=60, election_min_ms=300, election_max_ms=600)
        self.heartbeat_grace_s = heartbeat_grace_s
        self.servers: dict[str, ControllerServer | None] = {c.self_id: None for c in self.configs}

    @property
    def addresses(self) -> list[str]:
        """Every peer's address (a broker's ``controllerAddr``, joined with ``;``)."""
        return [c.self_peer("").address for c in self.configs]

    @property
    def running(self) -> list[ControllerServer]:
        return [s for s in self.servers.values() if s is not None]

    async def start(self, peer_id: str | None = None) -> ControllerServer | None:
        """Start ``peer_id`` (None: every peer); the peer started."""
        if peer_id is None:
            for config in self.configs:
                await self.start(config.self_id)
            return None
        config = next(c for c in self.configs if c.self_id == peer_id)
        server = ControllerServer(config, host="127.0.0.1", raft_timing=self.timing,
                                  heartbeat_grace_s=self.heartbeat_grace_s)
        self.servers[peer_id] = await server.start()
        return server

    async def stop(self, peer_id: str | None = None) -> None:
        """Stop ``peer_id`` (None: every running peer)."""
        for pid in [peer_id] if peer_id is not None else list(self.servers):
            server = self.servers[pid]
            self.servers[pid] = None
            if server is not None:
                await server.close()

    async def leader(self, timeout: float = 15) -> ControllerServer:
        """The one running peer that leads, once every running peer knows it."""
        def agreed() -> bool:
            leaders = [s for s in self.running if s.journal.is_leader]
            return len(leaders) == 1 and all(s.journal.leader_id == leaders[0].config.self_id
                                             for s in self.running)
        async with asyncio.timeout(timeout):
            while not agreed():
                await asyncio.sleep(0.01)
        return next(s for s in self.running if s.journal.is_leader)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Wait until ``check()`` holds (asked every 0.2 s); AssertionError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.2)


async def group_addrs(client: RemotingClient, namesrv: str, group: str) -> dict[int, str]:
    """The NameServer's broker ids and addresses of broker group ``group`` ({} when it has none,
    or does not answer)."""
    try:
        r = await client.invoke(namesrv, RemotingCommand.request(C.GET_BROKER_CLUSTER_INFO))
    except RemotingError:
        return {}
    data = ClusterInfo.decode(r.body_bytes()).broker_addr_table.get(group)
    return dict(data.broker_addrs) if data is not None else {}


async def send_to(client: RemotingClient, addr: str, topic: str, i: int) -> RemotingCommand:
    """SEND_MESSAGE_V2 of body ``m-<i>`` to queue ``i % 4`` of ``topic`` on the broker at ``addr``
    (created through TBW102); the answer."""
    header = SendMessageRequestHeader(producer_group="pg", topic=topic, default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=i % 4, sys_flag=0,
                                      born_timestamp=int(time.time() * 1000), flag=0, properties="")
    request = RemotingCommand.request(C.SEND_MESSAGE_V2, header.to_v2(), b"m-%d" % i)
    return await client.invoke(addr, request, 5000)


async def master_then_slave(client: RemotingClient, namesrv: str, group: str, master: BrokerProcess,
                            slave: BrokerProcess, *, timeout: float = 40, context: str = "") -> int:
    """Start ``master`` and wait until the NameServer lists it as the group's master (id 0),
    then ``slave`` until it is listed under the id its ``brokerIdentity`` holds; that id.
    ``context`` is added to the timeout's message (e.g. the controllers' logs)."""
    master.start()

    async def master_listed() -> bool:
        return (await group_addrs(client, namesrv, group)).get(0) == master.addr
    await eventually(master_listed, timeout,
                     f"{master.addr} listed as master (id 0)\n{master.log()}\n{context}")
    slave.start()
    slave_id: int | None = None

    async def slave_listed() -> bool:
        nonlocal slave_id
        found = read_identity(slave.store / "brokerIdentity")
        slave_id = found.broker_id if found else None
        addrs = await group_addrs(client, namesrv, group)
        return addrs.get(0) == master.addr and slave_id is not None and addrs.get(slave_id) == slave.addr
    await eventually(slave_listed, timeout, f"{slave.addr} listed as slave\n{slave.log()}")
    assert slave_id is not None
    return slave_id
