"""``bolide admin``'s controller commands against a real controller on loopback:
getControllerMetaData, getSyncStateSet, getControllerConfig, updateControllerConfig, electMaster
and cleanBrokerMetadata, as JSON and as tables, and their errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_cli_admin import admin_json, bolide

from bolide.controller import ControllerConfig, ControllerServer
from bolide.remoting import run
from bolide.testing.controller import ControllerBroker

NS = "127.0.0.1:1"  # no NameServer is needed by these commands


async def cli_json(*args: str) -> Any:
    return await asyncio.to_thread(admin_json, NS, *args)


async def cli_text(*args: str, ok: bool = True) -> str:
    result = await asyncio.to_thread(bolide, "admin", *args, "-n", NS, ok=ok)
    return str(result.output)


def test_controller_admin_commands(tmp_path: Path) -> None:
    run(_commands(tmp_path))


async def _commands(tmp_path: Path) -> None:
    config = ControllerConfig.from_mapping({"controllerStorePath": str(tmp_path / "ctrl"),
                                            "controllerDLegerGroup": "g1",
                                            "controllerDLegerPeers": "n0-127.0.0.1:0"})
    async with ControllerServer(config, host="127.0.0.1") as server:
        addr = server.address
        one, two = ControllerBroker(addr, "b"), ControllerBroker(addr, "b")
        try:
            for broker in (one, two):
                await broker.join()
                await broker.beat(timeout_ms=60_000)
            await one.elect()

            meta = await cli_json("getControllerMetaData", "-a", addr)
            assert meta == {"group": "g1", "controllerLeaderId": "n0", "controllerLeaderAddress": addr,
                            "isLeader": True, "peers": [f"n0:{addr}"]}
            assert "ControllerLeaderAddress" in await cli_text("getControllerMetaData", "-a", addr)

            doc = await cli_json("getSyncStateSet", "-a", addr, "-b", "b")
            info = doc["replicasInfoTable"]["b"]
            assert (info["masterBrokerId"], info["masterEpoch"]) == (1, 1)
            assert [r["brokerId"] for r in info["notInSyncReplicas"]] == [2]
            assert "SyncStateSetEpoch" in await cli_text("getSyncStateSet", "-a", addr, "-b", "b")
            assert "give the broker group" in await cli_text("getSyncStateSet", "-a", addr, ok=False)

            changed = await cli_json("updateControllerConfig", "-a", addr, "-k", "enableElectUncleanMaster",
                                     "-v", "true")
            assert changed == {"key": "enableElectUncleanMaster", "value": "true", "controllers": [addr]}
            configs = await cli_json("getControllerConfig", "-a", addr)
            assert configs[addr]["enableElectUncleanMaster"] == "true"
            refused = await cli_text("updateControllerConfig", "-a", addr, "-k", "configStorePath",
                                     "-v", "/x", ok=False)
            assert "black list" in refused

            # broker 2 is not in sync, but unclean elections are on now
            elected = await cli_json("electMaster", "-a", addr, "-c", "C", "-bn", "b", "-b", "2")
            assert elected["masterBrokerId"] == 2 and elected["masterEpoch"] == 2
            assert elected["brokers"] == {"1": one.addr, "2": two.addr}
            failed = await cli_text("electMaster", "-a", addr, "-c", "C", "-bn", "b", "-b", "9", ok=False)
            assert "Failed to elect a new master" in failed

            alive = await cli_text("cleanBrokerMetadata", "-a", addr, "-bn", "b", "-c", "C", "-b", "1",
                                   ok=False)
            assert "still alive" in alive
            assert "-c" in await cli_text("cleanBrokerMetadata", "-a", addr, "-bn", "b", ok=False)
            cleaned = await cli_json("cleanBrokerMetadata", "-a", addr, "-bn", "b", "-l")
            assert cleaned == {"brokerName": "b", "brokerIds": [], "cleaned": True}
            assert server.state.get("b") is None
        finally:
            for broker in (one, two):
                await broker.close()
