"""``bolide store query``: find messages offline by key (the index files) or by message id
(an offsetMsgId names the CommitLog offset; a UNIQ_KEY is looked up in the index).

Like :meth:`MessageStore.query_message`, every index hit is read back and kept only when its
topic and key really match (the index compares hashes only).
"""

from __future__ import annotations

from bolide.common import properties as P
from bolide.common.hosts import encode_host
from bolide.common.message import MessageExt
from bolide.common.msgid import decode_offset_msg_id
from bolide.common.records import RecordFormatError, decode_record
from bolide.errors import BolideError
from bolide.store.config import StoreConfig
from bolide.store.index_reader import IndexGeometryError, index_paths, open_index
from bolide.store.offline import Segments, open_commit_log, queue_dirs, read_record


class QueryError(BolideError):
    """The lookup cannot be made (no index, a malformed id); the message says what to do."""


def _require_index(config: StoreConfig) -> None:
    if not index_paths(config):
        raise QueryError(f"no index files in {config.index_dir}: the store was written with "
                         "messageIndexEnable=false, or they were lost; `bolide store repair "
                         "--rebuild-index` builds them from the CommitLog")


def _hits(config: StoreConfig, full_key: str, max_num: int) -> list[int]:
    """CommitLog offsets whose hash matches ``topic#key``, newest index file first."""
    found: list[int] = []
    for path in reversed(index_paths(config)):
        try:
            with open_index(config, path) as reader:
                found += [phy for phy, _ts in reader.lookup(full_key, max_num - len(found))]
        except IndexGeometryError as exc:
            raise QueryError(str(exc)) from None
        if len(found) >= max_num:
            break
    return found


def _read(log: Segments, phy: int) -> MessageExt | None:
    raw = read_record(log, phy)
    if raw is None:
        return None
    try:
        return decode_record(raw)
    except RecordFormatError:
        return None


def query_by_key(config: StoreConfig, topic: str, key: str, max_num: int = 64) -> list[MessageExt]:
    """Messages of ``topic`` whose KEYS contain ``key`` or whose UNIQ_KEY is ``key``, sorted
    by CommitLog offset."""
    _require_index(config)
    found: dict[int, MessageExt] = {}
    with open_commit_log(config) as log:
        for phy in _hits(config, f"{topic}#{key}", max_num):
            if phy in found:
                continue
            msg = _read(log, phy)
            if msg is None or msg.topic != topic or msg.commit_log_offset != phy:
                continue
            if msg.msg_id == key or key in msg.properties.get(P.KEYS, "").split(P.KEY_SEPARATOR):
                found[phy] = msg
    return [found[phy] for phy in sorted(found)]


def query_by_msg_id(config: StoreConfig, msg_id: str, topic: str | None = None) -> list[MessageExt]:
    """The message(s) with this id: an offsetMsgId (store host + CommitLog offset) read
    directly, else a UNIQ_KEY searched in the index under ``topic`` or every topic."""
    text = msg_id.strip().upper()
    if len(text) in (32, 56):
        try:
            host, offset = decode_offset_msg_id(text)
        except ValueError:
            host, offset = "", -1
        if offset >= 0:
            with open_commit_log(config) as log:
                msg = _read(log, offset)
            if (msg is not None and msg.commit_log_offset == offset
                    and encode_host(msg.store_host) == encode_host(host)
                    and (topic is None or msg.topic == topic)):
                return [msg]
    if len(text) != 32 or any(c not in "0123456789ABCDEF" for c in text):
        raise QueryError(f"{msg_id!r} is neither an offsetMsgId of a record in this store nor "
                         "a UNIQ_KEY (32 hex characters); `bolide store dump` shows both ids "
                         "of each record")
    _require_index(config)
    topics = [topic] if topic else sorted({t for t, _ in queue_dirs(config)})
    found: dict[int, MessageExt] = {}
    for name in topics:
        for msg in query_by_key(config, name, text):
            if msg.msg_id == text:
                found[msg.commit_log_offset] = msg
    return [found[phy] for phy in sorted(found)]
