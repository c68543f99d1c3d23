"""Offset arithmetic of the ``rocketmq`` source: resolving start and end specifications per
queue, the JSON form Spark checkpoints, splitting ranges into partitions and admission control.

A queue is ``(topic, brokerName, queueId)``; an offset is the next queue offset to read, so a
range ``[start, end)`` holds ``end - start`` messages. Pure: no Spark, no network.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bolide.spark.options import EARLIEST, LATEST, OffsetSpec, SparkOptionError

log = logging.getLogger(__name__)

QueueKey = tuple[str, str, int]  # topic, broker name, queue id
Offsets = dict[QueueKey, int]
Bounds = dict[QueueKey, tuple[int, int]]  # queue -> (min offset, max offset)


@dataclass(frozen=True, slots=True, order=True)
class QueueRange:
    """Messages ``[start, end)`` of one queue: one Spark input partition, picklable."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker_name, self.queue_id)

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def queue_name(key: QueueKey) -> str:
    return f"{key[0]}/{key[1]}/{key[2]}"


# -- JSON form ---------------------------------------------------------------------------------
def to_json(offsets: Mapping[QueueKey, int]) -> dict[str, Any]:
    """``{"topic": {"broker": {"queueId": offset}}}`` with keys in one fixed order (topics and
    brokers by name, queue ids by number): Spark compares offsets as JSON text, so the same
    offsets must always give the same text."""
    out: dict[str, Any] = {}
    for topic, broker, qid in sorted(offsets):
        out.setdefault(topic, {}).setdefault(broker, {})[str(qid)] = int(offsets[(topic, broker, qid)])
    return out


def from_json(data: Mapping[str, Any]) -> Offsets:
    """The inverse of :func:`to_json`."""
    out: Offsets = {}
    try:
        for topic, brokers in data.items():
            for broker, queues in brokers.items():
                for qid, off in queues.items():
                    out[(topic, broker, int(qid))] = int(off)
    except (AttributeError, TypeError, ValueError):
        raise SparkOptionError(f"offsets {data!r} are not of the form "
                               '{"topic": {"broker": {"queueId": offset}}}: was the checkpoint written '
                               "by another source?") from None
    return out


# -- resolving ---------------------------------------------------------------------------------
def _given(spec: dict[str, Any], key: QueueKey) -> int | None:
    topic, broker, qid = key
    per = spec.get(topic)
    if not per:
        return None
    value = per.get(broker)
    if isinstance(value, dict):
        found = value.get(str(qid))
        return None if found is None else int(found)
    found = per.get(str(qid))
    return None if isinstance(found, dict) or found is None else int(found)


def resolve(spec: OffsetSpec, bounds: Bounds, *, missing: int) -> Offsets:
    """Concrete offsets for every queue of ``bounds`` from ``earliest``, ``latest`` or JSON;
    a queue the JSON does not name gets ``missing`` (EARLIEST or LATEST)."""
    out: Offsets = {}
    for key, (low, high) in bounds.items():
        if spec == "earliest":
            value = EARLIEST
        elif spec == "latest":
            value = LATEST
        else:
            assert isinstance(spec, dict)
            given = _given(spec, key)
            value = missing if given is None else given
        out[key] = low if value == EARLIEST else high if value == LATEST else value
    return out


def check_known_queues(spec: OffsetSpec, bounds: Bounds, name: str) -> None:
    """Refuse JSON offsets naming a queue the cluster does not have."""
    if not isinstance(spec, dict):
        return
    known = {(t, b) for t, b, _ in bounds} | {(t, str(q)) for t, _, q in bounds}
    queues = {(t, b, q) for t, b, q in bounds}
    for topic, per in spec.items():
        for key, value in per.items():
            if isinstance(value, dict):
                bad = [q for q in value if (topic, key, int(q)) not in queues]
                if (topic, key) not in known or bad:
                    raise SparkOptionError(f"option {name} names queue(s) {topic}/{key}/{bad or list(value)} "
                                           "that the cluster does not have: check topic, broker name "
                                           "and queue ids (bolide admin topicStatus -t TOPIC)")
            elif (topic, key) not in known:
                raise SparkOptionError(f"option {name} names queue {topic}/{key} that the cluster "
                                       "does not have (bolide admin topicStatus -t TOPIC)")


class DataLossError(RuntimeError):
    """Messages the query needs were deleted (retention) before it read them."""


def lost_range(key: QueueKey, start: int, low: int) -> str:
    return (f"messages {start}..{low - 1} of queue {queue_name(key)} were deleted before they were read "
            f"(the queue now starts at {low})")


def clamp_start(key: QueueKey, start: int, low: int, *, fail_on_data_loss: bool) -> int:
    """``start`` when the queue still has it, else ``low``: fail or warn per failOnDataLoss."""
    if start >= low:
        return start
    message = lost_range(key, start, low)
    if fail_on_data_loss:
        raise DataLossError(message + ": set failOnDataLoss=false to skip them, or start a new query "
                            "(a new checkpoint) from startingOffsets=earliest")
    log.warning("%s; skipped (failOnDataLoss=false)", message)
    return low


# -- partitions --------------------------------------------------------------------------------
def ranges(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> list[QueueRange]:
    """Non-empty ``[start, end)`` ranges per queue, sorted; a queue missing from ``start``
    starts at 0 (its earliest)."""
    out = []
    for key in sorted(end):
        s, e = start.get(key, 0), end[key]
        if e > s:
            out.append(QueueRange(key[0], key[1], key[2], s, e))
    return out


def split(parts: Iterable[QueueRange], min_partitions: int | None) -> list[QueueRange]:
    """Split large ranges so there are at least ``min_partitions`` partitions (Kafka's
    minPartitions): a range gets ``ceil(size * min_partitions / total)`` even pieces."""
    parts = list(parts)
    total = sum(p.size for p in parts)
    if not min_partitions or len(parts) >= min_partitions or total == 0:
        return parts
    out = []
    for p in parts:
        n = min(-(-p.size * min_partitions // total), p.size)
        bounds = [p.start + -(-p.size * j // n) for j in range(n + 1)]
        out += [QueueRange(p.topic, p.broker_name, p.queue_id, s, e) for s, e in itertools.pairwise(bounds)]
    return out


# -- admission control -------------------------------------------------------------------------
def rate_limit(start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int], max_rows: int) -> Offsets:
    """End offsets that admit at most ``max_rows`` messages in all, shared across queues in
    proportion to their backlog (Kafka's maxOffsetsPerTrigger); deterministic."""
    backlog = {k: max(latest[k] - start.get(k, 0), 0) for k in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    share = {k: backlog[k] * max_rows // total for k in backlog}
    left = max_rows - sum(share.values())
    for k in sorted(backlog, key=lambda k: (-(backlog[k] * max_rows % total), k)):
        if left == 0:
            break
        if share[k] < backlog[k]:
            share[k] += 1
            left -= 1
    return {k: start.get(k, 0) + share[k] for k in latest}


def backlog(start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int]) -> int:
    return sum(max(latest[k] - start.get(k, 0), 0) for k in latest)
