"""A returning master's pre-online step (RocketMQ 5's BrokerPreOnlineService, with
``enableSlaveActingMaster=true``, ``totalReplicas`` above 1 and ``skipPreOnline=false``; with
RocketMQ's default ``totalReplicas=1`` a master registers at once).

While the master was away, its lowest live slave acted for it: consumers committed their
offsets there and its delay-level schedule delivered the delayed messages that came due. Before
the master registers with the NameServers (until then no client finds it, and its own schedule
waits), it tells each live slave of its group, lowest id first, where its HA service is
(EXCHANGE_BROKER_HA_INFO, 906), asks it for GET_ALL_CONSUMER_OFFSET (43) and
GET_ALL_DELAY_OFFSET (45) and takes them where the slave's data version is not older than
its own (RocketMQ's ``syncMetadataReverse``): consumers go on from where they were on the slave,
and delayed messages are not delivered twice. A slave's consumer offsets replace the master's
per ``topic@group``; offsets of groups the slave does not have stay. A slave that does not answer
is asked again every second, as RocketMQ does, until it answers or the NameServer drops it from
the group.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bolide.errors import BolideError, ProtocolError, RemotingError
from bolide.protocol.bodies.route import MASTER_ID
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.namesrv import ExchangeHAInfoRequestHeader
from bolide.store.config_files import ConsumerOffsetManager, DataVersion, DelayOffsetManager

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

RETRY_S = 1.0
TIMEOUT_MS = 3000  # per call, as RocketMQ's BrokerOuterAPI


class PreOnlineError(BolideError):
    """A slave refused or failed one of the calls."""


def _order(version: DataVersion | None) -> tuple[int, int, int]:
    if version is None:
        return (0, 0, 0)
    return (version.state_version or 0, version.counter, version.timestamp)


def not_older(theirs: DataVersion | None, ours: DataVersion | None) -> bool:
    """RocketMQ's ``ours.compare(theirs) <= 0``: state version, then counter, then timestamp
    (a file without a version counts as the lowest)."""
    return _order(ours) <= _order(theirs)


async def go_online(broker: BrokerController) -> None:
    """Take the group's slaves' metadata (retrying until each live one answers)."""
    assert broker.acting_master is not None
    while True:
        members = await broker.acting_master.fetch_member_group()
        slaves = sorted((i, addr) for i, addr in members.items() if i != MASTER_ID)
        try:
            for broker_id, addr in slaves:
                await send_ha_info(broker, addr)
                await sync_metadata_reverse(broker, addr)
                log.info("pre-online: took the metadata of slave %d (%s)", broker_id, addr)
            return
        except (RemotingError, ProtocolError, OSError, PreOnlineError) as exc:
            log.warning("pre-online: the metadata reverse sync failed, again in %.0f s: %s",
                        RETRY_S, exc)
        await asyncio.sleep(RETRY_S)


async def _fetch(broker: BrokerController, addr: str, code: int) -> bytes:
    response = await broker.namesrv_client.invoke(addr, RemotingCommand.request(code), TIMEOUT_MS)
    if response.code != ResponseCode.SUCCESS:
        raise PreOnlineError(f"{RequestCode(code).name} to {addr} answered code {response.code}: "
                             f"{response.remark}")
    return response.body_bytes()


async def send_ha_info(broker: BrokerController, addr: str) -> None:
    """EXCHANGE_BROKER_HA_INFO to the slave at ``addr``: where this master's HA service and
    broker are, so that it replicates from here again (RocketMQ's ``sendBrokerHaInfo``)."""
    assert broker.registration is not None
    header = ExchangeHAInfoRequestHeader(master_ha_address=broker.registration.ha_addr,
                                         master_flush_offset=broker.init_max_offset,
                                         master_address=broker.broker_addr)
    request = RemotingCommand.request(RequestCode.EXCHANGE_BROKER_HA_INFO, header)
    response = await broker.namesrv_client.invoke(addr, request, TIMEOUT_MS)
    if response.code != ResponseCode.SUCCESS:
        raise PreOnlineError(f"EXCHANGE_BROKER_HA_INFO to {addr} answered code {response.code}: "
                             f"{response.remark}")


async def sync_metadata_reverse(broker: BrokerController, addr: str) -> None:
    """The consumer and delay offsets of the slave at ``addr``, where not older than ours."""
    body = await _fetch(broker, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
    theirs = ConsumerOffsetManager(broker.offsets.path)  # a scratch table: not written
    theirs.decode(body)
    if not_older(theirs.data_version, broker.offsets.data_version):
        broker.offsets.take(theirs)
        await asyncio.to_thread(broker.offsets.persist)
    body = await _fetch(broker, addr, RequestCode.GET_ALL_DELAY_OFFSET)
    delays = DelayOffsetManager(broker.delay_offsets.path)  # checked before replacing ours
    delays.decode(body)
    if not_older(delays.data_version, broker.delay_offsets.data_version):
        broker.delay_offsets.decode(body)
        await asyncio.to_thread(broker.delay_offsets.persist)
