"""ACL 2.0's check of each remoting request (RocketMQ 5.3's authentication and authorization
pipelines): the request must be signed by a known, enabled user; then, unless that user is a
super user, each resource the request touches needs an entry of the user's ACL that allows
one of the actions the request code needs (see :func:`wanted_resources`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bolide.broker.acl.addresses import host_of
from bolide.broker.auth.metadata import AuthMetadata, AuthRefused
from bolide.broker.auth.model import (
    CLUSTER,
    DENY,
    DISABLE,
    GROUP,
    RETRY_PREFIX,
    TOPIC,
    Resource,
    deciding_entry,
    group_of_retry,
    subject_key,
)
from bolide.errors import BolideError
from bolide.protocol.bodies.client import HeartbeatData, LockBatchRequestBody
from bolide.protocol.command import RemotingCommand
from bolide.remoting.hooks import ACCESS_KEY, RPCHook, verify_signature

Wanted = list[tuple[Resource, tuple[str, ...]]]

_SUB, _PUB, _GET, _UPDATE = ("Sub",), ("Pub",), ("Get",), ("Update",)
# Codes RocketMQ checks by the annotations of their header class: (actions, the header fields
# naming resources in order as (field, type, separator), whether the cluster stands in when
# none is given). Codes in neither this table nor wanted_resources' own are not checked.
_F = tuple[str, str, str | None]


def _T(name: str) -> _F:
    return name, TOPIC, None


def _G(name: str) -> _F:
    return name, GROUP, None


_C: _F = ("clusterName", CLUSTER, None)
_ANNOTATED: dict[int, tuple[tuple[str, ...], tuple[_F, ...], bool]] = {
    17: (("Create",), (_T("topic"),), False),
    29: (_GET, (_T("topic"),), False), 30: (_GET, (_T("topic"),), False),
    31: (_GET, (_T("topic"),), False), 32: (_GET, (_T("topic"),), False),
    33: (_GET, (_T("topic"),), False),
    100: (_UPDATE, (), True), 101: (_GET, (), True), 102: (_UPDATE, (), True),
    103: (_UPDATE, (_C,), True), 104: (_UPDATE, (_C,), True),
    202: (_GET, (_T("topic"),), False), 203: (_GET, (_G("consumerGroup"),), False),
    204: (_GET, (), True), 205: (_UPDATE, (), True), 207: (("Delete",), (_G("groupName"),), False),
    208: (_GET, (_G("consumerGroup"), _T("topic"), ("topicList", TOPIC, ";")), False),
    215: (("Delete",), (_T("topic"),), False), 216: (_UPDATE, (_C,), True),
    217: (_UPDATE, (), True), 219: (_GET, (), True),
    222: (_UPDATE, (_G("group"), _T("topic")), False), 223: (_GET, (_T("topic"), _G("group")), False),
    300: (_GET, (_T("topic"),), False), 303: (_GET, (_T("topic"), _G("group")), False),
    307: (_GET, (_G("consumerGroup"),), False),
    308: (_GET, (("filterGroups", GROUP, ","), _G("compareGroup"), _T("topic")), False),
    309: (_SUB, (_G("consumerGroup"), _T("topic")), False),
    314: (_UPDATE, (_G("destGroup"), _T("topic")), False), 315: (_GET, (), True),
    317: (_GET, (), True), 321: (_GET, (_T("topic"), _G("consumerGroup")), False),
    322: (_GET, (_C,), True), 323: (_UPDATE, (_T("topic"),), False),
    326: (_SUB, (_G("producerGroup"), _T("topic")), False), 327: (_UPDATE, (), True),
    328: (_GET, (), True), 343: (_GET, (_G("group"),), False),
    345: (_GET, (_G("group"), _T("topic")), False), 351: (_GET, (_T("topic"),), False),
    352: (_GET, (_G("group"),), False), 353: (_UPDATE, (_G("group"), _T("topic")), False),
    **{code: (_UPDATE, (), True) for code in (3001, 3002, 3003, 3006, 3007, 3008)},
    **{code: (_GET, (), True) for code in (3004, 3005, 3009, 3010)},
    200050: (_SUB, (_G("consumerGroup"), _T("topic")), False),
    200051: (_SUB, (_G("consumerGroup"), _T("topic")), False),
    200052: (_SUB, (_T("topic"), _G("consumerGroup")), False),
    200053: (_SUB, (_G("consumerGroup"), _T("topic")), False),
    200054: (_SUB, (_G("consumerGroup"), _T("topic")), False),
    200055: (_GET, (_G("consumerGroup"), _T("topic")), False),
}
_SENDS = {10: ("topic", "group"), 310: ("b", "a"), 320: ("b", "a")}
_GROUP_ONLY = {36: ("group", _SUB), 35: ("consumerGroup", _SUB), 38: ("consumerGroup", ("Sub", "Get"))}
_OFFSETS = {14: ("Sub", "Get"), 15: ("Sub", "Update")}


def _topic_or_group(name: str, actions: tuple[str, ...]) -> tuple[Resource, tuple[str, ...]]:
    if name.startswith(RETRY_PREFIX):
        return Resource.literal(GROUP, group_of_retry(name)), actions
    return Resource.literal(TOPIC, name), actions


def wanted_resources(request: RemotingCommand, cluster: str) -> Wanted:
    """The resources ``request`` touches with the actions it needs, in RocketMQ's order; a
    retry topic stands for its group. Raises AuthRefused when its body cannot be read."""
    code, ext = request.code, request.ext_fields
    wanted: Wanted = []
    if code in _SENDS:
        topic_key, group_key = _SENDS[code]
        topic = ext.get(topic_key)
        if topic is not None:
            if topic.startswith(RETRY_PREFIX):
                group = ext.get(group_key) or group_of_retry(topic)
                wanted.append((Resource.literal(GROUP, group), _SUB))
            else:
                wanted.append((Resource.literal(TOPIC, topic), _PUB))
    elif code in (370, 37):  # RECALL_MESSAGE, END_TRANSACTION (old clients name no topic)
        if ext.get("topic"):
            wanted.append((Resource.literal(TOPIC, ext["topic"]), _PUB))
    elif code in _GROUP_ONLY:
        key, actions = _GROUP_ONLY[code]
        if ext.get(key):
            wanted.append((Resource.literal(GROUP, ext[key]), actions))
    elif code == 11 or code in _OFFSETS:  # PULL_MESSAGE, QUERY/UPDATE_CONSUMER_OFFSET
        actions = _OFFSETS.get(code, _SUB)
        named_topic, named_group = ext.get("topic"), ext.get("consumerGroup")
        if named_topic is not None and not named_topic.startswith(RETRY_PREFIX):
            wanted.append((Resource.literal(TOPIC, named_topic), actions))
        if named_group is not None:
            wanted.append((Resource.literal(GROUP, named_group), actions))
    elif code == 12:  # QUERY_MESSAGE
        if ext.get("topic") is not None:
            wanted.append((Resource.literal(TOPIC, ext["topic"]), ("Sub", "Get")))
    elif code == 34:  # HEART_BEAT
        try:
            heartbeat = HeartbeatData.decode(request.body_bytes())
        except BolideError:
            raise AuthRefused("parse authorization context error.") from None
        for consumer in heartbeat.consumer_data_set:
            wanted.append((Resource.literal(GROUP, consumer.group_name), _SUB))
            for sub in consumer.subscription_data_set:
                if not sub.topic.startswith(RETRY_PREFIX):
                    wanted.append((Resource.literal(TOPIC, sub.topic), _SUB))
    elif code in (41, 42):  # LOCK_BATCH_MQ, UNLOCK_BATCH_MQ
        try:
            body = LockBatchRequestBody.decode(request.body_bytes())
        except BolideError:
            raise AuthRefused("parse authorization context error.") from None
        if body.consumer_group:
            wanted.append((Resource.literal(GROUP, body.consumer_group), _SUB))
        for mq in body.mq_set:
            if not mq.topic.startswith(RETRY_PREFIX):
                wanted.append((Resource.literal(TOPIC, mq.topic), _SUB))
    elif code in _ANNOTATED:
        actions, fields, cluster_default = _ANNOTATED[code]
        for name, rtype, separator in fields:
            value = ext.get(name)
            if value is None:
                continue
            for item in value.split(separator) if separator else (value,):
                if rtype == TOPIC:
                    wanted.append(_topic_or_group(item, actions))
                else:
                    wanted.append((Resource.literal(rtype, item), actions))
        if not wanted and cluster_default:
            wanted.append((Resource.literal(CLUSTER, cluster), actions))
    return wanted


def authenticate(metadata: AuthMetadata, access_key: str | None,
                 signed: Callable[[str], bool]) -> None:
    """RocketMQ's authentication of one request: ``signed(password)`` tells whether it was
    signed with that password. Raises AuthRefused with RocketMQ's text."""
    if not access_key:
        raise AuthRefused("username cannot be null.")
    user = metadata.users.get(access_key)
    if user is None:
        raise AuthRefused(f"{subject_key(access_key)} is not found.")
    if user.status == DISABLE:
        raise AuthRefused(f"{subject_key(access_key)} is disabled.")
    if not signed(user.password):
        raise AuthRefused("check signature failed.")


def authorize(metadata: AuthMetadata, access_key: str | None,
              wanted: Sequence[tuple[Resource, tuple[str, ...]]], remote_addr: str) -> None:
    """RocketMQ's authorization of the resources a request touches, in order; raises
    AuthRefused for the first one the user's ACL does not allow."""
    if not wanted:
        return
    if not access_key:
        raise AuthRefused("Authorization failed. Please verify your access rights and try again.")
    subject = subject_key(access_key)
    user = metadata.users.get(access_key)
    if user is None:
        raise AuthRefused(f"{subject} not found.")
    if user.is_super:
        return
    acl = metadata.acls.get(subject)
    ip = host_of(remote_addr)
    for resource, actions in wanted:
        entry = None if acl is None else deciding_entry(acl, resource, actions, ip)
        if entry is None:
            raise AuthRefused(f"{subject} has no permission to access {resource.key} from {ip}, "
                              "no matched policies.")
        if entry.decision == DENY:
            raise AuthRefused(f"{subject} has no permission to access {resource.key} from {ip}, "
                              "the decision is deny.")


_DECISIONS_KEPT = 4096  # cached authorization outcomes (cleared when full or when metadata change)


def _codes(text: str) -> frozenset[int]:
    return frozenset(int(part) for part in text.split(",") if part.strip().isdigit())


class AuthHook(RPCHook):
    """The RPC hook of a broker with ``authenticationEnabled`` and/or ``authorizationEnabled``:
    authentication, then authorization, before each request's processor (codes in the
    white lists skip the step)."""

    __slots__ = ("_decided", "_decided_version", "authn", "authn_white", "authz", "authz_white",
                 "cluster", "metadata")

    def __init__(self, metadata: AuthMetadata, cluster: str, *, authn: bool, authz: bool,
                 authn_white: str = "", authz_white: str = "") -> None:
        self.metadata = metadata
        self.cluster = cluster
        self.authn, self.authz = authn, authz
        self.authn_white, self.authz_white = _codes(authn_white), _codes(authz_white)
        self._decided: dict[tuple[str | None, tuple[tuple[Resource, tuple[str, ...]], ...], str], str] = {}
        self._decided_version = -1

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        ext = request.ext_fields
        access_key = ext.get(ACCESS_KEY)
        if self.authn and request.code not in self.authn_white:
            authenticate(self.metadata, access_key, lambda secret: verify_signature(request, secret))
        if self.authz and ext and request.code not in self.authz_white:
            self._authorize(access_key, tuple(wanted_resources(request, self.cluster)), remote_addr)

    def _authorize(self, access_key: str | None, wanted: tuple[tuple[Resource, tuple[str, ...]], ...],
                   remote_addr: str) -> None:
        """:func:`authorize`, its outcome kept per user, resources and address until the users
        or ACLs change (the same clients send the same requests over and over)."""
        metadata = self.metadata
        if self._decided_version != metadata.version or len(self._decided) >= _DECISIONS_KEPT:
            self._decided.clear()
            self._decided_version = metadata.version
        key = (access_key, wanted, host_of(remote_addr))
        refusal = self._decided.get(key)
        if refusal is None:
            try:
                authorize(metadata, access_key, wanted, remote_addr)
                refusal = ""
            except AuthRefused as exc:
                refusal = str(exc)
            self._decided[key] = refusal
        if refusal:
            raise AuthRefused(refusal)
