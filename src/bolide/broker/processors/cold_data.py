"""Cold data flow control's administration (RocketMQ 5, :mod:`bolide.broker.cold_data`):
UPDATE_COLD_DATA_FLOW_CTR_CONFIG (2001, a body of ``group=threshold`` lines, bytes per 5 s),
REMOVE_COLD_DATA_FLOW_CTR_CONFIG (2002, the group's name as the body) and
GET_COLD_DATA_FLOW_CTR_INFO (2003, a JSON body: ``runtimeTable``, ``configTable``,
``cgColdReadThreshold``, ``globalColdReadThreshold``, ``globalAcc``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.common.config_file import parse_properties
from bolide.common.fastjson import dumps
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

MAX_THRESHOLD = 2**63 - 1  # a Java long


def parse_thresholds(text: str) -> dict[str, int] | str:
    """The ``group=threshold`` lines of an update; a remark naming the bad entries instead."""
    thresholds, bad = {}, []
    for group, value in parse_properties(text).items():
        try:
            threshold = int(value.strip())
        except ValueError:
            threshold = -1
        if not group or not 0 <= threshold <= MAX_THRESHOLD:
            bad.append(f"{group}={value}")
        else:
            thresholds[group] = threshold
    if bad:
        return (f"cold read thresholds must be whole numbers of bytes (0 or more) per consumer group: "
                f"{', '.join(bad)} is not; nothing was changed")
    return thresholds


class ColdDataProcessor:
    """The thresholds set by administrators, and the accounting's state."""

    CODES = (RequestCode.UPDATE_COLD_DATA_FLOW_CTR_CONFIG, RequestCode.REMOVE_COLD_DATA_FLOW_CTR_CONFIG,
             RequestCode.GET_COLD_DATA_FLOW_CTR_INFO)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        control = self.broker.cold_data
        if request.code == RequestCode.GET_COLD_DATA_FLOW_CTR_INFO:
            return request.make_response(body=dumps(control.info()))
        text = request.body_bytes().decode("utf-8", "replace")
        if request.code == RequestCode.REMOVE_COLD_DATA_FLOW_CTR_CONFIG:
            group = text.strip()
            if not group:
                return request.make_response(ResponseCode.SYSTEM_ERROR,
                                             "no consumer group: send its name as the body")
            control.remove_threshold(group)
            return request.make_response()
        thresholds = parse_thresholds(text)
        if isinstance(thresholds, str):
            return request.make_response(ResponseCode.SYSTEM_ERROR, thresholds)
        try:
            for group, threshold in thresholds.items():
                control.set_threshold(group, threshold)
        except ValueError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        return request.make_response()
