"""Admin bodies: KV tables, topic and group lists, connections and queue statistics.

TopicStatsTable and ConsumeStats are Java ``Map<MessageQueue, ...>``: fastjson writes each key
as a bare JSON object (``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``). Java also
parses the key as a string holding that object, which ``encode(standard=True)`` writes.
"""

from __future__ import annotations

from bolide.protocol.bodies.bean import Bean, bean, jfield
from bolide.protocol.bodies.client import MessageQueue, SubscriptionData
from bolide.protocol.codes import DEFAULT_VERSION


@bean
class KVTable(Bean):
    """String map: GET_KVLIST_BY_NAMESPACE, GET_BROKER_RUNTIME_INFO, REGISTER_BROKER answer."""

    table: dict[str, str] = jfield(factory=dict)


@bean
class TopicList(Bean):
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER / GET_TOPICS_BY_CLUSTER answer."""

    topic_list: list[str] = jfield(factory=list)
    broker_addr: str | None = None


@bean
class GroupList(Bean):
    """QUERY_TOPIC_CONSUME_BY_WHO answer."""

    group_list: list[str] = jfield(factory=list)


@bean
class Connection(Bean):
    """One client connection as the broker saw it in heartbeats."""

    client_id: str = ""
    client_addr: str = ""
    language: str = "JAVA"
    version: int = DEFAULT_VERSION


@bean
class ConsumerConnection(Bean):
    """GET_CONSUMER_CONNECTION_LIST (203) answer."""

    connection_set: list[Connection] = jfield(factory=list)
    subscription_table: dict[str, SubscriptionData] = jfield(factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None


@bean
class ProducerConnection(Bean):
    """GET_PRODUCER_CONNECTION_LIST (204) answer."""

    connection_set: list[Connection] = jfield(factory=list)


@bean
class TopicOffset(Bean):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@bean
class TopicStatsTable(Bean):
    """GET_TOPIC_STATS_INFO (202) answer: offsets of every queue of a topic on a broker."""

    offset_table: dict[MessageQueue, TopicOffset] = jfield(factory=dict)


@bean
class OffsetWrapper(Bean):
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0
    pull_offset: int | None = None  # 5.x


@bean
class ConsumeStats(Bean):
    """GET_CONSUME_STATS (208) answer: a group's progress per queue."""

    offset_table: dict[MessageQueue, OffsetWrapper] = jfield(factory=dict)
    consume_tps: float = 0.0

    @property
    def total_diff(self) -> int:
        """Messages behind, summed over all queues (Java's computeTotalDiff)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@bean
class ResetOffsetBody(Bean):
    """INVOKE_BROKER_TO_RESET_OFFSET answer and RESET_CONSUMER_CLIENT_OFFSET body: the new
    offset of every queue."""

    offset_table: dict[MessageQueue, int] = jfield(factory=dict)
