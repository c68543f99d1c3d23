"""The official Apache RocketMQ Java client (rocketmq-client 4.9.7, unmodified) against Bolide:
a DefaultMQProducer sends messages with tags and keys through an auto-created topic, then a
DefaultMQPushConsumer (clustering, CONSUME_FROM_FIRST_OFFSET) receives every one of them.

The client is ``interop/java-client/BolideClient.java``, run as a separate JVM against an
in-process NameServer + Broker on free ports. Needs java, javac and mvn (the jars come from Maven
Central once, into ``interop/.m2``): without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from bolide.store import StoreConfig
from bolide.testing.rocketmq import RocketMQUnavailable, java_client_command
from bolide.testing.servers import running_servers
from conftest import assert_consistent

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

TOPIC = "BolideJavaClientTopic"
GROUP = "bolide_java_client_cg"
COUNT = 20
CLIENT_TIMEOUT = 120.0  # seconds for one JVM run, start-up included
CONSUME_TIMEOUT_SEC = 60
# what running_servers gives the store
COMMIT_LOG = 1024 * 1024
CONSUME_QUEUE = 1000 * 20


def _unavailable(reason: str) -> NoReturn:
    message = f"real RocketMQ unavailable: {reason}"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)", pytrace=False)
    pytest.skip(message)


@dataclass(frozen=True)
class Sent:
    status: str
    msg_id: str
    broker: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True)
class Received:
    body: str
    tags: str
    keys: str
    queue_id: int
    queue_offset: int
    msg_id: str


def _expected(i: int) -> tuple[str, str, str]:
    """body, tags and keys of message ``i`` as BolideClient ``produce`` builds them."""
    return f"body-{i}", f"tag{i % 3}", f"key-{i} k{i % 2}"


async def _run(cmd: list[str], log: Path) -> tuple[int, list[list[str]]]:
    """Run a client JVM; its exit code and its protocol lines (tab-split), stdout+stderr to ``log``."""
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CLIENT_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{cmd[-5:]} did not finish in {CLIENT_TIMEOUT}s") from None
    text = out.decode(errors="replace")
    log.write_text(text + "\n--- stderr ---\n" + err.decode(errors="replace"))
    lines = [line.split("\t") for line in text.splitlines() if line.startswith(("SEND\t", "MSG\t"))]
    assert proc.returncode == 0, (f"{cmd[-6:]} exited {proc.returncode}; see {log}:\n"
                                  f"{text[-3000:]}\n{err.decode(errors='replace')[-3000:]}")
    return proc.returncode, lines


def test_java_producer_and_push_consumer_against_bolide(tmp_path: Path) -> None:
    try:
        java = java_client_command(home=tmp_path / "jclient")
    except RocketMQUnavailable as exc:
        _unavailable(str(exc))
    store_dir = tmp_path / "store"

    async def main() -> tuple[list[Sent], list[Received]]:
        async with running_servers(store_dir, auto_create_topic_enable=True) as servers:
            ns = servers.namesrv_addr
            _, produced = await _run([*java, "produce", ns, TOPIC, str(COUNT)], tmp_path / "produce.log")
            sent = [Sent(f[1], f[2], f[3], int(f[4]), int(f[5])) for f in produced]
            _, consumed = await _run([*java, "consume", ns, TOPIC, GROUP, str(COUNT),
                                      str(CONSUME_TIMEOUT_SEC)], tmp_path / "consume.log")
            received = [Received(f[1], f[2], f[3], int(f[4]), int(f[5]), f[6]) for f in consumed]
            return sent, received

    sent, received = asyncio.run(main())

    assert len(sent) == COUNT
    assert all(s.status == "SEND_OK" for s in sent), sent
    assert len({s.msg_id for s in sent}) == COUNT
    assert len({(s.queue_id, s.queue_offset) for s in sent}) == COUNT
    assert {s.broker for s in sent} == {"broker-a"}

    by_id = {r.msg_id: r for r in received}  # at-least-once: a redelivery is allowed, a loss is not
    assert set(by_id) == {s.msg_id for s in sent}
    for i, s in enumerate(sent):
        r = by_id[s.msg_id]
        assert (r.body, r.tags, r.keys) == _expected(i), (i, r)
        assert (r.queue_id, r.queue_offset) == (s.queue_id, s.queue_offset), (i, r, s)

    assert_consistent(StoreConfig(store_path_root_dir=str(store_dir), mapped_file_size_commit_log=COMMIT_LOG,
                                  mapped_file_size_consume_queue=CONSUME_QUEUE))
