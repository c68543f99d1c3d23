"""An in-process NameServer + Broker on free ports with a store in a given directory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bolide.broker import BrokerConfig, BrokerController
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.remoting.tls import TlsServerConfig
from bolide.store import StoreConfig


@dataclass(slots=True)
class Servers:
    namesrv: NamesrvController
    broker: BrokerController

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"

    @property
    def broker_addr(self) -> str:
        return self.broker.broker_addr


@asynccontextmanager
async def running_servers(store_dir: str | Path, *, store_options: dict[str, Any] | None = None,
                          tls: TlsServerConfig | None = None,
                          **broker_options: Any) -> AsyncIterator[Servers]:
    """Start a NameServer and a Broker registered with it on 127.0.0.1, ports chosen by the OS;
    ``broker_options`` override BrokerConfig fields, ``store_options`` StoreConfig fields,
    ``tls`` the TLS settings of both servers. Both are closed on exit."""
    namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(Path(store_dir) / "kvConfig.json")),
                                host="127.0.0.1", port=0, tls=tls)
    await namesrv.start()
    try:
        # the HA port too is the OS's choice: listenPort + 1 (RocketMQ's default) may be taken
        config = BrokerConfig(namesrv_addr=f"127.0.0.1:{namesrv.port}", listen_port=0,
                              bind_address="127.0.0.1", broker_ip1="127.0.0.1",
                              ha_listen_port=0).replace(**broker_options)
        store_config = StoreConfig(**{"store_path_root_dir": str(store_dir),
                                      "mapped_file_size_commit_log": 1024 * 1024,
                                      "mapped_file_size_consume_queue": 1000 * 20,
                                      **(store_options or {})})
        broker = BrokerController(config, store_config, tls)
        await broker.start()
        try:
            yield Servers(namesrv, broker)
        finally:
            await broker.close()
    finally:
        await namesrv.close()


@asynccontextmanager
async def another_broker(s: Servers, store_dir: str | Path, broker_name: str = "broker-b", *,
                         tls: TlsServerConfig | None = None,
                         **broker_options: Any) -> AsyncIterator[BrokerController]:
    """Another broker (``broker_name``) in the cluster of ``s``, registered with its NameServer,
    on ports chosen by the OS; ``broker_options`` override BrokerConfig fields, ``tls`` its TLS
    settings. Closed on exit."""
    config = BrokerConfig(namesrv_addr=s.namesrv_addr, listen_port=0, bind_address="127.0.0.1",
                          broker_ip1="127.0.0.1", ha_listen_port=0,
                          broker_name=broker_name).replace(**broker_options)
    store_config = StoreConfig(store_path_root_dir=str(store_dir), mapped_file_size_commit_log=1024 * 1024,
                               mapped_file_size_consume_queue=1000 * 20)
    broker = BrokerController(config, store_config, tls)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.close()
