"""Several read ranges per CommitLog segment: cuts land on record starts found through the
ConsumeQueue, the ranges cover every record exactly once, and ``rocketmq-store`` reads the
same rows split or whole (also restricted to a CommitLog offset range)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from bolide.common.message import Message
from bolide.spark import register
from bolide.spark.store_reader import FORMAT, scan_range
from bolide.spark.store_splits import ReadRange, plan_ranges, queue_indexes, record_start_at_or_after
from bolide.store import MessageStore, StoreConfig

SEGMENT = 64 * 1024


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """Three topics x two queues, bodies of varied sizes over several 64 KiB segments;
    returns the root and every record's CommitLog offset."""
    root = tmp_path_factory.mktemp("splits") / "store"
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT,
                         mapped_file_size_consume_queue=20 * 64)  # CQ files roll over too
    offsets = []
    with MessageStore(config) as s:
        for i in range(600):
            r = s.put_message(Message(f"T{i % 3}", b"x" * (50 + i * 7 % 400), keys=[f"k{i}"]),
                              queue_id=i % 2)
            offsets.append(r.wrote_offset)
        assert s.wait_dispatched()
    return root, offsets


def _segments(root: Path) -> list[tuple[str, int, bool]]:
    files = sorted((root / "commitlog").iterdir(), key=lambda p: int(p.name))
    used = [p for p in files if p.read_bytes()[:8] != bytes(8)]
    return [(str(p), int(p.name), i == len(used) - 1) for i, p in enumerate(used)]


def test_record_start_lookup_through_the_consume_queue(store: tuple[Path, list[int]]) -> None:
    root, offsets = store
    queues = queue_indexes(root / "consumequeue")
    assert len(queues) == 6
    for target in (0, 1, offsets[10], offsets[10] + 1, SEGMENT, offsets[-1]):
        assert record_start_at_or_after(queues, target) == min(o for o in offsets if o >= target)
    assert record_start_at_or_after(queues, offsets[-1] + 1) is None


def test_ranges_cover_every_record_once(store: tuple[Path, list[int]]) -> None:
    root, offsets = store
    ranges = list(plan_ranges(_segments(root), SEGMENT, 8 * 1024, root / "consumequeue"))
    assert len(ranges) > 3 * len(_segments(root))  # several per segment
    assert all(r.begin in offsets or r.begin == r.segment_start for r in ranges)
    assert [r.tail for r in ranges].count(True) == 1 and ranges[-1].tail
    seen = [m.commit_log_offset for r in ranges for m in scan_range(r)]
    assert seen == offsets


def test_min_partitions_cuts_the_data_into_even_ranges(store: tuple[Path, list[int]]) -> None:
    """As Spark splits files over its cores: at least ``min_partitions`` ranges of about equal
    data, the last segment's unused end not counted."""
    root, offsets = store
    segments = _segments(root)
    data = offsets[-1] + 500 - segments[-1][1] + SEGMENT * (len(segments) - 1)  # upper bound
    for parts in (2, 5, 12):
        ranges = list(plan_ranges(segments, SEGMENT, None, root / "consumequeue", parts, min_split=1))
        per_range = [[m.commit_log_offset for m in scan_range(r)] for r in ranges]
        assert [o for got in per_range for o in got] == offsets
        assert sum(1 for got in per_range if got) >= parts
        share = -(-data // parts)
        assert all(r.end - r.begin <= share + 500 for r in ranges if not r.tail), (parts, ranges)
    # below min_split nothing is cut (the default: 4 MiB); max_bytes still applies
    assert len(list(plan_ranges(segments, SEGMENT, None, root / "consumequeue", 12))) == len(segments)


def test_without_consume_queues_a_segment_is_one_range(store: tuple[Path, list[int]],
                                                         tmp_path: Path) -> None:
    root, offsets = store
    ranges = list(plan_ranges(_segments(root), SEGMENT, 8 * 1024, tmp_path / "absent"))
    assert len(ranges) == len(_segments(root))
    assert [m.commit_log_offset for r in ranges for m in scan_range(r)] == offsets


def test_a_stale_consume_queue_entry_is_not_a_cut(store: tuple[Path, list[int]],
                                                  tmp_path: Path) -> None:
    """ConsumeQueue entries pointing into the middle of a record (a foreign or stale queue)
    are checked and skipped."""
    root, offsets = store
    copy = tmp_path / "store"
    shutil.copytree(root, copy)
    cq = copy / "consumequeue" / "T0" / "0"
    first = sorted(cq.iterdir(), key=lambda p: int(p.name))[0]
    data = bytearray(first.read_bytes())
    for i in range(0, 20 * 8, 20):  # shift the first entries' offsets by one byte
        data[i:i + 8] = (int.from_bytes(data[i:i + 8], "big") + 1).to_bytes(8, "big")
    first.write_bytes(bytes(data))
    ranges = list(plan_ranges(_segments(copy), SEGMENT, 2 * 1024, copy / "consumequeue"))
    assert [m.commit_log_offset for r in ranges for m in scan_range(r)] == offsets


@pytest.mark.spark
def test_split_and_whole_reads_give_the_same_rows(spark: Any, store: tuple[Path, list[int]]) -> None:
    root, offsets = store
    register(spark)

    def read(**options: str) -> tuple[int, list[int]]:
        reader = spark.read.format(FORMAT)
        for k, v in options.items():
            reader = reader.option(k, v)
        df = reader.load(str(root))
        rows = [r.commitLogOffset for r in df.select("commitLogOffset").collect()]
        return df.rdd.getNumPartitions(), sorted(rows)

    whole_parts, whole = read()
    split_parts, split = read(maxPartitionBytes="16384")
    assert whole == split == offsets
    assert whole_parts == len(_segments(root)) and split_parts > whole_parts
    lo, hi = offsets[100], offsets[400]
    _, ranged = read(maxPartitionBytes="16384", startOffset=str(lo), endOffset=str(hi))
    assert ranged == offsets[100:400]


def test_range_scan_honours_offset_bounds(store: tuple[Path, list[int]]) -> None:
    root, offsets = store
    path, start, _ = _segments(root)[1]
    rng = ReadRange(path, start, start, start + SEGMENT, False)
    inside = [o for o in offsets if start <= o < start + SEGMENT]
    got = [m.commit_log_offset for m in scan_range(rng, lo=inside[3], hi=inside[-2])]
    assert got == inside[3:-2]
