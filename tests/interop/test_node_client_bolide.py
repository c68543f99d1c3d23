"""The Node.js RocketMQ client ali-ons (3.12.0 from npm, unmodified) against Bolide: a producer sends
messages with tags and keys, then a push consumer (clustering, CONSUME_FROM_FIRST_OFFSET) receives
every one of them; and a consumer that asks for a retry gets each message again through the
broker's send-back and retry topic.

ali-ons speaks JSON headers only, sends with SEND_MESSAGE_V2, puts no UNIQ_KEY on messages (its
message ids are offset ids: store host + commit-log offset) and pulls with the subscription in the
request. It cannot auto-create a topic: its route lookup throws on TOPIC_NOT_EXIST before it would
fall back to TBW102 (as against a real NameServer), so the test creates the topic first, the way an
operator would. The driver is ``interop/node-client/driver.js``; ``npm ci`` installs its locked
packages once into ``interop/.cache/node-client``. Needs node and npm: without them the module is
skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from client_roundtrip import expected, round_trip, run_driver, unavailable

from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import CreateTopicRequestHeader, GetRouteInfoRequestHeader
from bolide.remoting import RemotingClient
from bolide.testing.nodeclient import node_client_command, node_env
from bolide.testing.rocketmq import RocketMQUnavailable
from bolide.testing.servers import Servers, running_servers

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

ROUTE_TIMEOUT = 10.0


async def create_topic(servers: Servers, topic: str) -> None:
    """Create ``topic`` (4 queues) on the broker and wait until the NameServer routes it."""
    async with RemotingClient() as client:
        header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=4,
                                          write_queue_nums=4, perm=6)
        create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        r = await client.invoke(servers.broker_addr, create)
        assert r.code == ResponseCode.SUCCESS, r
        route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                        GetRouteInfoRequestHeader(topic=topic))

        async def routed() -> None:
            while (await client.invoke(servers.namesrv_addr, route)).code != ResponseCode.SUCCESS:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(routed(), ROUTE_TIMEOUT)


def test_node_producer_and_push_consumer_against_bolide(tmp_path: Path) -> None:
    try:
        command = node_client_command()
    except RocketMQUnavailable as exc:
        unavailable(f"Node.js client unavailable: {exc}")
    round_trip(command, tmp_path, "BolideNodeClientTopic", "bolide_node_client_cg", consume_timeout_sec=80,
               env=node_env(home=tmp_path / "nodeclient-home"), before=create_topic)


RETRIED = 5


def test_node_consumer_retry_through_send_back_against_bolide(tmp_path: Path) -> None:
    """The handler asks for a retry on each first delivery: ali-ons sends the message back
    (CONSUMER_SEND_MSG_BACK, delay level 0: the broker chooses), reads it again from
    ``%RETRY%<group>`` and hands it to the topic's handler by its RETRY_TOPIC property."""
    try:
        command = node_client_command()
    except RocketMQUnavailable as exc:
        unavailable(f"Node.js client unavailable: {exc}")
    env = node_env(home=tmp_path / "nodeclient-home")
    topic, group = "BolideNodeRetryTopic", "bolide_node_retry_cg"

    async def main() -> list[list[str]]:
        async with running_servers(tmp_path / "store", auto_create_topic_enable=True) as servers:
            await create_topic(servers, topic)
            ns = servers.namesrv_addr
            await run_driver([*command, "produce", ns, topic, str(RETRIED)], tmp_path / "produce.log", env)
            return await run_driver([*command, "consume-retry", ns, topic, group, str(RETRIED), "100"],
                                    tmp_path / "consume.log", env)

    lines = asyncio.run(main())
    firsts = {f[1]: f for f in lines if f[7] == "0"}
    retries = {f[1]: f for f in lines if f[7] != "0"}
    bodies = {expected(i)[0] for i in range(RETRIED)}
    assert set(firsts) == bodies and set(retries) == bodies, lines
    for body, again in retries.items():
        first = firsts[body]
        assert again[7] == "1", again  # one send-back so far
        assert again[2:4] == first[2:4], (first, again)  # tags and keys survive the round trip
        assert again[6] != first[6]  # a new record in the retry topic
    assert {f[4] for f in retries.values()} == {"0"}  # %RETRY% topics have one queue
    assert sorted(int(f[5]) for f in retries.values()) == list(range(RETRIED))
    # the send-back itself was accepted: ali-ons falls back to a plain send when it fails
    assert "consumerSendMessageBack" not in (tmp_path / "consume.log").read_text()


@pytest.mark.parametrize("model", ["CLUSTERING", "BROADCASTING"])
def test_node_two_consumers_in_one_group(tmp_path: Path, model: str) -> None:
    try:
        command = node_client_command()
    except RocketMQUnavailable as exc:
        unavailable(f"Node.js client unavailable: {exc}")
    env = node_env(home=tmp_path / "nodeclient-home")
    topic, group, n = f"BolideNodeGroup{model.title()}", f"bolide_node_{model.lower()}_cg", 12

    async def main() -> list[list[str]]:
        async with running_servers(tmp_path / "store") as servers:
            await create_topic(servers, topic)
            return await run_driver([*command, "group", servers.namesrv_addr, topic, group, model, str(n),
                                     "100"], tmp_path / "group.log", env, prefixes=("MSG", "SENT"))

    lines = asyncio.run(main())
    [sent] = [int(f[1]) for f in lines if f[0] == "SENT"]
    received: dict[str, set[str]] = {"a": set(), "b": set()}
    for f in lines:
        if f[0] == "MSG":
            received[f[1]].add(f[2])
    everything = {f"g-{i}" for i in range(sent)}
    if model == "CLUSTERING":
        assert sent >= n and received["a"] and received["b"]  # the group shared the queues
        assert received["a"] | received["b"] == everything
    else:
        assert sent == n and received["a"] == received["b"] == everything

