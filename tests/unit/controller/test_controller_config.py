"""ControllerConfig: RocketMQ's keys and defaults, the one-peer group and its refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.controller.config import ControllerConfig, Peer, parse_peers
from bolide.errors import ConfigError


def test_defaults_are_rocketmqs() -> None:
    config = ControllerConfig()
    assert config.store_dir == Path.home() / "DLedgerController"
    assert (config.scan_not_active_broker_interval_ms, config.notify_broker_role_changed,
            config.enable_elect_unclean_master, config.elect_master_max_retry_count) == (5000, True, False, 3)
    assert config.port == 9878 and config.self_id == "n0"
    assert config.self_peer("10.0.0.1") == Peer("n0", "10.0.0.1:9878")


def test_peers_set_the_port_and_id() -> None:
    config = ControllerConfig.from_mapping({"controllerDLegerGroup": "g",
                                            "controllerDLegerPeers": "n1-127.0.0.1:9999",
                                            "controllerDLegerSelfId": "n1", "controllerStorePath": "/tmp/c"})
    assert (config.port, config.self_id, config.group, config.store_dir) == (9999, "n1", "g", Path("/tmp/c"))
    assert parse_peers("n0-a:1; n1-b:2;") == [Peer("n0", "a:1"), Peer("n1", "b:2")]


def test_a_group_of_peers_listens_on_its_own_entry() -> None:
    config = ControllerConfig.from_mapping({"controllerDLegerPeers": "n0-h0:9001;n1-h1:9002;n2-h2:9003",
                                            "controllerDLegerSelfId": "n1"})
    assert (config.port, config.self_id, config.self_peer("ignored")) == (9002, "n1", Peer("n1", "h1:9002"))
    assert [p.peer_id for p in config.peers] == ["n0", "n1", "n2"]


@pytest.mark.parametrize(("props", "message"), [
    ({"controllerDLegerPeers": "n0-a:1;n1-b:2;n2-c:3"}, "say which one this is with controllerDLegerSelfId"),
    ({"controllerDLegerPeers": "n0-a:1;n0-b:2"}, "names a peer twice"),
    ({"controllerDLegerPeers": "a:1"}, "is not id-host:port"),
    ({"controllerDLegerPeers": "n0-a:1", "controllerDLegerSelfId": "n1"}, "make it one of them"),
    ({"scanNotActiveBrokerInterval": "0"}, "must be positive"),
    ({"enableElectUncleanMaster": "maybe"}, "expected true or false"),
])
def test_bad_settings_are_refused_with_the_fix(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ControllerConfig.from_mapping(props)


def test_properties_text_round_trips() -> None:
    config = ControllerConfig().updated({"enableElectUncleanMaster": "true", "unknownKey": "x"})
    assert config.enable_elect_unclean_master
    text = config.to_properties_text()
    assert "enableElectUncleanMaster=true\n" in text and "unknownKey" not in text
    assert {"configStorePath", "rocketmqHome", "configBlackList"} <= config.black_list
