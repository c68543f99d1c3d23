"""The controller calls of :class:`~bolide.client.admin.Admin` (RocketMQ 5 controller mode;
mqadmin getControllerMetaData, getSyncStateSet, getControllerConfig, updateControllerConfig,
electMaster, cleanBrokerMetadata). Each takes the controller's address; like mqadmin, the
calls that change or read the replicas ask it for its leader first and go there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bolide.client.admin_config import properties_body
from bolide.common.config_file import parse_properties
from bolide.protocol import RequestCode
from bolide.protocol.bodies.controller import (
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    encode_broker_names,
)
from bolide.protocol.headers import controller as h

if TYPE_CHECKING:
    from bolide.protocol import RemotingCommand
    from bolide.protocol.headers.base import Header


def controller_addrs(addrs: str | Sequence[str]) -> list[str]:
    """``host:port;host:port`` (mqadmin's -a) as a list; ValueError when empty."""
    found = [a.strip() for a in (addrs.split(";") if isinstance(addrs, str) else addrs) if a.strip()]
    if not found:
        raise ValueError("give the controller address, host:port (several joined by ';')")
    return found


class ControllerAdminCalls:
    """Mixed into Admin: needs its ``_call``."""

    if TYPE_CHECKING:
        async def _call(self, addr: str, code: int, header: Header | None, what: str,
                        body: bytes = b"", ok: tuple[int, ...] = ...) -> RemotingCommand: ...

    async def controller_metadata(self, controller: str) -> h.GetMetaDataResponseHeader:
        """The controller group, its leader and peers (CONTROLLER_GET_METADATA_INFO 1005)."""
        response = await self._call(controller, RequestCode.CONTROLLER_GET_METADATA_INFO, None,
                                    "getControllerMetaData")
        return response.read_header(h.GetMetaDataResponseHeader)

    async def _leader(self, controller: str) -> str:
        meta = await self.controller_metadata(controller)
        return meta.controller_leader_address or controller

    async def sync_state_data(self, controller: str, broker_names: Sequence[str]) -> BrokerReplicasInfo:
        """Each broker group's master, epochs and in-sync / other replicas
        (CONTROLLER_GET_SYNC_STATE_DATA 1006, mqadmin getSyncStateSet)."""
        if not broker_names:
            return BrokerReplicasInfo()
        response = await self._call(await self._leader(controller),
                                    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, "getSyncStateSet",
                                    body=encode_broker_names(list(broker_names)))
        body = response.body_bytes()
        return BrokerReplicasInfo.decode(body) if body else BrokerReplicasInfo()

    async def controller_config(self, controllers: str | Sequence[str]) -> dict[str, dict[str, str]]:
        """Each controller's settings by key, by address (GET_CONTROLLER_CONFIG 1010)."""
        out = {}
        for addr in controller_addrs(controllers):
            response = await self._call(addr, RequestCode.GET_CONTROLLER_CONFIG, None, "getControllerConfig")
            out[addr] = parse_properties(response.body_bytes().decode("utf-8", "replace"))
        return out

    async def update_controller_config(self, changes: Mapping[str, object],
                                       controllers: str | Sequence[str]) -> list[str]:
        """Change settings of each controller (UPDATE_CONTROLLER_CONFIG 1009); their addresses."""
        addrs = controller_addrs(controllers)
        body = properties_body(changes)
        for addr in addrs:
            await self._call(addr, RequestCode.UPDATE_CONTROLLER_CONFIG, None,
                             f"updateControllerConfig {', '.join(changes)}", body=body)
        return addrs

    async def elect_master(self, controller: str, cluster: str, broker_name: str,
                           broker_id: int) -> tuple[h.ElectMasterResponseHeader, ElectMasterResponseBody]:
        """Make ``broker_id`` the master of its group if it is alive and in sync
        (CONTROLLER_ELECT_MASTER 1002 with designateElect, mqadmin electMaster)."""
        header = h.ElectMasterRequestHeader(cluster_name=cluster, broker_name=broker_name,
                                            broker_id=broker_id, designate_elect=True)
        response = await self._call(await self._leader(controller), RequestCode.CONTROLLER_ELECT_MASTER,
                                    header, f"electMaster {broker_name} {broker_id}")
        body = response.body_bytes()
        return (response.read_header(h.ElectMasterResponseHeader),
                ElectMasterResponseBody.decode(body) if body else ElectMasterResponseBody())

    async def clean_broker_metadata(self, controller: str, broker_name: str, *, cluster: str | None = None,
                                    broker_ids: Sequence[int] = (), clean_living: bool = False) -> None:
        """Forget a broker group, or some of its ids, on the controller (CLEAN_BROKER_DATA 1011,
        mqadmin cleanBrokerMetadata); refused for a live broker unless ``clean_living``."""
        header = h.CleanControllerBrokerDataRequestHeader(
            broker_name=broker_name, cluster_name=cluster,
            broker_controller_ids_to_clean=";".join(str(i) for i in broker_ids) or None,
            is_clean_living_broker=clean_living)
        await self._call(await self._leader(controller), RequestCode.CLEAN_BROKER_DATA, header,
                         f"cleanBrokerMetadata {broker_name}")
