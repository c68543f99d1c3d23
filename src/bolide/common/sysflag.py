"""RocketMQ ``MessageSysFlag`` bits stored in every CommitLog record."""

COMPRESSED = 0x1
MULTI_TAGS = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20
NEED_UNWRAP = 0x40
INNER_BATCH = 0x80
COMPRESSION_TYPE_MASK = 0x700


def transaction_type(sys_flag: int) -> int:
    """The transaction bits of ``sys_flag`` (one of the ``TRANSACTION_*`` values)."""
    return sys_flag & TRANSACTION_MASK


def gets_queue_entry(sys_flag: int) -> bool:
    """True for records that get a ConsumeQueue entry (NOT_TYPE and COMMIT)."""
    t = sys_flag & TRANSACTION_MASK
    return t in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
