"""What slaves and mqadmin ask a broker about replication: GET_ALL_CONSUMER_OFFSET (43),
GET_ALL_DELAY_OFFSET (45) and GET_ALL_MESSAGE_REQUEST_MODE (402, RocketMQ 5), which a slave's
sync reads from its master, and
GET_BROKER_HA_STATUS (907, RocketMQ 5), which mqadmin haStatus prints, and
GET_TIMER_CHECK_POINT (60), which a RocketMQ 5 slave asks its master as it syncs (its
GET_TIMER_METRICS is :mod:`bolide.broker.processors.broker_ops`'). Topic configs (21) and
subscription groups (201) are answered by :mod:`bolide.broker.processors.admin`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.broker.ha.status import master_runtime_info, slave_runtime_info
from bolide.common import fastjson
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


# lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset, masterTimerQueueOffset and the
# data version (stateVersion, timestamp, counter): seven big-endian longs
_EMPTY_TIMER_CHECKPOINT = bytes(56)


class HAAdminProcessor:
    """Offsets for slave sync and the replication status."""

    CODES = (RequestCode.GET_ALL_CONSUMER_OFFSET, RequestCode.GET_ALL_DELAY_OFFSET,
             RequestCode.GET_BROKER_HA_STATUS, RequestCode.GET_TIMER_CHECK_POINT,
             RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        c = RequestCode
        self._handlers = {
            c.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            c.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            c.GET_BROKER_HA_STATUS: self.get_ha_status,
            c.GET_TIMER_CHECK_POINT: self.get_timer_check_point,
            c.GET_ALL_MESSAGE_REQUEST_MODE: self.get_all_message_request_mode,
        }

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return self._handlers[request.code](request)

    def get_all_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        """The ConsumerOffsetSerializeWrapper as Java sends it: compact fastjson with bare
        queue id keys, ``{"offsetTable":{"topic@group":{0:12}}}``."""
        return request.make_response(body=fastjson.dumps(self.broker.offsets.to_json_obj()))

    def get_all_delay_offset(self, request: RemotingCommand) -> RemotingCommand:
        """delayOffset.json's content (compact): ``{"offsetTable":{1:5,2:0}}``."""
        return request.make_response(body=fastjson.dumps(self.broker.delay_offsets.to_json_obj()))

    def get_all_message_request_mode(self, request: RemotingCommand) -> RemotingCommand:
        """messageRequestMode.json's content (compact): ``{"messageRequestModeMap":{...}}``."""
        return request.make_response(body=fastjson.dumps(self.broker.request_modes.to_json_obj()))

    def get_ha_status(self, request: RemotingCommand) -> RemotingCommand:
        """HARuntimeInfo: a slave's HA client figures, or a master's slave connections (in
        controller mode, the AutoSwitch HA's)."""
        broker = self.broker
        if broker.role_switch is not None:
            info = broker.role_switch.replication.ha.runtime_info()
        elif broker.ha_slave is not None:
            info = slave_runtime_info(broker.store, broker.ha_slave)
        else:
            info = master_runtime_info(broker.store, broker.ha_master)
        return request.make_response(body=info.encode())

    def get_timer_check_point(self, request: RemotingCommand) -> RemotingCommand:
        """A RocketMQ 5 TimerCheckpoint, all zero: Bolide has no timer wheel, so there is no
        timer progress to copy (a 5.x slave logs an error for any answer but SUCCESS)."""
        return request.make_response(body=_EMPTY_TIMER_CHECKPOINT)
