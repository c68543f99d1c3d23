"""A controller-mode broker's calls to the controller (RocketMQ 5's ``BrokerOuterAPI``):
which controller leads, the next free broker id, applying it, registering, heartbeats,
replica info, elections and the master's in-sync set changes."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bolide.errors import BolideError
from bolide.protocol.bodies.controller import ElectMasterResponseBody, SyncStateSet
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.base import Header
from bolide.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)
from bolide.remoting import RemotingClient, RemotingError

TIMEOUT_MS = 3000  # RocketMQ's BrokerOuterAPI waits 3 s for each controller call


class ControllerCallError(BolideError):
    """A controller refused a call (``code``: its response code) or could not be reached
    (``code`` None)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class MasterInfo:
    """What the controller says of a group's master (None fields: no master now)."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    @property
    def has_master(self) -> bool:
        return self.master_broker_id is not None and bool(self.master_address)


def _now_ms() -> int:
    return int(time.time() * 1000)


class ControllerClient:
    """Calls the controllers through the broker's outgoing ``client``."""

    def __init__(self, client: RemotingClient, cluster_name: str, broker_name: str) -> None:
        self.client = client
        self.cluster_name = cluster_name
        self.broker_name = broker_name

    async def _call(self, addr: str, code: RequestCode, header: Header | None = None,
                    body: bytes = b"", timeout_ms: int = TIMEOUT_MS) -> RemotingCommand:
        request = RemotingCommand.request(code, header, body)
        try:
            response = await self.client.invoke(addr, request, timeout_ms)
        except RemotingError as exc:
            raise ControllerCallError(f"{code.name} to controller {addr} failed: {exc}") from None
        if response.code != ResponseCode.SUCCESS:
            raise ControllerCallError(f"{code.name} to controller {addr} answered code "
                                      f"{response.code}: {response.remark}", response.code)
        return response

    async def leader_address(self, addr: str) -> str | None:
        """GET_METADATA_INFO (1005) to ``addr``: the leading controller's address, if any."""
        response = await self._call(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
        header = GetMetaDataResponseHeader.from_ext_fields(response.ext_fields)
        return header.controller_leader_address or None

    async def next_broker_id(self, leader: str) -> int:
        """GET_NEXT_BROKER_ID (1012): the id the controller would give the next broker."""
        response = await self._call(leader, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                    GetNextBrokerIdRequestHeader(cluster_name=self.cluster_name,
                                                                 broker_name=self.broker_name))
        next_id = GetNextBrokerIdResponseHeader.from_ext_fields(response.ext_fields).next_broker_id
        if next_id is None:
            raise ControllerCallError(f"GET_NEXT_BROKER_ID to {leader} answered no nextBrokerId")
        return next_id

    async def apply_broker_id(self, leader: str, broker_id: int, check_code: str) -> None:
        """APPLY_BROKER_ID (1013): claim ``broker_id`` (ControllerCallError when taken)."""
        await self._call(leader, RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(
            cluster_name=self.cluster_name, broker_name=self.broker_name,
            applied_broker_id=broker_id, register_check_code=check_code))

    async def register(self, leader: str, broker_id: int, broker_addr: str) -> MasterInfo:
        """CONTROLLER_REGISTER_BROKER (1003): the group's master as the controller knows it."""
        response = await self._call(leader, RequestCode.CONTROLLER_REGISTER_BROKER,
                                    RegisterBrokerToControllerRequestHeader(
                                        cluster_name=self.cluster_name, broker_name=self.broker_name,
                                        broker_id=broker_id, broker_address=broker_addr,
                                        invoke_time=_now_ms()))
        header = RegisterBrokerToControllerResponseHeader.from_ext_fields(response.ext_fields)
        sss = _sync_state_set(response)
        return MasterInfo(header.master_broker_id, header.master_address, header.master_epoch or 0,
                          frozenset(sss.sync_state_set), header.sync_state_set_epoch or 0)

    async def replica_info(self, leader: str) -> MasterInfo:
        """GET_REPLICA_INFO (1004): the group's master, epoch and in-sync set."""
        response = await self._call(leader, RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                    GetReplicaInfoRequestHeader(broker_name=self.broker_name))
        header = GetReplicaInfoResponseHeader.from_ext_fields(response.ext_fields)
        sss = _sync_state_set(response)
        return MasterInfo(header.master_broker_id, header.master_address, header.master_epoch or 0,
                          frozenset(sss.sync_state_set), sss.sync_state_set_epoch)

    async def elect(self, leader: str, broker_id: int) -> MasterInfo:
        """ELECT_MASTER (1002, designateElect=false): ask for an election in the group."""
        response = await self._call(leader, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(
            cluster_name=self.cluster_name, broker_name=self.broker_name, broker_id=broker_id,
            designate_elect=False, invoke_time=_now_ms()))
        header = ElectMasterResponseHeader.from_ext_fields(response.ext_fields)
        members: frozenset[int] = frozenset()
        if response.body:
            members = frozenset(ElectMasterResponseBody.decode(response.body_bytes()).sync_state_set)
        return MasterInfo(header.master_broker_id, header.master_address, header.master_epoch or 0,
                          members, header.sync_state_set_epoch or 0)

    async def alter_sync_state_set(self, leader: str, broker_id: int, master_epoch: int,
                                   members: set[int], epoch: int) -> SyncStateSet:
        """ALTER_SYNC_STATE_SET (1001): the master's new in-sync set; the controller's answer."""
        body = SyncStateSet(sync_state_set=set(members), sync_state_set_epoch=epoch).encode()
        response = await self._call(leader, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                                    AlterSyncStateSetRequestHeader(
                                        broker_name=self.broker_name, master_broker_id=broker_id,
                                        master_epoch=master_epoch, invoke_time=_now_ms()), body)
        return _sync_state_set(response)

    async def heartbeat(self, addr: str, header: BrokerHeartbeatRequestHeader, timeout_ms: int) -> None:
        """BROKER_HEARTBEAT (904) to one controller, one way (sent to each, as RocketMQ
        does)."""
        request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, header, oneway=True)
        try:
            await self.client.invoke_oneway(addr, request, timeout_ms)
        except RemotingError as exc:
            raise ControllerCallError(f"BROKER_HEARTBEAT to controller {addr} failed: {exc}") from None


def _sync_state_set(response: RemotingCommand) -> SyncStateSet:
    return SyncStateSet.decode(response.body_bytes()) if response.body else SyncStateSet()
