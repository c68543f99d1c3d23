"""SET_COMMITLOG_READ_MODE (2004, RocketMQ 5): turn the kernel's read-ahead in the CommitLog's
mapped segments on or off. The extFields key ``READ_AHEAD_MODE`` is a ``madvise`` advice: 0
(MADV_NORMAL, read-ahead) or 1 (MADV_RANDOM, none); the store applies it to every segment and
to those mapped later. Remarks and codes as RocketMQ's AdminBrokerProcessor answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

READ_AHEAD_MODE = "READ_AHEAD_MODE"
MADV_NORMAL, MADV_RANDOM = 0, 1  # Linux's numbers, which RocketMQ's LibC and mqadmin use


class ReadModeProcessor:
    """Applies the read-ahead mode to the store."""

    CODES = (RequestCode.SET_COMMITLOG_READ_MODE,)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if not request.ext_fields:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         "set commitlog readahead mode param error")
        raw = request.ext_fields.get(READ_AHEAD_MODE)
        try:
            mode = int(raw.strip()) if raw is not None else None
        except ValueError:
            mode = None
        if mode is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"set commitlog readahead mode failed: {READ_AHEAD_MODE}="
                f"{raw!r} is not a number: give {MADV_NORMAL} (read-ahead) or {MADV_RANDOM} (none)")
        if mode not in (MADV_NORMAL, MADV_RANDOM):
            return request.make_response(
                ResponseCode.INVALID_PARAMETER, f"set commitlog readahead mode param value error: {mode} is "
                f"neither {MADV_NORMAL} (MADV_NORMAL) nor {MADV_RANDOM} (MADV_RANDOM)")
        self.broker.store.set_commit_log_read_ahead(mode == MADV_NORMAL)
        return request.make_response(remark=f"set commitlog readahead mode success, mode: {mode}")
