"""Plain-ACL administration (mqadmin updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr,
clusterAclConfigVersion, getAclConfig): codes 50 to 54 over the broker's ACL files. With
``aclEnable=false`` each answers that ACL is off and how to turn it on."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from bolide.errors import ConfigError
from bolide.protocol import fastjson
from bolide.protocol.bodies.admin import PlainAccessConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.acl import PlainAcl
    from bolide.broker.controller import BrokerController

ACL_OFF = ("ACL is off on this broker: set aclEnable=true and bolideAclFile=/path/to/plain_acl.yml "
           "in broker.conf and restart it")


def _split(text: str | None) -> list[str] | None:
    """A comma-joined header value as a list (Java's UtilAll.split: None stays None)."""
    if text is None:
        return None
    return [item for item in text.split(",") if item]


class AclAdminProcessor:
    """Reads and changes the accounts and white lists of :class:`~bolide.broker.acl.PlainAcl`."""

    CODES = (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
             RequestCode.GET_BROKER_CLUSTER_ACL_INFO, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
             RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)

    _FAILED = {RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
               RequestCode.DELETE_ACL_CONFIG: ResponseCode.DELETE_ACL_CONFIG_FAILED,
               RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG:
                   ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED}

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._writes = asyncio.Lock()  # one change of the files at a time, as RocketMQ's

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        acl = self.broker.acl
        code = request.code
        if acl is None:
            return request.make_response(self._FAILED.get(code, ResponseCode.SYSTEM_ERROR), ACL_OFF)
        if code == RequestCode.GET_BROKER_CLUSTER_ACL_INFO:
            return self._versions(request, acl)
        if code == RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG:
            return request.make_response(body=acl.cluster_config().encode())
        try:
            async with self._writes:
                return await asyncio.to_thread(self._change, request, acl)
        except (ConfigError, OSError) as exc:
            return request.make_response(self._FAILED[code], str(exc))

    def _change(self, request: RemotingCommand, acl: PlainAcl) -> RemotingCommand:
        if request.code == RequestCode.UPDATE_AND_CREATE_ACL_CONFIG:
            h = request.read_header(CreateAccessConfigRequestHeader)
            acl.update_account(PlainAccessConfig(
                access_key=h.access_key, secret_key=h.secret_key,
                white_remote_address=h.white_remote_address, admin=h.admin,
                default_topic_perm=h.default_topic_perm, default_group_perm=h.default_group_perm,
                topic_perms=_split(h.topic_perms), group_perms=_split(h.group_perms)))
        elif request.code == RequestCode.DELETE_ACL_CONFIG:
            key = request.read_header(DeleteAccessConfigRequestHeader).access_key
            if not acl.delete_account(key):
                return request.make_response(
                    ResponseCode.DELETE_ACL_CONFIG_FAILED,
                    f"The accesskey[{key}] corresponding to accessConfig has been deleted failed: "
                    "no such account in the broker's ACL files")
        else:
            h2 = request.read_header(UpdateGlobalWhiteAddrsConfigRequestHeader)
            acl.update_global_white(_split(h2.global_white_addrs) or [], h2.acl_file_full_path)
        return request.make_response()

    def _versions(self, request: RemotingCommand, acl: PlainAcl) -> RemotingCommand:
        config = self.broker.config
        versions = {path: v.to_json_obj() for path, v in acl.state.versions.items()}
        header = GetBrokerAclConfigResponseHeader(
            version=acl.main_version().encode().decode(), broker_name=config.broker_name,
            broker_addr=self.broker.broker_addr, cluster_name=config.broker_cluster_name,
            all_acl_file_version=fastjson.dumps(versions).decode())
        return request.make_response(header=header)
