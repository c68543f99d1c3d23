"""Store configuration: RocketMQ's MessageStoreConfig with snake_case names and units.

``StoreConfig.from_properties`` reads a RocketMQ ``broker.conf`` unchanged: its camelCase
keys map onto the fields below; keys that belong to other components are ignored.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bolide.common.config_file import PropertiesConfig, config_field
from bolide.errors import ConfigError


class FlushDiskType(enum.StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(enum.StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


_key = config_field


DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

# keys a running store takes at once (MessageStore.reconfigure): retention, disk watermarks and
# how much a get reads; the others are read when the store opens
RUNTIME_KEYS = frozenset({
    "deleteWhen", "fileReservedTime", "diskMaxUsedSpaceRatio", "diskSpaceWarningLevelRatio",
    "diskSpaceCleanForciblyRatio", "cleanFileForciblyEnable", "deleteCommitLogFilesInterval",
    "deleteConsumeQueueFilesInterval", "deleteFileBatchMax", "destroyMapedFileIntervalForcibly",
    "redeleteHangedFileInterval", "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInDisk",
    "maxTransferBytesOnMessageInDisk", "accessMessageInMemoryMaxRatio",
    "accessMessageInMemoryHotRatio",
})


@dataclass(frozen=True, slots=True)
class StoreConfig(PropertiesConfig):
    """Settings of a :class:`~bolide.store.MessageStore`; defaults are RocketMQ's."""

    store_path_root_dir: str = _key(
        "storePathRootDir", str(Path.home() / "store")
    )
    store_path_commit_log: str | None = _key("storePathCommitLog", None)
    mapped_file_size_commit_log: int = _key("mappedFileSizeCommitLog", 1024 * 1024 * 1024,
                                            alias="mapedFileSizeCommitLog")
    mapped_file_size_consume_queue: int = _key("mappedFileSizeConsumeQueue", 300000 * 20,
                                               alias="mapedFileSizeConsumeQueue")
    flush_disk_type: FlushDiskType = _key("flushDiskType", FlushDiskType.ASYNC_FLUSH)
    broker_role: BrokerRole = _key("brokerRole", BrokerRole.ASYNC_MASTER)
    flush_interval_commit_log_ms: int = _key("flushIntervalCommitLog", 500)
    flush_commit_log_least_pages: int = _key("flushCommitLogLeastPages", 4)
    flush_commit_log_thorough_interval_ms: int = _key("flushCommitLogThoroughInterval", 10000)
    flush_commit_log_timed: bool = _key("flushCommitLogTimed", True)
    flush_interval_consume_queue_ms: int = _key("flushIntervalConsumeQueue", 1000)
    flush_consume_queue_least_pages: int = _key("flushConsumeQueueLeastPages", 2)
    flush_consume_queue_thorough_interval_ms: int = _key(
        "flushConsumeQueueThoroughInterval", 60000
    )
    sync_flush_timeout_ms: int = _key("syncFlushTimeout", 5000)
    max_message_size: int = _key("maxMessageSize", 4 * 1024 * 1024)
    check_crc_on_recover: bool = _key("checkCRCOnRecover", True)
    message_index_enable: bool = _key("messageIndexEnable", True)
    message_index_safe: bool = _key("messageIndexSafe", False)
    # RocketMQ 5 controller mode (a BrokerConfig key there): consumers see the CommitLog up to
    # the confirm offset (what every in-sync replica holds) unless readUnCommitted
    enable_controller_mode: bool = _key("enableControllerMode", False)
    read_uncommitted: bool = _key("readUnCommitted", False)
    max_hash_slot_num: int = _key("maxHashSlotNum", 5_000_000)
    max_index_num: int = _key("maxIndexNum", 20_000_000)
    max_msgs_num_batch: int = _key("maxMsgsNumBatch", 64)
    max_transfer_bytes_on_message_in_memory: int = _key(
        "maxTransferBytesOnMessageInMemory", 256 * 1024
    )
    max_transfer_count_on_message_in_memory: int = _key("maxTransferCountOnMessageInMemory", 32)
    max_transfer_bytes_on_message_in_disk: int = _key("maxTransferBytesOnMessageInDisk", 64 * 1024)
    max_transfer_count_on_message_in_disk: int = _key("maxTransferCountOnMessageInDisk", 8)
    access_message_in_memory_max_ratio: int = _key("accessMessageInMemoryMaxRatio", 40)
    # RocketMQ 5's cold data: a read further than this % of memory behind the CommitLog's end
    # (cold data flow control, coldDataFlowControlEnable)
    access_message_in_memory_hot_ratio: int = _key("accessMessageInMemoryHotRatio", 26)
    # RocketMQ reads the machine's memory (StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE); 0 does too.
    # A smaller figure makes reads count as "old" (smaller batches, pulls sent to a slave) sooner.
    total_physical_memory_bytes: int = _key("bolideTotalPhysicalMemoryBytes", 0)
    # false: a slave's gets keep the asked offset where a master's correct it (PULL_OFFSET_MOVED)
    offset_check_in_slave: bool = _key("offsetCheckInSlave", False)
    delete_when: str = _key("deleteWhen", "04")
    file_reserved_time_hours: int = _key("fileReservedTime", 72)
    disk_max_used_space_ratio: int = _key("diskMaxUsedSpaceRatio", 75)
    clean_resource_interval_ms: int = _key("cleanResourceInterval", 10000)
    destroy_mapped_file_interval_forcibly_ms: int = _key(
        "destroyMapedFileIntervalForcibly", 120000
    )
    redelete_hanged_file_interval_ms: int = _key("redeleteHangedFileInterval", 120000)
    delete_commit_log_files_interval_ms: int = _key("deleteCommitLogFilesInterval", 100)
    delete_consume_queue_files_interval_ms: int = _key("deleteConsumeQueueFilesInterval", 100)
    delete_file_batch_max: int = _key("deleteFileBatchMax", 10)
    clean_file_forcibly_enable: bool = _key("cleanFileForciblyEnable", True)
    # RocketMQ 4.9 reads these two from the system properties
    # rocketmq.broker.diskSpaceWarningLevelRatio / diskSpaceCleanForciblyRatio (as fractions);
    # here they are broker.conf keys in percent, like 5.x.
    disk_space_warning_level_ratio: int = _key("diskSpaceWarningLevelRatio", 90)
    disk_space_clean_forcibly_ratio: int = _key("diskSpaceCleanForciblyRatio", 85)
    message_delay_level: str = _key("messageDelayLevel", DEFAULT_DELAY_LEVELS)
    store_host: str = _key("brokerIP1", "127.0.0.1", kind="ip")
    listen_port: int = _key("listenPort", 10911)
    dispatch_batch_bytes: int = _key("bolideDispatchBatchBytes", 4 * 1024 * 1024)
    preallocate_next_segment: bool = _key("bolidePreallocateNextSegment", True)
    prefault_segments: bool = _key("bolidePrefaultSegments", True)
    # compacted topics (cleanup.policy=COMPACTION), RocketMQ 5's CompactionStore
    enable_compaction: bool = _key("enableCompaction", True)
    compaction_mapped_file_size: int = _key("compactionMappedFileSize", 100 * 1024 * 1024)
    compaction_cq_mapped_file_size: int = _key("compactionCqMappedFileSize", 10 * 1024 * 1024)
    compaction_schedule_interval_ms: int = _key("compactionScheduleInternal", 15 * 60 * 1000)
    max_offset_map_size: int = _key("maxOffsetMapSize", 100 * 1024 * 1024)
    compaction_thread_num: int = _key("compactionThreadNum", 6)
    # controller mode: the broker's identity files (clusterName#brokerName#brokerId), by default
    # <storePathRootDir>/brokerIdentity and brokerIdentity-temp (bolide.store.broker_identity)
    store_path_broker_identity: str | None = _key("storePathBrokerIdentity", None)

    def __post_init__(self) -> None:
        if self.mapped_file_size_consume_queue <= 0:
            raise ConfigError(
                f"mappedFileSizeConsumeQueue={self.mapped_file_size_consume_queue} is not positive; "
                "use a multiple of 20 bytes (RocketMQ's default is 6000000)"
            )
        if self.mapped_file_size_consume_queue % 20:
            rounded = (self.mapped_file_size_consume_queue // 20 + 1) * 20
            object.__setattr__(self, "mapped_file_size_consume_queue", rounded)
        for key, ratio in (("accessMessageInMemoryMaxRatio", self.access_message_in_memory_max_ratio),
                           ("accessMessageInMemoryHotRatio", self.access_message_in_memory_hot_ratio)):
            if not 0 <= ratio <= 100:
                raise ConfigError(f"{key}={ratio} is not a percentage; use 0 to 100")
        if self.compaction_cq_mapped_file_size < 46 * 3:
            raise ConfigError(f"compactionCqMappedFileSize={self.compaction_cq_mapped_file_size} is too "
                              "small; use at least 138 bytes (three 46-byte units; RocketMQ's default "
                              "is 10485760)")
        if self.compaction_schedule_interval_ms <= 0 or self.max_offset_map_size <= 0:
            raise ConfigError("compactionScheduleInternal and maxOffsetMapSize must be positive "
                              "(RocketMQ's defaults: 900000 ms and 104857600 bytes)")
        if self.mapped_file_size_commit_log < 4096:
            raise ConfigError(
                f"mappedFileSizeCommitLog={self.mapped_file_size_commit_log} is too small; "
                "use at least 4096 bytes (RocketMQ's default is 1073741824)"
            )

    # -- derived paths -------------------------------------------------------------------
    @property
    def root(self) -> Path:
        return Path(self.store_path_root_dir)

    @property
    def broker_identity_path(self) -> Path:
        """storePathBrokerIdentity, else ``<storePathRootDir>/brokerIdentity`` (RocketMQ's)."""
        if self.store_path_broker_identity:
            return Path(self.store_path_broker_identity)
        return self.root / "brokerIdentity"

    @property
    def commit_log_dir(self) -> Path:
        return Path(self.store_path_commit_log) if self.store_path_commit_log else self.root / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.root / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    @property
    def store_address(self) -> str:
        """``ip:port`` written as the store host of every record."""
        return f"{self.store_host}:{self.listen_port}"

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == FlushDiskType.SYNC_FLUSH

    def replace(self, **changes: Any) -> StoreConfig:
        return dataclasses.replace(self, **changes)
