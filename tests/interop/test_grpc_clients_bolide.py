"""The official RocketMQ 5 gRPC clients, unmodified, against Bolide's gRPC endpoint: the Python
client (rocketmq-python-client 5.1.2), whose wire definitions are compared with Bolide's, and the
Java client (rocketmq-client-java 5.0.8). Each runs the same scenario: a producer sends normal,
FIFO, delay and transaction messages; simple consumers receive, change the invisible time,
acknowledge and get a FIFO group's messages in order; a push consumer gets the delay message at
its time, a failed message again, and the committed and checked transactions but not the rolled
back one.

The Node.js client (rocketmq-client-nodejs 1.0.8) runs the scenario too
(``interop/node5-client/driver.js``), as does the Go client (rocketmq-clients/golang/v5 5.1.3,
``interop/go5-client``, which has no recall API: it sends no message to recall), and the Java
client once more through a real RocketMQ 5.3.3
proxy in cluster mode in front of Bolide's NameServer and broker (``RocketMQProxy``).

The Python client runs in a virtual environment of its own (``bolide.testing.pyclient5``; it
cannot share a process with Bolide, both register the same protobuf names) through
``interop/python5-client/driver.py``; the Java one through ``interop/java-client/BolideGrpcClient.java``
(``bolide.testing.rocketmq.grpc_java_client_command``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bolide.client import Admin, ClientConfig
from bolide.remoting.tls import TlsServerConfig
from bolide.store.topic_config import SubscriptionGroupConfig
from bolide.testing.goclient import GO5_CLIENT, go_client_binary, go_env
from bolide.testing.nodeclient import node_client_command, node_env
from bolide.testing.pyclient5 import python5_command
from bolide.testing.pyvenv import driver_env
from bolide.testing.rocketmq import RocketMQProxy, RocketMQUnavailable, grpc_java_client_command
from bolide.testing.servers import Servers, another_broker, running_servers
from conftest import unavailable, wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]
DRIVER_TIMEOUT = 150.0
DELAY_SLACK_MS = 600  # the delay levels deliver within half the shortest level
NODE5 = "node5-client"  # interop/node5-client: rocketmq-client-nodejs


def python_client() -> list[str]:
    try:
        return python5_command()
    except RocketMQUnavailable as exc:
        unavailable(f"RocketMQ 5 Python client unavailable: {exc}")


def java_client(home: Path) -> list[str]:
    try:
        return grpc_java_client_command(home)
    except RocketMQUnavailable as exc:
        unavailable(f"RocketMQ 5 Java client unavailable: {exc}")


async def drive(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> str:
    """Run a client driver to its end; its standard output (both streams go to ``log``)."""
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), DRIVER_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{cmd[-2:]} did not finish in {DRIVER_TIMEOUT}s") from None
    text = out.decode(errors="replace")
    log.write_text(text + "\n--- stderr ---\n" + err.decode(errors="replace"))
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    return text


async def prepare(s: Servers, tls: bool = False) -> None:
    async with Admin(ClientConfig(s.namesrv_addr, use_tls=tls)) as admin:
        for topic, kind in (("N5", "NORMAL"), ("F5", "FIFO"), ("D5", "MIXED"), ("X5", "TRANSACTION")):
            await admin.create_topic(
                topic, read_queue_nums=4, write_queue_nums=4, attributes=f"+message.type={kind}"
            )
    s.broker.subscription_groups.update(
        SubscriptionGroupConfig(group_name="fifo_g", extra={"consumeMessageOrderly": True})
    )


def run_scenario(
    tmp_path: Path,
    command: list[str],
    env: dict[str, str] | None = None,
    tls: TlsServerConfig | None = None,
    proxy: bool = False,
    recall: bool = True,
    over_tls: bool = False,
) -> str:
    """The driver's ``scenario`` against a fresh broker with the topics and groups it needs
    (with ``tls``: a broker that enforces it; with ``proxy``: through a
    real RocketMQ 5.3.3 proxy in cluster mode, which talks to the broker over remoting;
    ``recall``: the driver recalls a delay message; ``over_tls``: the client connects over TLS, its
    default, else in plain text)."""

    async def main() -> str:
        async with running_servers(
            tmp_path / "store",
            tls=tls,
            use_tls=tls is not None,
            grpc_server_port=0,
            transaction_timeout_ms=1000,
            transaction_check_interval_ms=1000,
        ) as s:
            await prepare(s, tls is not None)
            assert s.broker.grpc is not None
            endpoint = f"127.0.0.1:{s.broker.grpc.port}"
            # each driver keeps its client's default settings: TLS for Java and Go, plain text for
            # Python and Node.js, all on the broker's one permissive port (the RocketMQ proxy here
            # serves plain text only: -Dtls.server.mode=disabled)
            extra = ["plain"] if proxy else []
            async with contextlib.AsyncExitStack() as stack:
                if proxy:
                    endpoint = (await stack.enter_async_context(rocketmq_proxy(tmp_path, s))).grpc_addr
                out = await drive([*command, "scenario", endpoint, *extra], tmp_path / "driver.log", env)
            front = s.broker.grpc._front
            if front is not None and not proxy:  # the permissive port: what the client chose
                assert front.counts["tls" if over_tls else "plain"] > 0, front.counts
                assert front.counts["plain" if over_tls else "tls"] == 0, front.counts
            # what the transactions left in their topic: the committed and the checked one
            store = s.broker.store
            assert await asyncio.to_thread(store.wait_dispatched, 10)
            stored = [m.body for q in range(4) for m in store.get_message("t", "X5", q, 0, 32).messages]
            assert sorted(stored) == [b"tx-check", b"tx-commit"]
            # the recalled delay message, due with "later", is dropped then
            schedule = s.broker.schedule
            assert schedule is not None
            if recall:
                await wait_until(lambda: schedule.recalled == 1, timeout=20)
            delayed = [m.body for q in range(4) for m in store.get_message("t", "D5", q, 0, 32).messages]
            assert b"recalled" not in delayed and b"later" in delayed
            return out

    return asyncio.run(main())


@contextlib.asynccontextmanager
async def rocketmq_proxy(tmp_path: Path, s: Servers) -> AsyncIterator[RocketMQProxy]:
    try:
        # the proxy tells the broker of its transaction producers every second (20 s by default),
        # so the broker's checks (every second here) find them soon
        settings = {"transactionHeartbeatPeriodSecond": 1}
        proxy = RocketMQProxy(tmp_path / "proxy", s.namesrv_addr, settings=settings)
    except RocketMQUnavailable as exc:
        unavailable(f"RocketMQ proxy unavailable: {exc}")
    await asyncio.to_thread(proxy.start)
    try:
        yield proxy
    finally:
        await asyncio.to_thread(proxy.stop)


def check_scenario(result: dict[str, Any]) -> None:
    simple = sorted(result["simple"])
    assert [row[:5] for row in simple] == [[f"n{i}", "TagA", [f"key{i}"], str(i), 1] for i in range(4)]
    assert sorted(row[5] for row in simple) == sorted(result["sent_ids"])
    assert len(result["again"]) == 1 and result["again"][0][1] == 2
    for group in ("ga", "gb"):
        assert [b for b in result["fifo"] if b.startswith(group)] == [f"{group}-{i}" for i in range(3)]
    pushed = result["pushed"]
    bodies = {row[0] for row in pushed}
    assert {"later", "retry-me", "tx-commit", "tx-check"} <= bodies and "tx-rollback" not in bodies
    later = next(row for row in pushed if row[0] == "later")
    assert later[2] >= result["due_ms"] - DELAY_SLACK_MS
    assert sorted(row[1] for row in pushed if row[0] == "retry-me")[:2] == [1, 2]
    assert result["checked"] == ["tx-check"]


def test_the_python_client_speaks_bolides_wire_definitions(tmp_path: Path) -> None:
    client = python_client()
    env = driver_env(tmp_path / "home")

    def dump(cmd: list[str]) -> dict[str, Any]:
        return json.loads(
            subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, timeout=60).stdout
        )

    theirs = dump([*client, "descriptors"])
    ours = dump([sys.executable, client[1], "descriptors", "bolide.protocol.v5.messaging_pb2"])
    assert len(theirs) > 80 and set(ours) == set(theirs)
    for name in theirs:
        assert ours[name] == theirs[name], name


def test_python_client_producer_simple_and_push_consumers(tmp_path: Path) -> None:
    out = run_scenario(tmp_path, python_client(), driver_env(tmp_path / "home"))
    check_scenario(json.loads(out.strip().splitlines()[-1]))


def across_two_brokers(tmp_path: Path, command: list[str], env: dict[str, str] | None, count: int) -> str:
    """A driver's ``cluster`` run against two brokers of one cluster, each with its gRPC endpoint,
    given broker-a's alone: its output, once both brokers are checked to hold some of the
    ``count`` messages of the topic C5 (so the client's route named broker-b's endpoint)."""

    async def main() -> str:
        async with (running_servers(tmp_path / "a", grpc_server_port=0) as s,
                    another_broker(s, tmp_path / "b", grpc_server_port=0) as b):
            async with Admin(s.namesrv_addr) as admin:
                await admin.create_topic("C5", read_queue_nums=2, write_queue_nums=2)
                async with asyncio.timeout(15):
                    while len((await admin.topic_route("C5")).queue_datas) < 2:
                        await asyncio.sleep(0.05)
            assert s.broker.grpc is not None
            endpoint = f"127.0.0.1:{s.broker.grpc.port}"
            out = await drive([*command, "cluster", endpoint, "C5", str(count)], tmp_path / "driver.log", env)
            per_broker = []
            for broker in (s.broker, b):
                assert await asyncio.to_thread(broker.store.wait_dispatched, 10)
                per_broker.append(sum(broker.store.get_max_offset_in_queue("C5", q) for q in range(2)))
            assert sum(per_broker) == count and min(per_broker) > 0, per_broker
            return out

    return asyncio.run(main())


def test_python_client_uses_every_broker_from_one_endpoint(tmp_path: Path) -> None:
    """Sends go to the queues of both brokers, a simple consumer receives from both."""
    out = across_two_brokers(tmp_path, python_client(), driver_env(tmp_path / "home"), 24)
    result = json.loads(out.strip().splitlines()[-1])
    assert sorted(result["sent"]) == sorted(f"c{i}" for i in range(24))
    assert set(result["received"]) == set(result["sent"])


def test_java_client_uses_every_broker_from_one_endpoint(tmp_path: Path) -> None:
    """Sends go to the queues of both brokers, a push consumer consumes from both."""
    out = across_two_brokers(tmp_path, java_client(tmp_path / "home"), None, 24)
    rows = [line.split("\t") for line in out.splitlines()]
    sent = {row[1] for row in rows if row[0] == "CSENT"}
    assert sent == {f"c{i}" for i in range(24)} and ["DONE"] in rows
    assert {row[1] for row in rows if row[0] == "CGOT"} == sent


def test_java_client_producer_simple_and_push_consumers(tmp_path: Path) -> None:
    """The client's default settings (TLS) against a broker's default settings."""
    check_lines(run_scenario(tmp_path, java_client(tmp_path / "home"), over_tls=True))


def test_java_client_through_a_rocketmq_proxy_in_front_of_bolide(tmp_path: Path) -> None:
    """RocketMQ 5's cluster deployment: the Java client talks gRPC to a real RocketMQ 5.3.3 proxy,
    which serves it from Bolide's NameServer and broker over remoting (routes, sends, pops with
    acks and invisible-time changes, transactions and their check, recalls)."""
    check_lines(run_scenario(tmp_path, java_client(tmp_path / "home"), proxy=True))


def test_java_client_over_tls_its_default(tmp_path: Path) -> None:
    tls_dir = Path(__file__).resolve().parents[1] / "data" / "tls"
    tls = TlsServerConfig(
        mode="enforcing", cert_path=str(tls_dir / "server.crt"), key_path=str(tls_dir / "server.key")
    )
    check_lines(run_scenario(tmp_path, java_client(tmp_path / "home"), tls=tls))


def test_node_client_producer_simple_and_push_consumers(tmp_path: Path) -> None:
    try:
        command = node_client_command(NODE5)
    except RocketMQUnavailable as exc:
        unavailable(f"RocketMQ 5 Node.js client unavailable: {exc}")
    check_lines(run_scenario(tmp_path, command, node_env(tmp_path / "home", NODE5)))


def test_go_client_producer_simple_and_push_consumers(tmp_path: Path) -> None:
    try:
        command = [str(go_client_binary(GO5_CLIENT))]
    except RocketMQUnavailable as exc:
        unavailable(f"RocketMQ 5 Go client unavailable: {exc}")
    check_lines(run_scenario(tmp_path, command, go_env(tmp_path / "home"), recall=False, over_tls=True))


def check_lines(out: str) -> None:
    """:func:`check_scenario` on the tab-separated lines of the Java and Node.js drivers."""
    rows = [line.split("\t") for line in out.splitlines() if "\t" in line or line == "DONE"]
    assert ["DONE"] in rows, out[-2000:]

    def of(kind: str) -> list[list[str]]:
        return [row[1:] for row in rows if row[0] == kind]

    check_scenario(
        {
            "sent_ids": [row[0] for row in of("SENT")],
            "simple": [
                [body, tag, keys.split(","), seq, int(attempt), msg_id]
                for body, tag, keys, seq, attempt, msg_id in of("SIMPLE")
            ],
            "again": [[body, int(attempt)] for body, attempt in of("AGAIN")],
            "fifo": [row[0] for row in of("FIFO")],
            "pushed": [[body, int(attempt), int(at)] for body, attempt, at in of("PUSH")],
            "checked": [row[0] for row in of("CHECKED")],
            "due_ms": int(of("DUE")[0][0]),
        }
    )


def test_java_and_python_clients_as_they_are_against_bolide_start_as_it_is(tmp_path: Path) -> None:
    """``bolide start`` without a config (ports the kernel's): the Java client with its default
    settings (TLS) and the Python client with its own (plain text) on the one gRPC port, each
    sending and consuming."""
    java, python = java_client(tmp_path / "home"), python_client()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from bolide.cli.main import main; main()", "start", "--store",
         str(tmp_path / "store"), "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        endpoint = ""
        for line in proc.stdout:  # until the servers say they listen
            if line.startswith("RocketMQ 5 gRPC clients connect to "):
                endpoint = line.split()[6]
            if line.startswith("Press Ctrl+C"):
                break
        assert endpoint, "bolide start printed no gRPC endpoint"
        out = asyncio.run(drive([*java, "cluster", endpoint, "StartJ", "8"], tmp_path / "java.log"))
        rows = [line.split("\t") for line in out.splitlines()]
        assert {row[1] for row in rows if row[0] == "CGOT"} == {f"c{i}" for i in range(8)}
        out = asyncio.run(drive([*python, "cluster", endpoint, "StartP", "8"], tmp_path / "python.log",
                                driver_env(tmp_path / "home")))
        received = json.loads(out.strip().splitlines()[-1])["received"]
        assert sorted(set(received)) == [f"c{i}" for i in range(8)]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert proc.returncode == 0
