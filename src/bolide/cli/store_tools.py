"""``bolide store inspect|dump|query|repair``: offline tools on a store directory (Bolide's or
one Apache RocketMQ wrote). All read-only but ``repair``, which refuses a locked store."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from bolide.common.message import MessageExt
from bolide.errors import BolideError
from bolide.store import StoreConfig
from bolide.store.dump import DumpedRecord, dump_commit_log, dump_queue, record_fields
from bolide.store.inspect import format_ms, inspect_store
from bolide.store.query import query_by_key, query_by_msg_id
from bolide.store.repair import apply_repair, plan_repair
from bolide.store.verify import verify_store

OUTPUT = click.option("--output", type=click.Choice(["text", "json"]), default="text",
                      show_default=True, help="Text for people, JSON for scripts.")
CONFIG = click.option("-c", "--config", "conf",
                      help="The broker.conf the store was written with (segment and index sizes).")
STORE_DIR = click.argument("path", type=click.Path(exists=True, file_okay=False))


def store_config(path: str, conf: str | None) -> StoreConfig:
    if conf:
        return StoreConfig.from_properties(conf, store_path_root_dir=path)
    return StoreConfig(store_path_root_dir=path)


def _json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _fail(exc: BolideError) -> click.ClickException:
    return click.ClickException(str(exc))


# -- inspect ------------------------------------------------------------------------------
@click.command("inspect")
@STORE_DIR
@CONFIG
@OUTPUT
def inspect_cmd(path: str, conf: str | None, output: str) -> None:
    """Segments, offsets, topics and queues, index files, checkpoint, compacted queues,
    consumer lag."""
    info = inspect_store(store_config(path, conf))
    if output == "json":
        _json(info)
        return
    cl = info["commit_log"]
    click.echo(f"Store {info['root']}")
    click.echo(f"  lock: {'HELD by a running process' if info['lock_held'] else 'free'}   "
               f"abort file: {'present (last exit unclean)' if info['abort'] else 'absent'}")
    click.echo(f"CommitLog {cl['dir']}: {len(cl['segments'])} segment(s) of {cl['segment_size']} "
               f"bytes, offsets [{cl['min_offset']}, {cl['max_offset']})"
               + (f", chain stops: {cl['end_reason']}" if cl["end_reason"] else ""))
    for seg in cl["segments"]:
        click.echo(f"  {seg['name']}")
    for problem in cl["problems"]:
        click.echo(f"  PROBLEM {problem}")
    cp = info["checkpoint"]
    if cp is None:
        click.echo("Checkpoint: none")
    else:
        click.echo(f"Checkpoint: physic {format_ms(cp['physic_msg_timestamp'])}, logics "
                   f"{format_ms(cp['logics_msg_timestamp'])}, index "
                   f"{format_ms(cp['index_msg_timestamp'])}")
    click.echo("Topics:" if info["topics"] else "Topics: none")
    for topic, queues in info["topics"].items():
        for qid, q in queues.items():
            click.echo(f"  {topic} queue {qid}: offsets [{q['min_offset']}, {q['max_offset']}), "
                       f"{q['count']} messages, {q['files']} file(s)")
    click.echo("Index files:" if info["index_files"] else "Index files: none")
    for f in info["index_files"]:
        if "error" in f:
            click.echo(f"  {f['name']}: {f['error']}")
        else:
            click.echo(f"  {f['name']}: {f['entries']}/{f['max_entries']} entries, stored "
                       f"{format_ms(f['begin_timestamp'])} .. {format_ms(f['end_timestamp'])}, "
                       f"CommitLog {f['begin_phy_offset']} .. {f['end_phy_offset']}")
    _echo_compaction(info["compaction"])
    click.echo("Consumer groups:" if info["consumer_groups"] else "Consumer groups: none")
    for group, topics in info["consumer_groups"].items():
        for topic, rows in topics.items():
            for qid, row in rows.items():
                lag = "?" if row["lag"] is None else row["lag"]
                click.echo(f"  {group} on {topic} queue {qid}: offset {row['offset']}, "
                           f"max {row['max_offset']}, lag {lag}")
    click.echo("Config files: " + ", ".join(f"{k} {v}" for k, v in info["config_files"].items()))


def _echo_compaction(comp: dict[str, Any]) -> None:
    click.echo("Compacted queues:" if comp["queues"] else "Compacted queues: none")
    for q in comp["queues"]:
        kept = (f"offsets {q['first_offset']}..{q['last_offset']} kept" if q["records"]
                else "no records")
        position = "none" if q["position"] is None else q["position"]
        click.echo(f"  {q['topic']} queue {q['queue_id']}: {q['files']} file pair(s), {kept}, "
                   f"{q['records']} records, {q['bytes']} bytes, compacted up to {position}")
        for problem in q["problems"]:
            click.echo(f"    PROBLEM {problem}")
    positions = comp["positions"]
    if positions is not None:
        click.echo("Compaction positions: " + (", ".join(f"{k} {v}" for k, v in positions.items())
                                               or "none"))
    for problem in comp["problems"]:
        click.echo(f"  PROBLEM {problem}")


# -- dump ---------------------------------------------------------------------------------
def _print_record(rec: DumpedRecord | MessageExt, with_hex: bool) -> None:
    if isinstance(rec, MessageExt):
        m, raw = rec, None
    else:
        from bolide.common.records import decode_record
        m, raw = decode_record(rec.raw), rec.raw
    click.echo(f"@{m.commit_log_offset} {m.topic} queue {m.queue_id} offset {m.queue_offset}: "
               f"{m.store_size} bytes, stored {format_ms(m.store_timestamp)} by {m.store_host}, "
               f"born {format_ms(m.born_timestamp)} at {m.born_host}")
    click.echo(f"  msgId {m.msg_id}  offsetMsgId {m.offset_msg_id}  sysFlag 0x{m.sys_flag:X}  "
               f"flag {m.flag}  reconsume {m.reconsume_times}")
    if m.properties:
        click.echo("  properties " + ", ".join(f"{k}={v}" for k, v in m.properties.items()))
    body = m.body.decode("utf-8", "backslashreplace")
    click.echo(f"  body ({len(m.body)} bytes) {body[:200]!r}" + (" ..." if len(body) > 200 else ""))
    if with_hex and raw is not None:
        for f in record_fields(raw):
            data = raw[f.start : f.end]
            if f.name in ("BODY", "PROPERTIES", "TOPIC") and len(data) > 16:
                click.echo(f"  +{f.start:04x} {f.name:<26} {f.value}")
                for i in range(0, len(data), 16):
                    chunk = data[i : i + 16]
                    text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
                    click.echo(f"    {f.start + i:04x}: {chunk.hex(' '):<47}  {text}")
            else:
                click.echo(f"  +{f.start:04x} {f.name:<26} {data.hex(' '):<24} {f.value}")


@click.command()
@STORE_DIR
@CONFIG
@click.option("--topic", help="Dump this topic's queue (with --queue).")
@click.option("--queue", "queue_id", type=int, default=0, show_default=True)
@click.option("--from-offset", type=int, help="First queue offset (default: the queue's first).")
@click.option("--phy-offset", type=int, help="Dump from the record at this CommitLog offset.")
@click.option("--limit", type=int, default=10, show_default=True)
@click.option("--hex", "with_hex", is_flag=True, help="Also the raw bytes, field by field.")
@OUTPUT
def dump(path: str, conf: str | None, topic: str | None, queue_id: int, from_offset: int | None,
         phy_offset: int | None, limit: int, with_hex: bool, output: str) -> None:
    """Decoded records of a queue (--topic/--queue/--from-offset) or from a CommitLog offset."""
    if (topic is None) == (phy_offset is None):
        raise click.UsageError("give either --topic (with --queue, --from-offset) or --phy-offset")
    config = store_config(path, conf)
    try:
        if topic is not None:
            records = dump_queue(config, topic, queue_id, from_offset, limit)
        else:
            assert phy_offset is not None
            records = dump_commit_log(config, phy_offset, limit)
    except BolideError as exc:
        raise _fail(exc) from None
    if output == "json":
        _json([r.to_json(with_hex) for r in records])
        return
    for rec in records:
        _print_record(rec, with_hex)
    if not records:
        click.echo("no records")


# -- query --------------------------------------------------------------------------------
@click.command()
@STORE_DIR
@CONFIG
@click.option("--topic", help="The topic (required with --key).")
@click.option("--key", help="A key of the KEYS property, or a UNIQ_KEY.")
@click.option("--msg-id", help="An offsetMsgId or a UNIQ_KEY (client message id).")
@click.option("--max", "max_num", type=int, default=64, show_default=True)
@OUTPUT
def query(path: str, conf: str | None, topic: str | None, key: str | None, msg_id: str | None,
          max_num: int, output: str) -> None:
    """Find messages by key (--topic T --key K) or by id (--msg-id ID), through the index."""
    if (key is None) == (msg_id is None):
        raise click.UsageError("give either --key (with --topic) or --msg-id")
    config = store_config(path, conf)
    try:
        if key is not None:
            if topic is None:
                raise click.UsageError("--key needs --topic: index keys are per topic")
            found = query_by_key(config, topic, key, max_num)
        else:
            assert msg_id is not None
            found = query_by_msg_id(config, msg_id, topic)
    except BolideError as exc:
        raise _fail(exc) from None
    if output == "json":
        _json([DumpedRecord(m.commit_log_offset, _raw(config, m)).to_json() for m in found])
    else:
        for m in found:
            _print_record(m, False)
        click.echo(f"{len(found)} message(s)")
    sys.exit(0 if found else 1)


def _raw(config: StoreConfig, m: MessageExt) -> bytes:
    from bolide.store.offline import open_commit_log, read_record
    with open_commit_log(config) as log:
        raw = read_record(log, m.commit_log_offset)
    assert raw is not None
    return raw


# -- repair -------------------------------------------------------------------------------
@click.command()
@STORE_DIR
@CONFIG
@click.option("--dry-run", is_flag=True, help="Show what would be done; change nothing.")
@click.option("--rebuild-queues", is_flag=True, help="Rebuild every ConsumeQueue even if sound.")
@click.option("--rebuild-index", is_flag=True, help="Rebuild the index even if sound.")
@click.option("--rebuild-compaction", "rebuild_compaction", multiple=True, metavar="TOPIC[:QUEUE]",
              help="Remove a compacted queue's compaction files (all queues of TOPIC without "
              ":QUEUE); the broker copies them in again from the ConsumeQueue. Repeatable.")
@OUTPUT
def repair(path: str, conf: str | None, dry_run: bool, rebuild_queues: bool, rebuild_index: bool,
           rebuild_compaction: tuple[str, ...], output: str) -> None:
    """Cut a corrupt CommitLog tail, rebuild ConsumeQueues and index, cut compaction files at
    their first bad record (refuses a locked store)."""
    config = store_config(path, conf)
    try:
        plan = plan_repair(config, rebuild_queues, rebuild_index, rebuild_compaction)
        if not dry_run and plan.actions:
            apply_repair(config, plan)
    except BolideError as exc:
        raise _fail(exc) from None
    after = verify_store(config.root, config) if plan.actions and not dry_run else plan.report
    if output == "json":
        _json({**plan.to_json(), "dry_run": dry_run, "ok_after": after.ok,
               "problems_after": [p.to_json() for p in after.problems]})
    else:
        for p in plan.report.problems:
            click.echo(f"PROBLEM {p}")
        if not plan.actions:
            click.echo("nothing to repair: verify found no problems" if plan.report.ok else
                       "no repair action for these problems: follow the fix each one names")
        for action in plan.actions:
            click.echo(("WOULD " if dry_run else "DONE ") + str(action))
        if plan.recovery is not None:
            click.echo(f"recovery: {plan.recovery.summary()}")
        if dry_run and plan.actions:
            click.echo("dry run: nothing was changed; run again without --dry-run to repair")
        elif plan.actions:
            click.echo("verify after repair: " + ("OK" if after.ok else
                                                  f"{len(after.problems)} problem(s) left"))
            for p in after.problems:
                click.echo(f"PROBLEM {p}")
    sys.exit(0 if (dry_run and plan.actions) or after.ok else 1)


COMMANDS = (inspect_cmd, dump, query, repair)
