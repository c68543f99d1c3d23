"""The in-process cluster of the HA tests: a NameServer, a master and (optionally) a slave
BrokerController on free ports, with small CommitLog segments so that tests cross several."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bolide.broker import BrokerConfig, BrokerController
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.remoting import RemotingClient
from bolide.store import BrokerRole, StoreConfig

TIMEOUT = 30.0
SEGMENT = 128 * 1024


def store_config(root: Path, role: BrokerRole, **options: Any) -> StoreConfig:
    settings: dict[str, Any] = {"mapped_file_size_commit_log": SEGMENT,
                                "mapped_file_size_consume_queue": 500 * 20} | options
    return StoreConfig(store_path_root_dir=str(root), broker_role=role, **settings)


def broker(namesrv_port: int, root: Path, role: BrokerRole, store_options: dict[str, Any] | None = None,
           **options: Any) -> BrokerController:
    """A broker of ``role`` on ``root``; ``options`` override BrokerConfig fields."""
    config = BrokerConfig(namesrv_addr=f"127.0.0.1:{namesrv_port}", listen_port=0,
                          bind_address="127.0.0.1", broker_ip1="127.0.0.1",
                          broker_id=1 if role is BrokerRole.SLAVE else 0, ha_listen_port=0,
                          ha_reconnect_interval_ms=200, ha_send_heartbeat_interval_ms=1000,
                          vip_channel_enabled=False).replace(**options)
    return BrokerController(config, store_config(root, role, **(store_options or {})))


@dataclass
class Cluster:
    namesrv: NamesrvController
    master: BrokerController
    slave: BrokerController | None
    client: RemotingClient
    root: Path
    store_options: dict[str, Any] = field(default_factory=dict)  # every broker's StoreConfig
    options: dict[str, Any] = field(default_factory=dict)  # every broker's BrokerConfig

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"

    @property
    def the_slave(self) -> BrokerController:
        assert self.slave is not None
        return self.slave

    def broker(self, directory: str, role: BrokerRole, **options: Any) -> BrokerController:
        """A broker of this cluster (not started) on ``root / directory``."""
        return broker(self.namesrv.port, self.root / directory, role, self.store_options,
                      **(self.options | options))

    async def start_slave(self, **options: Any) -> BrokerController:
        self.slave = self.broker("slave", BrokerRole.SLAVE, **options)
        await self.slave.start()
        return self.slave


@asynccontextmanager
async def cluster(root: Path, master_role: BrokerRole = BrokerRole.ASYNC_MASTER, with_slave: bool = True,
                  store_options: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
                  **master_options: Any) -> AsyncIterator[Cluster]:
    """``options`` go to every broker, ``master_options`` to the first master only."""
    namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(root / "kv.json")),
                                host="127.0.0.1", port=0)
    await namesrv.start()
    store_options, options = store_options or {}, options or {}
    master = broker(namesrv.port, root / "master", master_role, store_options,
                    **(options | master_options))
    c = Cluster(namesrv, master, None, RemotingClient(), root, store_options, options)
    try:
        await master.start()
        if with_slave:
            await c.start_slave()
        yield c
    finally:
        await c.client.close()
        if c.slave is not None:
            await c.slave.close()
        await c.master.close()
        await master.close()  # a no-op unless a test replaced the master
        await namesrv.close()


def run(root: Path, test: Callable[[Cluster], Awaitable[None]], **cluster_options: Any) -> None:
    """Run ``test`` against a :func:`cluster` (keyword arguments as there)."""
    async def main() -> None:
        async with cluster(root, **cluster_options) as c:
            await asyncio.wait_for(test(c), TIMEOUT)

    asyncio.run(main())


async def wait_until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
