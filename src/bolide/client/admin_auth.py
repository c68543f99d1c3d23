"""The ACL 2.0 calls of :class:`~bolide.client.admin.Admin` (mqadmin 5's createUser,
updateUser, deleteUser, getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl, listAcl),
against Bolide brokers and Apache RocketMQ 5.3 brokers. Users and ACLs belong to each broker:
changes go to every broker of the target (``cluster``: its masters), reads to the first."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from bolide.protocol import RequestCode, fastjson
from bolide.protocol.bodies.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from bolide.protocol.headers.auth import (
    AclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)

if TYPE_CHECKING:
    from bolide.protocol import RemotingCommand
    from bolide.protocol.headers.base import Header


class AuthAdminCalls:
    """Mixed into Admin: needs its ``_call`` and ``_targets``."""

    if TYPE_CHECKING:
        async def _call(self, addr: str, code: int, header: Header | None, what: str,
                        body: bytes = b"", ok: tuple[int, ...] = ...) -> RemotingCommand: ...

        async def _targets(self, broker_addr: str | None, cluster: str | None) -> list[str]: ...

    async def _each(self, code: int, header: Header, what: str, body: bytes, broker_addr: str | None,
                    cluster: str | None) -> list[str]:
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, code, header, what, body=body)
        return addrs

    async def create_user(self, username: str, password: str, user_type: str | None = None, *,
                          broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """Create a user (``user_type`` ``Super`` or ``Normal``, the default); returns the brokers."""
        info = UserInfo(username=username, password=password, user_type=user_type)
        return await self._each(RequestCode.AUTH_CREATE_USER, UserRequestHeader(username=username),
                                f"createUser {username!r}", info.encode(), broker_addr, cluster)

    async def update_user(self, username: str, *, password: str | None = None,
                          user_type: str | None = None, user_status: str | None = None,
                          broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """Change a user's password, type or status (``enable``/``disable``); None keeps it."""
        info = UserInfo(username=username, password=password, user_type=user_type,
                        user_status=user_status)
        return await self._each(RequestCode.AUTH_UPDATE_USER, UserRequestHeader(username=username),
                                f"updateUser {username!r}", info.encode(), broker_addr, cluster)

    async def delete_user(self, username: str, *, broker_addr: str | None = None,
                          cluster: str | None = None) -> list[str]:
        """Delete a user and its ACL (nothing to do for a user that does not exist)."""
        return await self._each(RequestCode.AUTH_DELETE_USER, UserRequestHeader(username=username),
                                f"deleteUser {username!r}", b"", broker_addr, cluster)

    async def get_user(self, username: str, *, broker_addr: str | None = None,
                       cluster: str | None = None) -> UserInfo | None:
        """The user as the first target broker has it, None when it has none by that name."""
        addr = (await self._targets(broker_addr, cluster))[0]
        response = await self._call(addr, RequestCode.AUTH_GET_USER,
                                    UserRequestHeader(username=username), f"getUser {username!r}")
        return UserInfo.decode(response.body_bytes()) if response.body else None

    async def list_users(self, name_part: str | None = None, *, broker_addr: str | None = None,
                         cluster: str | None = None) -> list[UserInfo]:
        """The users of the first target broker whose names contain ``name_part``."""
        addr = (await self._targets(broker_addr, cluster))[0]
        response = await self._call(addr, RequestCode.AUTH_LIST_USER,
                                    ListUsersRequestHeader(filter=name_part), "listUser")
        if not response.body:
            return []
        return [UserInfo.from_json_obj(item) for item in fastjson.loads(response.body_bytes()) or []]

    async def put_acl(self, subject: str, resources: Iterable[str], actions: Iterable[str],
                      decision: str = "Allow", source_ips: Iterable[str] | None = None, *,
                      policy_type: str | None = None, update: bool = False,
                      broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """Add rules to ``subject``'s ACL (``User:<name>``): one entry per resource
        (``Topic:orders``, ``Group:app*``, ``*``) with ``actions`` (Pub, Sub, Create, Update,
        Delete, Get, List, All) and the decision; an entry on the same resource is replaced
        (mqadmin createAcl, or updateAcl with ``update``: the broker treats both alike)."""
        ips = list(source_ips) if source_ips else None
        entries = [PolicyEntryInfo(resource=r, actions=list(actions), source_ips=ips, decision=decision)
                   for r in resources]
        info = AclInfo(subject=subject, policies=[PolicyInfo(policy_type=policy_type, entries=entries)])
        code = RequestCode.AUTH_UPDATE_ACL if update else RequestCode.AUTH_CREATE_ACL
        return await self._each(code, AclRequestHeader(subject=subject),
                                f"{'update' if update else 'create'}Acl {subject!r}", info.encode(),
                                broker_addr, cluster)

    async def delete_acl(self, subject: str, resource: str | None = None, *,
                         policy_type: str | None = None, broker_addr: str | None = None,
                         cluster: str | None = None) -> list[str]:
        """Delete ``subject``'s whole ACL, or only its entry on ``resource``."""
        header = AclRequestHeader(subject=subject, resource=resource, policy_type=policy_type)
        return await self._each(RequestCode.AUTH_DELETE_ACL, header, f"deleteAcl {subject!r}", b"",
                                broker_addr, cluster)

    async def get_acl(self, subject: str, *, broker_addr: str | None = None,
                      cluster: str | None = None) -> AclInfo | None:
        """``subject``'s ACL on the first target broker, None when it has none."""
        addr = (await self._targets(broker_addr, cluster))[0]
        response = await self._call(addr, RequestCode.AUTH_GET_ACL, AclRequestHeader(subject=subject),
                                    f"getAcl {subject!r}")
        return AclInfo.decode(response.body_bytes()) if response.body else None

    async def list_acls(self, subject_part: str | None = None, resource_part: str | None = None, *,
                        broker_addr: str | None = None, cluster: str | None = None) -> list[AclInfo]:
        """The ACLs of the first target broker, narrowed to subjects and resources containing
        the parts given."""
        addr = (await self._targets(broker_addr, cluster))[0]
        header = ListAclsRequestHeader(subject_filter=subject_part, resource_filter=resource_part)
        response = await self._call(addr, RequestCode.AUTH_LIST_ACL, header, "listAcl")
        if not response.body:
            return []
        return [AclInfo.from_json_obj(item) for item in fastjson.loads(response.body_bytes()) or []]

    async def copy_users(self, from_addr: str, to_addr: str,
                         usernames: Iterable[str] | None = None) -> list[str]:
        """Copy users (all, or those named) from one broker to another, passwords included,
        creating or updating them there (mqadmin copyUser); returns the names copied."""
        wanted = None if usernames is None else set(usernames)
        users = [u for u in await self.list_users(broker_addr=from_addr)
                 if wanted is None or u.username in wanted]
        for user in users:
            name = user.username or ""
            exists = await self.get_user(name, broker_addr=to_addr) is not None
            code = RequestCode.AUTH_UPDATE_USER if exists else RequestCode.AUTH_CREATE_USER
            await self._call(to_addr, code, UserRequestHeader(username=name), f"copyUser {name!r}",
                             body=user.encode())
        return [u.username or "" for u in users]

    async def copy_acls(self, from_addr: str, to_addr: str,
                        subjects: Iterable[str] | None = None) -> list[str]:
        """Copy ACLs (all, or those of the subjects named) from one broker to another, merged
        into the target's (mqadmin copyAcl); the users must exist there. Returns the subjects."""
        wanted = None if subjects is None else set(subjects)
        acls = [a for a in await self.list_acls(broker_addr=from_addr)
                if wanted is None or a.subject in wanted]
        for acl in acls:
            subject = acl.subject or ""
            await self._call(to_addr, RequestCode.AUTH_UPDATE_ACL, AclRequestHeader(subject=subject),
                             f"copyAcl {subject!r}", body=acl.encode())
        return [a.subject or "" for a in acls]
