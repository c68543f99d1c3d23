"""Consumer lag per group / topic / queue, as a Spark DataFrame, a JSON file, a text table and
a PNG chart.

Two inputs:

* **offline**, a store directory (a copy, or the store of a running broker: nothing is
  written): each ``topic@group`` of ``config/consumerOffset.json`` against the max offset of
  each ConsumeQueue of the topic (its queues per ``config/topics.json``, else those on disk);
  Spark tasks read the queues, one task per group of queues;
* **online**, a NameServer address: the brokers' consumer progress through
  :meth:`bolide.client.admin.Admin.consumer_progress` (mqadmin's consumerProgress).

Columns: group, topic, brokerName, queueId, brokerOffset (the queue's max offset),
consumerOffset (the committed next offset; 0 when none), lag = brokerOffset - consumerOffset
(never negative), lagMs = now - store time of the first message not consumed (0 when
nothing is behind; null when that message cannot be read). Online, that message is read with
mqadmin's tools group, which commits nothing.

Example::

    from bolide.spark.jobs.lag_report import lag_report, summarize, write_report

    df = lag_report(spark, store_dir="/data/store")          # or namesrv="127.0.0.1:9876"
    summarize(df).show()                                      # per group/topic: lag, max lagMs
    write_report(df, "lag-out")   # lag-out/report.json, report.txt, lag.png
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from bolide.client.errors import ClientConfigError
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.store.config_files import TOPIC_GROUP_SEPARATOR, ConsumerOffsetManager
from bolide.store.consume_queue import ENTRY, ENTRY_SIZE
from bolide.store.offline import PRE_BLANK_SIZE, Segments, queue_range
from bolide.store.record import RecordInfo, parse_record
from bolide.store.topic_config import TopicConfigManager

COLUMNS = ("group", "topic", "brokerName", "queueId", "brokerOffset", "consumerOffset", "lag", "lagMs")
TOTAL_COLUMNS = ("group", "topic", "queues", "brokerOffset", "consumerOffset", "lag", "maxLagMs")


class LagReportError(ClientConfigError):
    """The lag report cannot be made from the inputs given; the message says what to pass."""


class QueueTask(NamedTuple):
    """One queue of one group, for an offline task."""

    group: str
    topic: str
    queue_id: int
    consumer_offset: int


class ReportFiles(NamedTuple):
    json: Path
    txt: Path
    png: Path


def _schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("group", T.StringType(), False), T.StructField("topic", T.StringType(), False),
        T.StructField("brokerName", T.StringType(), False),
        T.StructField("queueId", T.IntegerType(), False),
        T.StructField("brokerOffset", T.LongType(), False),
        T.StructField("consumerOffset", T.LongType(), False),
        T.StructField("lag", T.LongType(), False), T.StructField("lagMs", T.LongType(), True)])


def _lag_ms(lag: int, stored_ms: int | None, now_ms: int) -> int | None:
    if lag == 0:
        return 0
    return None if not stored_ms or stored_ms <= 0 else max(now_ms - stored_ms, 0)


# -- offline: executors ---------------------------------------------------------------------------
def _segment_size(directory: Path) -> int | None:
    """The size of the first segment file in ``directory`` (all must have it), None if none."""
    if not directory.is_dir():
        return None
    names = sorted(p for p in directory.iterdir() if p.is_file() and p.name.isdigit())
    return names[0].stat().st_size if names else None


def _store_time(log: Segments, queue: Segments, index: int) -> int | None:
    """Store time of the message at ``index`` of a queue, read through its ConsumeQueue entry."""
    found = queue.find(index * ENTRY_SIZE)
    if found is None:
        return None
    start, m = found
    phys, size, _ = ENTRY.unpack_from(m, index * ENTRY_SIZE - start)
    if phys < 0 or size <= 0 or size == PRE_BLANK_SIZE:
        return None
    seg = log.find(phys)
    if seg is None:
        return None
    info = parse_record(seg[1], phys - seg[0], False)
    return info.store_timestamp if type(info) is RecordInfo and info.size else None


def offline_rows(store_dir: str, broker_name: str, now_ms: int, tasks: Iterable[QueueTask]
                 ) -> Iterator[tuple[Any, ...]]:
    """The rows of ``tasks`` (a Spark task): each queue's max offset and the store time of the
    first message not consumed, read from the store's files (mapped read-only)."""
    root = Path(store_dir)
    log_dir = root / "commitlog"
    with Segments.open(log_dir, _segment_size(log_dir) or 1) as log:
        queues: dict[tuple[str, int], tuple[Segments, int, int]] = {}
        try:
            for t in tasks:
                key = (t.topic, t.queue_id)
                if key not in queues:
                    qdir = root / "consumequeue" / t.topic / str(t.queue_id)
                    segs = Segments.open(qdir, _segment_size(qdir) or ENTRY_SIZE)
                    queues[key] = (segs, *queue_range(segs, log.start))
                segs, low, high = queues[key]
                lag = max(high - t.consumer_offset, 0)
                stored = _store_time(log, segs, max(t.consumer_offset, low)) if lag else None
                yield (t.group, t.topic, broker_name, t.queue_id, high, t.consumer_offset, lag,
                       _lag_ms(lag, stored, now_ms))
        finally:
            for segs, _, _ in queues.values():
                segs.close()


# -- offline and online: driver -------------------------------------------------------------------
def offline_tasks(store_dir: str | Path, groups: Sequence[str] | None = None) -> list[QueueTask]:
    """Every (group, topic, queue) of ``consumerOffset.json`` (``groups`` only, when given): the
    topic's queues per ``topics.json``, else those on disk, plus every committed one."""
    root = Path(store_dir)
    offsets = ConsumerOffsetManager.in_store(root)
    offsets.load()
    topics = TopicConfigManager.in_store(root)
    topics.load()
    wanted = set(groups) if groups is not None else None
    tasks: list[QueueTask] = []
    for key, committed in sorted(offsets.snapshot().items()):
        topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
        if wanted is not None and group not in wanted:
            continue
        tc = topics.get(topic)
        if tc is not None:
            ids = set(range(tc.read_queue_nums))
        else:
            qdir = root / "consumequeue" / topic
            ids = {int(p.name) for p in qdir.iterdir() if p.name.isdigit()} if qdir.is_dir() else set()
        for qid in sorted(ids | set(committed)):
            tasks.append(QueueTask(group, topic, qid, max(committed.get(qid, 0), 0)))
    return tasks


def online_rows(namesrv: str, groups: Sequence[str] | None, now_ms: int) -> list[tuple[Any, ...]]:
    """The rows of every group (default: those with a retry topic, as mqadmin lists them)."""
    from bolide.client.blocking import Admin

    rows: list[tuple[Any, ...]] = []
    with Admin(namesrv) as admin:
        names = list(groups) if groups is not None else sorted(
            t[len(RETRY_GROUP_TOPIC_PREFIX):] for t in admin.topic_list()
            if t.startswith(RETRY_GROUP_TOPIC_PREFIX))
        for group in names:
            for q in admin.consumer_progress(group).queues:
                mq = q.queue
                stored = None
                if q.lag:
                    first = admin.read_messages(mq, q.consumer_offset, 1)
                    stored = first[0].store_timestamp if first else q.earliest_ms
                rows.append((group, mq.topic, mq.broker_name, mq.queue_id, q.broker_offset,
                             q.consumer_offset, q.lag, _lag_ms(q.lag, stored, now_ms)))
    return rows


def lag_report(spark: Any, *, store_dir: str | Path | None = None, namesrv: str | None = None,
               groups: Sequence[str] | None = None, broker_name: str = "broker-a",
               now_ms: int | None = None) -> Any:
    """Lag per group / topic / queue (columns :data:`COLUMNS`) of a store directory or of the
    brokers a NameServer knows; exactly one of ``store_dir`` and ``namesrv``.

    ``groups`` limits the report to those consumer groups. ``broker_name`` names the store's
    broker in offline rows (a store does not record it). ``now_ms`` is the time lagMs counts
    to (default: now).
    """
    if (store_dir is None) == (namesrv is None):
        raise LagReportError("pass exactly one input: store_dir= (a store directory, read offline) "
                             "or namesrv= (a NameServer address, asked online)")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    schema = _schema()
    if namesrv is not None:
        return spark.createDataFrame(online_rows(namesrv, groups, now), schema)
    root = Path(store_dir)  # type: ignore[arg-type]
    if not (root / "commitlog").is_dir():
        raise LagReportError(f"{root} holds no commitlog/ directory: pass a store directory "
                             "(storePathRootDir)")
    tasks = offline_tasks(root, groups)
    if not tasks:
        return spark.createDataFrame([], schema)
    sc = spark.sparkContext
    # one task per group of queues: each opens the CommitLog once, each queue once
    by_queue = sorted(tasks, key=lambda t: (t.topic, t.queue_id, t.group))
    rdd = sc.parallelize(by_queue, max(1, min(len(by_queue), sc.defaultParallelism)))
    rows = rdd.mapPartitions(partial(offline_rows, str(root.resolve()), broker_name, now))
    return spark.createDataFrame(rows, schema)


def summarize(df: Any) -> Any:
    """Per group / topic: queues, summed offsets and lag, and the largest lagMs (columns
    :data:`TOTAL_COLUMNS`)."""
    from pyspark.sql import functions as F

    return (df.groupBy("group", "topic")
            .agg(F.count("*").alias("queues"), F.sum("brokerOffset").alias("brokerOffset"),
                 F.sum("consumerOffset").alias("consumerOffset"), F.sum("lag").alias("lag"),
                 F.max("lagMs").alias("maxLagMs"))
            .orderBy("group", "topic"))


# -- output ---------------------------------------------------------------------------------------
def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """An aligned text table: text left, numbers right, null as ``-``."""
    cells = [[("-" if r[c] is None else str(r[c])) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    numeric = [all(r[c] is None or isinstance(r[c], int) for r in rows) and bool(rows)
               for c in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    out = [line(list(columns)), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    return "\n".join(out) + "\n"


def draw_chart(totals: Sequence[dict[str, Any]], path: Path) -> None:
    """A horizontal bar chart of the lag of each group / topic (matplotlib, Agg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    labels = [f"{t['group']} / {t['topic']}" for t in totals]
    values = [t["lag"] or 0 for t in totals]
    fig = Figure(figsize=(9, max(2.5, 0.5 * len(totals) + 1.4)), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if totals:
        bars = ax.barh(range(len(totals)), values, color="#d9534f")
        ax.set_yticks(range(len(totals)), labels=labels)
        ax.invert_yaxis()  # first group at the top, as in the table
        top = max(values) or 1
        ax.set_xlim(0, top * 1.35)
        for bar, t in zip(bars, totals, strict=True):
            ms = "-" if t["maxLagMs"] is None else f"{t['maxLagMs']:,} ms"
            ax.text(bar.get_width() + top * 0.01, bar.get_y() + bar.get_height() / 2,
                    f"{t['lag']:,} msgs, max {ms}", va="center", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no consumer offsets", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("messages behind (lag)")
    ax.set_title("Consumer lag per group / topic")
    fig.tight_layout()
    fig.savefig(path, format="png")


def write_report(df: Any, out_dir: str | Path) -> ReportFiles:
    """Write ``report.json`` (rows and per group/topic totals), ``report.txt`` (the same as
    aligned tables) and ``lag.png`` (lag per group / topic) to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cached = not df.is_cached
    if cached:  # the rows and the totals come from one computation of the lag (one store read)
        df.persist()
    try:
        rows = [r.asDict() for r in df.orderBy("group", "topic", "brokerName", "queueId").collect()]
        totals = [r.asDict() for r in summarize(df).collect()]
    finally:
        if cached:
            df.unpersist()
    files = ReportFiles(out / "report.json", out / "report.txt", out / "lag.png")
    files.json.write_text(json.dumps({"rows": rows, "totals": totals}, indent=2) + "\n")
    files.txt.write_text(format_table(rows, COLUMNS) + "\n" + format_table(totals, TOTAL_COLUMNS))
    draw_chart(totals, files.png)
    return files
