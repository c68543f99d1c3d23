"""A broker's side of RocketMQ 5's controller protocol, for tests of a controller: the id
application and registration sequence, heartbeats, elections, and a server of its own that
records the controller's NOTIFY_BROKER_ROLE_CHANGED (1008)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from bolide.errors import RemotingError
from bolide.protocol.bodies.controller import SyncStateSet
from bolide.protocol.codes import RequestCode as C
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import controller as h
from bolide.protocol.headers.base import Header
from bolide.remoting import RemotingClient, RemotingServer, RequestContext


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
