"""``bolide produce`` (stdin or a file, one message per line) and ``bolide consume`` (JSON lines,
committed offsets) against an in-process NameServer + Broker in a background thread."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bolide.cli.main import cli
from bolide.client.blocking import Admin
from bolide.testing.servers import Servers, running_servers

FIELDS = {"topic", "queueId", "queueOffset", "msgId", "tags", "keys", "body"}


class _Servers:
    def __init__(self, store_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.servers: Servers | None = None
        self.error: BaseException | None = None
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self.main(store_dir),),
                                       daemon=True)

    async def main(self, store_dir: Path) -> None:
        self.stop = asyncio.Event()
        try:
            async with running_servers(store_dir, enable_property_filter=True) as servers:
                self.servers = servers
                self.ready.set()
                await self.stop.wait()
        except BaseException as exc:
            self.error = exc
            self.ready.set()


@pytest.fixture(scope="module")
def ns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    st = _Servers(tmp_path_factory.mktemp("kcat") / "store")
    st.thread.start()
    assert st.ready.wait(30) and st.error is None and st.servers is not None, st.error
    yield st.servers.namesrv_addr
    assert st.stop is not None
    st.loop.call_soon_threadsafe(st.stop.set)
    st.thread.join(30)


def bolide(*args: str, input: str | None = None, ok: bool = True) -> Result:
    result = CliRunner().invoke(cli, list(args), input=input)
    if ok:
        assert result.exit_code == 0, result.output + repr(result.exception)
    return result


def create_topic(ns: str, topic: str, queues: int) -> None:
    with Admin(ns) as admin:
        admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
    bolide("admin", "updateTopic", "-t", topic, "-r", str(queues), "-w", str(queues), "-n", ns)  # waits


def consume(ns: str, *args: str) -> list[dict[str, Any]]:
    result = bolide("consume", "-n", ns, *args)
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_produce_stdin_then_consume_commits(ns: str) -> None:
    create_topic(ns, "KcatLines", 2)
    lines = "".join(f"line {i}\n" for i in range(10)) + "\n"  # the empty line is skipped
    summary = json.loads(bolide("produce", "-n", ns, "-t", "KcatLines", "--tags", "T1", "-O", "json",
                                input=lines).stdout)
    assert summary["sent"] == 10 and sum(q["count"] for q in summary["queues"]) == 10
    table = bolide("produce", "-n", ns, "-t", "KcatLines", "--keys", "k", input="extra\n").stdout
    assert "Sent 1 message(s) to KcatLines" in table

    first = consume(ns, "-t", "KcatLines", "-g", "kcat-cg", "--from", "first", "--count", "4")
    assert len(first) == 4 and all(m.keys() >= FIELDS for m in first)
    assert all(m["topic"] == "KcatLines" and m["tags"] == "T1" for m in first)
    rest = consume(ns, "-t", "KcatLines", "-g", "kcat-cg", "--count", "7", "--timeout", "5")
    bodies = sorted(m["body"] for m in first + rest)
    assert bodies == sorted([f"line {i}" for i in range(10)] + ["extra"])  # no duplicates: committed
    assert [m["keys"] for m in rest if m["body"] == "extra"] == [["k"]]
    nothing = bolide("consume", "-n", ns, "-t", "KcatLines", "-g", "kcat-cg", "--timeout", "0.5")
    assert nothing.stdout == "" and "0 message(s) consumed" in nothing.stderr
    with Admin(ns) as admin:
        assert admin.consumer_progress("kcat-cg").total_lag == 0


def test_consume_from_last_skips_older_messages(ns: str) -> None:
    create_topic(ns, "KcatLast", 1)
    bolide("produce", "-n", ns, "-t", "KcatLast", input="old\n")
    assert consume(ns, "-t", "KcatLast", "-g", "kcat-last", "--from", "last", "--timeout", "0.5") == []
    bolide("produce", "-n", ns, "-t", "KcatLast", input="new\n")
    got = consume(ns, "-t", "KcatLast", "-g", "kcat-last", "--count", "1", "--timeout", "5")
    assert [m["body"] for m in got] == ["new"]


def test_consume_with_a_sql92_selector(ns: str) -> None:
    create_topic(ns, "KcatSql", 1)
    for tag in ("a", "b", "a"):
        bolide("produce", "-n", ns, "-t", "KcatSql", "--tags", tag, "--keys", f"k{tag}", input=f"{tag}\n")
    got = consume(ns, "-t", "KcatSql", "-g", "kcat-sql", "--from", "first", "--sql",
                  "TAGS = 'a' AND KEYS IS NOT NULL", "--count", "2", "--timeout", "5")
    assert [m["body"] for m in got] == ["a", "a"]
    bad = bolide("consume", "-n", ns, "-t", "KcatSql", "-g", "kcat-sql", "--sql", "TAGS =", ok=False)
    assert bad.exit_code == 1 and "not a SQL92 selector" in bad.output
    both = bolide("consume", "-n", ns, "-t", "KcatSql", "-g", "kcat-sql", "--sql", "a = 1", "--tags", "x",
                  ok=False)
    assert both.exit_code == 2 and "not both" in both.output


def test_produce_file_with_key_field(ns: str, tmp_path: Path) -> None:
    create_topic(ns, "KcatKeys", 4)
    path = tmp_path / "orders.jsonl"
    rows = [{"order": {"id": f"o{i % 3}"}, "step": i} for i in range(30)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = json.loads(bolide("produce", "-n", ns, "-t", "KcatKeys", "-f", str(path),
                                "--key-field", "order.id", "--in-flight", "1", "-O", "json").stdout)
    assert summary["sent"] == 30
    got = consume(ns, "-t", "KcatKeys", "-g", "kcat-keys", "--from", "first", "--count", "30",
                  "--timeout", "5")
    assert len(got) == 30
    queue_of_key: dict[str, set[int]] = {}
    for m in got:
        queue_of_key.setdefault(m["keys"][0], set()).add(m["queueId"])
    assert sorted(queue_of_key) == ["o0", "o1", "o2"] and all(len(q) == 1 for q in queue_of_key.values())
    for key in queue_of_key:  # one key, one queue, in the order of the file
        steps = [json.loads(m["body"])["step"] for m in sorted(got, key=lambda m: m["queueOffset"])
                 if m["keys"] == [key]]
        assert steps == sorted(steps)


def test_produce_errors_name_the_fix(ns: str, tmp_path: Path) -> None:
    create_topic(ns, "KcatBad", 1)
    bad = bolide("produce", "-n", ns, "-t", "KcatBad", "--key-field", "id", input='{"id": "a"}\nnot json\n',
                 ok=False)
    assert bad.exit_code == 1 and "line 2 is not JSON" in bad.output
    assert "1 message(s) were sent" in bad.output
    missing = bolide("produce", "-n", ns, "-t", "KcatBad", "--key-field", "id", input='{"x": 1}\n', ok=False)
    assert "line 1 has no field 'id'" in missing.output
    no_route = bolide("consume", "-n", ns, "-t", "KcatNoSuchTopic", "-g", "g", "--timeout", "1", ok=False)
    assert no_route.exit_code == 1 and "has no route" in no_route.output
