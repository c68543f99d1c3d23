"""Plain ACL and ACL 2.0 for gRPC calls (a broker with ``aclEnable``, or
``authenticationEnabled`` / ``authorizationEnabled``): RocketMQ 5 clients sign each call
with HMAC-SHA1 of its ``x-mq-date-time`` header under the account's secret key, in the
``authorization`` header (``MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time,
Signature=<hex>``); the account then needs the permission each call needs on its topics and
group, as a remoting request does (:func:`bolide.broker.acl.validator.check_access`)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from bolide.broker.acl.accounts import AclState
from bolide.broker.acl.permissions import PUB, SUB, retry_topic
from bolide.broker.acl.validator import check_access
from bolide.broker.auth.checks import authenticate
from bolide.broker.auth.checks import authorize as authorize_resources
from bolide.broker.auth.metadata import AuthMetadata, AuthRefused
from bolide.broker.auth.model import GROUP, RETRY_PREFIX, TOPIC, Resource, group_of_retry
from bolide.broker.proxy.call import Call
from bolide.broker.proxy.convert import Refused
from bolide.errors import AclError
from bolide.protocol.v5 import messaging_pb2 as pb


def credentials(authorization: str) -> tuple[str | None, str]:
    """(access key, hex signature) of an ``authorization`` header; (None, "") without one."""
    _, _, fields = authorization.partition(" ")
    values = dict(part.strip().partition("=")[::2] for part in fields.split(",") if "=" in part)
    if "Credential" not in values:
        return None, ""
    return values["Credential"].partition("/")[0], values.get("Signature", "")


def signed(secret: str, date_time: str, signature: str) -> bool:
    """Whether ``signature`` (hex, either case) is HMAC-SHA1 of ``date_time`` under ``secret``."""
    try:
        given = bytes.fromhex(signature)
    except ValueError:
        return False
    return hmac.compare_digest(hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).digest(), given)


def needed(rpc: str, request: Any, call: Call) -> dict[str, int]:
    """The topics and groups (``%RETRY%group``) a call touches, with the permission each needs."""
    if rpc == "SendMessage":
        return {call.name(m.topic): PUB for m in request.messages}
    if rpc == "EndTransaction":
        return {call.name(request.topic): PUB}
    if rpc == "ReceiveMessage":
        return {call.name(request.message_queue.topic): SUB, retry_topic(call.name(request.group)): SUB}
    if rpc in ("AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue", "QueryAssignment"):
        return {call.name(request.topic): SUB, retry_topic(call.name(request.group)): SUB}
    if rpc in ("GetOffset", "UpdateOffset"):
        return {call.name(request.message_queue.topic): SUB, retry_topic(call.name(request.group)): SUB}
    if rpc == "QueryOffset":
        return {call.name(request.message_queue.topic): SUB}
    if rpc == "Heartbeat" and request.HasField("group"):
        return {retry_topic(call.name(request.group)): SUB}
    return {}  # routes, telemetry, termination: the account only


def authorize(state: AclState, call: Call, rpc: str, request: Any) -> None:
    """Let the call through or raise Refused (UNAUTHORIZED, FORBIDDEN) saying why not."""
    access_key, signature = credentials(call.authorization)
    try:
        check_access(
            state,
            call.peer,
            access_key,
            lambda secret: signed(secret, call.date_time, signature),
            lambda: needed(rpc, request, call),
        )
    except AclError as exc:
        code = pb.UNAUTHORIZED if getattr(exc, "unauthenticated", False) else pb.FORBIDDEN
        raise Refused(code, str(exc)) from None


def _wanted_v2(touched: dict[str, int]) -> list[tuple[Resource, tuple[str, ...]]]:
    """:func:`needed`'s topics and ``%RETRY%group`` names as ACL 2.0 resources and actions."""
    return [(Resource.literal(GROUP, group_of_retry(name)) if name.startswith(RETRY_PREFIX)
             else Resource.literal(TOPIC, name), ("Pub",) if perm == PUB else ("Sub",))
            for name, perm in touched.items()]


def authorize_v2(metadata: AuthMetadata, call: Call, rpc: str, request: Any, *, authn: bool,
                 authz: bool) -> None:
    """ACL 2.0 for a gRPC call (the user name as the credential, the password as the key):
    raise Refused (UNAUTHORIZED, FORBIDDEN) with RocketMQ's text, or let it through."""
    access_key, signature = credentials(call.authorization)
    try:
        if authn:
            authenticate(metadata, access_key, lambda secret: signed(secret, call.date_time, signature))
    except AuthRefused as exc:
        raise Refused(pb.UNAUTHORIZED, str(exc)) from None
    try:
        if authz:
            authorize_resources(metadata, access_key, _wanted_v2(needed(rpc, request, call)), call.peer)
    except AuthRefused as exc:
        raise Refused(pb.FORBIDDEN, str(exc)) from None
