"""``bolide store`` on a store written by real Apache RocketMQ 4.9.7: inspect, dump, verify and
query read it (also while the broker runs), and repair refuses it while the broker holds its lock.

Needs java, javac and mvn (see test_store_compat_rocketmq.py): without them the module is
skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from client_roundtrip import unavailable
from test_store_compat_rocketmq import QUEUES, RMQ_TOPIC, RMQ_TOPIC_2, Sent, _broker, send_messages

from bolide.cli.main import cli
from bolide.testing.rocketmq import RocketMQ, RocketMQUnavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(900)]
VERSION = "4.9.7"


@pytest.fixture(scope="module")
def rmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQ]:
    try:
        server = RocketMQ(VERSION, tmp_path_factory.mktemp(f"tools-rocketmq-{VERSION}"))
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    try:
        server.start_namesrv()
        yield server
    finally:
        server.stop()


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["store", *args])
    return result.exit_code, result.output


def test_store_tools_on_a_rocketmq_store(rmq: RocketMQ, tmp_path: Path) -> None:
    root = tmp_path / "store"
    rmq.start_broker(_broker(root))
    try:
        sent, status = send_messages(rmq)
        conf = str(rmq.broker_conf_path)
        # the broker is running: read-only tools work, repair is refused
        code, out = run("inspect", str(root), "-c", conf, "--output", "json")
        assert code == 0, out
        assert json.loads(out)["lock_held"] is True
        code, out = run("repair", str(root), "-c", conf, "--dry-run")
        assert code == 1 and "locked by a running process" in out, out
    finally:
        rmq.stop_broker()
    assert not (root / "abort").exists()

    code, out = run("inspect", str(root), "-c", conf, "--output", "json")
    assert code == 0, out
    info = json.loads(out)
    assert info["lock_held"] is False and info["commit_log"]["end_reason"] == ""
    for topic, queues in status.items():
        for qid, s in queues.items():
            q = info["topics"][topic].get(str(qid), {"min_offset": 0, "max_offset": 0})
            assert (q["min_offset"], q["max_offset"]) == (s.min_offset, s.max_offset), (topic, qid)
    # every ConsumeQueue write sets logicsMsgTimestamp, saved at shutdown; physicMsgTimestamp
    # is only set by a thorough flush, 10 s apart, which a short run may not see
    assert info["index_files"] and info["checkpoint"]["logics_msg_timestamp"] > 0

    code, out = run("verify", str(root), "-c", conf, "--output", "json")
    assert code == 0, out
    report = json.loads(out)
    assert report["ok"] and report["index_files"] >= 1 and report["config_files"] >= 1
    assert report["records"] >= len(sent)

    for qid in range(QUEUES):
        mine = [s for s in sent if (s.topic, s.queue_id) == (RMQ_TOPIC, qid)]
        code, out = run("dump", str(root), "-c", conf, "--topic", RMQ_TOPIC, "--queue", str(qid),
                        "--limit", "100", "--output", "json", "--hex")
        assert code == 0, out
        records = json.loads(out)
        assert [(r["msg_id"], r["body"]) for r in records] == [(s.msg_id, s.body) for s in mine]
        for r in records:
            assert r["fields"][-1]["end"] == r["store_size"]

    first: Sent = next(s for s in sent if s.keys)
    code, out = run("query", str(root), "-c", conf, "--topic", RMQ_TOPIC, "--key", first.keys[0],
                    "--output", "json")
    assert code == 0, out
    found = json.loads(out)
    assert [m["msg_id"] for m in found] == [first.msg_id]
    code, out = run("query", str(root), "-c", conf, "--msg-id", found[0]["offset_msg_id"],
                    "--output", "json")
    assert code == 0 and [m["commit_log_offset"] for m in json.loads(out)] == [
        found[0]["commit_log_offset"]]
    lonely = next(s for s in sent if s.topic == RMQ_TOPIC_2 and s.tags)
    code, out = run("query", str(root), "-c", conf, "--msg-id", lonely.msg_id, "--output", "json")
    assert code == 0 and [m["body"] for m in json.loads(out)] == [lonely.body]
