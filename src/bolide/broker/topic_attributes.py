"""Topic attributes as RocketMQ 5 sends them in UPDATE_AND_CREATE_TOPIC: ``+key=value`` adds
or replaces an attribute, ``-key`` removes it, several joined by commas
(``mqadmin updateTopic -a +message.type=NORMAL,+retention.hours=24``).

Bolide acts on three: ``retention.hours``, a per-topic retention floor on top of the global
``fileReservedTime`` (see docs/store.md, "Retention"), RocketMQ 5's ``message.type`` (NORMAL,
FIFO, DELAY, TRANSACTION or MIXED: the messages gRPC clients may send to the topic) and
RocketMQ 5's ``cleanup.policy`` (DELETE, the default, or COMPACTION: a compacted topic, see
docs/store.md, "Compacted topics"), which like RocketMQ's is fixed once the topic exists. Other
attributes are kept and returned as they were given.
"""

from __future__ import annotations

import math

RETENTION_HOURS = "retention.hours"
MESSAGE_TYPE = "message.type"  # what RocketMQ 5 clients may send to the topic (gRPC endpoint)
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
CLEANUP_POLICY = "cleanup.policy"  # RocketMQ 5's TopicAttributes.CLEANUP_POLICY_ATTRIBUTE
CLEANUP_POLICIES = ("DELETE", "COMPACTION")  # exact case, as RocketMQ's CleanupPolicy enum


class TopicAttributeError(ValueError):
    """A malformed attributes string or value; the message says what is expected."""


def apply_changes(current: dict[str, str] | None, text: str | None) -> dict[str, str] | None:
    """``current`` with the ``+k=v`` / ``-k`` changes of ``text`` applied (None, or an empty
    ``text``, leaves it as it is)."""
    if not text or not text.strip():
        return current
    result = dict(current or {})
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        op, body = item[0], item[1:]
        if op == "+":
            key, sep, value = body.partition("=")
            if not sep or not key:
                raise TopicAttributeError(f"topic attribute {item!r}: write +key=value to set one")
            _check(key, value)
            result[key] = value
        elif op == "-":
            if not body or "=" in body:
                raise TopicAttributeError(f"topic attribute {item!r}: write -key to remove one")
            result.pop(body, None)
        else:
            raise TopicAttributeError(f"topic attribute {item!r} must start with + (set) or - (remove), "
                                  "as in +retention.hours=24")
    return result


def _check(key: str, value: str) -> None:
    if key == RETENTION_HOURS:
        retention_hours({key: value})
    elif key == MESSAGE_TYPE and value.upper() not in MESSAGE_TYPES:
        raise TopicAttributeError(f"{MESSAGE_TYPE}={value!r}: give one of {', '.join(MESSAGE_TYPES)}")
    elif key == CLEANUP_POLICY and value not in CLEANUP_POLICIES:
        raise TopicAttributeError(f"{CLEANUP_POLICY}={value!r}: give DELETE or COMPACTION (upper case, "
                                  "as RocketMQ's CleanupPolicy)")


def cleanup_policy(attributes: dict[str, str] | None) -> str:
    """The topic's cleanup policy: DELETE (the default) or COMPACTION."""
    value = (attributes or {}).get(CLEANUP_POLICY, "DELETE")
    return value if value in CLEANUP_POLICIES else "DELETE"


def is_compaction(attributes: dict[str, str] | None) -> bool:
    """Whether the topic is compacted (``cleanup.policy=COMPACTION``)."""
    return cleanup_policy(attributes) == "COMPACTION"


def check_unchangeable(old: dict[str, str] | None, new: dict[str, str] | None) -> None:
    """Refuse a change of an existing topic's ``cleanup.policy``: RocketMQ declares it
    unchangeable ("attempt to update an unchangeable attribute")."""
    if cleanup_policy(old) != cleanup_policy(new):
        raise TopicAttributeError(
            f"{CLEANUP_POLICY} cannot change once the topic exists (it is {cleanup_policy(old)}); "
            "delete the topic and create it again with the policy wanted")


def retention_hours(attributes: dict[str, str] | None) -> float | None:
    """The topic's retention floor in hours, or None when it has none."""
    raw = (attributes or {}).get(RETENTION_HOURS)
    if raw is None:
        return None
    try:
        hours = float(raw)
    except ValueError:
        hours = math.nan
    if not math.isfinite(hours) or hours <= 0:
        raise TopicAttributeError(f"{RETENTION_HOURS}={raw!r}: give a positive number of hours "
                              "(or remove the attribute with -retention.hours)")
    return hours
