"""``bolide admin updateStaticTopic`` / ``remappingStaticTopic`` against mqadmin 5.3.3's, on two
Bolide brokers: for the same cluster state both leave the same mappings on the brokers (epochs
aside) and write the same ``.after`` file; a static topic made by one is remapped by the other."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from client_roundtrip import unavailable

from bolide.broker.controller import BrokerController
from bolide.cli.main import cli
from bolide.protocol.bodies.static_topic import TopicQueueMappingDetail
from bolide.testing.rocketmq import RocketMQ, RocketMQUnavailable
from bolide.testing.servers import another_broker, running_servers
from conftest import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

OURS, THEIRS = "StaticByBol", "StaticByMqa"  # same length: the files compare after a rename
AFTER = re.compile(r"The (?:new|old) mapping data is written to file (\S+\.after)")
WRITTEN = re.compile(r"mapping data is written to file (\S+)")


def bolide_admin(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["admin", *args, "--output", "json"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def without_epoch(detail: TopicQueueMappingDetail | None, topic: str) -> str:
    assert detail is not None
    copy = TopicQueueMappingDetail.decode(detail.encode())
    copy.epoch, copy.topic = 0, "T"
    return copy.encode().decode().replace(topic, "T")


def file_without_epochs(path: str, topic: str) -> str:
    text = Path(path).read_text().replace(topic, "T")
    return re.sub(r'"epoch":\d+', '"epoch":0', text)


def test_bolide_admin_and_mqadmin_make_and_remap_the_same_static_topics(tmp_path: Path) -> None:
    try:
        rmq = RocketMQ("5.3.3", tmp_path / "mqadmin")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
        raise

    async def main() -> None:
        async with running_servers(tmp_path / "a") as s, another_broker(s, tmp_path / "b") as b:
            rmq.namesrv_port = s.namesrv.port
            ns, files = s.namesrv_addr, str(tmp_path / "files")
            Path(files).mkdir()
            brokers: dict[str, BrokerController] = {"broker-a": s.broker, "broker-b": b}
            routes = s.namesrv.processor.routes
            await wait_until(lambda: len(routes.get_all_cluster_info().broker_addr_table) == 2, 10)

            def both(topic: str) -> dict[str, str]:
                return {name: without_epoch(broker.static_topics.get(topic), topic)
                        for name, broker in brokers.items()}

            async def settled(topic: str) -> None:
                def same_epoch() -> bool:
                    found = [br.static_topics.get(topic) for br in brokers.values()]
                    return all(d is not None for d in found) and len({d.epoch for d in found if d}) == 1
                await wait_until(same_epoch, 20)

            # the same two updates: 2 queues on broker-a, then 4 on both (broker-b gets 2 and 3)
            steps = [["-qn", "2", "-b", "broker-a"], ["-qn", "4", "-b", "broker-a,broker-b"]]
            led = [({0: 0, 1: 1}, {}), ({0: 0, 1: 1}, {2: 0, 3: 1})]  # broker-a's, broker-b's
            ours_after: list[str] = []
            theirs_after: list[str] = []
            for step, (on_a, on_b) in zip(steps, led, strict=True):
                made = await asyncio.to_thread(bolide_admin, "updateStaticTopic", "-t", OURS, *step,
                                               "-n", ns, "--tmp-dir", files)
                ours_after.append(made["newMappingFile"])
                (out,) = await asyncio.to_thread(rmq.mqadmin_batch,
                                                 [["updateStaticTopic", "-t", THEIRS, *step]])
                assert "command failed" not in out and "Exception" not in out, out
                theirs_after.append(AFTER.findall(out)[-1])
                mqadmin_files.extend(WRITTEN.findall(out))
                await settled(OURS)
                await settled(THEIRS)
                assert both(OURS) == both(THEIRS)
                for topic in (OURS, THEIRS):
                    found = [brokers[n].static_topics.get(topic) for n in ("broker-a", "broker-b")]
                    assert [d.leader_ids() if d else None for d in found] == [on_a, on_b]
            # the last update is deterministic: the .after files are the same bytes (epochs aside)
            assert file_without_epochs(ours_after[-1], OURS) == file_without_epochs(theirs_after[-1], THEIRS)

            # each remaps the other's topic onto broker-b
            (out,) = await asyncio.to_thread(rmq.mqadmin_batch, [["remappingStaticTopic", "-t", OURS,
                                                                   "-b", "broker-b"]])
            assert "command failed" not in out and "Exception" not in out, out
            mqadmin_files.extend(WRITTEN.findall(out))
            moved = await asyncio.to_thread(bolide_admin, "remappingStaticTopic", "-t", THEIRS,
                                            "-b", "broker-b", "-n", ns, "--tmp-dir", files)
            assert moved["brokerToMapIn"] == ["broker-b"] and moved["brokerToMapOut"] == ["broker-a"]
            await settled(OURS)
            await settled(THEIRS)
            assert both(OURS) == both(THEIRS)
            detail = b.static_topics.get(THEIRS)
            assert detail is not None and sorted(detail.leader_ids()) == [0, 1, 2, 3]
            for global_id in (0, 1):
                items = detail.hosted_queues[global_id]
                assert [(i.bname, i.logic_offset) for i in items] == [("broker-a", 0), ("broker-b", 10000)]

    mqadmin_files: list[str] = []  # in java.io.tmpdir: removed afterwards
    try:
        asyncio.run(main())
    finally:
        for name in mqadmin_files:
            Path(name).unlink(missing_ok=True)
