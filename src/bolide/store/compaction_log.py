"""One compacted queue: RocketMQ 5's ``CompactionLog``.

Records of the queue that have keys are copied in as they arrive (:meth:`CompactionLog.ingest`).
A compaction (:meth:`CompactionLog.compact`) takes every file pair but the last (still written),
builds the key -> newest offset map from the records after the last compaction's position, and
rewrites the pairs into ``compacting/`` keeping a record when it is the newest of its key (and
has a body: an empty body is a tombstone) or lies after the map's last offset. The new files
then replace the old ones:

1. the ``compacting/`` files are flushed, then ``compacting/swap.json`` names the old and new
   file names and the new position (written atomically);
2. the new files are renamed over the parent directory's, the old ones not replaced deleted;
3. the position is stored (``position-checkpoint``) and ``compacting/`` removed.

Killed before step 1 ends, the old files are untouched and ``compacting/`` is dropped at the
next open; killed after it, the next open finishes steps 2 and 3 (:func:`finish_swap`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from bolide.common.config_persist import sync_dir, write_atomic
from bolide.errors import StoreFormatError
from bolide.store.compaction_files import PartitionLog, Segment, record_body_length
from bolide.store.offset_map import ENTRY_SIZE, OffsetMap
from bolide.store.record import RecordError, RecordInfo, parse_record, property_bytes

log = logging.getLogger(__name__)

COMPACTING = "compacting"
SWAP_FILE = "swap.json"
KEYS = b"KEYS\x01"


def record_keys(props: bytes) -> str:
    """The KEYS property of a record's properties ('' when none or blank): the compaction key,
    the whole value as RocketMQ's ``MessageExt.getKeys()`` gives it."""
    raw = property_bytes(props, KEYS) if props else None
    if raw is None:
        return ""
    text = raw.decode("utf-8", "replace")
    return text if text.strip() else ""


class CompactionLog:
    """The compaction log and sparse queue of (topic, queue_id)."""

    def __init__(self, log_dir: Path, cq_dir: Path, log_size: int, cq_size: int,
                 topic: str, queue_id: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.current = PartitionLog(log_dir, cq_dir, log_size, cq_size)
        self.read_lock = threading.Lock()  # held by readers and while files are swapped

    def load(self, check_crc: bool = True) -> int | None:
        """Finish or drop an interrupted compaction, then open the files. Returns the position
        an interrupted swap recorded (to store), or None."""
        position = finish_swap(self.current.log_dir, self.current.cq_dir)
        self.current.load(check_crc)
        return position

    @property
    def max_offset(self) -> int:
        return self.current.max_queue_offset

    @property
    def min_offset(self) -> int:
        return self.current.min_queue_offset

    def ingest(self, record: memoryview | bytes, queue_offset: int, tags_code: int,
               store_timestamp: int, keys: str) -> bool:
        """Copy one record of the queue in; False when it is skipped: already here (an offset
        below the end) or without keys (RocketMQ keeps only keyed messages)."""
        if queue_offset < self.current.max_queue_offset or not keys:
            return False
        self.current.append(record, queue_offset, tags_code, store_timestamp)
        return True

    # -- compaction ---------------------------------------------------------------------
    def compact(self, position: int, map_bytes: int, on_swapped: Callable[[int], None]) -> int | None:
        """One compaction pass; the new position (already passed to ``on_swapped``, which
        stores it) or None when there was nothing to do. A pass stops early when the offset
        map is full: call again until None."""
        segments = self.current.segments
        if len(segments) < 2:
            return None
        old = segments[:-1]
        fresh = [seg for seg in old if seg.units and seg.last > position]
        if not fresh:
            return None
        # no larger than the pass needs: the buffer is the broker's own memory while it runs
        needed = sum(seg.units for seg in fresh) * 4 // 3 + 2
        offset_map = OffsetMap(min(map_bytes, needed * ENTRY_SIZE))
        for seg, i in _units(fresh):
            phys, size, _tags, _ts, qoff, _b, _c, _r = seg.unit(i)
            if qoff <= position:
                continue
            info, _view = _parsed(seg, phys, size)
            if not offset_map.put(record_keys(info.properties), qoff):
                log.info("compaction %s-%d: offset map full (%d keys; maxOffsetMapSize) at offset "
                         "%d, the rest next pass", self.topic, self.queue_id, offset_map.count, qoff)
                break
        if offset_map.last_offset < 0:
            return None
        new = self._rewrite(old, offset_map)
        if new.segments and new.segments[-1].base >= segments[-1].base:
            new.destroy()
            raise StoreFormatError(
                f"compaction of {self.topic}-{self.queue_id} made more files than it read; "
                "nothing replaced (report this with the store's compaction directory)")
        # from here on a failure leaves compacting/ and its swap record: the next open finishes
        self._swap(old, new, offset_map.last_offset)
        on_swapped(offset_map.last_offset)
        return offset_map.last_offset

    def _rewrite(self, old: list[Segment], offset_map: OffsetMap) -> PartitionLog:
        cur = self.current
        new = PartitionLog(cur.log_dir / COMPACTING, cur.cq_dir / COMPACTING, cur.log_size, cur.cq_size)
        new.destroy()  # leftovers of a pass that did not finish
        try:
            for seg, i in _units(old):
                phys, size, tags, ts, qoff, _b, _c, _r = seg.unit(i)
                info, view = _parsed(seg, phys, size)
                if qoff <= offset_map.last_offset:
                    keys = record_keys(info.properties)
                    if not keys or qoff < offset_map.get(keys) or record_body_length(view) <= 0:
                        continue
                new.append(view, qoff, tags, ts)
            if new.segments:  # no BLANK and no end unit, as RocketMQ's putEndMessage
                new.end_segment(new.segments[-1], marks=False)
            new.flush()
        except BaseException:
            new.destroy()
            raise
        return new

    def _swap(self, old: list[Segment], new: PartitionLog, position: int) -> None:
        cur = self.current
        old_names = [seg.log.path.name for seg in old]
        new_names = [seg.log.path.name for seg in new.segments]
        try:
            write_atomic(cur.log_dir / COMPACTING / SWAP_FILE, json.dumps(
                {"old": old_names, "new": new_names, "position": position}).encode())
        except BaseException:
            new.destroy()  # no swap record: the old files stay as they are
            raise
        with self.read_lock:
            _apply_swap(cur.log_dir, cur.cq_dir, old_names, new_names)
            for seg in new.segments:  # the mappings stay valid across the rename
                seg.log.path = cur.log_dir / seg.log.path.name
                seg.cq.path = cur.cq_dir / seg.cq.path.name
            cur.segments = [*new.segments, *cur.segments[len(old):]]
        for seg in old:
            seg.close()

    def remove_swap_record(self) -> None:
        """The swap is complete and its position stored: forget it."""
        _remove_compacting(self.current.log_dir, self.current.cq_dir)

    def close(self) -> None:
        self.current.close()


def _units(segments: list[Segment]) -> list[tuple[Segment, int]]:
    return [(seg, i) for seg in segments for i in range(seg.units)]


def _parsed(seg: Segment, phys: int, size: int) -> tuple[RecordInfo, memoryview]:
    """The record of a unit, its CRC checked; StoreFormatError when it is bad."""
    view = seg.record(phys, size)
    info = parse_record(view, 0, True) if view is not None else RecordError(-1, "outside the file")
    if isinstance(info, RecordError) or view is None:
        reason = info.reason if isinstance(info, RecordError) else "outside the file"
        raise StoreFormatError(f"compaction log {seg.log.path}: record at {phys} is bad "
                               f"({reason}); compaction of this queue stops: check the store")
    return info, view


def _apply_swap(log_dir: Path, cq_dir: Path, old: list[str], new: list[str]) -> None:
    for directory in (log_dir, cq_dir):
        src = directory / COMPACTING
        for name in new:
            if (src / name).exists():
                os.replace(src / name, directory / name)
        for name in set(old) - set(new):
            (directory / name).unlink(missing_ok=True)
        sync_dir(directory)


def _remove_compacting(log_dir: Path, cq_dir: Path) -> None:
    shutil.rmtree(log_dir / COMPACTING, ignore_errors=True)
    shutil.rmtree(cq_dir / COMPACTING, ignore_errors=True)


def finish_swap(log_dir: Path, cq_dir: Path) -> int | None:
    """At open: complete a swap whose record exists (returns its position, to be stored
    before :meth:`CompactionLog.remove_swap_record`), else drop an unfinished ``compacting/``."""
    record = log_dir / COMPACTING / SWAP_FILE
    try:
        text = record.read_bytes()
    except FileNotFoundError:
        _remove_compacting(log_dir, cq_dir)
        return None
    try:
        swap = json.loads(text)
        old, new, position = list(swap["old"]), list(swap["new"]), int(swap["position"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreFormatError(f"{record} is not readable ({exc}); the compaction it records "
                               "cannot be finished: restore the queue's compaction files") from None
    log.warning("compaction of %s was interrupted during its file swap: finishing it", log_dir)
    _apply_swap(log_dir, cq_dir, old, new)
    return position

