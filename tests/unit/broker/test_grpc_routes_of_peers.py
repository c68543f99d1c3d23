"""The pure parts of the gRPC endpoint's routes across brokers: which brokers of a NameServer
route are the others, where their gRPC endpoints are, and the port a broker's config names."""

from __future__ import annotations

from bolide.broker.proxy.cluster import PeerQueues, grpc_port_of, master_addresses, peers_of
from bolide.broker.proxy.routes import endpoints_of
from bolide.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from bolide.protocol.v5 import messaging_pb2 as pb

ROUTE = TopicRouteData(
    queue_datas=[
        QueueData(broker_name="broker-a", read_queue_nums=4, write_queue_nums=4, perm=6),
        QueueData(broker_name="broker-c", read_queue_nums=2, write_queue_nums=1, perm=4),
        QueueData(broker_name="broker-b", read_queue_nums=8, write_queue_nums=8, perm=6),
        QueueData(broker_name="broker-s", read_queue_nums=8, write_queue_nums=8, perm=6),
    ],
    broker_datas=[
        BrokerData(cluster="c", broker_name="broker-a", broker_addrs={0: "10.0.0.1:10911"}),
        BrokerData(cluster="c", broker_name="broker-b",
                   broker_addrs={0: "10.0.0.2:10911", 1: "10.0.0.3:10911"}),
        BrokerData(cluster="c", broker_name="broker-c", broker_addrs={0: "host-c.example:10911"}),
        BrokerData(cluster="c", broker_name="broker-s", broker_addrs={1: "10.0.0.9:10911"}),  # no master
    ],
)


def test_the_other_brokers_masters_are_the_peers() -> None:
    assert master_addresses(ROUTE, "broker-a") == {
        "broker-b": "10.0.0.2:10911",
        "broker-c": "host-c.example:10911",
    }


def test_peers_take_their_own_port_the_default_or_are_left_out() -> None:
    ports: dict[str, int | None] = {"10.0.0.2:10911": 18081}  # broker-c named none: the default
    assert peers_of(ROUTE, "broker-a", ports, 8081) == (
        PeerQueues("broker-b", "10.0.0.2", 18081, 6, 8, 8),
        PeerQueues("broker-c", "host-c.example", 8081, 4, 2, 1),
    )
    off: dict[str, int | None] = {"10.0.0.2:10911": None, "host-c.example:10911": None}
    assert peers_of(ROUTE, "broker-a", off, 8081) == ()
    assert [p.broker_name for p in peers_of(ROUTE, "broker-b", {}, 8081)] == ["broker-a", "broker-c"]


def test_the_port_a_brokers_config_names() -> None:
    assert grpc_port_of("brokerName=b\ngrpcServerPort=18081\n", 8081) == 18081
    assert grpc_port_of("brokerName=b\n", 8081) == 8081  # RocketMQ's: this endpoint's port
    assert grpc_port_of("grpcServerPort=-1\n", 8081) is None  # its endpoint is off
    assert grpc_port_of("grpcServerPort=0\n", 8081) is None  # not bound
    assert grpc_port_of("grpcServerPort=eighty\n", 8081) is None


def test_endpoints_name_their_address_scheme() -> None:
    assert endpoints_of("10.0.0.2", 8081).scheme == pb.IPv4
    assert endpoints_of("::1", 8081).scheme == pb.IPv6
    named = endpoints_of("host-c.example", 8081)
    assert named.scheme == pb.DOMAIN_NAME
    assert [(a.host, a.port) for a in named.addresses] == [("host-c.example", 8081)]
