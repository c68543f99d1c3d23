"""The ``archive`` job: old CommitLog segments exported to Parquet before retention deletes them.

A segment is archived whole once its newest message (by store time) is older than
``older_than_hours``; the last segment holding data (the one being written) never is. Like
retention, the job walks the segments oldest first and stops at the first one not old enough.
Rows have the columns of the ``rocketmq-store`` source plus ``date`` (``YYYY-MM-DD``, the UTC
day of ``storeTimestamp``), laid out as ``out_dir/topic=<topic>/date=<date>/part-*.parquet``.

``out_dir/_bolide_manifest.json`` is the truth about what is archived: one entry per exported
segment (file name, its byte range ``[start_offset, end_offset)``, rows, Parquet bytes, export
time, the Parquet files written). A run writes into ``out_dir/_staging-<id>``, moves the files
into place, then replaces the manifest atomically; a re-run skips the segments it lists.
Parquet files it does not list (a run cut short) are deleted by the next run, and
:func:`read_archive_and_live` reads only listed files, so an interrupted run shows no half
data. Segments deleted from the store later stay listed.

Example::

    from pyspark.sql import SparkSession
    from bolide.spark.jobs.archive import archive, read_archive_and_live

    spark = SparkSession.builder.master("local[*]").getOrCreate()
    result = archive(spark, "/data/store", "/data/archive", older_than_hours=48)
    print(result.segments_exported, result.rows, result.bytes, result.manifest_path)
    df = read_archive_and_live(spark, "/data/archive", "/data/store")  # every message once
    df.where("topic = 'Orders' AND date = '2024-05-01'").count()
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bolide.spark.schema import COLUMNS, spark_schema
from bolide.spark.store_reader import FORMAT, Segment, StoreOptions, plan_segments
from bolide.store.record import RecordError, parse_record

MANIFEST = "_bolide_manifest.json"
LOCK = "_bolide_archive.lock"
STAGING_PREFIX = "_staging-"
MANIFEST_VERSION = 1
ARCHIVE_COLUMNS = (*COLUMNS, "date")
_HOUR_MS = 3_600_000
_ZERO_END = "end of data (zero bytes)"


@dataclass(frozen=True, slots=True)
class ArchiveResult:
    """What one :func:`archive` run did. ``bytes`` counts the Parquet bytes it wrote."""

    segments_exported: tuple[str, ...]  # CommitLog file names, oldest first
    segments_skipped: tuple[str, ...]  # in the store and already in the manifest
    rows: int
    bytes: int
    manifest_path: str


@dataclass(frozen=True, slots=True)
class _Survey:
    """A segment's messages as the driver sees them: the newest store time and a count."""

    segment: Segment
    newest_ms: int | None  # None: no message at all
    rows: int  # of the archived topics
    used_bytes: int  # where its records end


# -- the store and the output directory --------------------------------------------------
def _commit_log_dir(store_dir: str | os.PathLike[str]) -> Path:
    root = Path(store_dir)
    if (root / "commitlog").is_dir():
        return root / "commitlog"
    if root.is_dir() and (root.name == "commitlog" or any(
            p.name.isdigit() and len(p.name) == 20 for p in root.iterdir())):
        return root
    raise ValueError(f"{store_dir} is not a message store: pass the store directory that holds "
                     "commitlog/ (storePathRootDir of the broker) or its commitlog/ directory")


def _out_dir(out_dir: str | os.PathLike[str]) -> Path:
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f"{STAGING_PREFIX}probe-{uuid.uuid4().hex}"
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise ValueError(f"cannot write to the archive directory {out_dir} ({exc.strerror or exc}): "
                         "pass a directory you can create and write, or fix its permissions") from exc
    return out


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    with open(out / LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another archive run is writing to {out}; wait for it to end "
                               "and run again") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# -- the manifest -------------------------------------------------------------------------
def load_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of ``out_dir`` (an empty one when there is none yet)."""
    path = Path(out_dir) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {"version": MANIFEST_VERSION, "topics": None, "segment_size": None, "segments": []}
    if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
        raise ValueError(f"{path} is not a version {MANIFEST_VERSION} archive manifest: archive "
                         "into a new directory")
    return data


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """Replace the manifest atomically: temp file, fsync, rename, fsync of the directory."""
    tmp = out / f"{MANIFEST}.tmp-{uuid.uuid4().hex}"
    try:
        with open(tmp, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out / MANIFEST)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(out)


def _listed_files(manifest: dict[str, Any]) -> list[str]:
    return [f for seg in manifest["segments"] for f in seg["parquet_files"]]


def _remove_unlisted(out: Path, manifest: dict[str, Any]) -> None:
    """Delete what a run cut short left: staging directories and Parquet files not listed."""
    for staging in out.glob(STAGING_PREFIX + "*"):
        shutil.rmtree(staging, ignore_errors=True)
    for tmp in out.glob(MANIFEST + ".tmp-*"):
        tmp.unlink(missing_ok=True)
    listed = set(_listed_files(manifest))
    for part in out.glob("topic=*"):
        for path in sorted(part.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if path.is_file() and path.relative_to(out).as_posix() not in listed:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        if not any(part.iterdir()):
            part.rmdir()


# -- choosing segments ---------------------------------------------------------------------
def _survey(seg: Segment, topics: frozenset[str]) -> _Survey:
    """Walk the record headers of a finished segment (no body is decoded)."""
    newest: int | None = None
    rows = pos = 0
    with open(seg.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        while True:
            info = parse_record(m, pos, False)
            if type(info) is RecordError:
                if info.reason == _ZERO_END:
                    break
                raise OSError(f"CommitLog file {seg.path}: unreadable record at byte {pos} "
                              f"({info.reason}); check the store with `bolide store verify`")
            if info.size == 0:  # BLANK: the rest of the segment is unused
                break
            newest = info.store_timestamp if newest is None else max(newest, info.store_timestamp)
            if not topics or info.topic in topics:
                rows += 1
            pos += info.size
    return _Survey(seg, newest, rows, pos)


def _topic_set(topics: str | Iterable[str] | None) -> frozenset[str]:
    if topics is None:
        return frozenset()
    items = topics.split(",") if isinstance(topics, str) else topics
    return frozenset(t.strip() for t in items if t.strip())


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _in_ranges(ranges: list[tuple[int, int]]) -> Any:
    from pyspark.sql import functions as F

    col = F.col("commitLogOffset")
    cond = F.lit(False)
    for start, end in ranges:
        cond = cond | ((col >= start) & (col < end))
    return cond


def _with_date(df: Any) -> Any:
    """Add ``date``: the UTC day of storeTimestamp, whatever the session time zone."""
    from pyspark.sql import functions as F

    days = F.floor(F.unix_millis(F.col("storeTimestamp")) / 86_400_000).cast("int")
    return df.withColumn("date", F.date_add(F.lit("1970-01-01").cast("date"), days).cast("string"))


def _archive_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType([*spark_schema().fields, T.StructField("date", T.StringType(), True)])


# -- writing --------------------------------------------------------------------------------
def _rows_by_segment(path: Path, size: int) -> Counter[int]:
    """Rows of one Parquet file per segment start, from its commitLogOffset statistics."""
    import pyarrow.parquet as pq

    counts: Counter[int] = Counter()
    pf = pq.ParquetFile(path)
    for i in range(pf.num_row_groups):
        rg = pf.metadata.row_group(i)
        stats = next((rg.column(j).statistics for j in range(rg.num_columns)
                      if rg.column(j).path_in_schema == "commitLogOffset"), None)
        if stats is not None and stats.has_min_max and stats.min // size == stats.max // size:
            counts[stats.min // size * size] += rg.num_rows
        else:
            for value in pf.read_row_group(i, columns=["commitLogOffset"]).column(0).to_pylist():
                counts[value // size * size] += 1
    return counts


def _read_store(spark: Any, store_dir: str, topics: Iterable[str],
                ranges: list[tuple[int, int | None]]) -> Any:
    """The ``rocketmq-store`` rows of the records starting in any of ``ranges`` (an end of None:
    to the end of the store), through its startOffset/endOffset options, so only the segments
    of those ranges are scanned."""
    dfs = []
    for start, end in ranges:
        reader = spark.read.format(FORMAT).option("startOffset", str(start))
        if end is not None:
            reader = reader.option("endOffset", str(end))
        if topics:
            reader = reader.option("topic", ",".join(sorted(topics)))
        dfs.append(reader.load(store_dir))
    out = dfs[0]
    for df in dfs[1:]:
        out = out.unionByName(df)
    return out


def _export(spark: Any, store_dir: str, staging: Path, topics: frozenset[str],
            chosen: list[_Survey]) -> None:
    ranges = _merge((s.segment.start, s.segment.start + s.used_bytes) for s in chosen)
    df = _read_store(spark, store_dir, topics, list(ranges))
    _with_date(df).write.partitionBy("topic", "date").parquet(str(staging))


def _move_into_place(out: Path, staging: Path) -> list[str]:
    """Move the Parquet files of ``staging`` to the same place under ``out``, durably."""
    moved: list[str] = []
    dirs: set[Path] = set()
    for path in sorted(staging.rglob("*.parquet")):
        rel = path.relative_to(staging)
        target = out / rel
        if target.exists():
            raise FileExistsError(f"{target} exists already; remove it and run again")
        with open(path, "rb") as f:
            os.fsync(f.fileno())
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        moved.append(rel.as_posix())
        dirs.update(target.parents[i] for i in range(len(rel.parts)))
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        _fsync_dir(d)
    return moved


def archive(spark: Any, store_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str],
            older_than_hours: float, now_ms: int | None = None,
            topics: str | Iterable[str] | None = None) -> ArchiveResult:
    """Export to Parquet the segments of ``store_dir`` whose newest message is older than
    ``older_than_hours`` (against ``now_ms``, default the clock) and not yet in ``out_dir``'s
    manifest. ``topics`` (a list or a comma-separated string) limits the rows to those topics;
    an archive directory keeps the topic set of its first run."""
    from bolide.spark import register

    if not older_than_hours >= 0:
        raise ValueError(f"older_than_hours must be 0 or more, not {older_than_hours!r}")
    commit_log = _commit_log_dir(store_dir)
    out = _out_dir(out_dir)
    wanted = _topic_set(topics)
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    cutoff = now - round(older_than_hours * _HOUR_MS)
    with _locked(out):
        manifest = load_manifest(out)
        if not (out / MANIFEST).exists():
            others = [p.name for p in out.iterdir()
                      if p.name != LOCK and not p.name.startswith(STAGING_PREFIX)]
            if others:
                raise ValueError(f"{out} is not empty and holds no {MANIFEST}: archive into a new "
                                 "or empty directory")
            manifest["topics"] = sorted(wanted) or None
            _write_manifest(out, manifest)  # from now on, files it does not list are leftovers
        if sorted(manifest["topics"] or ()) != sorted(wanted):
            raise ValueError(f"{out} archives topics {manifest['topics'] or 'all'}, not "
                             f"{sorted(wanted) or 'all'}: archive other topics into another directory")
        _remove_unlisted(out, manifest)

        segments = plan_segments(StoreOptions(str(commit_log), wanted))
        size = manifest["segment_size"]
        if segments:
            seg_size = Path(segments[0].path).stat().st_size
            if size is not None and size != seg_size:
                raise ValueError(f"{out} archives a store with {size}-byte segments but "
                                 f"{commit_log} has {seg_size}-byte ones: use another directory")
            size = seg_size
        done = {s["file"] for s in manifest["segments"]}
        skipped = tuple(Path(s.path).name for s in segments if Path(s.path).name in done)
        chosen: list[_Survey] = []
        for seg in segments:
            if seg.tail:
                break
            if Path(seg.path).name in done:
                continue
            survey = _survey(seg, wanted)
            if survey.newest_ms is not None and survey.newest_ms >= cutoff:
                break  # retention deletes oldest first: so does the archive
            chosen.append(survey)
        if not chosen:
            return ArchiveResult((), skipped, 0, 0, str(out / MANIFEST))

        staging = out / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
        moved: list[str] = []
        try:
            if any(s.rows for s in chosen):
                register(spark)
                _export(spark, str(commit_log), staging, wanted, chosen)
                moved = _move_into_place(out, staging)
            entries = _entries(out, chosen, moved, size)
            manifest["segment_size"] = size
            manifest["segments"] = sorted([*manifest["segments"], *entries],
                                          key=lambda e: e["start_offset"])
            _write_manifest(out, manifest)
        except BaseException:
            _remove_unlisted(out, load_manifest(out))  # back out: nothing unlisted stays visible
            raise
        shutil.rmtree(staging, ignore_errors=True)
        return ArchiveResult(tuple(Path(s.segment.path).name for s in chosen), skipped,
                             sum(e["rows"] for e in entries), sum(e["bytes"] for e in entries),
                             str(out / MANIFEST))


def _entries(out: Path, chosen: list[_Survey], moved: list[str], size: int) -> list[dict[str, Any]]:
    """The manifest entries of the exported segments; their rows are checked against the walk."""
    files: dict[int, list[str]] = {s.segment.start: [] for s in chosen}
    rows: Counter[int] = Counter()
    nbytes: Counter[int] = Counter()
    for rel in moved:
        counts = _rows_by_segment(out / rel, size)
        length = (out / rel).stat().st_size
        total = sum(counts.values())
        for start, n in counts.items():
            if start not in files:
                raise RuntimeError(f"{rel} holds rows of the segment at offset {start}, which was "
                                   "not chosen for export; report this as a bug")
            files[start].append(rel)
            rows[start] += n
            nbytes[start] += length * n // total
    at = time.time()
    entries = []
    for s in chosen:
        start = s.segment.start
        if rows[start] != s.rows:
            raise RuntimeError(f"segment {Path(s.segment.path).name}: {rows[start]} rows written "
                               f"but it holds {s.rows} messages; nothing was archived, run again")
        entries.append({
            "file": Path(s.segment.path).name, "start_offset": start, "end_offset": start + size,
            "rows": rows[start], "bytes": nbytes[start], "commitlog_bytes": s.used_bytes,
            "newest_store_timestamp_ms": s.newest_ms, "exported_at_ms": int(at * 1000),
            "exported_at": datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds"),
            "parquet_files": sorted(files[start]),
        })
    return entries


# -- reading ---------------------------------------------------------------------------------
def read_archive_and_live(spark: Any, out_dir: str | os.PathLike[str],
                          store_dir: str | os.PathLike[str]) -> Any:
    """One DataFrame (columns of ``rocketmq-store`` plus ``date``) over the archived rows and the
    rows of the store not archived: every message once, wherever it is now."""
    from pyspark.sql import functions as F

    from bolide.spark import register

    commit_log = _commit_log_dir(store_dir)
    out = Path(out_dir)
    manifest = load_manifest(out)
    files = [str(out / rel) for rel in _listed_files(manifest)]
    if files:
        archived = (spark.read.schema(_archive_schema()).option("basePath", str(out))
                    .parquet(*files).select(*ARCHIVE_COLUMNS))
    else:
        archived = spark.createDataFrame([], _archive_schema())
    register(spark)
    ranges = _merge((s["start_offset"], s["end_offset"]) for s in manifest["segments"])
    if manifest["topics"]:  # archived ranges still hold the other topics' rows
        live = spark.read.format(FORMAT).load(str(commit_log))
        live = live.where(~(_in_ranges(ranges) & F.col("topic").isin(manifest["topics"])))
    else:  # the gaps between archived ranges, and what follows them
        ends = [0] + [end for _, end in ranges]
        starts: list[int | None] = [start for start, _ in ranges] + [None]
        live = _read_store(spark, str(commit_log), (), [(a, b) for a, b in zip(ends, starts, strict=True)
                                                         if b is None or a < b])
    live = _with_date(live).select(*ARCHIVE_COLUMNS)
    return archived.unionByName(live)
