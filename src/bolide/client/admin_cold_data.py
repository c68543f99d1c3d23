"""The cold data flow control calls of :class:`~bolide.client.admin.Admin` (RocketMQ 5; mqadmin
updateColdDataFlowCtrGroupConfig, removeColdDataFlowCtrGroupConfig, getColdDataFlowCtrInfo),
against Bolide's servers or Apache RocketMQ's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bolide.client.errors import ClientConfigError
from bolide.common.fastjson import JSONError, loads
from bolide.errors import ProtocolError
from bolide.protocol import RequestCode
from bolide.protocol.bodies.admin import ColdReadAcc
from bolide.protocol.bodies.route import MASTER_ID

if TYPE_CHECKING:
    from bolide.protocol import RemotingCommand
    from bolide.protocol.bodies.route import ClusterInfo
    from bolide.protocol.headers.base import Header


@dataclass(slots=True)
class ColdDataFlowCtrInfo:
    """GET_COLD_DATA_FLOW_CTR_INFO's answer: the groups that read cold data in the last minute,
    the thresholds set for groups (``<group>||adaptive``: set by the broker's strategy), the
    default and broker-wide thresholds (bytes per 5 s) and the broker's cold bytes this window."""

    runtime_table: dict[str, ColdReadAcc] = field(default_factory=dict)
    config_table: dict[str, int] = field(default_factory=dict)
    cg_cold_read_threshold: int = 0
    global_cold_read_threshold: int = 0
    global_acc: int = 0

    @classmethod
    def decode(cls, body: bytes) -> ColdDataFlowCtrInfo:
        try:
            doc = loads(body)
            return cls({g: ColdReadAcc.from_json_obj(e, f"runtimeTable.{g}")
                        for g, e in (doc.get("runtimeTable") or {}).items()},
                       {g: int(v) for g, v in (doc.get("configTable") or {}).items()},
                       int(doc["cgColdReadThreshold"]), int(doc["globalColdReadThreshold"]),
                       int(doc["globalAcc"]))
        except (JSONError, ProtocolError, AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"GET_COLD_DATA_FLOW_CTR_INFO answered no cold data flow control "
                                f"document ({exc!r}): {bytes(body[:200])!r}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"runtimeTable": {g: e.to_json_obj() for g, e in self.runtime_table.items()},
                "configTable": dict(self.config_table), "cgColdReadThreshold": self.cg_cold_read_threshold,
                "globalColdReadThreshold": self.global_cold_read_threshold, "globalAcc": self.global_acc}


class ColdDataAdminCalls:
    """Mixed into Admin: needs its ``_call``, ``_targets`` and ``cluster_info``."""

    if TYPE_CHECKING:
        async def _call(self, addr: str, code: int, header: Header | None, what: str,
                        body: bytes = b"", ok: tuple[int, ...] = ...) -> RemotingCommand: ...

        async def _targets(self, broker_addr: str | None, cluster: str | None) -> list[str]: ...

        async def cluster_info(self) -> ClusterInfo: ...

    async def update_cold_data_flow_ctr_group_config(
            self, group: str, threshold: int, *, broker_addr: str | None = None,
            cluster: str | None = None) -> list[str]:
        """Give ``group`` its own cold read threshold (bytes per 5 s) on one broker, the masters
        of a cluster, or every master (UPDATE_COLD_DATA_FLOW_CTR_CONFIG 2001); the addresses."""
        if not group or any(c in group for c in "=: \t\r\n"):
            raise ValueError(f"consumer group {group!r}: give a group name (no '=', ':' or spaces)")
        if threshold < 0:
            raise ValueError(f"cold read threshold {threshold}: give 0 or more bytes per 5 s")
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.UPDATE_COLD_DATA_FLOW_CTR_CONFIG, None,
                             "updateColdDataFlowCtrGroupConfig", f"{group}={threshold}\n".encode())
        return addrs

    async def remove_cold_data_flow_ctr_group_config(
            self, group: str, *, broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """Drop ``group``'s own threshold (it gets cgColdReadThreshold again) on the brokers
        (REMOVE_COLD_DATA_FLOW_CTR_CONFIG 2002); the addresses."""
        if not group:
            raise ValueError("give the consumer group whose cold read threshold to remove")
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.REMOVE_COLD_DATA_FLOW_CTR_CONFIG, None,
                             "removeColdDataFlowCtrGroupConfig", group.encode())
        return addrs

    async def cold_data_flow_ctr_info(self, *, broker_addr: str | None = None, cluster: str | None = None,
                                      ) -> dict[str, ColdDataFlowCtrInfo | None]:
        """The cold data flow control state of one broker, or of every master and slave of a
        cluster (of every cluster when neither is given) (GET_COLD_DATA_FLOW_CTR_INFO 2003), by
        address; None for a broker that answered no table."""
        addrs = [broker_addr] if broker_addr else await self._brokers_of(cluster)
        out: dict[str, ColdDataFlowCtrInfo | None] = {}
        for addr in addrs:
            response = await self._call(addr, RequestCode.GET_COLD_DATA_FLOW_CTR_INFO, None,
                                        "getColdDataFlowCtrInfo")
            body = response.body_bytes()
            out[addr] = ColdDataFlowCtrInfo.decode(body) if body else None
        return out

    async def _brokers_of(self, cluster: str | None) -> list[str]:
        """Masters then their slaves, of ``cluster`` (of every cluster when None)."""
        info = await self.cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise ClientConfigError(f"cluster {cluster!r} is unknown to the NameServer (known: {known}): "
                                    "check the name, or give a broker address with -b")
        names = info.cluster_addr_table[cluster] if cluster is not None else info.broker_addr_table
        addrs = []
        for name in sorted(names):
            found = info.broker_addr_table.get(name)
            if found is not None and MASTER_ID in found.broker_addrs:
                addrs += [addr for _, addr in sorted(found.broker_addrs.items())]
        if not addrs:
            raise ClientConfigError("no master broker is registered with the NameServer: start a "
                                    "broker, or give one with -b")
        return addrs
