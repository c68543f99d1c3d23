"""Controller mode's broker.conf keys: RocketMQ's names and defaults, and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.broker.config import BrokerConfig
from bolide.errors import ConfigError


def test_defaults_are_rocketmqs() -> None:
    config = BrokerConfig()
    assert not config.enable_controller_mode and config.controller_addr == ""
    assert config.controller_heart_beat_timeout_ms == 10_000
    assert config.sync_broker_metadata_period_ms == 5000
    assert config.check_sync_state_set_period_ms == 5000
    assert config.sync_controller_metadata_period_ms == 10_000
    assert config.broker_election_priority == 2**31 - 1
    assert config.broker_heartbeat_interval_ms == 1000


def test_keys_are_read_from_broker_conf(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("enableControllerMode=true\ncontrollerAddr=10.0.0.1:9878; 10.0.0.2:9878\n"
                    "controllerHeartBeatTimeoutMills=3000\nbrokerElectionPriority=1\n"
                    "syncBrokerMetadataPeriod=1000\nfetchControllerAddrByDnsLookup=true\n")
    config = BrokerConfig.from_properties(conf)
    assert config.enable_controller_mode and config.fetch_controller_addr_by_dns_lookup
    assert config.controller_addrs == ["10.0.0.1:9878", "10.0.0.2:9878"]
    assert config.controller_heart_beat_timeout_ms == 3000
    assert config.broker_election_priority == 1 and config.sync_broker_metadata_period_ms == 1000


def test_controller_mode_needs_a_controller_address() -> None:
    with pytest.raises(ConfigError, match="controllerAddr=host:port"):
        BrokerConfig(enable_controller_mode=True)


def test_slave_acting_master_is_accepted_but_not_with_controller_mode() -> None:
    config = BrokerConfig.from_mapping({"enableSlaveActingMaster": "true", "enableRemoteEscape": "true",
                                           "brokerNotActiveTimeoutMillis": "5000"})
    assert config.enable_slave_acting_master and config.enable_remote_escape
    assert config.broker_not_active_timeout_ms == 5000 and config.compatible_with_old_name_srv
    with pytest.raises(ConfigError, match="exclude each other"):
        BrokerConfig(enable_slave_acting_master=True, enable_controller_mode=True,
                     controller_addr="127.0.0.1:9878")
    with pytest.raises(ConfigError, match="syncBrokerMemberGroupPeriod=0"):
        BrokerConfig(sync_broker_member_group_period_ms=0)


def test_periods_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="syncBrokerMetadataPeriod=0"):
        BrokerConfig(sync_broker_metadata_period_ms=0)
