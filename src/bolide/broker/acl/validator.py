"""The broker's plain-ACL check of each request (RocketMQ's PlainAccessValidator), run as an
RPC hook before the request's processor.

In order: a peer in a global white list passes; a request without ``AccessKey`` or with an
unknown one is refused; a peer in the account's white list passes; the signature must check
out; then the account needs admin for the admin codes and, on every topic and group the
request names, the permission that request code needs (the table of RocketMQ 5.1, which also
checks batch sends). A refusal raises AclError, answered as SYSTEM_ERROR with RocketMQ's text.
"""

from __future__ import annotations

from collections.abc import Callable

from bolide.broker.acl.accounts import AclState, PlainAcl
from bolide.broker.acl.addresses import host_of
from bolide.broker.acl.permissions import (
    ADMIN_CODES,
    PUB,
    RETRY_PREFIX,
    SUB,
    allows,
    perm_name,
    resource_label,
    retry_topic,
)
from bolide.errors import AclError, BolideError
from bolide.protocol.bodies.client import HeartbeatData
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting.hooks import ACCESS_KEY, RPCHook, verify_signature

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # sends of message traces skip the permission check


def not_authenticated(message: str) -> AclError:
    """The refusal of a request that names no account, an unknown one, or is not signed with
    its secret (``unauthenticated`` set: gRPC answers it UNAUTHORIZED, not FORBIDDEN)."""
    error = AclError(message)
    error.unauthenticated = True  # type: ignore[attr-defined]
    return error


_SENDS = {RequestCode.SEND_MESSAGE: ("topic", "group"),  # v1 headers name no group: none checked
          RequestCode.SEND_MESSAGE_V2: ("b", "a"), RequestCode.SEND_BATCH_MESSAGE: ("b", "a")}
_GROUP_ONLY = {RequestCode.CONSUMER_SEND_MSG_BACK: "group",
               RequestCode.UNREGISTER_CLIENT: "consumerGroup",
               RequestCode.GET_CONSUMER_LIST_BY_GROUP: "consumerGroup"}
_TOPIC_AND_GROUP = {code: ("topic", "consumerGroup") for code in (
    RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE, RequestCode.UPDATE_CONSUMER_OFFSET,
    RequestCode.POP_MESSAGE,
    RequestCode.ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME)}


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """The topics and groups (as ``%RETRY%group``) ``request`` touches, with the permission
    each needs; AclError when a heartbeat's body cannot be read."""
    code, ext = request.code, request.ext_fields
    needed: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource is not None:
            needed[resource] = perm

    if code in _SENDS:
        topic_key, group_key = _SENDS[code]
        topic = ext.get(topic_key)
        if topic is not None and topic.startswith(RETRY_PREFIX):
            group = ext.get(group_key)
            add(None if group is None else retry_topic(group), SUB)
        else:
            add(topic, PUB)
    elif code in _TOPIC_AND_GROUP:
        topic_key, group_key = _TOPIC_AND_GROUP[code]
        add(ext.get(topic_key), SUB)
        group = ext.get(group_key)
        add(None if group is None else retry_topic(group), SUB)
    elif code in _GROUP_ONLY:
        group = ext.get(_GROUP_ONLY[code])
        add(None if group is None else retry_topic(group), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        add(ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        try:
            heartbeat = HeartbeatData.decode(request.body_bytes())
        except BolideError as exc:
            raise AclError(f"cannot read the heartbeat to check its groups: {exc}") from None
        for consumer in heartbeat.consumer_data_set:
            add(retry_topic(consumer.group_name), SUB)
            for subscription in consumer.subscription_data_set:
                add(subscription.topic, SUB)
    return needed


def check_request(state: AclState, remote_addr: str, request: RemotingCommand) -> None:
    """Let ``request`` from ``remote_addr`` through, or raise AclError saying why not."""
    check_access(state, remote_addr, request.ext_fields.get(ACCESS_KEY),
                 lambda secret: verify_signature(request, secret), lambda: needed_resources(request),
                 admin_code=request.code if request.code in ADMIN_CODES else None)


def check_access(state: AclState, remote_addr: str, access_key: str | None, signed: Callable[[str], bool],
                 needed: Callable[[], dict[str, int]], *, admin_code: int | None = None) -> None:
    """The plain-ACL check of one request from ``remote_addr`` whatever its protocol:
    ``signed(secret)`` tells whether the request was signed with the account's secret,
    ``needed()`` the topics and groups (``%RETRY%group``) it touches with the permission each
    needs, ``admin_code`` the admin request code it is. Raises AclError saying why not."""
    host = host_of(remote_addr)
    for pattern in state.global_white:
        if pattern.matches(host):
            return
    if access_key is None:
        raise not_authenticated("No accessKey is configured: the client must sign its requests with an "
                       "account of the broker's plain_acl.yml (accessKey and secretKey)")
    account = state.accounts.get(access_key)
    if account is None:
        raise not_authenticated(f"No acl config for {access_key}: add the account to the broker's "
                       "plain_acl.yml or use one listed there")
    if account.white.matches(host):
        return
    if not signed(account.secret_key):
        raise not_authenticated(f"Check signature failed for accessKey={access_key}: the client's "
                       "secretKey differs from the broker's plain_acl.yml")
    if admin_code is not None and not account.admin:
        raise AclError(f"Need admin permission for request code={admin_code}, but accessKey="
                       f"{access_key} is not (set admin: true for it in plain_acl.yml)")
    resources = needed()
    if not resources or resources.get(TRACE_TOPIC) == PUB or (account.admin and not account.perms):
        return
    for resource, perm in resources.items():
        is_group = resource.startswith(RETRY_PREFIX)
        owned = account.perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_group else account.default_topic_perm
        if not allows(perm, owned):
            kind = "groupPerms" if is_group else "topicPerms"
            name = resource[len(RETRY_PREFIX):] if is_group else resource
            raise AclError(f"No default permission for {resource_label(resource)}: accessKey="
                           f"{access_key} needs {perm_name(perm)} on it ({kind}: {name}="
                           f"{perm_name(perm)} in plain_acl.yml)")


class AclValidator(RPCHook):
    """The RPC hook of a broker with ``aclEnable=true``: checks each request against the
    current snapshot of ``acl``."""

    __slots__ = ("acl",)

    def __init__(self, acl: PlainAcl) -> None:
        self.acl = acl

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        check_request(self.acl.state, remote_addr, request)
