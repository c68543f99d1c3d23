"""Queue locks on a quorum of the group (``lockInStrictMode``, RocketMQ 5 slave acting master),
in-process: a NameServer, broker-a's master and slave with ``enableSlaveActingMaster``,
``totalReplicas=2`` and ``lockInStrictMode``.

A lock taken on the master is taken on the slave too; another client can lock the queue neither
on the master nor on the slave; an unlock on the master reaches the slave. With the master gone
the acting slave alone is no quorum: it grants no lock (orderly consumption waits for the
master), and the master back grants them again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ha_cluster import broker, wait_until

from bolide.broker import BrokerController
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies.client import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    UnlockBatchRequestBody,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.remoting import RemotingClient
from bolide.store import BrokerRole
from conftest import acting_namesrv

GROUP, TOPIC = "orderly_cg", "StrictTopic"
QUEUES = {MessageQueue(TOPIC, "broker-a", q) for q in range(2)}
STRICT = {"enable_slave_acting_master": True, "lock_in_strict_mode": True, "total_replicas": 2,
          "broker_heartbeat_interval_ms": 200, "sync_broker_member_group_period_ms": 200,
          "ha_reconnect_interval_ms": 100}


async def lock(client: RemotingClient, addr: str, client_id: str, only_here: bool = False,
               ) -> set[MessageQueue]:
    body = LockBatchRequestBody(consumer_group=GROUP, client_id=client_id, mq_set=set(QUEUES),
                                only_this_broker=only_here or None)
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body.encode()))
    assert r.code == ResponseCode.SUCCESS, r
    return LockBatchResponseBody.decode(r.body_bytes()).lock_ok_mq_set


def owners(b: BrokerController) -> set[str | None]:
    return {b.queue_locks.owner(GROUP, mq) for mq in QUEUES}


def test_locks_are_taken_on_a_quorum_of_the_group(tmp_path: Path) -> None:
    async def main() -> None:
        namesrv = await acting_namesrv(tmp_path)
        master = broker(namesrv.port, tmp_path / "a0", BrokerRole.ASYNC_MASTER, **STRICT)
        slave = broker(namesrv.port, tmp_path / "a1", BrokerRole.SLAVE, **STRICT)
        client = RemotingClient()
        started = [master, slave]
        try:
            for b in started:
                await b.start()
            assert master.acting_master is not None
            await wait_until(lambda: master.acting_master is not None
                             and set(master.acting_master.members) == {0, 1})

            assert await lock(client, master.broker_addr, "c1") == QUEUES
            assert owners(master) == owners(slave) == {"c1"}  # taken on the slave as well
            assert await lock(client, master.broker_addr, "c2") == set()
            assert await lock(client, slave.broker_addr, "c2", only_here=True) == set()

            unlock = UnlockBatchRequestBody(consumer_group=GROUP, client_id="c1", mq_set=set(QUEUES))
            r = await client.invoke(master.broker_addr, RemotingCommand.request(
                RequestCode.UNLOCK_BATCH_MQ, body=unlock.encode()))
            assert r.code == ResponseCode.SUCCESS, r
            assert owners(master) == {None}
            await wait_until(lambda: owners(slave) == {None})  # passed on, one way
            assert await lock(client, master.broker_addr, "c2") == QUEUES

            # the master goes: the acting slave alone is no quorum of two
            master_port, master_ha = master.port, master.ha_master.port  # type: ignore[union-attr]
            await master.close()
            started.remove(master)
            await wait_until(lambda: slave.acting)
            assert await lock(client, slave.broker_addr, "c2") == set()

            # the master comes back: locks are granted again
            master = broker(namesrv.port, tmp_path / "a0", BrokerRole.ASYNC_MASTER,
                            listen_port=master_port, ha_listen_port=master_ha, **STRICT)
            await master.start()
            started.append(master)
            await wait_until(lambda: master.online and master.acting_master is not None
                             and set(master.acting_master.members) == {0, 1})
            assert await lock(client, master.broker_addr, "c2") == QUEUES
        finally:
            await client.close()
            for b in reversed(started):
                await b.close()
            await namesrv.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_group_of_one_locks_on_its_broker_alone(tmp_path: Path) -> None:
    async def main() -> None:
        namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                    host="127.0.0.1", port=0)
        await namesrv.start()
        master = broker(namesrv.port, tmp_path / "a0", BrokerRole.ASYNC_MASTER,
                        **(STRICT | {"total_replicas": 1}))
        client = RemotingClient()
        try:
            await master.start()
            assert await lock(client, master.broker_addr, "c1") == QUEUES  # quorum of one
            assert await lock(client, master.broker_addr, "c2") == set()
        finally:
            await client.close()
            await master.close()
            await namesrv.close()

    asyncio.run(asyncio.wait_for(main(), 60))
