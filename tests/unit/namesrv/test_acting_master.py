"""The NameServer's side of slave acting master (RocketMQ 5.3.3's RouteInfoManager): read-only
queue data and the lowest-id slave shown as brokerId 0 while a group has no master, the prime
slave's registration, and the min-broker-id notices."""

from __future__ import annotations

import pytest
from test_route_info import Clock, register, wrapper

from bolide.namesrv.acting import SYNC_BROKER_MEMBER_GROUP_PREFIX, MinBrokerIdChange, min_broker_id_change
from bolide.namesrv.route_info import RouteInfoManager
from bolide.protocol.bodies.route import PERM_READ, PERM_WRITE

MASTER, SLAVE1, SLAVE2 = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"
SYNC_TOPIC = SYNC_BROKER_MEMBER_GROUP_PREFIX + "broker-a"
RW = PERM_READ | PERM_WRITE


@pytest.fixture
def routes() -> RouteInfoManager:
    return RouteInfoManager(clock=Clock())


def group(routes: RouteInfoManager, acting: bool | None = True) -> None:
    topics = wrapper(TopicTest=(4, 4, RW), **{SYNC_TOPIC: (1, 1, 1)})
    register(routes, MASTER, topics=topics, enable_acting_master=acting, timeout_ms=10_000)
    register(routes, SLAVE1, broker_id=1, topics=topics, enable_acting_master=acting)
    register(routes, SLAVE2, broker_id=2, topics=topics, enable_acting_master=acting)
    routes.drain_notices()


def test_master_gone_slave_acts_read_only(routes: RouteInfoManager) -> None:
    group(routes)
    assert routes.unregister_broker(cluster="DefaultCluster", broker_name="broker-a",
                                    broker_addr=MASTER, broker_id=0)
    plain = routes.pick_topic_route_data("TopicTest")
    assert plain is not None
    assert plain.broker_datas[0].broker_addrs == {1: SLAVE1, 2: SLAVE2}
    assert plain.queue_datas[0].perm == PERM_READ  # write permission wiped
    acting = routes.pick_topic_route_data("TopicTest", support_acting_master=True)
    assert acting is not None
    assert acting.broker_datas[0].broker_addrs == {0: SLAVE1, 2: SLAVE2}
    assert acting.queue_datas[0].perm == PERM_READ
    # the member group topic's route is never mapped: it tells brokers who is really alive
    sync = routes.pick_topic_route_data(SYNC_TOPIC, support_acting_master=True)
    assert sync is not None and sync.broker_datas[0].broker_addrs == {1: SLAVE1, 2: SLAVE2}
    # the stored table is untouched by the mapping
    assert routes.get_broker_member_group("DefaultCluster", "broker-a").broker_addrs == {
        1: SLAVE1, 2: SLAVE2}


def test_notice_when_master_leaves_and_returns(routes: RouteInfoManager) -> None:
    group(routes)
    routes.on_channel_destroy(MASTER)  # the registration's channel closed
    assert routes.drain_notices() == [MinBrokerIdChange(
        "broker-a", 1, SLAVE1, MASTER, None, (SLAVE1, SLAVE2))]
    register(routes, MASTER, topics=wrapper(TopicTest=(4, 4, RW)), enable_acting_master=True)
    assert routes.drain_notices() == [MinBrokerIdChange(
        "broker-a", 0, MASTER, None, "10.0.0.1:10912", (SLAVE1, SLAVE2))]
    back = routes.pick_topic_route_data("TopicTest", support_acting_master=True)
    assert back is not None and back.queue_datas[0].perm == RW  # the master's registration restores it
    assert back.broker_datas[0].broker_addrs == {0: MASTER, 1: SLAVE1, 2: SLAVE2}


def test_slave_leaving_is_no_notice(routes: RouteInfoManager) -> None:
    group(routes)
    routes.on_channel_destroy(SLAVE2)
    assert routes.drain_notices() == []


def test_expired_master_by_heartbeat_timeout(routes: RouteInfoManager) -> None:
    clock = Clock()
    routes = RouteInfoManager(clock=clock)
    group(routes)
    clock.now += 10_001  # the master registered a 10 s timeout; the slaves keep 120 s
    routes.refresh_broker(SLAVE1)
    assert [e.broker_addr for e in routes.scan_not_active_broker()] == [MASTER]
    assert routes.drain_notices()[0].offline_broker_addr == MASTER
    acting = routes.pick_topic_route_data("TopicTest", support_acting_master=True)
    assert acting is not None and acting.broker_datas[0].broker_addrs[0] == SLAVE1


def test_groups_without_acting_master_keep_their_route(routes: RouteInfoManager) -> None:
    group(routes, acting=False)
    routes.unregister_broker(cluster="DefaultCluster", broker_name="broker-a", broker_addr=MASTER,
                             broker_id=0)
    route = routes.pick_topic_route_data("TopicTest", support_acting_master=True)
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {1: SLAVE1, 2: SLAVE2}
    assert route.queue_datas[0].perm == RW
    assert routes.drain_notices() == []  # only acting groups are told of a lost master


def test_old_broker_registration_turns_acting_off(routes: RouteInfoManager) -> None:
    group(routes)
    register(routes, SLAVE2, broker_id=2, enable_acting_master=None)  # a 4.x broker
    routes.unregister_broker(cluster="DefaultCluster", broker_name="broker-a", broker_addr=MASTER,
                             broker_id=0)
    route = routes.pick_topic_route_data("TopicTest", support_acting_master=True)
    assert route is not None and 0 not in route.broker_datas[0].broker_addrs


def test_prime_slave_registers_topics_read_only(routes: RouteInfoManager) -> None:
    """A slave first (no master ever registered): its topics make queue data, without write."""
    register(routes, SLAVE1, broker_id=1, topics=wrapper(TopicTest=(4, 4, RW)), enable_acting_master=True)
    register(routes, SLAVE2, broker_id=2, topics=wrapper(Other=(2, 2, RW)), enable_acting_master=True)
    route = routes.pick_topic_route_data("TopicTest", support_acting_master=True)
    assert route is not None and route.queue_datas[0].perm == PERM_READ
    assert route.broker_datas[0].broker_addrs == {0: SLAVE1, 2: SLAVE2}
    assert routes.pick_topic_route_data("Other") is None  # not the lowest id: no queue data
    # a 5.x slave of a group without acting master still registers its topics, writable
    register(routes, "10.0.9.9:10911", name="broker-z", broker_id=1,
             topics=wrapper(Zed=(1, 1, RW)), enable_acting_master=False)
    zed = routes.pick_topic_route_data("Zed", support_acting_master=True)
    assert zed is not None and zed.queue_datas[0].perm == RW and 0 not in zed.broker_datas[0].broker_addrs


def test_notice_targets() -> None:
    addrs = {0: MASTER, 1: SLAVE1, 2: SLAVE2}
    assert min_broker_id_change("b", addrs, None, "h").targets == (SLAVE1, SLAVE2)
    assert min_broker_id_change("b", {1: SLAVE1}, None, None).targets == (SLAVE1,)
    assert min_broker_id_change("b", {1: SLAVE1, 2: SLAVE2}, MASTER, None).targets == (SLAVE1, SLAVE2)
    assert min_broker_id_change("b", {}, MASTER, None) is None
