"""The official Apache RocketMQ Go client (rocketmq-client-go/v2 v2.1.2, unmodified) against Bolide:
a producer sends messages with tags and keys through an auto-created topic (sync sends), then a push
consumer (clustering, ConsumeFromFirstOffset) receives every one of them.

The client is ``interop/go-client/main.go``, built once into ``interop/.gocache/bin`` and run as a
separate process against an in-process NameServer + Broker on free ports. Needs go (the modules come
from the Go module proxy once, into ``interop/.gocache``): without it the module is skipped, or fails
when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from bolide.store import StoreConfig
from bolide.testing.goclient import go_client_binary, go_env
from bolide.testing.rocketmq import RocketMQUnavailable
from bolide.testing.servers import running_servers
from conftest import assert_consistent

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

TOPIC = "BolideGoClientTopic"
GROUP = "bolide_go_client_cg"
COUNT = 20
CLIENT_TIMEOUT = 120.0  # seconds for one client run
CONSUME_TIMEOUT_SEC = 80
# what running_servers gives the store
COMMIT_LOG = 1024 * 1024
CONSUME_QUEUE = 1000 * 20


def _unavailable(reason: str) -> NoReturn:
    message = f"Go client unavailable: {reason}"
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
    """body, tags and keys of message ``i`` as the Go driver's ``produce`` builds them."""
    return f"body-{i}", f"tag{i % 3}", f"key-{i} k{i % 2}"


async def _run(cmd: list[str], env: dict[str, str], log: Path) -> list[list[str]]:
    """Run the Go driver; its protocol lines (tab-split), stdout+stderr to ``log``."""
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, env=env)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CLIENT_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{cmd[1:]} did not finish in {CLIENT_TIMEOUT}s") from None
    text = out.decode(errors="replace")
    errors = err.decode(errors="replace")
    log.write_text(text + "\n--- stderr ---\n" + errors)
    lines = [line.split("\t") for line in text.splitlines() if line.startswith(("SEND\t", "MSG\t"))]
    assert proc.returncode == 0, (f"{cmd[1:]} exited {proc.returncode}; see {log}:\n"
                                  f"{text[-3000:]}\n{errors[-3000:]}")
    return lines


def test_go_producer_and_push_consumer_against_bolide(tmp_path: Path) -> None:
    try:
        binary = str(go_client_binary())
    except RocketMQUnavailable as exc:
        _unavailable(str(exc))
    env = go_env(home=tmp_path / "goclient-home")
    store_dir = tmp_path / "store"

    async def main() -> tuple[list[Sent], list[Received]]:
        async with running_servers(store_dir, auto_create_topic_enable=True) as servers:
            ns = servers.namesrv_addr
            produced = await _run([binary, "produce", ns, TOPIC, str(COUNT)], env, tmp_path / "produce.log")
            sent = [Sent(f[1], f[2], f[3], int(f[4]), int(f[5])) for f in produced]
            consumed = await _run([binary, "consume", ns, TOPIC, GROUP, str(COUNT), str(CONSUME_TIMEOUT_SEC)],
                                  env, tmp_path / "consume.log")
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
