"""GET_BROKER_HA_STATUS (907) answer: RocketMQ 5's ``HARuntimeInfo``, which mqadmin haStatus
prints. A master fills the replication figures of each connected slave; a slave fills
``haClientRuntimeInfo`` (its HA client's view of the master)."""

from __future__ import annotations

from bolide.protocol.bodies.bean import Bean, bean, jfield


@bean
class HAConnectionRuntimeInfo(Bean):
    """One slave connection on a master."""

    addr: str = ""  # the slave's HA socket address, "ip:port"
    slave_ack_offset: int = -1  # the CommitLog offset the slave last acknowledged
    diff: int = 0  # master max offset - slaveAckOffset: bytes the slave lacks
    in_sync: bool = False
    transferred_byte_in_second: int = 0
    transfer_from_where: int = -1  # the next CommitLog offset the master sends


@bean
class HAClientRuntimeInfo(Bean):
    """A slave's HA client."""

    master_addr: str | None = None  # the master's HA address
    transferred_byte_in_second: int = 0
    max_offset: int = 0  # the slave's CommitLog max offset
    last_read_timestamp: int = 0  # ms: last bytes received from the master
    last_write_timestamp: int = 0  # ms: last offset report sent to the master
    master_flush_offset: int = 0  # controller mode only in RocketMQ; 0 here
    # Java's bean has this field without a getter, so a Java broker never sends it
    is_activated: bool = jfield(default=False, name="isActivated")


@bean
class HARuntimeInfo(Bean):
    """The whole answer; ``master`` tells which half is filled."""

    master: bool = False
    master_commit_log_max_offset: int = 0
    in_sync_slave_nums: int = 0
    ha_connection_info: list[HAConnectionRuntimeInfo] = jfield(factory=list)
    ha_client_runtime_info: HAClientRuntimeInfo = jfield(factory=HAClientRuntimeInfo)
