"""Slave acting master with real ``bolide broker`` processes: the master of broker-a is
SIGKILLed; the slave (enableSlaveActingMaster) becomes broker-a's brokerId 0 in the routes of a
NameServer with supportActingMaster, reports brokerActive, and serves pulls that commit offsets
on it; the master restarted on its store takes the group back."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

from test_ha_master_kill import free_port, start_broker

from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import TopicRouteData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeader,
)
from bolide.remoting import RemotingClient, RemotingError
from conftest import acting_namesrv

TOPIC = "ActingKill"


async def call(client: RemotingClient, addr: str, code: int, header: object = None,
               body: bytes = b"") -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, header, body))  # type: ignore[arg-type]


async def until(check: object, timeout: float = 20.0) -> None:
    """Wait until the coroutine function ``check`` returns True."""
    assert callable(check)
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def test_slave_acts_when_its_master_is_killed(tmp_path: Path) -> None:
    async def main() -> None:
        namesrv = await acting_namesrv(tmp_path, notify=False)
        ns = f"127.0.0.1:{namesrv.port}"
        port, ha_port, slave_port = free_port(), free_port(), free_port()
        common = {"namesrvAddr": ns, "enableSlaveActingMaster": "true",
                  "brokerHeartbeatInterval": 200, "syncBrokerMemberGroupPeriod": 200,
                  "brokerNotActiveTimeoutMillis": 3000, "autoCreateTopicEnable": "true"}
        master_props = {**common, "listenPort": port, "haListenPort": ha_port, "brokerId": 0,
                        "brokerRole": "ASYNC_MASTER"}
        slave_props = {**common, "listenPort": slave_port, "brokerId": 1, "brokerRole": "SLAVE",
                       "bolideHaReconnectInterval": 200, "bolideSlaveSyncInterval": 300}
        master_addr, slave_addr = f"127.0.0.1:{port}", f"127.0.0.1:{slave_port}"
        loop = asyncio.get_running_loop()
        procs: list[subprocess.Popen[str]] = []
        client = RemotingClient()

        async def route() -> tuple[dict[int, str], int] | None:
            header = GetRouteInfoRequestHeader(topic=TOPIC)
            r = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, header)
            if r.code != ResponseCode.SUCCESS:
                return None
            data = TopicRouteData.decode(r.body_bytes())
            return data.broker_datas[0].broker_addrs, data.queue_datas[0].perm

        async def active(addr: str) -> str:
            r = await call(client, addr, RequestCode.GET_BROKER_RUNTIME_INFO)
            return r.body_bytes().decode().split('"brokerActive":"', 1)[1].split('"', 1)[0]

        async def slave_offset() -> int:
            header = QueryConsumerOffsetRequestHeader(consumer_group="cg", topic=TOPIC, queue_id=0)
            r = await call(client, slave_addr, RequestCode.QUERY_CONSUMER_OFFSET, header)
            return int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1

        try:
            procs.append(await loop.run_in_executor(None, start_broker, tmp_path, "master", master_props))
            procs.append(await loop.run_in_executor(None, start_broker, tmp_path, "slave", slave_props))
            for i in range(10):
                header = SendMessageRequestHeader(
                    producer_group="pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=1,
                    queue_id=0, sys_flag=0, born_timestamp=1_700_000_000_000, flag=0, properties="")
                r = await call(client, master_addr, RequestCode.SEND_MESSAGE_V2, header.to_v2(), b"k-%d" % i)
                assert r.code == ResponseCode.SUCCESS, r

            async def slave_has_all() -> bool:  # replicated and its topic copied from the master
                r = await call(client, slave_addr, RequestCode.PULL_MESSAGE, pull_header(9, None))
                return r.code == ResponseCode.SUCCESS
            await until(slave_has_all)
            await until(lambda: _eq(route(), ({0: master_addr, 1: slave_addr}, 6)))
            assert await active(slave_addr) == "false"

            procs[0].send_signal(signal.SIGKILL)
            assert await loop.run_in_executor(None, procs[0].wait, 10) == -signal.SIGKILL
            await until(lambda: _eq(route(), ({0: slave_addr}, 4)))  # acting, read-only
            await until(lambda: _eq(active(slave_addr), "true"))

            r = await call(client, slave_addr, RequestCode.PULL_MESSAGE, pull_header(4, 4))
            assert r.code == ResponseCode.SUCCESS, r
            assert await slave_offset() == 4  # the commit of the pull is kept on the acting slave

            procs[0] = await loop.run_in_executor(None, start_broker, tmp_path, "master", master_props)
            await until(lambda: _eq(route(), ({0: master_addr, 1: slave_addr}, 6)))
            await until(lambda: _eq(active(slave_addr), "false"))
        finally:
            await client.close()
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    await loop.run_in_executor(None, proc.wait, 20)
                except subprocess.TimeoutExpired:
                    proc.kill()
            await namesrv.close()

    asyncio.run(asyncio.wait_for(main(), 90))


def pull_header(offset: int, commit: int | None) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumer_group="cg", topic=TOPIC, queue_id=0, queue_offset=offset, max_msg_nums=1,
        sys_flag=4 | (1 if commit is not None else 0), commit_offset=commit or 0,
        suspend_timeout_millis=0, subscription="*", sub_version=0)


async def _eq(value: object, expected: object) -> bool:
    try:
        return await value == expected  # type: ignore[misc]
    except (RemotingError, OSError):
        return False
