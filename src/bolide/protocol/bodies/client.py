"""Bodies clients send or read: MessageQueue, HEART_BEAT's HeartbeatData, the consumer list,
and the orderly lock bodies (LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42)."""

from __future__ import annotations

from bolide.common.hashing import java_string_hash
from bolide.protocol.bodies.bean import Bean, bean, jfield

# ConsumerData enum names, as Java writes them
CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull / lite-pull consumers
CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push consumers
CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"
CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"
SUB_ALL = "*"


@bean(frozen=True, order=True)
class MessageQueue(Bean):
    """A queue: (topic, broker name, queue id). Hashable; a map key in stats bodies."""

    topic: str = ""
    broker_name: str = ""
    queue_id: int = 0


@bean
class SubscriptionData(Bean):
    """One subscription of a consumer group (Go writes ``codeSet`` as strings; both parse)."""

    topic: str = ""
    sub_string: str = SUB_ALL
    tags_set: list[str] = jfield(factory=list)
    code_set: list[int] = jfield(factory=list)
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG  # ali-ons leaves it out: TAG
    class_filter_mode: bool = False

    @classmethod
    def of(cls, topic: str, sub_string: str | None, sub_version: int = 0,
           expression_type: str = EXPRESSION_TAG) -> SubscriptionData:
        """Build as the Java broker does: TAG expressions split on ``||`` into tags and codes."""
        text = (sub_string or "").strip()
        if expression_type != EXPRESSION_TAG:
            return cls(topic=topic, sub_string=text, sub_version=sub_version,
                       expression_type=expression_type)
        if not text or text == SUB_ALL:
            return cls(topic=topic, sub_string=SUB_ALL, sub_version=sub_version)
        tags = [t.strip() for t in text.split("||") if t.strip()]
        return cls(topic=topic, sub_string=text, tags_set=tags,
                   code_set=[java_string_hash(t) for t in tags], sub_version=sub_version)

    @property
    def matches_all(self) -> bool:
        return self.expression_type == EXPRESSION_TAG and self.sub_string in (SUB_ALL, "")


@bean
class ConsumerData(Bean):
    group_name: str = ""
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None
    subscription_data_set: list[SubscriptionData] = jfield(factory=list)
    unit_mode: bool = False


@bean
class ProducerData(Bean):
    group_name: str = ""


@bean
class HeartbeatData(Bean):
    """HEART_BEAT (34) body. 5.x adds ``heartbeatFingerprint`` and ``withoutSub``."""

    client_id: str = jfield(default="", name="clientID")
    producer_data_set: list[ProducerData] = jfield(factory=list)
    consumer_data_set: list[ConsumerData] = jfield(factory=list)
    heartbeat_fingerprint: int | None = None
    without_sub: bool | None = None


@bean
class ConsumerListBody(Bean):
    """GET_CONSUMER_LIST_BY_GROUP answer (Java's GetConsumerListByGroupResponseBody)."""

    consumer_id_list: list[str] = jfield(factory=list)


@bean
class LockBatchRequestBody(Bean):
    """LOCK_BATCH_MQ (41) request."""

    consumer_group: str = ""
    client_id: str = ""
    mq_set: set[MessageQueue] = jfield(factory=set)
    only_this_broker: bool | None = None


@bean
class LockBatchResponseBody(Bean):
    """LOCK_BATCH_MQ answer: the queues the client now holds."""

    lock_ok_mq_set: set[MessageQueue] = jfield(factory=set, name="lockOKMQSet")


@bean
class UnlockBatchRequestBody(Bean):
    """UNLOCK_BATCH_MQ (42) request."""

    consumer_group: str = ""
    client_id: str = ""
    mq_set: set[MessageQueue] = jfield(factory=set)
    only_this_broker: bool | None = None


@bean
class CheckClientRequestBody(Bean):
    """CHECK_CLIENT_CONFIG (46): a consumer asks whether the broker supports its filter."""

    client_id: str = ""
    group: str = ""
    subscription_data: SubscriptionData | None = None
