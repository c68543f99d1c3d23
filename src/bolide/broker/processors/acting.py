"""NOTIFY_MIN_BROKER_ID_CHANGE (905): a NameServer with ``notifyMinBrokerIdChanged`` tells the
brokers of a group that its lowest live broker id changed (slave acting master,
:mod:`bolide.broker.acting_master`). Answered SUCCESS always, as RocketMQ 5's
AdminBrokerProcessor; only a slave with ``enableSlaveActingMaster=true`` acts on it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.namesrv import NotifyMinBrokerIdChangeRequestHeader
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


class ActingMasterProcessor:
    CODES = (RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE,)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = request.read_header(NotifyMinBrokerIdChangeRequestHeader)
        if self.broker.acting_master is not None:
            self.broker.acting_master.notified(header)
        return request.make_response()
