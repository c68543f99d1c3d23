"""Consumer group changes: NOTIFY_CONSUMER_IDS_CHANGED to the group's members when a consumer
joins, leaves or disconnects, closing of connections whose heartbeats stopped, pulls of
unknown or disabled subscription groups, and CHECK_CLIENT_CONFIG for filter types."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_broker_slice import pull_request

from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import (
    CheckClientRequestBody,
    ConsumerData,
    ConsumerListBody,
    HeartbeatData,
    SubscriptionData,
)
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode
from bolide.protocol.headers import GetConsumerListByGroupRequestHeader, GetRouteInfoRequestHeader
from bolide.protocol.headers.consumer import NotifyConsumerIdsChangedRequestHeader
from bolide.remoting import RemotingClient, RequestContext
from bolide.store.topic_config import SubscriptionGroupConfig
from bolide.testing.servers import Servers, running_servers

TIMEOUT = 10.0


def notified_client() -> tuple[RemotingClient, asyncio.Queue[str]]:
    """A client that records the groups named in NOTIFY_CONSUMER_IDS_CHANGED requests."""
    groups: asyncio.Queue[str] = asyncio.Queue()

    async def on_notify(ctx: RequestContext, request: RemotingCommand) -> None:
        assert request.is_oneway
        groups.put_nowait(request.read_header(NotifyConsumerIdsChangedRequestHeader).consumer_group)

    client = RemotingClient()
    client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    return client, groups


async def heartbeat(client: RemotingClient, s: Servers, client_id: str, topics: tuple[str, ...] = ("T",),
                    language: LanguageCode = LanguageCode.JAVA) -> None:
    consumer = ConsumerData(group_name="cg", consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
                            consume_from_where="CONSUME_FROM_LAST_OFFSET",
                            subscription_data_set=[SubscriptionData.of(t, "*") for t in topics])
    beat = HeartbeatData(client_id=client_id, consumer_data_set=[consumer])
    request = RemotingCommand.request(RequestCode.HEART_BEAT, body=beat.encode())
    request.language = language
    r = await client.invoke(s.broker_addr, request)
    assert r.code == ResponseCode.SUCCESS, r


async def consumer_ids(client: RemotingClient, s: Servers) -> list[str]:
    r = await client.invoke(s.broker_addr, RemotingCommand.request(
        RequestCode.GET_CONSUMER_LIST_BY_GROUP, GetConsumerListByGroupRequestHeader(consumer_group="cg")))
    if r.code != ResponseCode.SUCCESS:
        return []
    return ConsumerListBody.decode(r.body_bytes()).consumer_id_list


def run(tmp_path: Path, test: Any, **broker: Any) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", **broker) as s:
            await asyncio.wait_for(test(s), TIMEOUT)

    asyncio.run(main())


def test_members_are_told_when_the_group_changes(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        first, first_told = notified_client()
        second, second_told = notified_client()
        async with first, second:
            await heartbeat(first, s, "10.0.0.1@1")
            assert await first_told.get() == "cg"  # joining changes the group too
            await heartbeat(first, s, "10.0.0.1@1")  # the same again: no news
            await heartbeat(second, s, "10.0.0.2@2", language=LanguageCode.GO)
            assert await first_told.get() == "cg" and await second_told.get() == "cg"
            assert first_told.empty()  # the repeated heartbeat was not a change
            assert await consumer_ids(first, s) == ["10.0.0.1@1", "10.0.0.2@2"]
            info = s.broker.clients.channels
            assert sorted(i.language for i in info.values()) == ["GO", "JAVA"]

            await heartbeat(second, s, "10.0.0.2@2", topics=("T", "U"))  # new subscription
            assert await first_told.get() == "cg"
            await second_told.get()

            await second.close()  # leaving: the remaining member is told
            assert await first_told.get() == "cg"
            assert await consumer_ids(first, s) == ["10.0.0.1@1"]

    run(tmp_path, test)


def test_silent_connections_expire(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        quiet = RemotingClient()
        alive, told = notified_client()
        async with quiet, alive:
            await heartbeat(quiet, s, "10.0.0.3@3")
            await heartbeat(alive, s, "10.0.0.4@4")
            await told.get()
            while await consumer_ids(alive, s) != ["10.0.0.4@4"]:  # the quiet one expires
                await heartbeat(alive, s, "10.0.0.4@4")  # the live one keeps beating
                await asyncio.sleep(0.05)
            assert s.broker.housekeeping.closed >= 1
            assert await told.get() == "cg"  # told when the expired member left
            assert "10.0.0.4@4" in {i.client_id for i in s.broker.clients.channels.values()}

    run(tmp_path, test, channel_expired_timeout_ms=400)


def test_pulls_of_unknown_or_disabled_groups_are_refused(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with RemotingClient() as client:
            r = await client.invoke(s.broker_addr, pull_request("TBW102", 0, group="nobody"))
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "updateSubGroup" in r.remark
            s.broker.subscription_groups.update(SubscriptionGroupConfig(group_name="off",
                                                                        consume_enable=False))
            r = await client.invoke(s.broker_addr, pull_request("TBW102", 0, group="off"))
            assert r.code == ResponseCode.NO_PERMISSION and "consumeEnable" in r.remark
            s.broker.subscription_groups.update(SubscriptionGroupConfig(group_name="on"))
            r = await client.invoke(s.broker_addr, pull_request("TBW102", 0, group="on"))
            assert r.code == ResponseCode.PULL_NOT_FOUND

    run(tmp_path, test, auto_create_subscription_group=False)



def test_check_client_config_accepts_tags_and_refuses_sql92(tmp_path: Path) -> None:
    async def check(client: RemotingClient, s: Servers, sub: SubscriptionData) -> RemotingCommand:
        body = CheckClientRequestBody(client_id="c@1", group="cg", subscription_data=sub)
        return await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.CHECK_CLIENT_CONFIG, body=body.encode()))

    async def test(s: Servers) -> None:
        async with RemotingClient() as client:
            assert (await check(client, s, SubscriptionData.of("T", "a || b"))).code == ResponseCode.SUCCESS
            sql = SubscriptionData.of("T", "a > 5", expression_type="SQL92")
            r = await check(client, s, sql)
            assert r.code == ResponseCode.SYSTEM_ERROR and "SQL92" in r.remark

    run(tmp_path, test)


def test_a_new_groups_retry_topic_is_routable_once_its_heartbeat_is_answered(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with RemotingClient() as client:
            await heartbeat(client, s, "10.0.0.5@5")
            r = await client.invoke(s.namesrv_addr, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="%RETRY%cg")))
            assert r.code == ResponseCode.SUCCESS, r

    run(tmp_path, test)
