"""ACL 2.0 administration (mqadmin 5's createUser, updateUser, deleteUser, getUser, listUser,
createAcl, updateAcl, deleteAcl, getAcl, listAcl): codes 3001 to 3010 over the broker's
:class:`~bolide.broker.auth.AuthMetadata`, with RocketMQ 5.3's answers and texts. Who may call
them is authorization's business (``Cluster:<cluster>``, Update or Get); creating, changing or
deleting a super user also needs a super user (or authentication off)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from bolide.broker.auth.metadata import AuthMetadata, AuthRefused, acl_info, user_info
from bolide.broker.auth.model import SUPER, user_type
from bolide.errors import ConfigError, ProtocolError
from bolide.protocol import fastjson
from bolide.protocol.bodies.auth import AclInfo, UserInfo
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.auth import (
    AclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)
from bolide.remoting import RequestContext
from bolide.remoting.hooks import ACCESS_KEY

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

_WRITES = frozenset((RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_UPDATE_USER,
                     RequestCode.AUTH_DELETE_USER, RequestCode.AUTH_CREATE_ACL,
                     RequestCode.AUTH_UPDATE_ACL, RequestCode.AUTH_DELETE_ACL))


class AuthAdminProcessor:
    """Reads and changes the broker's ACL 2.0 users and ACLs (kept whether or not checks are on,
    as RocketMQ does, so they can be set up before turning them on)."""

    CODES = (RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_UPDATE_USER,
             RequestCode.AUTH_DELETE_USER, RequestCode.AUTH_GET_USER, RequestCode.AUTH_LIST_USER,
             RequestCode.AUTH_CREATE_ACL, RequestCode.AUTH_UPDATE_ACL,
             RequestCode.AUTH_DELETE_ACL, RequestCode.AUTH_GET_ACL, RequestCode.AUTH_LIST_ACL)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._writes = asyncio.Lock()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        metadata = self.broker.auth
        try:
            if request.code not in _WRITES:
                return self._read(request, metadata)
            async with self._writes:
                response = self._change(request, metadata)
                if response.code == ResponseCode.SUCCESS:
                    await asyncio.to_thread(metadata.persist)
                return response
        except AuthRefused as exc:
            return request.make_response(ResponseCode.NO_PERMISSION, str(exc))
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"cannot read the request body: {exc}")
        except ConfigError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))

    def _caller_is_super(self, request: RemotingCommand, metadata: AuthMetadata) -> bool:
        access_key = request.ext_fields.get(ACCESS_KEY)
        if not access_key:  # authentication off
            return True
        user = metadata.users.get(access_key)
        return user is not None and user.is_super

    def _change(self, request: RemotingCommand, metadata: AuthMetadata) -> RemotingCommand:
        code = request.code
        if code in (RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_UPDATE_USER):
            name = request.read_header(UserRequestHeader).username
            if not name or not name.strip():
                return request.make_response(ResponseCode.INVALID_PARAMETER, "The username is blank")
            if not request.body:
                return request.make_response(ResponseCode.SYSTEM_ERROR,
                                             "The body of the request is null: it must be a UserInfo")
            info = UserInfo.decode(request.body_bytes())
            info.username = name
            creating = code == RequestCode.AUTH_CREATE_USER
            caller_super = self._caller_is_super(request, metadata)
            if user_type(info.user_type) == SUPER and not caller_super:
                verb = "create" if creating else "update"
                return request.make_response(ResponseCode.SYSTEM_ERROR,
                                             f"The super user can only be {verb} by super user")
            if creating:
                metadata.create_user(info)
            else:
                old = metadata.users.get(name)
                if old is not None and old.is_super and not caller_super:
                    raise AuthRefused("The super user can only be update by super user")
                metadata.update_user(info)
        elif code == RequestCode.AUTH_DELETE_USER:
            name = request.read_header(UserRequestHeader).username
            if not name:
                raise AuthRefused("username can not be blank")
            old = metadata.users.get(name)
            if old is not None and old.is_super and not self._caller_is_super(request, metadata):
                raise AuthRefused("The super user can only be update by super user")
            metadata.delete_user(name)
        elif code in (RequestCode.AUTH_CREATE_ACL, RequestCode.AUTH_UPDATE_ACL):
            subject = request.read_header(AclRequestHeader).subject
            body = AclInfo.decode(request.body_bytes()) if request.body else AclInfo()
            if not body.policies:
                return request.make_response(ResponseCode.SYSTEM_ERROR, "The body of acl is null")
            metadata.put_acl(body, subject)
        else:
            h = request.read_header(AclRequestHeader)
            metadata.delete_acl(h.subject, h.policy_type, h.resource)
        return request.make_response()

    def _read(self, request: RemotingCommand, metadata: AuthMetadata) -> RemotingCommand:
        code = request.code
        body: bytes | None = None
        if code == RequestCode.AUTH_GET_USER:
            name = request.read_header(UserRequestHeader).username
            if not name or not name.strip():
                return request.make_response(ResponseCode.INVALID_PARAMETER, "The username is blank")
            user = metadata.users.get(name)
            body = None if user is None else user_info(user).encode()
        elif code == RequestCode.AUTH_LIST_USER:
            users = metadata.list_users(request.read_header(ListUsersRequestHeader).filter)
            body = fastjson.dumps([user_info(u) for u in users]) if users else None
        elif code == RequestCode.AUTH_GET_ACL:
            acl = metadata.get_acl(request.read_header(AclRequestHeader).subject)
            body = None if acl is None else acl_info(acl).encode()
        else:
            h = request.read_header(ListAclsRequestHeader)
            acls = metadata.list_acls(h.subject_filter, h.resource_filter)
            body = fastjson.dumps([acl_info(a) for a in acls]) if acls else None
        response = request.make_response()
        if body is not None:
            response.body = body
        return response
