"""A controller-mode broker's codes: NOTIFY_BROKER_ROLE_CHANGED (1008, the controller tells the
broker its group's new master) and GET_BROKER_EPOCH_CACHE (1007, ``mqadmin getBrokerEpoch``:
the broker's epoch entries and CommitLog max offset), as RocketMQ 5's AdminBrokerProcessor."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bolide.errors import BolideError
from bolide.protocol.bodies.controller import EpochEntryCache, SyncStateSet
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.controller import NotifyBrokerRoleChangedRequestHeader
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)


class ReplicasProcessor:
    """Answers 1007 and 1008; a broker not in controller mode answers SYSTEM_ERROR (1007) or
    takes no action (1008), as RocketMQ does."""

    CODES = (RequestCode.GET_BROKER_EPOCH_CACHE, RequestCode.NOTIFY_BROKER_ROLE_CHANGED)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._changes: set[asyncio.Task[None]] = set()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_BROKER_EPOCH_CACHE:
            return self._epoch_cache(request)
        return self._role_changed(request)

    def _epoch_cache(self, request: RemotingCommand) -> RemotingCommand:
        broker, switch = self.broker, self.broker.role_switch
        if not broker.config.enable_controller_mode or switch is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         "this request only for controllerMode ")
        cfg = broker.config
        cache = EpochEntryCache(cluster_name=cfg.broker_cluster_name, broker_name=cfg.broker_name,
                                broker_id=cfg.broker_id, epoch_list=switch.epoch_entries(),
                                max_offset=broker.store.max_phy_offset)
        return request.make_response(body=cache.encode())

    def _role_changed(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(NotifyBrokerRoleChangedRequestHeader)
        try:
            members = SyncStateSet.decode(request.body_bytes()) if request.body else SyncStateSet()
        except (BolideError, ValueError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"the SyncStateSet body cannot be read: {exc}")
        log.info("controller says: master of %s is broker %s at %s (epoch %s)",
                 self.broker.config.broker_name, header.master_broker_id, header.master_address,
                 header.master_epoch)
        replicas = self.broker.replicas
        if replicas is not None:  # the change (and its NameServer registration) goes on after the answer
            task = asyncio.get_running_loop().create_task(replicas.change_role(
                header.master_broker_id, header.master_address, header.master_epoch,
                header.sync_state_set_epoch, set(members.sync_state_set)))
            self._changes.add(task)
            task.add_done_callback(self._changes.discard)
        return request.make_response()
