"""RocketMQ 5.3's RocksDB migration codes, answered for Bolide's stores, whose ConsumeQueues
are files and whose configs are JSON files (``config/*.json``) only:
CHECK_ROCKSDB_CQ_WRITE_PROGRESS (354, ``mqadmin checkRocksdbCqWriteProgress``) says there is no
RocksDB ConsumeQueue to check, as a RocketMQ broker without ``rocksdbCQDoubleWriteEnable``
finds; EXPORT_ROCKSDB_CONFIG_TO_JSON (355, ``mqadmin rocksDBConfigToJson``) has nothing to
export, as a RocketMQ broker whose configs are JSON answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.common import fastjson
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import (
    ROCKSDB_CONFIG_TYPES,
    CheckRocksdbCqWriteProgressRequestHeader,
    ExportRocksDBConfigToJsonRequestHeader,
)
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

CHECK_NOT_OK = 1  # RocketMQ's CheckRocksdbCqWriteResult.CheckStatus ordinals: OK 0, NOT_OK 1, ...
NO_ROCKSDB_CQ = ("Bolide keeps ConsumeQueues in files only (no RocksDB double write, as "
                 "rocksdbCQWriteEnable=false): there is no RocksDB ConsumeQueue to check")


class RocksDBAdminProcessor:
    """Answers the RocksDB migration codes for a store without RocksDB."""

    CODES = (RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS, RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS:
            request.read_header(CheckRocksdbCqWriteProgressRequestHeader)  # a bad header is answered
            body = {"checkResult": NO_ROCKSDB_CQ, "checkStatus": CHECK_NOT_OK}
            return request.make_response(body=fastjson.dumps(body))
        header = request.read_header(ExportRocksDBConfigToJsonRequestHeader)
        names = [n.strip() for n in header.config_type.split(";") if n.strip()]
        unknown = [n for n in names if n.lower() not in {t.lower() for t in ROCKSDB_CONFIG_TYPES}]
        if not names or unknown:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"Unknown config type: {', '.join(unknown) or '(none)'}: give "
                f"{', '.join(ROCKSDB_CONFIG_TYPES)}, joined by ';'")
        return request.make_response()  # the configs are JSON files already: nothing to write
