"""Broker statistics and connection lists for mqadmin (spec 3.7): GET_TOPIC_STATS_INFO (202),
GET_CONSUME_STATS (208), GET_BROKER_CONSUME_STATS (317), GET_CONSUMER_CONNECTION_LIST (203),
GET_PRODUCER_CONNECTION_LIST (204), GET_ALL_PRODUCER_INFO (328), QUERY_TOPIC_CONSUME_BY_WHO
(300) and VIEW_BROKER_STATS_DATA (315)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from bolide.protocol.bodies.admin import (
    BrokerStatsData,
    BrokerStatsItem,
    Connection,
    ConsumerConnection,
    ConsumeStats,
    ConsumeStatsList,
    GroupList,
    OffsetWrapper,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    TopicOffset,
    TopicStatsTable,
)
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import admin as h
from bolide.remoting import RequestContext
from bolide.store import MessageStore
from bolide.store.record import read_store_timestamp

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


def store_time_at(store: MessageStore, topic: str, queue_id: int, offset: int) -> int:
    """Store time of the message at a queue offset; 0 when there is none (Java's
    getMessageStoreTimeStamp reports -1, which callers turn into 0)."""
    if offset < 0:
        return 0
    result = store.get_message("", topic, queue_id, offset, 1)
    try:
        return read_store_timestamp(result.buffers[0], 0) if result.buffers else 0
    finally:
        result.release()


class AdminStatsProcessor:
    """Queue offsets, consumer progress and who is connected."""

    CODES = (RequestCode.GET_TOPIC_STATS_INFO, RequestCode.GET_CONSUME_STATS,
             RequestCode.GET_BROKER_CONSUME_STATS, RequestCode.GET_CONSUMER_CONNECTION_LIST,
             RequestCode.GET_PRODUCER_CONNECTION_LIST, RequestCode.GET_ALL_PRODUCER_INFO,
             RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, RequestCode.VIEW_BROKER_STATS_DATA)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        c = RequestCode
        self._handlers = {
            c.GET_TOPIC_STATS_INFO: self.get_topic_stats,
            c.GET_CONSUME_STATS: self.get_consume_stats,
            c.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
            c.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connections,
            c.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connections,
            c.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            c.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            c.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
        }

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return self._handlers[request.code](request)

    def view_broker_stats_data(self, request: RemotingCommand) -> RemotingCommand:
        """A stats item's sum, rate and average per call over the last minute, hour and day
        (``mqadmin statsAll``); SYSTEM_ERROR naming it when the broker has none such."""
        header = request.read_header(h.ViewBrokerStatsDataRequestHeader)
        windows = self.broker.stats_items.view(header.stats_name, header.stats_key)
        if windows is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"The stats <{header.stats_name}> <{header.stats_key}> not exist")
        minute, hour, day = (BrokerStatsItem(sum=w.sum, tps=w.tps, avgpt=w.avgpt) for w in windows)
        return request.make_response(
            body=BrokerStatsData(stats_minute=minute, stats_hour=hour, stats_day=day).encode())

    def get_topic_stats(self, request: RemotingCommand) -> RemotingCommand:
        """Min and max offset and last store time of every write queue; 17 for an unknown topic."""
        header = request.read_header(h.GetTopicStatsInfoRequestHeader)
        tc = self.broker.topics.get(header.topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST,
                                         f"topic[{header.topic}] not exist")
        store = self.broker.store
        name = self.broker.config.broker_name
        table: dict[MessageQueue, TopicOffset] = {}
        for qid in range(tc.write_queue_nums):
            max_offset = max(store.get_max_offset_in_queue(header.topic, qid), 0)
            table[MessageQueue(topic=header.topic, broker_name=name, queue_id=qid)] = TopicOffset(
                min_offset=max(store.get_min_offset_in_queue(header.topic, qid), 0),
                max_offset=max_offset,
                last_update_timestamp=store_time_at(store, header.topic, qid, max_offset - 1))
        return request.make_response(body=TopicStatsTable(offset_table=table).encode())

    def get_consume_stats(self, request: RemotingCommand) -> RemotingCommand:
        """Per read queue of each topic the group has offsets on (or of ``topic``): the queue's
        max offset, the group's committed offset and the store time of the last one consumed.
        Topics an online group no longer subscribes to are left out, as Java does."""
        header = request.read_header(h.GetConsumeStatsRequestHeader)
        group = header.consumer_group
        topics = [header.topic] if header.topic else sorted(self.broker.offsets.topics_of_group(group))
        table: dict[MessageQueue, OffsetWrapper] = {}
        for topic in topics:
            stats = self._consume_stats(group, topic)
            if stats is not None:
                table.update(stats.offset_table)
        return request.make_response(body=ConsumeStats(offset_table=table).encode())

    def get_broker_consume_stats(self, request: RemotingCommand) -> RemotingCommand:
        """Every consumer group (subscription groups, and groups with offsets) with a
        ConsumeStats per topic it has offsets on, only ordered topics with ``isOrder``; the
        messages behind in all of them (mqadmin brokerConsumeStats)."""
        header = request.read_header(h.GetConsumeStatsInBrokerHeader)
        broker = self.broker
        groups = sorted(set(broker.subscription_groups.names()) | broker.offsets.groups())
        out: list[dict[str, list[ConsumeStats]]] = []
        total = 0
        for group in groups:
            per_topic = []
            for topic in sorted(broker.offsets.topics_of_group(group)):
                tc = broker.topics.get(topic)
                if header.is_order and (tc is None or not tc.order):
                    continue
                stats = self._consume_stats(group, topic)
                if stats is not None:
                    per_topic.append(stats)
                    total += stats.total_diff
            out.append({group: per_topic})
        body = ConsumeStatsList(consume_stats_list=out, broker_addr=broker.broker_addr, total_diff=total)
        return request.make_response(body=body.encode())

    def _consume_stats(self, group: str, topic: str) -> ConsumeStats | None:
        """The group's progress on each read queue of ``topic``; None when the broker has no
        such topic or an online group no longer subscribes to it."""
        broker = self.broker
        tc = broker.topics.get(topic)
        online = broker.clients.consumers.get(group)
        if tc is None or (online is not None and online.subscriptions and topic not in online.subscriptions):
            return None
        store = broker.store
        name = broker.config.broker_name
        table: dict[MessageQueue, OffsetWrapper] = {}
        for qid in range(tc.read_queue_nums):
            consumer_offset = max(broker.offsets.query(group, topic, qid) or 0, 0)
            table[MessageQueue(topic=topic, broker_name=name, queue_id=qid)] = OffsetWrapper(
                broker_offset=max(store.get_max_offset_in_queue(topic, qid), 0),
                consumer_offset=consumer_offset,
                pull_offset=consumer_offset,  # 5.x: no separate pull offsets, nothing in flight
                last_timestamp=store_time_at(store, topic, qid, consumer_offset - 1))
        return ConsumeStats(offset_table=table)

    def _connection(self, channel: object, client_id: str) -> Connection:
        info = self.broker.clients.channel_info(channel)
        addr = (info.client_addr if info is not None else "") or getattr(channel, "remote_address", "")
        if info is None:
            return Connection(client_id=client_id, client_addr=addr)
        return Connection(client_id=client_id, client_addr=addr, language=info.language,
                          version=info.version)

    def get_consumer_connections(self, request: RemotingCommand) -> RemotingCommand:
        """The group's connections and subscriptions; 206 when no consumer of it is online."""
        header = request.read_header(h.GetConsumerConnectionListRequestHeader)
        info = self.broker.clients.consumers.get(header.consumer_group)
        if info is None or not info.clients:
            return request.make_response(ResponseCode.CONSUMER_NOT_ONLINE,
                                         f"the consumer group[{header.consumer_group}] not online")
        body = ConsumerConnection(
            connection_set=[self._connection(ch, cid) for ch, cid in info.clients.items()],
            subscription_table=dict(info.subscriptions), consume_type=info.consume_type,
            message_model=info.message_model, consume_from_where=info.consume_from_where)
        return request.make_response(body=body.encode())

    def get_producer_connections(self, request: RemotingCommand) -> RemotingCommand:
        """The group's producer connections; 1 when the group is unknown, as Java answers."""
        header = request.read_header(h.GetProducerConnectionListRequestHeader)
        clients = self.broker.clients.producers.get(header.producer_group)
        if not clients:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"the producer group[{header.producer_group}] not exist")
        body = ProducerConnection(
            connection_set=[self._connection(ch, cid) for ch, cid in clients.items()])
        return request.make_response(body=body.encode())

    def get_all_producer_info(self, request: RemotingCommand) -> RemotingCommand:
        """Every producer connection by group (mqadmin producer); addresses as Java prints a
        socket address (``/ip:port``), the time of each one's latest heartbeat."""
        clients = self.broker.clients
        now_wall, now_mono = time.time(), time.monotonic()
        data: dict[str, list[ProducerInfo]] = {}
        for group, members in sorted(clients.producers.items()):
            infos = []
            for channel, client_id in members.items():
                conn = self._connection(channel, client_id)
                info = clients.channel_info(channel)
                beat = info.last_heartbeat if info is not None else now_mono
                infos.append(ProducerInfo(client_id=client_id, remote_ip=f"/{conn.client_addr}",
                                          language=conn.language, version=conn.version,
                                          last_update_timestamp=int((now_wall - (now_mono - beat)) * 1000)))
            data[group] = infos
        return request.make_response(body=ProducerTableInfo(data=data).encode())

    def query_topic_consume_by_who(self, request: RemotingCommand) -> RemotingCommand:
        """Groups subscribed to the topic (heartbeats) or holding offsets on it."""
        header = request.read_header(h.QueryTopicConsumeByWhoRequestHeader)
        groups = (self.broker.clients.groups_of_topic(header.topic)
                  | self.broker.offsets.groups_of_topic(header.topic))
        return request.make_response(body=GroupList(group_list=sorted(groups)).encode())
