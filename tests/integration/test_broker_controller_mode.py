"""A Bolide broker in controller mode against a scripted controller on loopback: the
registration state machine (identity files, an id refused, a temp file resumed, a store of
another broker), heartbeats, and role changes at runtime told by NOTIFY_BROKER_ROLE_CHANGED
(sends accepted or refused, the master-only services, the NameServer's broker ids, epochs).

The scripted controller answers the controller codes for one group from what the test sets
(it injects the faults: a refused id); the full election against a real controller is in
tests/interop/test_controller_mode_rocketmq.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bolide.broker import BrokerConfig, BrokerController
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies.controller import EpochEntryCache, SyncStateSet
from bolide.protocol.bodies.route import ClusterInfo
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.headers.controller import NotifyBrokerRoleChangedRequestHeader
from bolide.remoting import RemotingClient, RemotingServer, RequestContext
from bolide.store import BrokerRole, StoreConfig
from bolide.store.broker_identity import BrokerIdentity, TempBrokerIdentity, read_identity, write_identity
from conftest import wait_until

pytestmark = pytest.mark.timeout(60)

GROUP = "broker-a"


class ScriptedController:
    """The controller codes for one group: ids handed out in turn, the master and epochs as
    the test sets them, an election that picks the asking broker; every request recorded."""

    CODES = (RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
             RequestCode.CONTROLLER_APPLY_BROKER_ID, RequestCode.CONTROLLER_REGISTER_BROKER,
             RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_GET_REPLICA_INFO,
             RequestCode.CONTROLLER_ELECT_MASTER, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET)

    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0)
        for code in self.CODES:
            self.server.register(code, self)
        self.next_id = 1
        self.refused_ids: set[int] = set()
        self.master_id: int | None = None
        self.master_addr: str | None = None
        self.epoch = 0
        self.requests: list[RemotingCommand] = []

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def codes(self) -> list[int]:
        return [r.code for r in self.requests]

    def _master(self, request: RemotingCommand) -> RemotingCommand:
        ext = {"masterEpoch": str(self.epoch), "syncStateSetEpoch": str(self.epoch)}
        if self.master_id is not None and self.master_addr:
            ext |= {"masterBrokerId": str(self.master_id), "masterAddress": self.master_addr}
        body = SyncStateSet(sync_state_set={self.master_id} if self.master_id else set(),
                            sync_state_set_epoch=self.epoch).encode()
        return request.make_response(body=body, ext_fields=ext)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.requests.append(request)
        ext, code = request.ext_fields, request.code
        if code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            return request.make_response_ext(ResponseCode.SUCCESS, {
                "controllerLeaderAddress": self.addr, "isLeader": "true", "group": "g"})
        if code == RequestCode.CONTROLLER_GET_NEXT_BROKER_ID:
            return request.make_response_ext(ResponseCode.SUCCESS, {"nextBrokerId": str(self.next_id)})
        if code == RequestCode.CONTROLLER_APPLY_BROKER_ID:
            applied = int(ext["appliedBrokerId"])
            self.next_id = max(self.next_id, applied + 1)
            if applied in self.refused_ids:
                return request.make_response(ResponseCode.CONTROLLER_BROKER_ID_INVALID, "taken")
            return request.make_response()
        if code == RequestCode.CONTROLLER_ELECT_MASTER and self.master_id is None:
            self.master_id, self.epoch = int(ext["brokerId"]), self.epoch + 1
            self.master_addr = self._addr_of(self.master_id)
        if code in (RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET):
            return request.make_response()
        return self._master(request)

    def _addr_of(self, broker_id: int) -> str | None:
        for r in reversed(self.requests):
            if (r.code == RequestCode.CONTROLLER_REGISTER_BROKER
                    and r.ext_fields["brokerId"] == str(broker_id)):
                return r.ext_fields["brokerAddress"]
        return None


@asynccontextmanager
async def cluster(tmp_path: Path,
                  ) -> AsyncIterator[tuple[ScriptedController, NamesrvController, RemotingClient]]:
    ctrl = ScriptedController()
    await ctrl.server.start()
    namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                host="127.0.0.1", port=0)
    await namesrv.start()
    client = RemotingClient()
    try:
        yield ctrl, namesrv, client
    finally:
        await client.close()
        await namesrv.close()
        await ctrl.server.close()


def broker_of(tmp_path: Path, ctrl: ScriptedController, namesrv: NamesrvController,
              **options: object) -> BrokerController:
    config = BrokerConfig(namesrv_addr=f"127.0.0.1:{namesrv.port}", listen_port=0,
                          bind_address="127.0.0.1", broker_ip1="127.0.0.1", ha_listen_port=0,
                          broker_name=GROUP, enable_controller_mode=True, controller_addr=ctrl.addr,
                          broker_heartbeat_interval_ms=100, sync_broker_metadata_period_ms=200,
                          vip_channel_enabled=False).replace(**options)
    store = StoreConfig(store_path_root_dir=str(tmp_path / "store"),
                        mapped_file_size_commit_log=1024 * 1024, mapped_file_size_consume_queue=1000 * 20,
                        broker_role=BrokerRole.ASYNC_MASTER)  # ignored in controller mode
    return BrokerController(config, store)


async def route_ids(client: RemotingClient, namesrv: NamesrvController) -> dict[int, str]:
    r = await client.invoke(f"127.0.0.1:{namesrv.port}",
                            RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    data = ClusterInfo.decode(r.body_bytes()).broker_addr_table.get(GROUP)
    return dict(data.broker_addrs) if data is not None else {}


async def send(client: RemotingClient, addr: str, i: int = 0) -> RemotingCommand:
    header = SendMessageRequestHeader(producer_group="pg", topic="CtrlMode", default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=i % 4, sys_flag=0,
                                      born_timestamp=int(time.time() * 1000), flag=0, properties="")
    return await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                                             header.to_v2(), b"x-%d" % i))


async def notify(client: RemotingClient, broker: BrokerController, master_id: int, master_addr: str,
                 epoch: int) -> None:
    header = NotifyBrokerRoleChangedRequestHeader(master_address=master_addr, master_epoch=epoch,
                                                  sync_state_set_epoch=epoch, master_broker_id=master_id)
    body = SyncStateSet(sync_state_set={master_id}, sync_state_set_epoch=epoch).encode()
    r = await client.invoke(broker.broker_addr, RemotingCommand.request(
        RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header, body))
    assert r.code == ResponseCode.SUCCESS, r.remark


def in_loop(test: Callable[[Path], Awaitable[None]]) -> Callable[[Path], None]:
    """Run the async test on a fresh event loop, failing it after 45 s."""
    @functools.wraps(test)
    def run(tmp_path: Path) -> None:
        asyncio.run(asyncio.wait_for(test(tmp_path), 45))
    return run


async def eventually(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.02)


@in_loop
async def test_first_broker_gets_an_id_is_elected_and_registers_as_master(tmp_path: Path) -> None:
    async with cluster(tmp_path) as (ctrl, namesrv, client):
        broker = broker_of(tmp_path, ctrl, namesrv)
        await broker.start()
        try:
            refused = await send(client, broker.broker_addr)  # fenced until the role is known
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert broker.replicas is not None
            await asyncio.wait_for(broker.replicas.role_known.wait(), 10)
            assert read_identity(tmp_path / "store" / "brokerIdentity") == BrokerIdentity(
                "DefaultCluster", GROUP, 1)
            assert not (tmp_path / "store" / "brokerIdentity-temp").exists()
            codes = ctrl.codes()
            order = [RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                     RequestCode.CONTROLLER_APPLY_BROKER_ID, RequestCode.CONTROLLER_REGISTER_BROKER,
                     RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_ELECT_MASTER]
            assert [c for c in codes if c in order][:len(order)] == order
            apply = next(r for r in ctrl.requests if r.code == RequestCode.CONTROLLER_APPLY_BROKER_ID)
            assert apply.ext_fields["registerCheckCode"].startswith(broker.broker_addr + ";")

            async def master_listed() -> bool:
                return (await route_ids(client, namesrv)).get(0) == broker.broker_addr
            await eventually(master_listed)
            assert (await send(client, broker.broker_addr)).code == ResponseCode.SUCCESS
            assert broker.schedule is not None and broker.schedule.running
            assert broker.transaction_check.running

            async def heartbeat_with_epoch() -> bool:
                return any(r.code == RequestCode.BROKER_HEARTBEAT and r.ext_fields.get("epoch") == "1"
                           for r in ctrl.requests)
            await eventually(heartbeat_with_epoch)
            beat = [r for r in ctrl.requests if r.code == RequestCode.BROKER_HEARTBEAT][-1].ext_fields
            assert beat["brokerId"] == "1" and beat["brokerName"] == GROUP
            assert beat["electionPriority"] == str(2**31 - 1) and int(beat["maxOffset"]) >= 0
            assert beat["heartbeatTimeoutMills"] == "10000"
        finally:
            await broker.close()


@in_loop
async def test_controller_addresses_by_dns_lookup(tmp_path: Path) -> None:
    async with cluster(tmp_path) as (ctrl, namesrv, _client):
        broker = broker_of(tmp_path, ctrl, namesrv, fetch_controller_addr_by_dns_lookup=True,
                           controller_addr=f"localhost:{ctrl.server.port}")
        await broker.start()
        try:
            assert broker.replicas is not None
            await asyncio.wait_for(broker.replicas.role_known.wait(), 10)
            assert broker.replicas.controller_addrs == [ctrl.addr]  # localhost's IPv4 address
        finally:
            await broker.close()


@in_loop
async def test_a_refused_id_is_dropped_and_another_applied(tmp_path: Path) -> None:
    async with cluster(tmp_path) as (ctrl, namesrv, _client):
        ctrl.refused_ids = {1}
        broker = broker_of(tmp_path, ctrl, namesrv)
        await broker.start()
        try:
            assert broker.replicas is not None
            await asyncio.wait_for(broker.replicas.role_known.wait(), 15)
            assert read_identity(tmp_path / "store" / "brokerIdentity") == BrokerIdentity(
                "DefaultCluster", GROUP, 2)
            applied = [r.ext_fields["appliedBrokerId"] for r in ctrl.requests
                       if r.code == RequestCode.CONTROLLER_APPLY_BROKER_ID]
            assert applied == ["1", "2"]
        finally:
            await broker.close()


@in_loop
async def test_a_temp_identity_is_applied_again_after_a_crash(tmp_path: Path) -> None:
    async with cluster(tmp_path) as (ctrl, namesrv, _client):
        temp = TempBrokerIdentity("DefaultCluster", GROUP, 7, "127.0.0.1:1;1700000000000")
        write_identity(tmp_path / "store" / "brokerIdentity-temp", temp)
        broker = broker_of(tmp_path, ctrl, namesrv)
        await broker.start()
        try:
            assert broker.replicas is not None
            await asyncio.wait_for(broker.replicas.role_known.wait(), 10)
            assert RequestCode.CONTROLLER_GET_NEXT_BROKER_ID not in ctrl.codes()
            apply = next(r for r in ctrl.requests if r.code == RequestCode.CONTROLLER_APPLY_BROKER_ID)
            assert apply.ext_fields["registerCheckCode"] == temp.register_check_code
            assert read_identity(tmp_path / "store" / "brokerIdentity") == BrokerIdentity(
                "DefaultCluster", GROUP, 7)
        finally:
            await broker.close()


def test_a_store_of_another_broker_never_registers(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bolide.broker.replicas.manager")
    asyncio.run(asyncio.wait_for(_another_brokers_store(tmp_path, caplog), 45))


async def _another_brokers_store(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with cluster(tmp_path) as (ctrl, namesrv, client):
        write_identity(tmp_path / "store" / "brokerIdentity", BrokerIdentity("DefaultCluster", "broker-z", 3))
        broker = broker_of(tmp_path, ctrl, namesrv)
        await broker.start()
        try:
            # a whole start attempt (its registration tries) ended without registering
            await wait_until(lambda: "not registered yet" in caplog.text)
            assert "is of broker broker-z in cluster DefaultCluster" in caplog.text
            assert RequestCode.CONTROLLER_REGISTER_BROKER not in ctrl.codes()
            assert (await send(client, broker.broker_addr)).code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert await route_ids(client, namesrv) == {}
        finally:
            await broker.close()


def test_role_changes_at_runtime_under_sends(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bolide.broker.replicas.manager")
    asyncio.run(asyncio.wait_for(_role_changes(tmp_path, caplog), 45))


async def _role_changes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with cluster(tmp_path) as (ctrl, namesrv, client):
        broker = broker_of(tmp_path, ctrl, namesrv)
        await broker.start()
        try:
            assert broker.replicas is not None
            await asyncio.wait_for(broker.replicas.role_known.wait(), 10)
            answers: list[int] = []
            stop = asyncio.Event()

            async def sender(i: int) -> None:
                while not stop.is_set():
                    answers.append((await send(client, broker.broker_addr, i)).code)
                    i += 4
            tasks = [asyncio.create_task(sender(i)) for i in range(4)]  # 4 sends in flight
            await wait_until(lambda: len(answers) > 20)
            # another broker (id 9) is elected: this one becomes its slave
            ctrl.master_id, ctrl.master_addr, ctrl.epoch = 9, "127.0.0.1:1", 2
            await notify(client, broker, 9, "127.0.0.1:1", 2)
            await wait_until(lambda: broker.role is BrokerRole.SLAVE)

            async def slave_listed() -> bool:
                return (await route_ids(client, namesrv)).get(1) == broker.broker_addr
            await eventually(slave_listed)
            assert 0 not in await route_ids(client, namesrv)
            assert broker.schedule is not None and not broker.schedule.running
            assert not broker.transaction_check.running
            assert broker.slave_sync is not None and broker.slave_sync.master_addr == "127.0.0.1:1"
            await wait_until(lambda: answers[-1] == ResponseCode.SERVICE_NOT_AVAILABLE)
            # a late notice of an older epoch changes nothing
            await notify(client, broker, 1, broker.broker_addr, 1)
            await wait_until(lambda: "master 1 of epoch 1 ignored: epoch 2 is newer" in caplog.text)
            assert broker.role is BrokerRole.SLAVE
            # elected again (epoch 3)
            ctrl.master_id, ctrl.master_addr, ctrl.epoch = 1, broker.broker_addr, 3
            await notify(client, broker, 1, broker.broker_addr, 3)
            await wait_until(lambda: broker.role is BrokerRole.SYNC_MASTER)

            async def master_listed() -> bool:
                return (await route_ids(client, namesrv)).get(0) == broker.broker_addr
            await eventually(master_listed)
            n = len(answers)
            await wait_until(lambda: len(answers) > n + 5 and answers[-1] == ResponseCode.SUCCESS)
            stop.set()
            await asyncio.gather(*tasks)
            assert set(answers) == {ResponseCode.SUCCESS, ResponseCode.SERVICE_NOT_AVAILABLE}
            assert broker.schedule.running and broker.transaction_check.running
            r = await client.invoke(broker.broker_addr,
                                    RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE))
            cache = EpochEntryCache.decode(r.body_bytes())
            epochs = [e.epoch for e in cache.epoch_list]  # a slave's epoch 2 is its master's
            assert epochs[0] == 1 and epochs[-1] == 3 and epochs == sorted(epochs)
            assert cache.broker_id == 0 and cache.broker_name == GROUP
            assert cache.max_offset == broker.store.max_phy_offset
            assert cache.epoch_list[0].end_offset == cache.epoch_list[1].start_offset
            # elected again (epoch 4): still master, the queues go on
            before = await send(client, broker.broker_addr, 0)
            ctrl.epoch = 4
            await notify(client, broker, 1, broker.broker_addr, 4)

            async def epoch_4() -> bool:
                r = await client.invoke(broker.broker_addr,
                                        RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE))
                return EpochEntryCache.decode(r.body_bytes()).epoch_list[-1].epoch == 4
            await eventually(epoch_4)
            after = await send(client, broker.broker_addr, 0)
            assert int(after.ext_fields["queueOffset"]) == int(before.ext_fields["queueOffset"]) + 1
            assert broker.role is BrokerRole.SYNC_MASTER
        finally:
            await broker.close()


@in_loop
async def test_epoch_cache_outside_controller_mode_is_refused(tmp_path: Path) -> None:
    from bolide.testing.servers import running_servers
    async with running_servers(tmp_path / "s") as s:
        client = RemotingClient()
        try:
            r = await client.invoke(s.broker_addr,
                                    RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE))
            assert r.code == ResponseCode.SYSTEM_ERROR and "controllerMode" in (r.remark or "")
        finally:
            await client.close()
