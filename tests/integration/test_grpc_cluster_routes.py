"""Routes across brokers on the gRPC endpoint: two brokers of one cluster, each with its own
gRPC port on loopback. A client that dialled one of them is given the queues of both, each at
its broker's endpoint, sends to and receives from both; a topic only the other broker has is
routed there (with its message types) and not created here; a broker with its endpoint off is
left out; a route is fetched again once old, the old one answered meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from bolide.broker import BrokerController
from bolide.broker.proxy.cluster import ROUTE_TTL_S, ClusterRoutes
from bolide.client import Admin
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.store.topic_config import SubscriptionGroupConfig
from bolide.testing.servers import Servers, another_broker, running_servers
from bolide.testing.v5calls import V5Calls, message, receive_request

TIMEOUT = 60.0


def run(tmp_path: Path, test: Callable[[Servers, BrokerController], Awaitable[None]], *,
        b_grpc_port: int = 0) -> None:
    async def main() -> None:
        async with (running_servers(tmp_path / "a", grpc_server_port=0) as s,
                    another_broker(s, tmp_path / "b", grpc_server_port=b_grpc_port) as b):
            await asyncio.wait_for(test(s, b), TIMEOUT)

    asyncio.run(main())


def route_request(topic: str, here: pb.Endpoints) -> pb.QueryRouteRequest:
    return pb.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=here)


def endpoints(port: int) -> pb.Endpoints:
    return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)])


def grpc_port(broker: BrokerController) -> int:
    assert broker.grpc is not None
    return broker.grpc.port


async def registered(s: Servers, topic: str, brokers: set[str]) -> None:
    """Wait until the NameServer routes ``topic`` to ``brokers``."""
    async with Admin(s.namesrv_addr) as admin, asyncio.timeout(15):
        while True:
            try:
                route = await admin.topic_route(topic)
                if {qd.broker_name for qd in route.queue_datas} == brokers:
                    return
            except Exception:  # not routed yet
                pass
            await asyncio.sleep(0.05)


async def create(s: Servers, topic: str, broker: BrokerController | None = None, **options: object) -> None:
    """``topic`` on every broker of the cluster (or on ``broker`` only), routed by the NameServer."""
    async with Admin(s.namesrv_addr) as admin:
        addr = broker.broker_addr if broker is not None else None
        await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2, broker_addr=addr,
                                 **options)  # type: ignore[arg-type]


def test_a_route_spans_both_brokers_and_clients_use_both(tmp_path: Path) -> None:
    async def test(s: Servers, b: BrokerController) -> None:
        await create(s, "Spread")
        await registered(s, "Spread", {"broker-a", "broker-b"})
        here, there = endpoints(grpc_port(s.broker)), endpoints(grpc_port(b))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port(s.broker)}") as ca, \
                grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port(b)}") as cb:
            a5, b5 = V5Calls(ca), V5Calls(cb)
            route = await a5("QueryRoute", route_request("Spread", here))
            assert route.status.code == pb.OK
            got = [(q.broker.name, q.id, q.permission, q.broker.endpoints) for q in route.message_queues]
            assert got == [("broker-a", 0, pb.READ_WRITE, here), ("broker-a", 1, pb.READ_WRITE, here),
                           ("broker-b", 0, pb.READ_WRITE, there), ("broker-b", 1, pb.READ_WRITE, there)]
            # each broker's endpoint takes the sends of its queues
            for calls, name in ((a5, "on-a"), (b5, "on-b")):
                one = pb.SendMessageRequest(messages=[message("Spread", name.encode(), name)])
                sent = await calls("SendMessage", one)
                assert sent.status.code == pb.OK
            assert await asyncio.to_thread(b.store.wait_dispatched, 10)
            on_b = [m.body for q in range(2) for m in b.store.get_message("t", "Spread", q, 0, 8).messages]
            assert on_b == [b"on-b"]
            # a consumer is assigned both brokers and receives from each at its endpoint
            assignment = await a5("QueryAssignment", pb.QueryAssignmentRequest(
                topic=pb.Resource(name="Spread"), group=pb.Resource(name="g"), endpoints=here))
            assert assignment.status.code == pb.OK
            assigned = [(a.message_queue.broker.name, a.message_queue.id, a.message_queue.broker.endpoints)
                        for a in assignment.assignments]
            assert assigned == [("broker-a", -1, here), ("broker-b", -1, there)]
            assert await asyncio.to_thread(s.broker.store.wait_dispatched, 10)
            bodies = []
            for calls in (a5, b5):
                code, got_msgs = await calls.receive(receive_request("Spread", "g"))
                assert code == pb.OK
                bodies += [m.body for m in got_msgs]
                assert (await calls.ack("g", "Spread", got_msgs)).status.code == pb.OK
            assert sorted(bodies) == [b"on-a", b"on-b"]
            # a FIFO group is assigned every queue of both
            s.broker.subscription_groups.update(
                SubscriptionGroupConfig(group_name="fifo", extra={"consumeMessageOrderly": True}))
            fifo = await a5("QueryAssignment", pb.QueryAssignmentRequest(
                topic=pb.Resource(name="Spread"), group=pb.Resource(name="fifo"), endpoints=here))
            assert [(a.message_queue.broker.name, a.message_queue.id) for a in fifo.assignments] == [
                ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]

    run(tmp_path, test)


def test_a_topic_of_the_other_broker_only_is_routed_there_and_not_created_here(tmp_path: Path) -> None:
    async def test(s: Servers, b: BrokerController) -> None:
        await create(s, "OnlyB", b, attributes="+message.type=FIFO")
        await registered(s, "OnlyB", {"broker-b"})
        here, there = endpoints(grpc_port(s.broker)), endpoints(grpc_port(b))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port(s.broker)}") as ca:
            a5 = V5Calls(ca)
            route = await a5("QueryRoute", route_request("OnlyB", here))
            assert route.status.code == pb.OK
            assert [(q.broker.name, q.id, q.broker.endpoints) for q in route.message_queues] == [
                ("broker-b", 0, there), ("broker-b", 1, there)]
            assert all(list(q.accept_message_types) == [pb.FIFO] for q in route.message_queues)
            assert s.broker.topics.get("OnlyB") is None  # autoCreateTopicEnable makes no copy here
            # a topic no broker has is still made here from TBW102
            fresh = await a5("QueryRoute", route_request("Fresh", here))
            assert fresh.status.code == pb.OK
            assert {q.broker.name for q in fresh.message_queues} == {"broker-a"}

    run(tmp_path, test)


def test_a_broker_with_its_endpoint_off_is_left_out(tmp_path: Path) -> None:
    async def test(s: Servers, b: BrokerController) -> None:
        assert b.grpc is None
        await create(s, "Half")
        await registered(s, "Half", {"broker-a", "broker-b"})
        here = endpoints(grpc_port(s.broker))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port(s.broker)}") as ca:
            route = await V5Calls(ca)(
                "QueryRoute", route_request("Half", here))
            assert {q.broker.name for q in route.message_queues} == {"broker-a"}

    run(tmp_path, test, b_grpc_port=-1)


def test_an_old_route_is_answered_while_the_new_one_is_fetched(tmp_path: Path) -> None:
    async def test(s: Servers, b: BrokerController) -> None:
        assert s.broker.grpc is not None
        now = [0.0]
        cluster: ClusterRoutes = s.broker.grpc.cluster
        cluster.clock = lambda: now[0]
        await create(s, "Grows", s.broker)
        await registered(s, "Grows", {"broker-a"})
        here = endpoints(grpc_port(s.broker))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port(s.broker)}") as ca:
            a5 = V5Calls(ca)

            async def brokers() -> set[str]:
                route = await a5("QueryRoute", route_request("Grows", here))
                return {q.broker.name for q in route.message_queues}

            assert await brokers() == {"broker-a"}
            await create(s, "Grows", b)
            await registered(s, "Grows", {"broker-a", "broker-b"})
            assert await brokers() == {"broker-a"}  # kept for ROUTE_TTL_S
            now[0] += ROUTE_TTL_S + 1
            assert await brokers() == {"broker-a"}  # the old one, while the new one comes
            async with asyncio.timeout(10):
                while await brokers() != {"broker-a", "broker-b"}:
                    await asyncio.sleep(0.02)

    run(tmp_path, test)
