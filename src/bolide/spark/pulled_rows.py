"""Arrow batches from the record bodies of PULL_MESSAGE answers: the ``rocketmq`` source's decoder.

The answers of a queue's pulls are joined into one buffer and decoded column by column
(:mod:`bolide.spark.record_columns`); uncommon records (compressed, IPv6, v2, odd properties)
go through the per-message decoder. Pulls in flight at once may overlap when the broker reads
past a window to find tag matches, so each body comes with the lowest queue offset still
wanted from it; the tag filter is applied here, as the Java client does after a pull.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bolide.client.filtering import SubscriptionData, matches
from bolide.common.compression import decompress_message
from bolide.common.message import MessageExt
from bolide.common.records import RecordFormatError, decode_record
from bolide.errors import ProtocolError
from bolide.spark.record_columns import RecordBuffer
from bolide.spark.schema import project, to_record_batch


def pulled_batches(bodies: Sequence[tuple[bytes, int]], end: int, sub: SubscriptionData,
                   broker_name: str, columns: tuple[str, ...] | None = None) -> list[pa.RecordBatch]:
    """The rows of the records in ``bodies`` (each a pull answer's body and the lowest queue
    offset wanted from it) below queue offset ``end`` that ``sub`` wants, in queue order; only
    ``columns`` when given (see :func:`~bolide.spark.schema.projection`)."""
    if not bodies:
        return []
    data = b"".join(body for body, _ in bodies)
    floors = np.array([floor for _, floor in bodies], np.int64)
    body_starts = np.cumsum([0] + [len(body) for body, _ in bodies[:-1]], dtype=np.int64)
    buf = RecordBuffer(data)
    starts, reached = buf.walk(0, len(data), len(data))
    if reached != len(data):
        _malformed(data, reached)
    ok, recs = buf.classify(starts)
    queue_offsets = recs.head["queue_offset"].astype(np.int64)
    wanted = (queue_offsets >= floors[np.searchsorted(body_starts, starts, side="right") - 1]) & (
        queue_offsets < end)
    parts = []
    slow = wanted & ~ok
    fast = recs.select(wanted & ok)
    # the tag filter reads tags and the merge below queueOffset, asked for or not
    extra = ("tags", "queueOffset") if _filters_tags(sub) else ("queueOffset",)
    needed = None if columns is None else list(dict.fromkeys([*columns, *extra]))
    if len(fast):
        batch = buf.decode(fast, broker_name, columns=needed)
        if batch is None:  # text that is not UTF-8, a repeated property key
            slow |= wanted & ok
        else:
            parts.append(_tag_filtered(batch, sub))
    if slow.any():
        msgs = [_decoded(buf.mv, int(pos)) for pos in starts[slow]]
        kept = [m for m in msgs if matches(sub, m)]
        if kept:
            batch = to_record_batch(broker_name, kept)
            parts.append(batch if needed is None else batch.select(needed))
    parts = [b for b in parts if b.num_rows]
    if len(parts) > 1:  # uncommon records among common ones: back into queue order
        parts = pa.Table.from_batches(parts).sort_by("queueOffset").combine_chunks().to_batches()
    return [project(b, columns) for b in parts]


def _filters_tags(sub: SubscriptionData) -> bool:
    return not sub.matches_all and bool(sub.tags_set)


def _tag_filtered(batch: pa.RecordBatch, sub: SubscriptionData) -> pa.RecordBatch:
    if not _filters_tags(sub):
        return batch
    hit = pc.fill_null(pc.is_in(batch.column("tags"), value_set=pa.array(sub.tags_set, pa.string())),
                       False)
    return batch.filter(hit)


def _decoded(view: memoryview, pos: int) -> MessageExt:
    try:
        msg = decode_record(view, pos)
    except RecordFormatError as exc:
        raise ProtocolError(f"a pull answer is malformed: {exc}") from None
    decompress_message(msg)
    return msg


def _malformed(data: bytes, pos: int) -> None:
    """Raise the error for the record at ``pos`` where the walk over ``data`` stopped."""
    try:
        decode_record(data, pos)
    except RecordFormatError as exc:
        raise ProtocolError(f"a pull answer is malformed: {exc}") from None
    raise ProtocolError(f"a pull answer is malformed: no record fits at byte {pos} of {len(data)}")
