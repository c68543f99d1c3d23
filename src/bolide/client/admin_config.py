"""The configuration calls of :class:`~bolide.client.admin.Admin` (mqadmin getBrokerConfig,
updateBrokerConfig, getNamesrvConfig, updateNamesrvConfig, updateKvConfig, deleteKvConfig,
wipeWritePerm, addWritePerm, setCommitLogReadAheadMode), against Bolide's servers or Apache
RocketMQ's."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bolide.client.errors import ClientConfigError
from bolide.common.config_file import parse_properties
from bolide.errors import RemotingError
from bolide.protocol import RequestCode, ResponseCode
from bolide.protocol.bodies.route import MASTER_ID
from bolide.protocol.headers.admin import (
    ROCKSDB_CONFIG_TYPES,
    CheckRocksdbCqWriteProgressRequestHeader,
    ExportRocksDBConfigToJsonRequestHeader,
    SetCommitLogReadModeRequestHeader,
)
from bolide.protocol.headers.namesrv import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)

if TYPE_CHECKING:
    from bolide.client.config import ClientConfig
    from bolide.protocol import RemotingCommand
    from bolide.protocol.bodies.route import ClusterInfo
    from bolide.protocol.headers.base import Header


def properties_body(changes: Mapping[str, object]) -> bytes:
    """``key=value`` lines, as mqadmin sends a config update; ValueError for a key or value
    that a properties file cannot hold on one line."""
    lines = []
    for key, value in changes.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not key or any(c in key for c in "=: \t\r\n") or any(c in text for c in "\r\n"):
            raise ValueError(f"{key!r}={text!r} cannot be sent as a setting: a key has no '=', ':' "
                             "or spaces, and neither a key nor a value spans lines")
        lines.append(f"{key}={text}\n")
    return "".join(lines).encode("utf-8")


# the broker settings mqadmin exportConfigs writes
EXPORTED_BROKER_KEYS = ("brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
                        "filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel",
                        "msgTraceTopicName", "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS",
                        "autoCreateTopicEnable", "autoCreateSubscriptionGroup")


class ConfigAdminCalls:
    """Mixed into Admin: needs its ``config``, ``_call`` and ``_targets``."""

    if TYPE_CHECKING:
        config: ClientConfig

        async def _call(self, addr: str, code: int, header: Header | None, what: str,
                        body: bytes = b"", ok: tuple[int, ...] = ...) -> RemotingCommand: ...

        async def _targets(self, broker_addr: str | None, cluster: str | None) -> list[str]: ...

        async def cluster_info(self) -> ClusterInfo: ...

    async def _each_namesrv(self, code: int, header: Header | None, what: str,
                            body: bytes = b"") -> dict[str, RemotingCommand]:
        """The answer of every NameServer to the same request, by address."""
        return {addr: await self._call(addr, code, header, what, body=body)
                for addr in self.config.namesrv_addrs}

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """A broker's settings by key (GET_BROKER_CONFIG 26, mqadmin getBrokerConfig)."""
        response = await self._call(broker_addr, RequestCode.GET_BROKER_CONFIG, None, "GET_BROKER_CONFIG")
        return parse_properties(response.body_bytes().decode("utf-8", "replace"))

    async def update_broker_config(self, changes: Mapping[str, object], *, broker_addr: str | None = None,
                                   cluster: str | None = None) -> list[str]:
        """Change settings of the target masters (UPDATE_BROKER_CONFIG 25, mqadmin
        updateBrokerConfig); a broker refusing a key raises MQBrokerError naming it. Bolide and
        RocketMQ brokers write the change into their config file. Returns the addresses."""
        body = properties_body(changes)
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.UPDATE_BROKER_CONFIG, None,
                             f"updateBrokerConfig {', '.join(changes)}", body=body)
        return addrs

    async def namesrv_config(self) -> dict[str, dict[str, str]]:
        """Each NameServer's settings by key, by address (GET_NAMESRV_CONFIG 319)."""
        answers = await self._each_namesrv(RequestCode.GET_NAMESRV_CONFIG, None, "GET_NAMESRV_CONFIG")
        return {addr: parse_properties(r.body_bytes().decode("utf-8", "replace"))
                for addr, r in answers.items()}

    async def update_namesrv_config(self, changes: Mapping[str, object]) -> list[str]:
        """Change settings of every NameServer (UPDATE_NAMESRV_CONFIG 318, mqadmin
        updateNamesrvConfig); returns their addresses."""
        return list(await self._each_namesrv(RequestCode.UPDATE_NAMESRV_CONFIG, None,
                                             f"updateNamesrvConfig {', '.join(changes)}",
                                             body=properties_body(changes)))

    async def update_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        """Set a key of the NameServers' KV config (PUT_KV_CONFIG 100, mqadmin updateKvConfig),
        e.g. namespace ORDER_TOPIC_CONFIG for a global ordered topic; returns their addresses."""
        header = PutKVConfigRequestHeader(namespace=namespace, key=key, value=value)
        return list(await self._each_namesrv(RequestCode.PUT_KV_CONFIG, header,
                                             f"updateKvConfig {namespace}/{key}"))

    async def kv_config(self, namespace: str, key: str) -> str | None:
        """A key of the NameServers' KV config (GET_KV_CONFIG 101; the first NameServer that
        answers), None when it has none (e.g. mqadmin updateOrderConf -m get)."""
        header = GetKVConfigRequestHeader(namespace=namespace, key=key)
        last: RemotingError | None = None
        for addr in self.config.namesrv_addrs:
            try:
                response = await self._call(addr, RequestCode.GET_KV_CONFIG, header,
                                            f"getKvConfig {namespace}/{key}",
                                            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            except RemotingError as exc:
                last = exc
                continue
            if response.code != ResponseCode.SUCCESS:
                return None
            return response.read_header(GetKVConfigResponseHeader).value
        assert last is not None
        raise last

    async def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        """Delete a key of the NameServers' KV config (DELETE_KV_CONFIG 102, mqadmin
        deleteKvConfig); returns their addresses."""
        header = DeleteKVConfigRequestHeader(namespace=namespace, key=key)
        return list(await self._each_namesrv(RequestCode.DELETE_KV_CONFIG, header,
                                             f"deleteKvConfig {namespace}/{key}"))

    async def export_configs(self, cluster: str) -> dict[str, Any]:
        """mqadmin exportConfigs: the main settings of each broker group of ``cluster`` (its
        master's, by broker name: the keys of :data:`EXPORTED_BROKER_KEYS` it has) and the
        cluster's size (NameServers given, masters, slaves)."""
        info = await self.cluster_info()
        if cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise ClientConfigError(f"cluster {cluster!r} is unknown to the NameServer (known: {known})")
        configs: dict[str, dict[str, str]] = {}
        masters = slaves = 0
        for name in sorted(info.cluster_addr_table[cluster]):
            addrs = info.broker_addr_table[name].broker_addrs if name in info.broker_addr_table else {}
            if MASTER_ID not in addrs:
                continue
            masters += 1
            slaves += len(addrs) - 1
            settings = await self.broker_config(addrs[MASTER_ID])
            configs[settings.get("brokerName", name)] = {k: settings[k] for k in EXPORTED_BROKER_KEYS
                                                         if k in settings}
        return {"brokerConfigs": configs,
                "clusterScale": {"namesrvSize": len(self.config.namesrv_addrs), "masterBrokerSize": masters,
                                 "slaveBrokerSize": slaves}}

    async def set_commit_log_read_ahead(self, mode: int, *, broker_addr: str | None = None,
                                        cluster: str | None = None) -> dict[str, str]:
        """Turn the kernel's read-ahead in the brokers' CommitLog files on (``mode`` 0) or off
        (1: random reads of old messages fetch only their pages) (SET_COMMITLOG_READ_MODE 2004,
        mqadmin setCommitLogReadAheadMode); each broker's answer by address."""
        if mode not in (0, 1):
            raise ValueError(f"read-ahead mode {mode}: give 0 (read ahead, the default) or 1 (random reads)")
        out = {}
        for addr in await self._targets(broker_addr, cluster):
            response = await self._call(addr, RequestCode.SET_COMMITLOG_READ_MODE,
                                        SetCommitLogReadModeRequestHeader(read_ahead_mode=mode),
                                        "setCommitLogReadAheadMode")
            out[addr] = response.remark or ""
        return out

    async def check_rocksdb_cq_write_progress(self, *, topic: str = "", check_from_ms: int = 0,
                                              broker_addr: str | None = None,
                                              cluster: str | None = None) -> dict[str, dict[str, Any]]:
        """Ask brokers to compare their RocksDB ConsumeQueues with the files' (RocketMQ 5.3's
        CHECK_ROCKSDB_CQ_WRITE_PROGRESS 354, mqadmin checkRocksdbCqWriteProgress): each one's
        ``{"checkResult": text, "checkStatus": 0 OK, 1 NOT_OK, 2 IN_PROGRESS, 3 ERROR}`` by
        address (a RocketMQ broker checks in the background and logs the outcome)."""
        header = CheckRocksdbCqWriteProgressRequestHeader(topic=topic, check_store_time=check_from_ms)
        out: dict[str, dict[str, Any]] = {}
        for addr in await self._targets(broker_addr, cluster):
            response = await self._call(addr, RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS, header,
                                        "checkRocksdbCqWriteProgress")
            out[addr] = json.loads(response.body_bytes() or b"{}")
        return out

    async def export_rocksdb_config_to_json(self, config_types: Sequence[str] = ROCKSDB_CONFIG_TYPES, *,
                                            broker_addr: str | None = None,
                                            cluster: str | None = None) -> list[str]:
        """Have brokers write the configs they keep in RocksDB as JSON files (RocketMQ 5.3's
        EXPORT_ROCKSDB_CONFIG_TO_JSON 355, mqadmin rocksDBConfigToJson): ``config_types`` of
        topics, subscriptionGroups, consumerOffsets; returns the brokers' addresses."""
        header = ExportRocksDBConfigToJsonRequestHeader(config_type=";".join(config_types))
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON, header, "rocksDBConfigToJson")
        return addrs

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Have every NameServer route no sends to ``broker_name`` (WIPE_WRITE_PERM_OF_BROKER
        205, mqadmin wipeWritePerm), as before taking a broker out of service; the number of
        topics changed, by NameServer address. To keep the broker read-only across its
        restarts, set its brokerPermission to 4 (:meth:`update_broker_config`)."""
        answers = await self._each_namesrv(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                           WipeWritePermOfBrokerRequestHeader(broker_name=broker_name),
                                           f"wipeWritePerm {broker_name!r}")
        return {addr: r.read_header(WipeWritePermOfBrokerResponseHeader).wipe_topic_count
                for addr, r in answers.items()}

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Give ``broker_name``'s topics their write permission back on every NameServer
        (ADD_WRITE_PERM_OF_BROKER 327, mqadmin addWritePerm); topics changed by address."""
        answers = await self._each_namesrv(RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                           AddWritePermOfBrokerRequestHeader(broker_name=broker_name),
                                           f"addWritePerm {broker_name!r}")
        return {addr: r.read_header(AddWritePermOfBrokerResponseHeader).add_topic_count
                for addr, r in answers.items()}
