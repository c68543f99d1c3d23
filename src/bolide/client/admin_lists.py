"""The batch calls of :class:`~bolide.client.admin.Admin` (mqadmin updateTopicList and
updateSubGroupList, and exportMetadata, their inverse): many topics or consumer groups in one
request per broker
(UPDATE_AND_CREATE_TOPIC_LIST 18, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST 225, RocketMQ 5).
A broker without them (RocketMQ 4.9) gets one UPDATE_AND_CREATE_TOPIC (17) or
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) per entry instead.

:func:`read_topic_list` and :func:`read_group_list` read mqadmin's ``-f`` files: a JSON array
of TopicConfig or SubscriptionGroupConfig objects."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bolide.client.errors import ClientConfigError
from bolide.common.topic import (
    DLQ_GROUP_TOPIC_PREFIX,
    PREDEFINED_GROUPS,
    RETRY_GROUP_TOPIC_PREFIX,
    SYSTEM_GROUP_PREFIX,
    SYSTEM_TOPIC_PREFIX,
)
from bolide.errors import BolideError
from bolide.protocol import RequestCode, ResponseCode, fastjson
from bolide.protocol.bodies.admin import CreateTopicListRequestBody, TopicList
from bolide.protocol.bodies.broker import (
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from bolide.protocol.bodies.route import PERM_PRIORITY
from bolide.protocol.headers.admin import CreateTopicRequestHeader

if TYPE_CHECKING:
    from bolide.protocol import RemotingCommand
    from bolide.protocol.headers.base import Header

DEFAULT_TOPIC = "TBW102"
GroupEntry = SubscriptionGroupConfig | Mapping[str, Any]


def _json_array(path: str | Path, what: str) -> list[Any]:
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        entries = fastjson.loads(text)
    except BolideError as exc:
        raise ClientConfigError(f"{path} is not JSON: {exc}") from None
    if not isinstance(entries, list):
        raise ClientConfigError(f"{path} holds no JSON array: write [{{...}}, ...], one {what} each")
    return entries


def _entries(path: str | Path, cls: type[TopicConfig] | type[SubscriptionGroupConfig],
             name_key: str) -> list[tuple[Any, Any]]:
    """Each entry of a JSON array file with the ``cls`` it parses as; ClientConfigError naming
    the entry that does not, or that has no ``name_key``."""
    out = []
    for i, entry in enumerate(_json_array(path, cls.__name__)):
        try:
            parsed = cls.from_json_obj(entry, f"{path}[{i}]")
        except BolideError as exc:
            raise ClientConfigError(f"{exc}: fix that entry") from None
        if not entry.get(name_key):
            raise ClientConfigError(f"{path}[{i}] has no {name_key}: set it")
        out.append((entry, parsed))
    return out


def read_topic_list(path: str | Path) -> list[TopicConfig]:
    """The TopicConfigs of a JSON array file; ClientConfigError naming a bad entry."""
    return [tc for _, tc in _entries(path, TopicConfig, "topicName")]


def read_group_list(path: str | Path) -> list[dict[str, Any]]:
    """The SubscriptionGroupConfig objects of a JSON array file, as written (fields Bolide does
    not know are passed on to the broker); ClientConfigError naming a bad entry."""
    return [dict(entry) for entry, _ in _entries(path, SubscriptionGroupConfig, "groupName")]


def _group_obj(entry: GroupEntry) -> dict[str, Any]:
    return entry.to_json_obj() if isinstance(entry, SubscriptionGroupConfig) else dict(entry)


def _attributes_text(attributes: dict[str, str] | None) -> str | None:
    """A TopicConfig's ``{"+key": "value", "-key": ""}`` as UPDATE_AND_CREATE_TOPIC's string."""
    if not attributes:
        return None
    return ",".join(key if key.startswith("-") else f"{key}={value}" for key, value in attributes.items())


class ListAdminCalls:
    """Mixed into Admin: needs its ``_call`` and ``_targets``."""

    if TYPE_CHECKING:
        async def _call(self, addr: str, code: int, header: Header | None, what: str,
                        body: bytes = b"", ok: tuple[int, ...] = ...) -> RemotingCommand: ...

        async def _targets(self, broker_addr: str | None, cluster: str | None) -> list[str]: ...

    async def create_topic_list(self, topics: Sequence[TopicConfig], *, broker_addr: str | None = None,
                                cluster: str | None = None) -> list[str]:
        """Create or update every topic of ``topics`` on the target masters (mqadmin
        updateTopicList); returns their addresses. A broker refusing an entry raises
        MQBrokerError naming it, and then has changed none of them. RocketMQ 5 ``attributes``
        are changes: ``{"+message.type": "NORMAL"}``."""
        body = CreateTopicListRequestBody(topic_config_list=list(topics)).encode()
        addrs = await self._targets(broker_addr, cluster)
        what = f"updateTopicList of {len(topics)} topics"
        for addr in addrs:
            answer = await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, None, what, body=body,
                                      ok=(ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED))
            if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:  # RocketMQ 4.9
                for tc in topics:
                    header = CreateTopicRequestHeader(
                        topic=tc.topic_name, default_topic=DEFAULT_TOPIC, read_queue_nums=tc.read_queue_nums,
                        write_queue_nums=tc.write_queue_nums, perm=tc.perm,
                        topic_filter_type=tc.topic_filter_type, topic_sys_flag=tc.topic_sys_flag,
                        order=tc.order, attributes=_attributes_text(tc.attributes))
                    await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header,
                                     f"updateTopic {tc.topic_name!r}")
        return addrs

    async def create_subscription_group_list(self, groups: Sequence[GroupEntry], *,
                                             broker_addr: str | None = None,
                                             cluster: str | None = None) -> list[str]:
        """Create or update every consumer group of ``groups`` (SubscriptionGroupConfigs, or
        their JSON objects to pass on fields Bolide does not model) on the target masters
        (mqadmin updateSubGroupList); returns their addresses."""
        objs = [_group_obj(g) for g in groups]
        body = fastjson.dumps({"groupConfigList": objs})
        addrs = await self._targets(broker_addr, cluster)
        what = f"updateSubGroupList of {len(objs)} groups"
        for addr in addrs:
            answer = await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, None, what,
                                      body=body,
                                      ok=(ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED))
            if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:  # RocketMQ 4.9
                for obj in objs:
                    await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                                     f"updateSubGroup {obj.get('groupName')!r}", body=fastjson.dumps(obj))
        return addrs

    async def user_topics(self, broker_addr: str, *, special: bool = False) -> dict[str, TopicConfig]:
        """A broker's topics of applications, as mqadmin's getUserTopicConfig picks them: not
        its system topics (those it lists by GET_SYSTEM_TOPIC_LIST_FROM_BROKER 305, and
        ``rmq_sys_``), retry and dead letter topics only with ``special`` (GET_ALL_TOPIC_CONFIG 21)."""
        response = await self._call(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG, None,
                                    "GET_ALL_TOPIC_CONFIG")
        table = TopicConfigSerializeWrapper.decode(response.body_bytes()).topic_config_table
        answer = await self._call(broker_addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, None,
                                  "GET_SYSTEM_TOPIC_LIST_FROM_BROKER")
        system = set(TopicList.decode(answer.body_bytes()).topic_list)
        return {name: tc for name, tc in table.items()
                if name not in system and not name.startswith(SYSTEM_TOPIC_PREFIX)
                and (special or not name.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)))
                and 0 <= tc.perm < PERM_PRIORITY}

    async def user_subscription_groups(self, broker_addr: str) -> dict[str, SubscriptionGroupConfig]:
        """A broker's consumer groups of applications: not RocketMQ's predefined groups nor
        ``CID_RMQ_SYS_`` ones (GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201, as mqadmin's
        getUserSubscriptionGroup)."""
        response = await self._call(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, None,
                                    "GET_ALL_SUBSCRIPTIONGROUP_CONFIG")
        table = SubscriptionGroupWrapper.decode(response.body_bytes()).subscription_group_table
        return {name: g for name, g in table.items()
                if name not in PREDEFINED_GROUPS and not name.startswith(SYSTEM_GROUP_PREFIX)}

    async def export_metadata(self, *, broker_addr: str | None = None, cluster: str | None = None,
                              special: bool = False) -> dict[str, Any]:
        """mqadmin exportMetadata: the topics and consumer groups of applications on one
        broker, or on the masters of ``cluster`` (every master when neither is given), a topic's
        queue counts (a group's retry queues) summed over the brokers that have it, and the
        time of the export:
        ``{"topicConfigTable": {...}, "subscriptionGroupTable": {...}, "exportTime": ms}``."""
        topics: dict[str, TopicConfig] = {}
        groups: dict[str, SubscriptionGroupConfig] = {}
        for addr in await self._targets(broker_addr, cluster):
            for name, tc in (await self.user_topics(addr, special=special)).items():
                if (seen := topics.get(name)) is not None:
                    tc.read_queue_nums += seen.read_queue_nums
                    tc.write_queue_nums += seen.write_queue_nums
                topics[name] = tc
            for name, group in (await self.user_subscription_groups(addr)).items():
                if (known := groups.get(name)) is not None:
                    group.retry_queue_nums += known.retry_queue_nums
                groups[name] = group
        return {"topicConfigTable": {n: tc.to_json_obj() for n, tc in sorted(topics.items())},
                "subscriptionGroupTable": {n: g.to_json_obj() for n, g in sorted(groups.items())},
                "exportTime": int(time.time() * 1000)}
