"""RocketMQ 5's batch creation (mqadmin ``updateTopicList -f`` and ``updateSubGroupList -f``):
UPDATE_AND_CREATE_TOPIC_LIST (18, body CreateTopicListRequestBody) and
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225, body SubscriptionGroupList).

Each entry passes the checks of the single requests (:mod:`bolide.broker.admin_create`), all
of them before anything changes, so a list with a bad entry changes nothing and the remark
names the entry (``topicConfigList[2] (Orders): ...``). Topics are stored as
UPDATE_AND_CREATE_TOPIC stores them (persisted, registered with the NameServers); an entry
equal to the topic the broker has already is left alone. A bad topic entry is answered
INVALID_PARAMETER, as RocketMQ 5 answers a bad topic name; a body that is no list, SYSTEM_ERROR.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bolide.broker.admin_create import CreateRefused, attribute_changes, checked_group, checked_topic
from bolide.errors import ProtocolError
from bolide.protocol import fastjson
from bolide.protocol.bodies.broker import TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import RequestContext
from bolide.store.topic_config import SubscriptionGroupConfig

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

TOPIC_LIST_FIELD = "topicConfigList"
GROUP_LIST_FIELD = "groupConfigList"


def _entries(body: bytes, field: str, what: str) -> list[Any]:
    """The array ``field`` of a JSON object body; ProtocolError saying what is wrong."""
    try:
        obj = fastjson.loads(body) if body else None
    except ProtocolError as exc:
        raise ProtocolError(f"the body is not a {what} (a JSON object with a {field} array): {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"the body is not a {what} (a JSON object with a {field} array)")
    entries = obj.get(field)
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ProtocolError(f"{field} of the {what} is not an array")
    return entries


class AdminListProcessor:
    """Creates or updates the topics or groups of a list."""

    CODES = (RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.UPDATE_AND_CREATE_TOPIC_LIST:
            return self.update_topics(request)
        return self.update_groups(request)

    def update_topics(self, request: RemotingCommand) -> RemotingCommand:
        try:
            entries = _entries(request.body_bytes(), TOPIC_LIST_FIELD, "CreateTopicListRequestBody")
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        topics = self.broker.topics
        checked: list[TopicConfig] = []
        for i, entry in enumerate(entries):
            what = f"{TOPIC_LIST_FIELD}[{i}]"
            name = entry.get("topicName") if isinstance(entry, dict) else None
            if name:
                what += f" ({name})"
            try:
                wanted = TopicConfig.from_json_obj(entry, what)
                checked.append(checked_topic(topics, wanted, attribute_changes(wanted.attributes)))
            except (ProtocolError, CreateRefused) as exc:
                text = str(exc) if str(exc).startswith(what) else f"{what}: {exc}"
                return request.make_response(ResponseCode.INVALID_PARAMETER, text)
        for tc in checked:
            if tc != topics.get(tc.topic_name):  # an unchanged topic keeps its data version
                topics.update(tc)
        return request.make_response()

    def update_groups(self, request: RemotingCommand) -> RemotingCommand:
        try:
            entries = _entries(request.body_bytes(), GROUP_LIST_FIELD, "SubscriptionGroupList")
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        checked: list[SubscriptionGroupConfig] = []
        for i, entry in enumerate(entries):
            try:
                checked.append(checked_group(entry, f"{GROUP_LIST_FIELD}[{i}]"))
            except CreateRefused as exc:
                return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        for config in checked:
            self.broker.subscription_groups.update(config)
        return request.make_response()
