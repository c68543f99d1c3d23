"""``bolide admin updateStaticTopic`` and ``remappingStaticTopic`` against a NameServer and two
brokers in-process: a static topic made on broker-a, its logic queues moved to broker-b, then
spread over both from a mapping file; messages sent before and after each move are all consumed
at their logic offsets through the logic queues."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli_admin import ServerThread, admin_json, bolide, wait_for

from bolide.client import ConsumeFrom, Message, MessageQueue
from bolide.client.admin_static import StaticTopicAdminCalls
from bolide.client.blocking import Admin, Producer, PullConsumer
from bolide.common.fastjson import loads
from bolide.protocol.bodies.static_topic import mock_broker_name
from bolide.protocol.static_topic_plan import remapping_plan
from bolide.remoting import RemotingConnectError
from bolide.testing.servers import another_broker

TOPIC = "CliStatic"
QUEUES = 4


class TwoBrokers(ServerThread):
    """The NameServer and broker-a of ServerThread, and broker-b in the same cluster."""

    def start_b(self, store_dir: Path) -> None:
        async def run() -> None:
            assert self.servers is not None
            self.b_cm = another_broker(self.servers, store_dir)
            self.b = await self.b_cm.__aenter__()

        self.run(run())

    def stop_b(self) -> None:
        self.run(self.b_cm.__aexit__(None, None, None))


@contextlib.contextmanager
def two_brokers(tmp_path: Path) -> Iterator[tuple[TwoBrokers, str, Path]]:
    """broker-a and broker-b registered with the NameServer; (servers, its address, a directory
    for the mapping files). Both stopped at the end."""
    st = TwoBrokers(tmp_path / "a")
    st.thread.start()
    assert st.ready.wait(30) and st.error is None, st.error
    st.start_b(tmp_path / "b")
    try:
        assert st.servers is not None
        ns, files = st.servers.namesrv_addr, tmp_path / "files"
        files.mkdir()
        with Admin(ns) as admin:
            wait_for(lambda: len(admin.cluster_info().broker_addr_table) == 2)
        yield st, ns, files
    finally:
        st.stop_b()
        st.stop()


def leaders(st: TwoBrokers) -> dict[str, dict[int, int]]:
    """The NameServer's route of TOPIC: each broker's logic queue -> physical queue."""
    assert st.servers is not None
    route = st.servers.namesrv.processor.routes.pick_topic_route_data(TOPIC)
    if route is None or not route.topic_queue_mapping_by_broker:
        return {}
    return {b: dict(info.curr_id_map) for b, info in route.topic_queue_mapping_by_broker.items()}


def send(ns: str, start: int, n: int) -> list[int]:
    """Send messages ``start..start+n-1`` round the logic queues; their logic offsets."""
    offsets = []
    with Producer(ns, "cli-static-pg") as producer:
        for i in range(start, start + n):
            mq = MessageQueue(TOPIC, mock_broker_name(), i % QUEUES)
            offsets.append(producer.send(Message(TOPIC, b"m%d" % i), queue=mq).queue_offset)
    return offsets


def consume_all(ns: str, group: str, n: int) -> dict[int, list[tuple[int, bytes]]]:
    """Every message of the logic queues from their start: (logic offset, body) by queue."""
    got: dict[int, list[tuple[int, bytes]]] = {q: [] for q in range(QUEUES)}
    with PullConsumer(ns, group, consume_from=ConsumeFrom.FIRST_OFFSET, poll_timeout_ms=500) as consumer:
        consumer.assign([MessageQueue(TOPIC, mock_broker_name(), q) for q in range(QUEUES)])
        consumer.start()

        def done() -> bool:
            for m in consumer.poll():
                got[m.queue_id].append((m.queue_offset, m.body))
            return sum(len(v) for v in got.values()) >= n

        wait_for(done, 30)
    return got


def test_update_and_remap_a_static_topic(tmp_path: Path) -> None:
    with two_brokers(tmp_path) as (st, ns, files):

        # create: every logic queue on broker-a; broker-b gets the topic without queues
        made = admin_json(ns, "updateStaticTopic", "-t", TOPIC, "-qn", str(QUEUES), "-b", "broker-a",
                          "--tmp-dir", str(files))
        assert made["type"] == "CREATE_OR_UPDATE" and made["totalQueues"] == QUEUES
        assert [(q["queueId"], q["broker"], q["physicalQueueId"]) for q in made["queues"]] == [
            (q, "broker-a", q) for q in range(QUEUES)]
        assert {w["broker"] for w in made["writes"]} == {"broker-a", "broker-b"}
        before, after = Path(made["oldMappingFile"]), Path(made["newMappingFile"])
        assert after.name == f"{TOPIC}-{made['epoch']}.after" and before.suffix == ".before"
        assert loads(after.read_bytes())["brokerConfigMap"]["broker-a"]["writeQueueNums"] == QUEUES
        detail_b = st.b.static_topics.get(TOPIC)
        assert detail_b is not None and detail_b.hosted_queues == {} and detail_b.epoch == made["epoch"]
        wait_for(lambda: leaders(st).get("broker-a") == {q: q for q in range(QUEUES)})
        assert send(ns, 0, 8) == [0, 0, 0, 0, 1, 1, 1, 1]

        # the .after file sent again (-mf): the same epoch and leaders, taken as they are
        out = bolide("admin", "updateStaticTopic", "-t", TOPIC, "-mf", str(after), "-n", ns).stdout
        assert "Mappings sent" in out and "broker-b" in out and "written to file" not in out, out

        # the same count again is refused naming the fix; the table output names the files
        again = bolide("admin", "updateStaticTopic", "-t", TOPIC, "-qn", str(QUEUES), "-b", "broker-a",
                       "-n", ns, "--tmp-dir", str(files), ok=False)
        assert again.exit_code != 0 and "give -qn above 4" in again.output, again.output

        # remap: every queue to broker-b; its items start at logic offset 10000
        moved = admin_json(ns, "remappingStaticTopic", "-t", TOPIC, "-b", "broker-b", "--tmp-dir", str(files))
        assert (moved["type"], moved["brokerToMapIn"], moved["brokerToMapOut"]) == (
            "REMAPPING", ["broker-b"], ["broker-a"])
        assert [(q["broker"], q["logicOffset"], q["items"]) for q in moved["queues"]] == [
            ("broker-b", 10000, 2)] * QUEUES
        assert [w["step"] for w in moved["writes"]] == ["map-in", "map-out", "map-in-offsets"]
        wait_for(lambda: leaders(st).get("broker-b") == {q: q for q in range(QUEUES)}
                 and not leaders(st).get("broker-a"))
        assert send(ns, 8, 4) == [10000] * 4

        # spread over both brokers from a mapping file planned ahead (mqadmin's -mf)
        with Admin(ns) as admin:
            configs = admin.static_topic_configs(TOPIC)
        plan = remapping_plan(TOPIC, configs, ["broker-a", "broker-b"])
        path = plan.write_to(files, after=True)
        spread = admin_json(ns, "remappingStaticTopic", "-t", TOPIC, "-f", str(path))
        assert sorted(spread["brokerToMapIn"]) == ["broker-a"]
        back = [q for q in spread["queues"] if q["broker"] == "broker-a"]
        assert len(back) == 2 and all(q["logicOffset"] == 20000 and q["items"] == 3 for q in back), back
        wait_for(lambda: len(leaders(st).get("broker-a", {})) == 2)
        assert sorted(send(ns, 12, 4)) == [10001, 10001, 20000, 20000]

        # every message, through the logic queues, at its logic offset
        got = consume_all(ns, "cli-static-cg", 16)
        for q in range(QUEUES):
            offsets = [o for o, _ in sorted(got[q])]
            assert offsets[:3] == [0, 1, 10000], (q, got[q])
            assert offsets[3] in (10001, 20000)
            assert sorted(b for _, b in got[q]) == sorted(b"m%d" % i for i in range(16) if i % QUEUES == q)

        # balanced already: a remapping moves nothing, only the epoch rises (table output)
        out = bolide("admin", "remappingStaticTopic", "-t", TOPIC, "-c", "DefaultCluster", "-n", ns,
                     "--tmp-dir", str(files)).stdout
        assert "The old mapping data is written to file" in out and ".after" in out, out
        assert "map-in" not in out and out.count("others") == 2, out

        # the brokers' files: broker-a holds its old items and leads two queues again
        detail_a = st.servers.broker.static_topics.get(TOPIC)
        assert detail_a is not None and detail_a.epoch > spread["epoch"]
        assert sorted(g for g, items in detail_a.hosted_queues.items() if items[-1].bname == "broker-a") == [
            q["queueId"] for q in back]


def test_bad_arguments_are_refused_with_the_fix(tmp_path: Path) -> None:
    st = ServerThread(tmp_path / "a")
    st.thread.start()
    assert st.ready.wait(30) and st.error is None, st.error
    try:
        assert st.servers is not None
        ns = st.servers.namesrv_addr
        out = bolide("admin", "remappingStaticTopic", "-t", TOPIC, "-n", ns, ok=False).output
        assert "give one of -b brokers, -c clusters or -mf mapping-file" in out
        out = bolide("admin", "updateStaticTopic", "-t", TOPIC, "-b", "broker-a", "-n", ns, ok=False).output
        assert "-qn N" in out
        out = bolide("admin", "remappingStaticTopic", "-t", TOPIC, "-b", "broker-a", "-n", ns,
                     "--tmp-dir", str(tmp_path), ok=False).output
        assert "No topic route to do the remapping" in out and "updateStaticTopic" in out, out
        out = bolide("admin", "remappingStaticTopic", "-t", TOPIC, "-b", "broker-x", "-n", ns,
                     ok=False).output
        assert "Can't find addr for broker broker-x" in out, out
        admin_json(ns, "updateTopic", "-t", "CliPlain", "-r", "2", "-w", "2")
        out = bolide("admin", "updateStaticTopic", "-t", "CliPlain", "-qn", "2", "-b", "broker-a", "-n", ns,
                     "--tmp-dir", str(tmp_path), ok=False).output
        assert "is a normal topic there" in out, out
        bad = tmp_path / "bad.json"
        bad.write_text("{not json")
        out = bolide("admin", "remappingStaticTopic", "-t", TOPIC, "-mf", str(bad), "-n", ns, ok=False).output
        assert "no TopicRemappingDetailWrapper" in out, out
    finally:
        st.stop()


@pytest.mark.parametrize("failing_write", [1, 2])
def test_an_interrupted_remapping_is_finished_by_its_mapping_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_write: int
) -> None:
    """A remapping that stops after ``failing_write`` of its writes (a broker unreachable: after
    broker-b took the queues in, or after broker-a gave them away too) is finished by the
    command its error names (``-mf`` with the ``.after`` file): every queue ends on broker-b at
    logic offset 10000, and every message is read at its logic offset."""
    with two_brokers(tmp_path) as (st, ns, files):
        admin_json(ns, "updateStaticTopic", "-t", TOPIC, "-qn", str(QUEUES), "-b", "broker-a",
                   "--tmp-dir", str(files))
        wait_for(lambda: leaders(st).get("broker-a") == {q: q for q in range(QUEUES)})
        assert send(ns, 0, 8) == [0, 0, 0, 0, 1, 1, 1, 1]

        real_write = StaticTopicAdminCalls.create_static_topic
        writes = 0

        async def unreachable_after(self: Any, addr: str, *args: Any, **kwargs: Any) -> None:
            nonlocal writes
            writes += 1
            if writes > failing_write:  # the fault: this broker cannot be reached
                raise RemotingConnectError(f"connect to {addr} failed: connection refused")
            await real_write(self, addr, *args, **kwargs)

        monkeypatch.setattr(StaticTopicAdminCalls, "create_static_topic", unreachable_after)
        failed = bolide("admin", "remappingStaticTopic", "-t", TOPIC, "-b", "broker-b", "-n", ns,
                        "--tmp-dir", str(files), ok=False)
        monkeypatch.undo()
        text = " ".join(failed.output.split())  # rich wraps the message
        sent = "map-in broker-b" + (", map-out broker-a" if failing_write == 2 else "")
        assert f"(mappings sent: {sent})" in text, text
        finish = re.search(r"send the planned ones with: (remappingStaticTopic -t \S+ -mf (\S+\.after))",
                           text)
        assert finish is not None, text
        assert Path(finish.group(2)).exists()

        # the command the error names finishes the move
        out = bolide("admin", *finish.group(1).split(" "), "-n", ns).stdout
        assert "Mappings sent" in out, out
        wait_for(lambda: leaders(st).get("broker-b") == {q: q for q in range(QUEUES)}
                 and not leaders(st).get("broker-a"))
        assert send(ns, 8, 4) == [10000] * 4
        got = consume_all(ns, f"cli-static-interrupted-{failing_write}", 12)
        for q in range(QUEUES):
            assert [o for o, _ in sorted(got[q])] == [0, 1, 10000], (q, got[q])
            assert sorted(b for _, b in got[q]) == sorted(b"m%d" % i for i in range(12) if i % QUEUES == q)
