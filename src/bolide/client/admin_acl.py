"""The plain-ACL calls of :class:`~bolide.client.admin.Admin` (mqadmin updateAclConfig,
deleteAclConfig, updateGlobalWhiteAddr, clusterAclConfigVersion, getAclConfig), against
brokers with ``aclEnable=true``: Bolide's or Apache RocketMQ 4.9's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bolide.protocol import RequestCode, fastjson
from bolide.protocol.bodies.admin import BrokerClusterAclConfig
from bolide.protocol.bodies.broker import DataVersion
from bolide.protocol.headers.admin import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)

if TYPE_CHECKING:
    from bolide.protocol import RemotingCommand
    from bolide.protocol.headers.base import Header


@dataclass(slots=True)
class AclVersion:
    """A broker's ACL data versions: of its main file, and of every file by path."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    version: DataVersion
    files: dict[str, DataVersion] = field(default_factory=dict)


class AclAdminCalls:
    """Mixed into Admin: needs its ``_call`` and ``_targets``."""

    if TYPE_CHECKING:
        async def _call(self, addr: str, code: int, header: Header | None, what: str,
                        body: bytes = b"", ok: tuple[int, ...] = ...) -> RemotingCommand: ...

        async def _targets(self, broker_addr: str | None, cluster: str | None) -> list[str]: ...

    async def update_acl_account(self, access_key: str, secret_key: str, *,
                                 white_remote_address: str | None = None, admin: bool = False,
                                 default_topic_perm: str | None = None,
                                 default_group_perm: str | None = None,
                                 topic_perms: Iterable[str] | None = None,
                                 group_perms: Iterable[str] | None = None,
                                 broker_addr: str | None = None,
                                 cluster: str | None = None) -> list[str]:
        """Create or change an account on the target masters (mqadmin updateAclConfig);
        values left as None keep the account's current ones. Perms are ``name=PERM`` with
        PUB, SUB, PUB|SUB or DENY. Returns the brokers' addresses."""
        header = CreateAccessConfigRequestHeader(
            access_key=access_key, secret_key=secret_key, white_remote_address=white_remote_address,
            admin=admin, default_topic_perm=default_topic_perm,
            default_group_perm=default_group_perm,
            topic_perms=None if topic_perms is None else ",".join(topic_perms),
            group_perms=None if group_perms is None else ",".join(group_perms))
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header,
                             f"updateAclConfig {access_key!r}")
        return addrs

    async def delete_acl_account(self, access_key: str, *, broker_addr: str | None = None,
                                 cluster: str | None = None) -> list[str]:
        """Remove an account from the target masters (mqadmin deleteAclConfig)."""
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.DELETE_ACL_CONFIG,
                             DeleteAccessConfigRequestHeader(access_key=access_key),
                             f"deleteAclConfig {access_key!r}")
        return addrs

    async def update_global_white_addrs(self, addresses: Iterable[str], *,
                                        acl_file: str | None = None,
                                        broker_addr: str | None = None,
                                        cluster: str | None = None) -> list[str]:
        """Replace the global white list (of ``acl_file``, by default the broker's main ACL
        file) on the target masters (mqadmin updateGlobalWhiteAddr)."""
        header = UpdateGlobalWhiteAddrsConfigRequestHeader(global_white_addrs=",".join(addresses),
                                                           acl_file_full_path=acl_file)
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header,
                             "updateGlobalWhiteAddr")
        return addrs

    async def acl_versions(self, *, broker_addr: str | None = None,
                           cluster: str | None = None) -> list[AclVersion]:
        """The ACL data versions of the target masters (mqadmin clusterAclConfigVersion)."""
        out = []
        for addr in await self._targets(broker_addr, cluster):
            response = await self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, None,
                                        "clusterAclConfigVersion")
            h = response.read_header(GetBrokerAclConfigResponseHeader)
            files = fastjson.loads(h.all_acl_file_version) if h.all_acl_file_version else {}
            out.append(AclVersion(h.cluster_name, h.broker_name, h.broker_addr,
                                  DataVersion.decode(h.version),
                                  {path: DataVersion.from_json_obj(v) for path, v in files.items()}))
        return out

    async def acl_config(self, *, broker_addr: str | None = None,
                         cluster: str | None = None) -> dict[str, BrokerClusterAclConfig]:
        """The accounts and global white addresses of the target masters, by address
        (mqadmin getAclConfig; Bolide brokers answer admin accounts only)."""
        out = {}
        for addr in await self._targets(broker_addr, cluster):
            response = await self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, None,
                                        "getAclConfig")
            out[addr] = BrokerClusterAclConfig.decode(response.body_bytes())
        return out
