"""The index files under ``<root>/index/`` (RocketMQ's IndexService): built from dispatch,
rolled when full, searched newest first."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from bolide.common import sysflag
from bolide.store.checkpoint import Checkpoint
from bolide.store.index_file import IndexFile, index_file_name
from bolide.store.record import RecordInfo, property_bytes

log = logging.getLogger(__name__)

_UNIQ = b"UNIQ_KEY\x01"
_CHECK_EVERY = 1024  # messages indexed between two free-space checks (each a statvfs)
_MAX_BYTES_PER_MESSAGE = 3 * 4096  # new pages one message can touch: entries, slots, header
_KEYS = b"KEYS\x01"


class IndexService:
    """Index files sorted oldest to newest; :meth:`build` is the dispatch hook."""

    def __init__(self, index_dir: Path, hash_slot_num: int, index_num: int,
                 checkpoint: Checkpoint, max_msgs_num_batch: int = 64, min_free_bytes: int = 0) -> None:
        self.dir = index_dir
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.checkpoint = checkpoint
        self.max_msgs_num_batch = max_msgs_num_batch
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()
        self._last_indexed = -1  # commit log offset of the newest indexed message
        self._failing = False
        # Index pages take disk space nobody reserved: below ``min_free_bytes`` free (checked
        # every _CHECK_EVERY messages) indexing pauses, leaving the space to the CommitLog
        # and the ConsumeQueues that acknowledged puts count on.
        self.min_free_bytes = min_free_bytes
        self._until_check = 0
        self._paused = False

    def load(self, abnormal: bool) -> None:
        """Open the files; after an unclean exit delete those newer than the checkpoint's."""
        if not self.dir.is_dir():
            return
        for path in sorted(p for p in self.dir.iterdir() if p.is_file()):
            f = IndexFile(path, self.hash_slot_num, self.index_num)
            if abnormal and f.end_timestamp > self.checkpoint.index_msg_timestamp:
                log.info("deleting index file %s (newer than the checkpoint)", path)
                f.destroy()
                continue
            self.files.append(f)
        self._update_last()

    @property
    def last_indexed(self) -> int:
        """CommitLog offset of the newest indexed message (-1: none)."""
        return self._last_indexed

    def forget_after(self, offset: int) -> bool:
        """The CommitLog was cut at ``offset`` (a record start): index the records written
        there from now on again. Entries of the removed records stay in the files, harmless:
        queries check every hit against the CommitLog. True when the index reached past it."""
        if self._last_indexed < offset:
            return False
        self._last_indexed = offset - 1
        if self.files:
            self.files[-1].set_end_phy_offset(offset - 1)
        return True

    def _update_last(self) -> None:
        self._last_indexed = -1
        if self.files:
            last = self.files[-1]
            if last.index_count > 1 or last.end_phy_offset > 0:
                self._last_indexed = last.end_phy_offset

    def _new_file(self) -> IndexFile:
        self.dir.mkdir(parents=True, exist_ok=True)
        prev = self.files[-1] if self.files else None
        millis = int(time.time() * 1000)
        name = index_file_name(millis)
        while (self.dir / name).exists() or (prev is not None and name <= prev.name):
            millis += 1
            name = index_file_name(millis)
        f = IndexFile(self.dir / name, self.hash_slot_num, self.index_num,
                      prev.end_phy_offset if prev else 0, prev.end_timestamp if prev else 0)
        self.files.append(f)
        if prev is not None:
            prev.flush()
            self.checkpoint.index_msg_timestamp = prev.end_timestamp
            self.checkpoint.flush()
        return f

    def _put(self, key: str, phy: int, ts: int) -> None:
        f = self.files[-1] if self.files else self._new_file()
        while not f.put(key, phy, ts):
            f = self._new_file()

    def build(self, info: RecordInfo) -> None:
        """Index a dispatched record under ``topic#UNIQ_KEY`` and ``topic#k`` for its KEYS."""
        self.build_fields(info.commit_log_offset, info.topic, info.sys_flag, info.store_timestamp,
                          info.properties)

    def build_fields(self, phy: int, topic: str, sys_flag: int, ts: int, props: bytes) -> None:
        """:meth:`build` from the record's fields."""
        if phy <= self._last_indexed or sys_flag & 0xC == sysflag.TRANSACTION_ROLLBACK_TYPE:
            return
        uniq = property_bytes(props, _UNIQ)
        keys = property_bytes(props, _KEYS)
        if not uniq and not keys:
            return
        if self.min_free_bytes:
            self._until_check -= 1
            if self._until_check < 0:
                self._until_check = _CHECK_EVERY
                self._check_space()
            if self._paused:
                return
        prefix = topic + "#"
        with self._lock:
            try:
                if uniq:
                    self._put(prefix + uniq.decode("utf-8", "replace"), phy, ts)
                if keys:
                    for k in keys.decode("utf-8", "replace").split(" "):
                        if k:
                            self._put(prefix + k, phy, ts)
            except OSError as exc:  # e.g. disk full: the message's keys from this one on stay
                # unindexed (its UNIQ_KEY may be in already), dispatch goes on
                if not self._failing:
                    log.error("index: cannot index the message at %d: %s", phy, exc)
                self._failing = True
                return
            if self._failing:
                log.warning("index: indexing again from the message at %d", phy)
                self._failing = False
            self._last_indexed = phy

    def build_records(self, buf: memoryview, pos: int, end: int) -> int:
        """Index the records of the CommitLog bytes ``buf[pos:end]`` with the compiled loop
        as far as it takes them (see :meth:`IndexFile.put_records`); returns where it
        stopped. The record there, if before ``end``, goes through :meth:`build`."""
        if self.min_free_bytes:
            if self._until_check < 0:
                self._until_check = _CHECK_EVERY
                self._check_space()
            if self._paused:
                return pos
        with self._lock:
            if not self.files or self.files[-1].is_full():
                return pos  # build() makes the file when a record has keys to index
            after, last, records = self.files[-1].put_records(buf, pos, end, self._last_indexed,
                                                              _CHECK_EVERY)
            self._until_check -= records
            if last != self._last_indexed:
                self._last_indexed = last
                if self._failing:
                    log.warning("index: indexing again from the message at %d", last)
                    self._failing = False
        return after

    def _check_space(self) -> None:
        try:
            try:
                st = os.statvfs(self.dir)
            except FileNotFoundError:  # no index file yet
                st = os.statvfs(self.dir.parent)
            free = st.f_bavail * st.f_frsize
        except OSError:
            return
        paused = free < self.min_free_bytes + _CHECK_EVERY * _MAX_BYTES_PER_MESSAGE
        if paused != self._paused:
            if paused:
                log.error("index: only %d bytes free in %s; indexing paused", free, self.dir)
            else:
                log.warning("index: disk space available again; indexing resumed")
            self._paused = paused

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """CommitLog offsets whose key hash matches ``topic#key`` (hash only: verify them)."""
        max_num = min(max_num, self.max_msgs_num_batch)
        found: list[int] = []
        full_key = f"{topic}#{key}"
        with self._lock:
            for f in reversed(self.files):
                if f.is_time_matched(begin, end):
                    f.select_phy_offsets(full_key, max_num, begin, end, found)
                if f.begin_timestamp < begin or len(found) >= max_num:
                    break
        return found

    def delete_below(self, commit_log_min: int) -> list[str]:
        """Delete the oldest files (never the last) whose entries all point below
        ``commit_log_min`` (endPhyOffset < min, 11.3 of the spec); returns their paths."""
        with self._lock:
            files = self.files
            count = 0
            while count < len(files) - 1 and files[count].end_phy_offset < commit_log_min:
                count += 1
            gone, self.files = files[:count], files[count:]
            for f in gone:
                try:
                    f.destroy()
                except OSError as exc:  # keep going: the file is out of the list anyway
                    log.error("index: cannot delete %s: %s", f.path, exc)
        return [str(f.path) for f in gone]

    def flush(self) -> None:
        with self._lock:
            for f in self.files:
                f.flush()

    def close(self) -> None:
        with self._lock:
            for f in self.files:
                try:
                    f.close()
                except OSError as exc:
                    log.error("index: cannot flush %s: %s", f.path, exc)
            self.files.clear()
