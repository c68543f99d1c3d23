"""Atomic writes of small config files with a ``.bak`` copy, and loads that fall back to it.

:func:`write_atomic` writes the new text to ``<file>.tmp`` and fsyncs it, copies the current
file to ``<file>.bak`` (through ``<file>.bak.tmp``, fsynced, renamed), renames the temp file
over the file and fsyncs the directory: after a crash the file holds either the whole old or
the whole new text, and ``.bak`` a whole earlier version. RocketMQ's ``MixAll.string2File``
does the same steps without the fsyncs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bolide.errors import BolideError, ConfigError

log = logging.getLogger(__name__)

T = TypeVar("T")


def sibling(path: Path, suffix: str) -> Path:
    """``path`` with ``suffix`` appended to its name (``x.json`` -> ``x.json.bak``)."""
    return path.with_name(path.name + suffix)


def backup_path(path: Path) -> Path:
    return sibling(path, ".bak")


def write_synced(path: Path, data: bytes) -> None:
    """Create or truncate ``path``, write ``data`` and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(directory: Path) -> None:
    """fsync a directory so renames in it are durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` keeping the old text in ``.bak`` (module docstring); OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = sibling(path, ".tmp")
    write_synced(tmp, data)
    try:
        previous = path.read_bytes()
    except FileNotFoundError:
        previous = None
    if previous is not None:
        bak_tmp = sibling(path, ".bak.tmp")
        write_synced(bak_tmp, previous)
        os.replace(bak_tmp, backup_path(path))
    os.replace(tmp, path)
    sync_dir(path.parent)


def load_with_backup(path: Path, decode: Callable[[bytes], T], *, what: str) -> T | None:
    """``decode`` of the file, or of its ``.bak`` when the file is missing, empty or undecodable.

    Returns None when neither holds anything. Using the backup is logged as a warning. When
    text exists but none decodes, raises ConfigError naming ``what`` (e.g. "the KV config").
    ``decode`` reports bad content with a BolideError or ValueError.
    """
    errors: list[str] = []  # reasons the content could not be used
    notes: list[str] = []  # why the backup was tried
    for candidate in (path, backup_path(path)):
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            notes.append(f"{candidate} is missing")
            continue
        except OSError as exc:
            errors.append(f"{candidate}: {exc.strerror or exc}")
            continue
        if not data.strip():
            notes.append(f"{candidate} is empty")
            continue  # an empty file holds nothing to lose: try the backup
        try:
            value = decode(data)
        except (BolideError, ValueError) as exc:
            errors.append(f"{candidate}: {exc}")
            continue
        if candidate != path:
            log.warning("loaded %s from its backup %s: %s", what, candidate, "; ".join(errors + notes))
        return value
    if errors:
        raise ConfigError(f"cannot load {what}: " + "; ".join(errors)
                          + ". Repair the file or move it away (and its .bak) to start empty")
    return None
