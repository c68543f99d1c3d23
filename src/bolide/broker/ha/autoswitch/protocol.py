"""The AutoSwitch HA wire format (RocketMQ 5 AutoSwitchHAClient / AutoSwitchHAConnection),
as a pure codec. All integers big-endian; ``state`` is the HAConnectionState ordinal.

Slave -> master:

- handshake, 16 bytes: ``i32 state=HANDSHAKE, i16 isSyncFromLastFile, i16 isAsyncLearner,
  i64 slaveBrokerId``
- transfer report, 12 bytes: ``i32 state=TRANSFER, i64 slaveMaxOffset`` (the first one after
  the handshake is where the stream starts; later ones are acks)

Master -> slave:

- handshake, 20-byte header + body: ``i32 state=HANDSHAKE, i32 bodySize, i64 masterMaxOffset,
  i32 lastEpoch``, then ``bodySize / 12`` epoch entries ``{i32 epoch, i64 startOffset}``
- transfer, 36-byte header + body: ``i32 state=TRANSFER, i32 bodySize, i64 offset,
  i32 epoch, i64 epochStartOffset, i64 confirmOffset``, then ``bodySize`` CommitLog bytes
  starting at ``offset``, all of one epoch (bodySize 0: a heartbeat)
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from bolide.errors import ProtocolError
from bolide.store.epoch_file import EpochEntry


class HAState(enum.IntEnum):
    """HAConnectionState; the ordinal goes on the wire."""

    READY = 0
    HANDSHAKE = 1
    TRANSFER = 2
    SUSPEND = 3
    SHUTDOWN = 4


SLAVE_HANDSHAKE = struct.Struct(">ihhq")  # 16
SLAVE_TRANSFER = struct.Struct(">iq")  # 12
MASTER_HANDSHAKE = struct.Struct(">iiqi")  # 20
MASTER_TRANSFER = struct.Struct(">iiqiqq")  # 36
EPOCH_ENTRY = struct.Struct(">iq")  # 12
MAX_BODY = 64 * 1024 * 1024  # a bound against garbage; masters send 32 KiB frames


@dataclass(slots=True)
class SlaveHandshake:
    broker_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False


@dataclass(slots=True)
class MasterHandshake:
    max_offset: int
    last_epoch: int
    entries: list[EpochEntry]


@dataclass(slots=True)
class Transfer:
    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body: bytes


def encode_slave_handshake(h: SlaveHandshake) -> bytes:
    return SLAVE_HANDSHAKE.pack(HAState.HANDSHAKE, int(h.sync_from_last_file),
                                int(h.async_learner), h.broker_id)


def encode_report(offset: int) -> bytes:
    return SLAVE_TRANSFER.pack(HAState.TRANSFER, offset)


def encode_master_handshake(max_offset: int, last_epoch: int,
                            entries: list[EpochEntry]) -> bytes:
    body = b"".join(EPOCH_ENTRY.pack(e.epoch, e.start_offset) for e in entries)
    return MASTER_HANDSHAKE.pack(HAState.HANDSHAKE, len(body), max_offset, last_epoch) + body


def encode_transfer_header(offset: int, body_size: int, epoch: int, epoch_start: int,
                           confirm_offset: int) -> bytes:
    return MASTER_TRANSFER.pack(HAState.TRANSFER, body_size, offset, epoch, epoch_start,
                                confirm_offset)


class SlaveMessageReader:
    """The master's side: a slave's handshakes and reports from a byte stream."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[SlaveHandshake | int]:
        """The messages ``data`` completes: a :class:`SlaveHandshake` or a reported offset.
        ProtocolError on a state that is neither."""
        buf = self._buf
        buf += data
        out: list[SlaveHandshake | int] = []
        pos = 0
        while len(buf) - pos >= 4:
            state = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
            if state == HAState.HANDSHAKE:
                if len(buf) - pos < SLAVE_HANDSHAKE.size:
                    break
                _, last_file, learner, broker_id = SLAVE_HANDSHAKE.unpack_from(buf, pos)
                out.append(SlaveHandshake(broker_id, last_file == 1, learner == 1))
                pos += SLAVE_HANDSHAKE.size
            elif state == HAState.TRANSFER:
                if len(buf) - pos < SLAVE_TRANSFER.size:
                    break
                out.append(SLAVE_TRANSFER.unpack_from(buf, pos)[1])
                pos += SLAVE_TRANSFER.size
            else:
                raise ProtocolError(f"bad AutoSwitch HA message state {state} from a slave; is "
                                    "it a RocketMQ 4.x (classic HA) slave? Use the same HA "
                                    "mode (enableControllerMode) on every replica")
        if pos:
            del buf[:pos]
        return out


class MasterMessageReader:
    """The slave's side: the master's handshake and transfer frames from a byte stream."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[MasterHandshake | Transfer]:
        """The messages ``data`` completes. ProtocolError on an unknown state or an absurd
        body size."""
        buf = self._buf
        buf += data
        out: list[MasterHandshake | Transfer] = []
        pos = 0
        size = len(buf)
        while size - pos >= MASTER_HANDSHAKE.size:
            state, body_size, offset, epoch = MASTER_HANDSHAKE.unpack_from(buf, pos)
            if not 0 <= body_size <= MAX_BODY:
                raise ProtocolError(f"bad AutoSwitch HA frame body size {body_size}; is the "
                                    "address really a controller-mode master's HA port?")
            if state == HAState.HANDSHAKE:
                end = pos + MASTER_HANDSHAKE.size + body_size
                if end > size:
                    break
                entries = [EpochEntry(e, s) for e, s in EPOCH_ENTRY.iter_unpack(
                    bytes(buf[pos + MASTER_HANDSHAKE.size : end - body_size % 12]))]
                out.append(MasterHandshake(offset, epoch, entries))
            elif state == HAState.TRANSFER:
                end = pos + MASTER_TRANSFER.size + body_size
                if end > size:
                    break
                _, _, _, _, epoch_start, confirm = MASTER_TRANSFER.unpack_from(buf, pos)
                out.append(Transfer(offset, epoch, epoch_start, confirm,
                                    bytes(buf[pos + MASTER_TRANSFER.size : end])))
            else:
                raise ProtocolError(f"bad AutoSwitch HA frame state {state} from the master; "
                                    "is it a classic (non-controller) HA master?")
            pos = end
        if pos:
            del buf[:pos]
        return out
