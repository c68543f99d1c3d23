"""Server commands: ``bolide start`` (NameServer + Broker in one process), ``bolide namesrv``
and ``bolide broker``. Each runs until SIGINT or SIGTERM, then closes cleanly (the store
removes its abort file)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click

from bolide.broker import BrokerConfig, BrokerController
from bolide.cli.controller_seed import seed
from bolide.common.config_file import parse_properties
from bolide.controller import ControllerConfig, ControllerServer
from bolide.errors import BolideError
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.remoting import run
from bolide.remoting.tls import TlsMode, TlsServerConfig
from bolide.store import StoreConfig

DEFAULT_GRPC_PORT = 8081  # RocketMQ 5 proxy's grpcServerPort


def _broker_configs(conf: str | None, store: str | None, port: int | None,
                    namesrv: str | None, grpc_port: int | None = None) -> tuple[BrokerConfig, StoreConfig]:
    broker_over: dict[str, object] = {}
    store_over: dict[str, object] = {}
    if port is not None:
        broker_over["listen_port"] = port
    if grpc_port is not None:
        broker_over["grpc_server_port"] = grpc_port
    if namesrv is not None:
        broker_over["namesrv_addr"] = namesrv
    if store is not None:
        store_over["store_path_root_dir"] = store
    if conf:  # the changes of UPDATE_BROKER_CONFIG go to this file unless it names another
        broker_config = BrokerConfig.from_properties(conf, **broker_over)
        if not broker_config.broker_config_path:
            broker_config = broker_config.replace(broker_config_path=str(Path(conf).resolve()))
        return broker_config, StoreConfig.from_properties(conf, **store_over)
    store_over.setdefault("store_path_root_dir", "./store")
    saved = BrokerConfig().config_file(Path(str(store_over["store_path_root_dir"])))
    if saved.is_file():  # the changes UPDATE_BROKER_CONFIG made on an earlier run
        click.echo(f"Broker settings from {saved} (written by updateBrokerConfig)")
        return (BrokerConfig.from_properties(saved, **broker_over),
                StoreConfig.from_properties(saved, **store_over))
    return BrokerConfig(**broker_over), StoreConfig(**store_over)  # type: ignore[arg-type]


def _tls(conf: str | None) -> TlsServerConfig:
    """The ``tls.server.*`` keys of the config file (RocketMQ's names), or TLS off."""
    return (TlsServerConfig.from_properties(conf) if conf else TlsServerConfig()).resolved()


def _serve(main: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Run ``main(stop)``; SIGINT/SIGTERM set ``stop`` from the start, so a signal that
    arrives while the servers start still stops them cleanly."""

    async def with_signals() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await main(stop)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    try:
        run(with_signals())
    except (BolideError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc


def _first_steps(namesrv: str, broker: BrokerController) -> None:
    click.echo(f"Broker {broker.config.broker_name} listening on {broker.broker_addr} "
               f"(store {broker.store.root}), registering with NameServer {namesrv}")
    click.echo("Send a first message with any RocketMQ client, e.g. the Java quick start:\n"
               f"  export NAMESRV_ADDR={namesrv}\n"
               "  sh tools.sh org.apache.rocketmq.example.quickstart.Producer")
    if broker.grpc is not None:
        kind = {"disabled": "plain text", "enforcing": "TLS"}.get(broker.grpc.mode.value, "TLS or plain text")
        click.echo(f"RocketMQ 5 gRPC clients connect to 127.0.0.1:{broker.grpc.port} (endpoints; {kind})")
    click.echo("Press Ctrl+C to stop.")


@click.command()
@click.option("--store", "store_dir", default=None, help="Store directory (default ./store).")
@click.option("--namesrv-port", default=9876, show_default=True, help="NameServer port.")
@click.option("--broker-port", default=None, type=int, help="Broker port (default 10911).")
@click.option("--grpc-port", default=None, type=int,
              help="Port of the gRPC endpoint for RocketMQ 5 clients (default 8081, or the config's "
                   "grpcServerPort; -1: off).")
@click.option("-c", "--config", "conf", help="A RocketMQ broker.conf.")
def start(store_dir: str | None, namesrv_port: int, broker_port: int | None, grpc_port: int | None,
          conf: str | None) -> None:
    """Run a NameServer and a Broker in one process on the embedded store."""
    if grpc_port is None and not conf:
        grpc_port = DEFAULT_GRPC_PORT

    tls = _tls(conf)

    async def main(stop: asyncio.Event) -> None:
        namesrv = NamesrvController(NamesrvConfig(), port=namesrv_port, tls=tls)
        await namesrv.start()
        ns_addr = f"127.0.0.1:{namesrv.port}"
        click.echo(f"NameServer listening on port {namesrv.port}")
        try:
            broker_config, store_config = _broker_configs(conf, store_dir, broker_port, ns_addr, grpc_port)
            if tls.tls_mode is TlsMode.ENFORCING:  # the broker registers with its NameServer
                broker_config = broker_config.replace(use_tls=True)
            broker = BrokerController(broker_config, store_config, tls)
            await broker.start()
            try:
                _first_steps(ns_addr, broker)
                await stop.wait()
            finally:
                await broker.close()
        finally:
            await namesrv.close()
        click.echo("stopped")

    _serve(main)


@click.command()
@click.option("-c", "--config", "conf", help="A RocketMQ namesrv.conf.")
@click.option("-p", "--port", default=None, type=int, help="Port (default 9876).")
def namesrv(conf: str | None, port: int | None) -> None:
    """Run a NameServer."""
    over = {"listen_port": port} if port is not None else {}
    config = NamesrvConfig.from_properties(conf, **over) if conf else NamesrvConfig(**over)
    config_file = None  # where UPDATE_NAMESRV_CONFIG writes: configStorePath if set, else the file
    if conf:
        named = "configStorePath" in parse_properties(Path(conf).read_text(encoding="utf-8"))
        config_file = Path(config.config_store_path if named else conf).resolve()

    tls = _tls(conf)
    controller_config = None
    if config.enable_controller_in_namesrv:  # the controller's keys come from the same file
        controller_config = ControllerConfig.from_properties(conf) if conf else ControllerConfig()

    async def main(stop: asyncio.Event) -> None:
        controller = NamesrvController(config, tls=tls, config_file=config_file,
                                       controller_config=controller_config)
        await controller.start()
        click.echo(f"NameServer listening on port {controller.port}; Ctrl+C stops it")
        if controller.controller is not None:
            click.echo(f"Controller listening on {controller.controller.address} "
                       f"(state in {controller.controller.store_dir})")
        try:
            await stop.wait()
        finally:
            await controller.close()

    _serve(main)


@click.command()
@click.option("-c", "--config", "conf", help="A RocketMQ broker.conf.")
@click.option("-n", "--namesrv-addr", default=None, help="NameServer address(es), host:port;...")
@click.option("--store", "store_dir", default=None, help="Store directory (overrides the config).")
@click.option("-p", "--port", default=None, type=int, help="Port (overrides listenPort).")
@click.option("--grpc-port", default=None, type=int,
              help="Serve RocketMQ 5 gRPC clients on this port (overrides grpcServerPort; -1: off).")
def broker(conf: str | None, namesrv_addr: str | None, store_dir: str | None, port: int | None,
           grpc_port: int | None) -> None:
    """Run a Broker."""
    broker_config, store_config = _broker_configs(conf, store_dir, port, namesrv_addr, grpc_port)
    tls = _tls(conf)

    async def main(stop: asyncio.Event) -> None:
        controller = BrokerController(broker_config, store_config, tls)
        await controller.start()
        click.echo(f"Broker listening on {controller.broker_addr} (store {controller.store.root}); "
                   "Ctrl+C stops it")
        try:
            await stop.wait()
        finally:
            await controller.close()

    _serve(main)


@click.group("controller", invoke_without_command=True)
@click.option("-c", "--config", "conf", help="A RocketMQ controller.conf (controllerDLegerPeers, ...).")
@click.option("-p", "--port", default=None, type=int,
              help="Port (default: the port of this controller's controllerDLegerPeers entry, else "
                   "listenPort, 9878).")
@click.pass_context
def controller(ctx: click.Context, conf: str | None, port: int | None) -> None:
    """Run a controller: RocketMQ 5 controller mode's master elections (alone, or one of a group
    of controllerDLegerPeers replicating their state with Raft).

    To move from one controller to a group keeping its state (masters, epochs, in-sync sets,
    broker ids), stop it and run `bolide controller seed -c <peer's controller.conf> --from
    <its directory>` for every peer of the group before the group's first start."""
    if ctx.invoked_subcommand is not None:
        if conf or port is not None:
            raise click.UsageError(f"give -c and -p after the command: bolide controller "
                                   f"{ctx.invoked_subcommand} -c <controller.conf> ...")
        return
    config = ControllerConfig.from_properties(conf) if conf else ControllerConfig()
    own = config.self_peer("")
    if port is not None and len(config.peers) > 1 and port != own.port:
        raise click.UsageError(f"--port {port} differs from this controller's controllerDLegerPeers entry "
                               f"({own.peer_id}-{own.address}), where its peers and brokers reach it: "
                               "change the entry in every peer's config instead")
    config_file = None  # where UPDATE_CONTROLLER_CONFIG writes: configStorePath if set, else the file
    if conf:
        named = "configStorePath" in parse_properties(Path(conf).read_text(encoding="utf-8"))
        config_file = Path(config.config_store_path if named else conf).resolve()

    async def main(stop: asyncio.Event) -> None:
        server = ControllerServer(config, port=port, config_file=config_file)
        await server.start()
        if server.journal.dropped_bytes:
            click.echo(f"Cut off a torn tail of {server.journal.dropped_bytes} bytes from the "
                       f"controller's log ({server.journal.reason})")
        peers = server.config.peers
        group = f" (peer {server.config.self_id} of {len(peers)})" if len(peers) > 1 else ""
        click.echo(f"Controller{group} listening on {server.address} (state in {server.store_dir}); "
                   "Ctrl+C stops it")
        try:
            await stop.wait()
        finally:
            await server.close()

    _serve(main)


controller.add_command(seed)
