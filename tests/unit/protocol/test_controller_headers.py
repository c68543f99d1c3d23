"""Controller-mode headers carry RocketMQ 5.3's extFields names."""

from __future__ import annotations

import pytest

from bolide.errors import HeaderFieldError
from bolide.protocol.headers import controller as h


def test_heartbeat_names_and_optional_fields() -> None:
    hb = h.BrokerHeartbeatRequestHeader(cluster_name="C", broker_addr="1.2.3.4:10911",
                                        broker_name="b", broker_id=2, epoch=3, max_offset=100,
                                        heartbeat_timeout_mills=10000, election_priority=1)
    ext = hb.to_ext_fields()
    assert ext == {"clusterName": "C", "brokerAddr": "1.2.3.4:10911", "brokerName": "b",
                   "brokerId": "2", "epoch": "3", "maxOffset": "100",
                   "heartbeatTimeoutMills": "10000", "electionPriority": "1"}
    assert h.BrokerHeartbeatRequestHeader.from_ext_fields(ext) == hb
    with pytest.raises(HeaderFieldError, match="brokerName"):
        h.BrokerHeartbeatRequestHeader.from_ext_fields({"clusterName": "C", "brokerAddr": "a"})


def test_boolean_fields_keep_java_names() -> None:
    meta = h.GetMetaDataResponseHeader(group="g", controller_leader_id="n0",
                                       controller_leader_address="127.0.0.1:9878", is_leader=True,
                                       peers="n0-127.0.0.1:9878")
    assert meta.to_ext_fields()["isLeader"] == "true"
    clean = h.CleanControllerBrokerDataRequestHeader.from_ext_fields(
        {"brokerName": "b", "brokerControllerIdsToClean": "1;2", "isCleanLivingBroker": "true"})
    assert clean.is_clean_living_broker and clean.broker_controller_ids_to_clean == "1;2"


def test_elect_master_defaults_as_java() -> None:
    elect = h.ElectMasterRequestHeader.from_ext_fields({"clusterName": "C", "brokerName": "b"})
    assert elect.broker_id == -1 and elect.designate_elect is False
    assert h.ElectMasterResponseHeader.from_ext_fields(
        {"masterBrokerId": "1", "masterAddress": "a:1", "masterEpoch": "2",
         "syncStateSetEpoch": "3"}).master_epoch == 2
