"""The compiled fast path of the store's puts (``bolide.store._append``, built by ``pip
install`` when a C compiler is there; ``BOLIDE_PURE_PYTHON=1`` turns it off).

An :class:`Appender` writes the common message straight into the mapped segment: a topic
already stored once (so validated), IPv4 hosts, no delay level, no PREPARED or ROLLBACK
transaction flag, room in the current segment and in the queue's ConsumeQueue files. It
returns the :class:`~bolide.store.results.PutMessageResult`, or None for anything else, which
the caller then puts through the general Python path (the tested reference: the same bytes
but for the timestamps and generated ids, and every refusal with its reason). The caller
holds the CommitLog's ``put_lock``.
"""

from __future__ import annotations

from typing import Any

from bolide.common.msgid import UniqKeyGenerator
from bolide.store.commitlog import CommitLog
from bolide.store.compiled import load
from bolide.store.results import PutMessageResult, PutStatus

_append = load("_append")

COMPILED = _append is not None


def new_appender(commit_log: CommitLog, queue_room: dict[tuple[str, int], int],
                 uniq: UniqKeyGenerator, max_body: int, room_ahead: int) -> Any | None:
    """An Appender over ``commit_log``, or None (pure Python, or an IPv6 store host)."""
    if _append is None or commit_log.store_v6:
        return None
    return _append.Appender(
        commit_log=commit_log, files=commit_log.files, queue_offsets=commit_log.queue_offsets,
        queue_room=queue_room, topic_fields=commit_log.topic_fields,
        store_host=commit_log.store_host, uniq=uniq, result_type=PutMessageResult,
        ok=PutStatus.PUT_OK, max_body=max_body, room_ahead=room_ahead,
    )
