"""RouteInfoManager: registrations of masters and slaves, routes, expiry, channel close and
the admin views, with an injected clock (no sleeps)."""

from __future__ import annotations

import pytest

from bolide.namesrv.route_info import (
    BROKER_CHANNEL_EXPIRED_TIME_MS,
    ExpiredBroker,
    RegisterBrokerResult,
    RouteInfoManager,
)
from bolide.protocol.bodies import DataVersion, QueueData, TopicConfig, TopicConfigSerializeWrapper

A_MASTER, A_SLAVE, B_MASTER, C_MASTER = ("10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911",
                                         "10.0.1.1:10911")


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def wrapper(counter: int = 1, **topics: tuple[int, int, int]) -> TopicConfigSerializeWrapper:
    """Topic configs by name: (readQueueNums, writeQueueNums, perm)."""
    table = {name: TopicConfig(topic_name=name, read_queue_nums=r, write_queue_nums=w, perm=p)
             for name, (r, w, p) in topics.items()}
    return TopicConfigSerializeWrapper(topic_config_table=table,
                                       data_version=DataVersion(timestamp=1_700_000_000_000,
                                                                counter=counter))


def register(routes: RouteInfoManager, addr: str, name: str = "broker-a", broker_id: int = 0,
             cluster: str = "DefaultCluster", channel: object | None = None,
             topics: TopicConfigSerializeWrapper | None = None, **kw: object) -> RegisterBrokerResult:
    host = addr.split(":")[0]
    return routes.register_broker(cluster=cluster, broker_name=name, broker_addr=addr,
                                  broker_id=broker_id, ha_server_addr=f"{host}:10912",
                                  topic_config_wrapper=topics if topics is not None else wrapper(),
                                  channel=channel if channel is not None else addr, **kw)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def routes(clock: Clock) -> RouteInfoManager:
    return RouteInfoManager(clock=clock)


def test_master_then_slave(routes: RouteInfoManager) -> None:
    assert register(routes, A_MASTER, topics=wrapper(TopicTest=(4, 4, 6))) == RegisterBrokerResult()
    result = register(routes, A_SLAVE, broker_id=1, topics=wrapper(TopicTest=(4, 4, 6)))
    assert result == RegisterBrokerResult("10.0.0.1:10912", A_MASTER)
    route = routes.pick_topic_route_data("TopicTest")
    assert route is not None
    assert [b.broker_addrs for b in route.broker_datas] == [{0: A_MASTER, 1: A_SLAVE}]
    assert route.queue_datas == [QueueData(broker_name="broker-a", read_queue_nums=4,
                                           write_queue_nums=4, perm=6, topic_sys_flag=0)]
    assert route.filter_server_table == {}


def test_slave_without_live_master_gets_no_master_and_writes_no_queue_data(
        routes: RouteInfoManager) -> None:
    assert register(routes, A_SLAVE, broker_id=1, topics=wrapper(T=(4, 4, 6))) == RegisterBrokerResult()
    assert routes.pick_topic_route_data("T") is None
    assert routes.get_all_topic_list().topic_list == []
    assert routes.get_all_cluster_info().broker_addr_table["broker-a"].broker_addrs == {1: A_SLAVE}


def test_queue_data_per_broker_group(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, "broker-a", topics=wrapper(T=(4, 4, 6), OnlyA=(1, 1, 6)))
    register(routes, B_MASTER, "broker-b", topics=wrapper(T=(8, 2, 4)))
    route = routes.pick_topic_route_data("T")
    assert route is not None
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
        ("broker-a", 4, 4, 6), ("broker-b", 8, 2, 4)]
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]
    only_a = routes.pick_topic_route_data("OnlyA")
    assert only_a is not None and [b.broker_name for b in only_a.broker_datas] == ["broker-a"]
    assert routes.pick_topic_route_data("Nope") is None


def test_route_body_matches_the_spec_example(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, topics=wrapper(TopicTest=(4, 4, 6)))
    route = routes.pick_topic_route_data("TopicTest")
    assert route is not None
    assert route.encode(standard=True) == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
        b'"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
    assert b'"brokerAddrs":{0:"10.0.0.1:10911"}' in route.encode()


def test_same_data_version_only_refreshes_the_heartbeat(routes: RouteInfoManager, clock: Clock) -> None:
    register(routes, A_MASTER, topics=wrapper(1, T=(4, 4, 6)))
    clock.now += 30_000
    register(routes, A_MASTER, topics=wrapper(1, T=(16, 16, 6), New=(1, 1, 6)))
    route = routes.pick_topic_route_data("T")
    assert route is not None and route.queue_datas[0].read_queue_nums == 4
    assert routes.pick_topic_route_data("New") is None
    live = routes.broker_live_info(A_MASTER)
    assert live is not None and live.last_update_ms == clock.now
    register(routes, A_MASTER, topics=wrapper(2, T=(16, 16, 6), New=(1, 1, 6)))
    route = routes.pick_topic_route_data("T")
    assert route is not None and route.queue_datas[0].read_queue_nums == 16
    assert routes.pick_topic_route_data("New") is not None
    assert routes.is_data_version_changed(A_MASTER, wrapper(2).data_version) is False
    assert routes.is_data_version_changed(A_MASTER, wrapper(3).data_version) is True
    assert routes.is_data_version_changed("10.9.9.9:1", wrapper(2).data_version) is True


def test_expiry_after_120_seconds_of_silence(routes: RouteInfoManager, clock: Clock) -> None:
    start = clock.now
    register(routes, A_MASTER, channel="chan-a", topics=wrapper(T=(4, 4, 6)))
    register(routes, B_MASTER, "broker-b", topics=wrapper(T=(4, 4, 6)))
    clock.now = start + 60_000
    register(routes, B_MASTER, "broker-b", topics=wrapper(T=(4, 4, 6)))  # b keeps beating
    assert routes.scan_not_active_broker(start + BROKER_CHANNEL_EXPIRED_TIME_MS) == []
    expired = routes.scan_not_active_broker(start + BROKER_CHANNEL_EXPIRED_TIME_MS + 1)
    assert expired == [ExpiredBroker(A_MASTER, "chan-a")]
    route = routes.pick_topic_route_data("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert set(routes.get_all_cluster_info().broker_addr_table) == {"broker-b"}
    assert routes.live_broker_addrs() == [B_MASTER]
    assert [e.broker_addr for e in routes.scan_not_active_broker(start + 180_001)] == [B_MASTER]
    assert routes.pick_topic_route_data("T") is None
    info = routes.get_all_cluster_info()
    assert info.broker_addr_table == {} and info.cluster_addr_table == {}
    assert routes.get_all_topic_list().topic_list == []


def test_expiry_uses_the_broker_timeout_when_it_sends_one(routes: RouteInfoManager, clock: Clock) -> None:
    register(routes, A_MASTER, timeout_ms=10_000)
    assert routes.scan_not_active_broker(clock.now + 10_000) == []
    assert len(routes.scan_not_active_broker(clock.now + 10_001)) == 1


def test_master_expiry_keeps_the_slave_readable(routes: RouteInfoManager, clock: Clock) -> None:
    start = clock.now
    register(routes, A_MASTER, topics=wrapper(T=(4, 4, 6)))
    clock.now = start + 100_000
    register(routes, A_SLAVE, broker_id=1, topics=wrapper(T=(4, 4, 6)))
    routes.scan_not_active_broker(start + 120_001)
    route = routes.pick_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: A_SLAVE}
    assert route.broker_datas[0].master_addr is None
    # The master comes back with the same DataVersion: first registration of id 0 again.
    register(routes, A_MASTER, topics=wrapper(T=(4, 4, 6)))
    route = routes.pick_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: A_MASTER, 1: A_SLAVE}


def test_channel_destroy_removes_what_the_connection_registered(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, channel="c1", topics=wrapper(T=(4, 4, 6)))
    register(routes, A_SLAVE, broker_id=1, channel="c2", topics=wrapper(T=(4, 4, 6)))
    assert routes.on_channel_destroy("client-connection") == []
    assert routes.on_channel_destroy(None) == []
    assert routes.on_channel_destroy("c1") == [A_MASTER]
    route = routes.pick_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: A_SLAVE}
    assert routes.on_channel_destroy("c2") == [A_SLAVE]
    assert routes.pick_topic_route_data("T") is None
    assert routes.get_all_topic_list().topic_list == []
    assert routes.get_all_cluster_info().cluster_addr_table == {}


def test_unregister(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, topics=wrapper(T=(4, 4, 6)))
    register(routes, A_SLAVE, broker_id=1)
    assert routes.unregister_broker(cluster="DefaultCluster", broker_name="broker-a",
                                    broker_addr=A_SLAVE, broker_id=1)
    assert routes.get_all_cluster_info().broker_addr_table["broker-a"].broker_addrs == {0: A_MASTER}
    assert routes.unregister_broker(cluster="DefaultCluster", broker_name="broker-a",
                                    broker_addr=A_MASTER, broker_id=0)
    assert routes.pick_topic_route_data("T") is None
    assert routes.get_all_cluster_info().cluster_addr_table == {}
    assert not routes.unregister_broker(cluster="DefaultCluster", broker_name="broker-a",
                                        broker_addr=A_MASTER, broker_id=0)


def test_slave_promoted_to_master_keeps_one_entry_per_address(routes: RouteInfoManager) -> None:
    register(routes, A_SLAVE, broker_id=1)
    register(routes, A_SLAVE, broker_id=0, topics=wrapper(T=(4, 4, 6)))
    info = routes.get_all_cluster_info()
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: A_SLAVE}
    assert routes.pick_topic_route_data("T") is not None


def test_master_address_replaced(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, channel="old", topics=wrapper(T=(4, 4, 6)))
    register(routes, "10.0.0.9:10911", channel="new", topics=wrapper(T=(4, 4, 6)))
    assert routes.live_broker_addrs() == ["10.0.0.9:10911"]
    assert routes.on_channel_destroy("old") == []


def test_address_moving_to_another_group_or_cluster(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, "broker-a", topics=wrapper(T=(4, 4, 6)))
    register(routes, A_MASTER, "broker-z", topics=wrapper(T=(4, 4, 6)))
    info = routes.get_all_cluster_info()
    assert set(info.broker_addr_table) == {"broker-z"}
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-z"}}
    route = routes.pick_topic_route_data("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-z"]
    register(routes, A_MASTER, "broker-z", cluster="Other")
    info = routes.get_all_cluster_info()
    assert info.cluster_addr_table == {"Other": {"broker-z"}}
    assert info.broker_addr_table["broker-z"].cluster == "Other"


def test_several_clusters(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, "broker-a", topics=wrapper(T=(4, 4, 6), A1=(1, 1, 6)))
    register(routes, B_MASTER, "broker-b", topics=wrapper(T=(4, 4, 6)))
    register(routes, C_MASTER, "broker-c", cluster="Second", topics=wrapper(T=(2, 2, 6), C1=(1, 1, 6)))
    info = routes.get_all_cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a", "broker-b"}, "Second": {"broker-c"}}
    assert routes.get_topics_by_cluster("DefaultCluster").topic_list == ["A1", "T"]
    assert routes.get_topics_by_cluster("Second").topic_list == ["C1", "T"]
    assert routes.get_topics_by_cluster("Unknown").topic_list == []
    route = routes.pick_topic_route_data("T")
    assert route is not None
    assert [(b.cluster, b.broker_name) for b in route.broker_datas] == [
        ("DefaultCluster", "broker-a"), ("DefaultCluster", "broker-b"), ("Second", "broker-c")]
    system = routes.get_system_topic_list()
    assert system.topic_list == ["DefaultCluster", "Second", "broker-a", "broker-b", "broker-c"]
    assert system.broker_addr == A_MASTER


def test_delete_topic_everywhere_or_in_one_cluster(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, "broker-a", topics=wrapper(T=(4, 4, 6), U=(4, 4, 6)))
    register(routes, C_MASTER, "broker-c", cluster="Second", topics=wrapper(T=(4, 4, 6)))
    assert routes.delete_topic("T", "Second")
    route = routes.pick_topic_route_data("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-a"]
    assert not routes.delete_topic("T", "Second")
    assert not routes.delete_topic("T", "NoSuchCluster")
    assert routes.delete_topic("T", "DefaultCluster")
    assert routes.delete_topic("U")
    assert routes.get_all_topic_list().topic_list == []
    assert not routes.delete_topic("U")


def test_wipe_and_add_write_perm(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, "broker-a", topics=wrapper(T=(4, 4, 6), TBW102=(8, 8, 7)))
    register(routes, B_MASTER, "broker-b", topics=wrapper(T=(4, 4, 6)))
    assert routes.wipe_write_perm_of_broker("broker-a") == 2
    route = routes.pick_topic_route_data("TBW102")
    assert route is not None and route.queue_datas[0].perm == 5
    route = routes.pick_topic_route_data("T")
    assert route is not None and [q.perm for q in route.queue_datas] == [4, 6]
    assert routes.add_write_perm_of_broker("broker-a") == 2
    route = routes.pick_topic_route_data("TBW102")
    assert route is not None and route.queue_datas[0].perm == 6
    assert routes.wipe_write_perm_of_broker("nobody") == 0


def test_routes_are_copies(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, topics=wrapper(T=(4, 4, 6)))
    route = routes.pick_topic_route_data("T")
    assert route is not None
    route.queue_datas[0].perm = 0
    route.broker_datas[0].broker_addrs.clear()
    again = routes.pick_topic_route_data("T")
    assert again is not None and again.queue_datas[0].perm == 6
    assert again.broker_datas[0].broker_addrs == {0: A_MASTER}


def test_filter_servers_in_routes(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER, topics=wrapper(T=(4, 4, 6)), filter_servers=["10.0.0.1:30000"])
    route = routes.pick_topic_route_data("T")
    assert route is not None and route.filter_server_table == {A_MASTER: ["10.0.0.1:30000"]}
    register(routes, A_MASTER, topics=wrapper(T=(4, 4, 6)), filter_servers=None)
    route = routes.pick_topic_route_data("T")
    assert route is not None and route.filter_server_table == {A_MASTER: ["10.0.0.1:30000"]}
    register(routes, A_MASTER, topics=wrapper(T=(4, 4, 6)), filter_servers=[])
    route = routes.pick_topic_route_data("T")
    assert route is not None and route.filter_server_table == {}


def test_unit_topic_lists(routes: RouteInfoManager) -> None:
    table = wrapper(Plain=(1, 1, 6), Unit=(1, 1, 6), UnitSub=(1, 1, 6), Both=(1, 1, 6))
    table.topic_config_table["Unit"].topic_sys_flag = 1
    table.topic_config_table["UnitSub"].topic_sys_flag = 2
    table.topic_config_table["Both"].topic_sys_flag = 3
    register(routes, A_MASTER, topics=table)
    assert routes.get_unit_topics().topic_list == ["Both", "Unit"]
    assert routes.get_has_unit_sub_topic_list().topic_list == ["Both", "UnitSub"]
    assert routes.get_has_unit_sub_un_unit_topic_list().topic_list == ["UnitSub"]


def test_delete_topics_missing_from_registration_when_enabled(clock: Clock) -> None:
    routes = RouteInfoManager(clock=clock, delete_topic_with_broker_registration=True)
    register(routes, A_MASTER, topics=wrapper(1, T=(4, 4, 6), Gone=(1, 1, 6)))
    register(routes, A_MASTER, topics=wrapper(2, T=(4, 4, 6)))
    assert routes.get_all_topic_list().topic_list == ["T"]


def test_register_topic_needs_known_broker_groups(routes: RouteInfoManager) -> None:
    register(routes, A_MASTER)
    assert not routes.register_topic("X", [QueueData(broker_name="broker-q", read_queue_nums=1)])
    assert not routes.register_topic("X", [])
    assert routes.register_topic("X", [QueueData(broker_name="broker-a", read_queue_nums=2,
                                                 write_queue_nums=2)])
    route = routes.pick_topic_route_data("X")
    assert route is not None and route.queue_datas[0].read_queue_nums == 2


def test_refresh_broker(routes: RouteInfoManager, clock: Clock) -> None:
    register(routes, A_MASTER)
    assert routes.refresh_broker(A_MASTER, clock.now + 100_000)
    assert not routes.refresh_broker("10.9.9.9:1")
    assert routes.scan_not_active_broker(clock.now + 200_000) == []
