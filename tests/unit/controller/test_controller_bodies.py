"""Controller bodies: byte-exact with what RocketMQ 5.3's fastjson writes, and parsed back."""

from __future__ import annotations

import pytest

from bolide.errors import ProtocolError
from bolide.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    EpochEntry,
    EpochEntryCache,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    decode_broker_names,
    encode_broker_names,
)


def test_sync_state_set_as_java_writes_it() -> None:
    body = SyncStateSet({2, 1}, 3)
    assert body.encode() == b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}'
    assert SyncStateSet.decode(b'{"syncStateSet":[2,1],"syncStateSetEpoch":3}') == body


def test_elect_master_body_with_member_group() -> None:
    body = ElectMasterResponseBody(BrokerMemberGroup("C", "b", {1: "h:1", 2: "h:2"}), {1})
    encoded = body.encode()
    assert encoded == (b'{"brokerMemberGroup":{"brokerAddrs":{1:"h:1",2:"h:2"},"brokerName":"b",'
                       b'"cluster":"C"},"syncStateSet":[1]}')
    assert ElectMasterResponseBody.decode(encoded) == body
    # MASTER_STILL_EXIST's body has no group
    assert ElectMasterResponseBody(sync_state_set={1, 2}).encode() == b'{"syncStateSet":[1,2]}'


def test_broker_replicas_info_round_trip() -> None:
    info = BrokerReplicasInfo({"b": ReplicasInfo(1, "h:1", 2, 3, [ReplicaIdentity("b", 1, "h:1", True)],
                                                 [ReplicaIdentity("b", 2, "h:2", False)])})
    encoded = info.encode()
    assert encoded.startswith(b'{"replicasInfoTable":{"b":{"inSyncReplicas":[{"alive":true,'
                              b'"brokerAddress":"h:1","brokerId":1,"brokerName":"b"}],"masterAddress":"h:1"')
    assert BrokerReplicasInfo.decode(encoded) == info


def test_epoch_entry_cache_defaults_end_offset_to_long_max() -> None:
    cache = EpochEntryCache("C", "b", 1, [EpochEntry(1, 0, 100), EpochEntry(2, 100)], 150)
    encoded = cache.encode()
    assert b'"endOffset":9223372036854775807' in encoded
    assert EpochEntryCache.decode(encoded) == cache


def test_broker_names_body() -> None:
    assert encode_broker_names(["a", "b"]) == b'["a","b"]'
    assert decode_broker_names(b'["a"]') == ["a"]
    with pytest.raises(ProtocolError, match="JSON array of broker names"):
        decode_broker_names(b'{"a":1}')
