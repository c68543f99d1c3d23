"""The slave acting master codes a broker answers (:mod:`bolide.broker.acting_master`):

- NOTIFY_MIN_BROKER_ID_CHANGE (905): a NameServer with ``notifyMinBrokerIdChanged`` tells the
  brokers of a group that its lowest live broker id changed. Answered SUCCESS always, as
  RocketMQ 5's AdminBrokerProcessor; only a slave with ``enableSlaveActingMaster=true`` acts on
  it.
- EXCHANGE_BROKER_HA_INFO (906): a returning master tells a slave its HA and broker addresses
  before it goes online (:mod:`bolide.broker.pre_online`): the slave replicates from there and
  copies that master's metadata again. Without a ``masterHaAddress`` a starting slave asks its
  master (RocketMQ 5's pre-online slave): a master answers its HA address, the end of its
  CommitLog when its store opened and its broker address; anything else answers SUCCESS with no
  fields, as RocketMQ does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.protocol.bodies.route import MASTER_ID
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.namesrv import (
    ExchangeHAInfoRequestHeader,
    ExchangeHAInfoResponseHeader,
    NotifyMinBrokerIdChangeRequestHeader,
)
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


class ActingMasterProcessor:
    CODES = (RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, RequestCode.EXCHANGE_BROKER_HA_INFO)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.EXCHANGE_BROKER_HA_INFO:
            return self.exchange_ha_info(request)
        header = request.read_header(NotifyMinBrokerIdChangeRequestHeader)
        if self.broker.acting_master is not None:
            self.broker.acting_master.notified(header)
        return request.make_response()

    def exchange_ha_info(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(ExchangeHAInfoRequestHeader)
        broker = self.broker
        if header.master_ha_address is not None:  # from a returning master
            if broker.ha_slave is not None:
                broker.ha_slave.set_master(header.master_ha_address)
            if broker.slave_sync is not None and header.master_address:
                broker.slave_sync.set_master(header.master_address)
            return request.make_response()
        if broker.config.broker_id == MASTER_ID and broker.registration is not None:
            return request.make_response(header=ExchangeHAInfoResponseHeader(
                master_ha_address=broker.registration.ha_addr or None,
                master_flush_offset=broker.init_max_offset, master_address=broker.broker_addr))
        return request.make_response()
