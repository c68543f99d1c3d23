"""Unclean shutdowns of a store opened in this process, for recovery tests.

:func:`crash` leaves a store's directory as a crash at the moment of the call would: the
``abort`` file present, the ConsumeQueues and checkpoint as far as they had been written
(dispatch may lag behind the CommitLog), optionally without what had not been flushed yet
(a power loss) and with a torn record after the CommitLog's end. It works from outside the
store: it copies the files that a clean close would change, closes the store, and puts the
copies back.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bolide.store import MessageStore

# Files of the store root a close rewrites or deletes; taken first so that the ConsumeQueues
# copied after them are never older than what the checkpoint claims about them.
_FIRST = ("checkpoint", "abort")
_LOCK = "lock"


@dataclass(frozen=True, slots=True)
class Crash:
    """What :func:`crash` left: the CommitLog offset kept and how many torn bytes follow it."""

    kept: int
    torn: int


def pause_dispatch(store: MessageStore) -> None:
    """Dispatch nothing written from now on, so that ConsumeQueues lag behind the CommitLog
    (what a crash between a put and its dispatch leaves). Only for a store about to :func:`crash`:
    it cannot be resumed, and a clean close would leave the store inconsistent.
    """
    dispatcher = store.dispatcher
    dispatcher.limit = lambda: dispatcher.reput_from


def crash(store: MessageStore, *, lose_unflushed: bool = False, queues_survive: bool = False,
          torn_tail: bytes = b"") -> Crash:
    """Close ``store`` as if its process (or, with ``lose_unflushed``, its machine) had died.

    No message may be being put while this runs. Dispatch and the flush services may still
    run; the files keep whatever state they have when they are copied.

    ``lose_unflushed``: also lose what the OS had not written to disk yet, i.e. CommitLog
    bytes past the flushed offset and ConsumeQueue bytes past each file's flushed position
    (they become zeros, as a fresh file reads); with ``queues_survive`` the ConsumeQueues
    lose nothing (their own flush had come first), so they may point past the CommitLog's
    end. ``torn_tail``: bytes written at the kept end
    of the CommitLog, as a record cut short by the crash would leave them (only as many as
    fit in the segment; nothing when no segment starts there).
    """
    root = store.root
    cl_dir = store.config.commit_log_dir
    cq_keep: dict[Path, int] | None = None
    if lose_unflushed:
        # read the flushed positions before copying: every byte below them is in the copy
        keep = store.commit_log.flushed_offset
        if not queues_survive:
            cq_keep = {mf.path: mf.flushed_position
                       for cq in store.consume_queues() for mf in list(cq.files.files)}
    else:
        keep = store.commit_log.max_offset
    image = _snapshot(root, cl_dir)
    store.close()
    _restore(root, cl_dir, image)
    (root / "abort").touch()
    if lose_unflushed:
        _zero_from_offset(cl_dir, store.config.mapped_file_size_commit_log, keep)
    if cq_keep is not None:
        for path in _files(store.config.consume_queue_dir):
            _zero_file_from(path, cq_keep.get(path, 0))
    torn = 0
    if torn_tail:
        size = store.config.mapped_file_size_commit_log
        path = cl_dir / f"{keep - keep % size:020d}"
        if path.is_file():
            pos = keep % size
            torn = min(len(torn_tail), size - pos)
            _write_at(path, pos, torn_tail[:torn])
    return Crash(keep, torn)


def _files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*") if p.is_file())


def _snapshot(root: Path, cl_dir: Path) -> tuple[set[Path], dict[Path, bytes]]:
    """Directories and file contents under ``root`` (CommitLog contents are not needed: a
    close does not change them)."""
    contents: dict[Path, bytes] = {}
    for name in _FIRST:
        path = root / name
        if path.is_file():
            contents[path] = path.read_bytes()
    dirs: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        dirs.update(base / d for d in dirnames)
        for name in filenames:
            path = base / name
            if path in contents or path == root / _LOCK:
                continue
            contents[path] = b"" if path.parent == cl_dir else path.read_bytes()
    return dirs, contents


def _restore(root: Path, cl_dir: Path, image: tuple[set[Path], dict[Path, bytes]]) -> None:
    dirs, contents = image
    for dirpath, dirnames, filenames in os.walk(root, topdown=True):
        base = Path(dirpath)
        for name in filenames:
            path = base / name
            if path not in contents and path != root / _LOCK:
                path.unlink()
        for d in list(dirnames):
            if base / d not in dirs:
                shutil.rmtree(base / d)
                dirnames.remove(d)
    for path, data in contents.items():
        if path.parent == cl_dir:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)


def _zero_from_offset(directory: Path, segment_size: int, offset: int) -> None:
    for path in _files(directory):
        if path.name.isdigit():
            start = int(path.name)
            _zero_file_from(path, min(segment_size, max(0, offset - start)))


def _zero_file_from(path: Path, position: int) -> None:
    size = path.stat().st_size
    if position < size:
        _write_at(path, position, bytes(size - position))


def _write_at(path: Path, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)
