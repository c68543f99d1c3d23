"""The client's remote calls (Java MQClientAPIImpl): one method per request code, typed
headers in, typed results out, error answers turned into :mod:`bolide.client.errors`."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bolide.client.errors import error_for_response
from bolide.errors import RemotingError
from bolide.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies.client import (
    CheckClientRequestBody,
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from bolide.protocol.bodies.route import TopicRouteData
from bolide.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.protocol.headers.base import Header
from bolide.remoting import RemotingClient

log = logging.getLogger(__name__)


_OffsetAnswer = GetMaxOffsetResponseHeader | GetMinOffsetResponseHeader | SearchOffsetResponseHeader

# the PULL_MESSAGE answers that are outcomes, not errors (found, none new, none matching, moved)
_PULL_OUTCOMES = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                  ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED)


def request(code: int, header: Header | None = None, body: bytes = b"",
            ext_fields: dict[str, str] | None = None) -> RemotingCommand:
    cmd = RemotingCommand.request(code, header, body, ext_fields=ext_fields)
    cmd.language = LanguageCode.PYTHON
    return cmd


class ClientAPI:
    """Calls NameServers and brokers through one :class:`RemotingClient`."""

    def __init__(self, remoting: RemotingClient, namesrv_addrs: list[str], timeout_ms: int) -> None:
        self.remoting = remoting
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout_ms = timeout_ms
        self._ns_index = 0

    async def call(self, addr: str, cmd: RemotingCommand, what: str, timeout_ms: int | None = None,
                   ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        """Invoke and raise the mapped error unless the answer's code is in ``ok``."""
        response = await self.remoting.invoke(addr, cmd, timeout_ms or self.timeout_ms)
        if response.code not in ok:
            raise error_for_response(response, what, addr)
        return response

    async def call_many(self, addr: str, cmds: list[RemotingCommand], what: str,
                        timeout_ms: int | None = None,
                        ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> list[RemotingCommand]:
        """:meth:`call` for several requests written together; their answers in order."""
        responses = await self.remoting.invoke_many(addr, cmds, timeout_ms or self.timeout_ms)
        for response in responses:
            if response.code not in ok:
                raise error_for_response(response, what, addr)
        return responses

    # -- NameServer -----------------------------------------------------------------------
    async def get_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or None when the NameServer has none (TOPIC_NOT_EXIST).

        Tries each NameServer in turn on transport errors, starting with the last good one.
        """
        last: Exception | None = None
        n = len(self.namesrv_addrs)
        for i in range(n):
            addr = self.namesrv_addrs[(self._ns_index + i) % n]
            try:
                response = await self.call(
                    addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic)),
                    f"route lookup of topic {topic!r}",
                    ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
            except RemotingError as exc:
                last = exc
                continue
            self._ns_index = (self._ns_index + i) % n
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            return TopicRouteData.decode(response.body_bytes())
        assert last is not None
        raise last

    # -- broker: registration ---------------------------------------------------------------
    async def heartbeat(self, addr: str, data: HeartbeatData) -> None:
        await self.call(addr, request(RequestCode.HEART_BEAT, body=data.encode()), "HEART_BEAT")

    async def unregister_client(self, addr: str, client_id: str, producer_group: str | None = None,
                                consumer_group: str | None = None) -> None:
        header = UnregisterClientRequestHeader(client_id=client_id, producer_group=producer_group,
                                               consumer_group=consumer_group)
        await self.call(addr, request(RequestCode.UNREGISTER_CLIENT, header), "UNREGISTER_CLIENT")

    async def check_client_config(self, addr: str, client_id: str, group: str,
                                  sub: SubscriptionData) -> None:
        """CHECK_CLIENT_CONFIG (46): whether the broker serves ``sub`` (a SQL92 subscription);
        raises the broker's answer when it does not."""
        body = CheckClientRequestBody(client_id=client_id, group=group, subscription_data=sub)
        await self.call(addr, request(RequestCode.CHECK_CLIENT_CONFIG, body=body.encode()),
                        f"subscription check of {sub.topic!r} ({sub.expression_type})")

    async def consumer_ids(self, addr: str, group: str) -> list[str]:
        """The group's client ids as the broker knows them (empty when it knows none)."""
        response = await self.call(
            addr, request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                          GetConsumerListByGroupRequestHeader(consumer_group=group)),
            f"consumer list of group {group!r}", ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
        if response.code != ResponseCode.SUCCESS or not response.body_length:
            return []
        return ConsumerListBody.decode(response.body_bytes()).consumer_id_list

    # -- broker: offsets --------------------------------------------------------------------
    async def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when none is stored (any error answer, as in Java).
        Asks the broker not to answer 0 for a group without an offset on a young queue
        (``setZeroIfNotFound=false``; RocketMQ 4.x brokers do not read it): where a new group
        starts is the consumer's consume-from setting."""
        header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                                  set_zero_if_not_found=False)
        response = await self.remoting.invoke(addr, request(RequestCode.QUERY_CONSUMER_OFFSET, header),
                                              self.timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            return None
        if "offset" not in response.ext_fields:
            return -1
        return QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int,
                                     offset: int) -> None:
        header = UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                                   commit_offset=offset)
        await self.call(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, header), "UPDATE_CONSUMER_OFFSET")

    async def _offset(self, addr: str, code: int, header: Header, answer: type[_OffsetAnswer],
                      what: str) -> int:
        """The answer's offset; HeaderFieldError (a ProtocolError) when it has none or not a number."""
        response = await self.call(addr, request(code, header), what)
        return answer.from_ext_fields(response.ext_fields).offset

    async def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset(addr, RequestCode.GET_MAX_OFFSET,
                                  GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id),
                                  GetMaxOffsetResponseHeader, "GET_MAX_OFFSET")

    async def min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset(addr, RequestCode.GET_MIN_OFFSET,
                                  GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id),
                                  GetMinOffsetResponseHeader, "GET_MIN_OFFSET")

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        header = SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, timestamp=timestamp_ms)
        return await self._offset(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header,
                                  SearchOffsetResponseHeader, "SEARCH_OFFSET_BY_TIMESTAMP")

    # -- broker: messages -------------------------------------------------------------------
    async def pull(self, addr: str, header: PullMessageRequestHeader, timeout_ms: int) -> RemotingCommand:
        """The raw pull answer (codes 0, 19, 20, 21 are normal outcomes; others raise)."""
        return await self.call(addr, request(RequestCode.PULL_MESSAGE, header), "PULL_MESSAGE", timeout_ms,
                               ok=_PULL_OUTCOMES)

    async def pull_many(self, addr: str, header: PullMessageRequestHeader, offsets: Sequence[int],
                        timeout_ms: int) -> list[RemotingCommand]:
        """:meth:`pull` of ``header`` from each of ``offsets`` (its queueOffset replaced), the
        requests written together; the answers in order."""
        ext = header.to_ext_fields()
        cmds = []
        for offset in offsets:
            fields = dict(ext)
            fields["queueOffset"] = str(offset)
            cmds.append(request(RequestCode.PULL_MESSAGE, None, b"", fields))
        return await self.call_many(addr, cmds, "PULL_MESSAGE", timeout_ms, ok=_PULL_OUTCOMES)

    async def send_back(self, addr: str, header: ConsumerSendMsgBackRequestHeader) -> None:
        await self.call(addr, request(RequestCode.CONSUMER_SEND_MSG_BACK, header), "CONSUMER_SEND_MSG_BACK")

    # -- broker: orderly consumers and transactions -------------------------------------------
    async def lock_batch(self, addr: str, group: str, client_id: str,
                         queues: set[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: lock (or renew) ``queues`` for this client; the queues it now holds."""
        body = LockBatchRequestBody(consumer_group=group, client_id=client_id, mq_set=set(queues))
        response = await self.call(addr, request(RequestCode.LOCK_BATCH_MQ, body=body.encode()),
                                   "LOCK_BATCH_MQ")
        if not response.body_length:
            return set()
        return set(LockBatchResponseBody.decode(response.body_bytes()).lock_ok_mq_set)

    async def unlock_batch(self, addr: str, group: str, client_id: str, queues: set[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ: give the locks of ``queues`` back."""
        body = UnlockBatchRequestBody(consumer_group=group, client_id=client_id, mq_set=set(queues))
        await self.call(addr, request(RequestCode.UNLOCK_BATCH_MQ, body=body.encode()), "UNLOCK_BATCH_MQ")

    async def end_transaction(self, addr: str, header: EndTransactionRequestHeader, remark: str | None = None,
                              timeout_ms: int | None = None) -> None:
        """END_TRANSACTION, oneway as the Java producer sends it."""
        cmd = request(RequestCode.END_TRANSACTION, header)
        cmd.remark = remark
        await self.remoting.invoke_oneway(addr, cmd, timeout_ms or self.timeout_ms)
