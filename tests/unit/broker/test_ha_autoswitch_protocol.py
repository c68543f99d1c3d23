"""The AutoSwitch HA codec: byte layouts of RocketMQ 5.3.3's AutoSwitchHAClient (slave ->
master) and AutoSwitchHAConnection (master -> slave), fed whole and byte by byte."""

from __future__ import annotations

import pytest

from bolide.broker.config import BrokerConfig
from bolide.broker.ha.autoswitch import AutoSwitchHAConfig
from bolide.broker.ha.autoswitch.protocol import (
    MasterHandshake,
    MasterMessageReader,
    SlaveHandshake,
    SlaveMessageReader,
    Transfer,
    encode_master_handshake,
    encode_report,
    encode_slave_handshake,
    encode_transfer_header,
)
from bolide.errors import ProtocolError
from bolide.store.epoch_file import EpochEntry


def test_slave_messages_layout() -> None:
    # state HANDSHAKE(1), isSyncFromLastFile, isAsyncLearner, slaveBrokerId
    assert encode_slave_handshake(SlaveHandshake(5, True, False)) == bytes.fromhex(
        "00000001" "0001" "0000" "0000000000000005")
    # state TRANSFER(2), maxOffset
    assert encode_report(0x1234) == bytes.fromhex("00000002" "0000000000001234")


def test_master_messages_layout() -> None:
    hs = encode_master_handshake(700, 2, [EpochEntry(1, 0), EpochEntry(2, 300)])
    assert hs == bytes.fromhex("00000001" "00000018" "00000000000002bc" "00000002"
                               "00000001" "0000000000000000" "00000002" "000000000000012c")
    header = encode_transfer_header(300, 4, 2, 300, 250)
    assert len(header) == 36
    assert header == bytes.fromhex("00000002" "00000004" "000000000000012c" "00000002"
                                   "000000000000012c" "00000000000000fa")


def test_readers_take_byte_by_byte_streams() -> None:
    stream = encode_slave_handshake(SlaveHandshake(9, False, True)) + encode_report(77) \
        + encode_report(88)
    reader = SlaveMessageReader()
    got: list[object] = []
    for b in stream:
        got += reader.feed(bytes([b]))
    assert got == [SlaveHandshake(9, False, True), 77, 88]

    stream = encode_master_handshake(10, 1, [EpochEntry(1, 0)]) \
        + encode_transfer_header(0, 3, 1, 0, 3) + b"abc" + encode_transfer_header(3, 0, 1, 0, 3)
    master = MasterMessageReader()
    out: list[object] = []
    for b in stream:
        out += master.feed(bytes([b]))
    assert out == [MasterHandshake(10, 1, [EpochEntry(1, 0)]), Transfer(0, 1, 0, 3, b"abc"),
                   Transfer(3, 1, 0, 3, b"")]


def test_garbage_is_refused_with_a_hint() -> None:
    with pytest.raises(ProtocolError, match="classic HA"):
        SlaveMessageReader().feed(b"\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00")
    with pytest.raises(ProtocolError, match="body size"):
        MasterMessageReader().feed(b"\x00\x00\x00\x02\xff\xff\xff\xff" + bytes(28))


def test_config_from_broker_config() -> None:
    cfg = AutoSwitchHAConfig.from_broker_config(
        BrokerConfig(listen_port=10911, broker_id=3, ha_send_heartbeat_interval_ms=700))
    assert cfg.ha_port == 10912 and cfg.local_broker_id == 3
    assert cfg.ha_send_heartbeat_interval_ms == 700
    assert cfg.ha_max_time_slave_not_catchup_ms == 15_000 and not cfg.all_ack_in_sync_state_set
    assert AutoSwitchHAConfig.from_broker_config(BrokerConfig(), ha_port=0).ha_port == 0
