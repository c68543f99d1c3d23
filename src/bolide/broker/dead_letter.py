"""Dead letters of the pop service: a message out of delivery attempts, or one a consumer
gives up on, copied into its group's ``%DLQ%<group>`` topic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.broker.retry import dlq_topic
from bolide.common.message import Message, MessageExt

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"  # RocketMQ 5's properties of a dead letter's origin
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"


def store_dead_letter(broker: BrokerController, group: str, msg: MessageExt) -> bool:
    """Store a copy of ``msg`` in ``%DLQ%<group>``; False when the store refused it."""
    topic = dlq_topic(group)
    broker.topics.create_for_group(topic)
    props = dict(msg.properties)
    props.setdefault(DLQ_ORIGIN_TOPIC, msg.topic)
    props.setdefault(DLQ_ORIGIN_MESSAGE_ID, msg.msg_id or msg.offset_msg_id)
    for key in ("DELAY", "TIMER_OUT_MS", "TIMER_DELIVER_MS"):
        props.pop(key, None)
    result = broker.store.put_message(
        Message(topic, msg.body, flag=msg.flag, properties=props),
        0,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        reconsume_times=msg.reconsume_times,
        wait_store=False,
    )
    if result.ok and broker.metrics is not None:
        broker.metrics.on_dead_letter(group, msg.topic)
    return result.ok
