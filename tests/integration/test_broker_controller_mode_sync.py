"""Two Bolide brokers in controller mode under Bolide's controller, in one process: the second
joins the master's in-sync replicas, and with ``allAckInSyncStateSet=true`` a send is answered
only once the slave holds it (the AutoSwitch HA's acknowledgement), so a failover after any
SEND_OK keeps the message; GET_BROKER_HA_STATUS reports the AutoSwitch connection."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_broker_controller_mode import GROUP, eventually, in_loop, send

from bolide.broker import BrokerConfig, BrokerController
from bolide.controller import ControllerConfig, ControllerServer
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies.ha import HARuntimeInfo
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.remoting import RemotingClient
from bolide.store import BrokerRole, StoreConfig

pytestmark = pytest.mark.timeout(60)


def broker(root: Path, namesrv: NamesrvController, controller: ControllerServer) -> BrokerController:
    config = BrokerConfig(namesrv_addr=f"127.0.0.1:{namesrv.port}", listen_port=0,
                          bind_address="127.0.0.1", broker_ip1="127.0.0.1", ha_listen_port=0,
                          broker_name=GROUP, enable_controller_mode=True,
                          controller_addr=controller.address, broker_heartbeat_interval_ms=100,
                          sync_broker_metadata_period_ms=200, check_sync_state_set_period_ms=200,
                          all_ack_in_sync_state_set=True, vip_channel_enabled=False)
    store = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1024 * 1024,
                        mapped_file_size_consume_queue=1000 * 20, broker_role=BrokerRole.ASYNC_MASTER)
    return BrokerController(config, store)


@in_loop
async def test_sends_wait_for_every_in_sync_replica(tmp_path: Path) -> None:
    ctrl_config = ControllerConfig.from_mapping({
        "controllerStorePath": str(tmp_path / "ctrl"), "controllerDLegerPeers": "n0-127.0.0.1:0",
        "controllerDLegerSelfId": "n0", "scanNotActiveBrokerInterval": "100",
        "scanInactiveMasterInterval": "100"})
    namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                host="127.0.0.1", port=0)
    await namesrv.start()
    async with ControllerServer(ctrl_config, host="127.0.0.1") as controller, RemotingClient() as client:
        master = broker(tmp_path / "a", namesrv, controller)
        await master.start()
        slave = broker(tmp_path / "b", namesrv, controller)
        try:
            async def elected() -> bool:
                return master.role is BrokerRole.SYNC_MASTER
            await eventually(elected)
            await slave.start()
            ha = master.sync_master

            async def both_in_sync() -> bool:
                return ha is not None and len(ha.sync_state_set) == 2

            await eventually(both_in_sync, 20)
            for i in range(20):
                r = await send(client, master.broker_addr, i)
                assert r.code == ResponseCode.SUCCESS, r
                # answered only once the slave acknowledged it: the slave's CommitLog has it
                assert slave.store.max_phy_offset >= master.store.max_phy_offset, i
            # GET_BROKER_HA_STATUS (mqadmin haStatus) shows the AutoSwitch HA's connection
            r = await client.invoke(master.broker_addr,
                                    RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS))
            info = HARuntimeInfo.decode(r.body_bytes())
            assert info.master and info.in_sync_slave_nums == 1, info
            (link,) = info.ha_connection_info
            assert link.in_sync and link.slave_ack_offset == master.store.max_phy_offset, link
        finally:
            await slave.close()
            await master.close()
            await namesrv.close()
