"""The controller's request handling (RocketMQ's ControllerRequestProcessor over its
DLedgerController): BROKER_HEARTBEAT (904) and codes 1001-1006, 1009-1013.

Write requests run one at a time: decide (:mod:`.decisions`), make the events durable and apply
them (the :mod:`.journal`: this controller's event log, or the group's Raft log), answer. Only
the group's leader reads or changes the state; the other peers answer CONTROLLER_NOT_LEADER, as
RocketMQ's, and take heartbeats and metadata and config requests. A new master is handed to
``on_master_changed`` (the server notifies the group's brokers). A bad header or body is
answered with CONTROLLER_INVALID_REQUEST naming the problem.

With ``metrics`` set (metricsExporterType=PROM) each request, election and append is counted
(:mod:`.metrics`): a request fails when it is refused as invalid or its change cannot be
persisted, and times out when no majority of the group takes its change in time.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bolide.common.config_file import parse_properties, update_properties_file
from bolide.controller import decisions
from bolide.controller.config import ControllerConfig
from bolide.controller.decisions import Result
from bolide.controller.heartbeat import BrokerLiveInfo, HeartbeatManager
from bolide.controller.journal import Journal, NotLeaderError, WriteTimeoutError
from bolide.controller.metrics import (
    FAILED,
    KEEP_CURRENT_MASTER,
    NEW_MASTER_ELECTED,
    NO_MASTER_ELECTED,
    SUCCESS,
    TIMEOUT,
    ControllerMetrics,
)
from bolide.controller.replicas import ReplicasState
from bolide.errors import BolideError
from bolide.protocol.bodies.controller import (
    ElectMasterResponseBody,
    SyncStateSet,
    decode_broker_names,
)
from bolide.protocol.codes import RequestCode as C
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import controller as h

log = logging.getLogger(__name__)

NOT_LEADER = "The controller is not in leader state"  # RocketMQ's remark
Handler = Callable[[RemotingCommand, object | None], Awaitable[RemotingCommand]]
MasterChanged = Callable[[h.ElectMasterResponseHeader, ElectMasterResponseBody], None]


ELECTION_RESULTS: dict[int, str] = {
    RC.SUCCESS: NEW_MASTER_ELECTED, RC.CONTROLLER_MASTER_STILL_EXIST: KEEP_CURRENT_MASTER,
    RC.CONTROLLER_MASTER_NOT_AVAILABLE: NO_MASTER_ELECTED,
    RC.CONTROLLER_ELECT_MASTER_FAILED: NO_MASTER_ELECTED}
# whether the current request's change timed out (set by commit, read by process)
_timed_out: contextvars.ContextVar[bool] = contextvars.ContextVar("controller_write_timed_out", default=False)

# codes every peer of a group answers; the others only its leader
ANY_PEER = frozenset({C.BROKER_HEARTBEAT, C.CONTROLLER_GET_METADATA_INFO, C.GET_CONTROLLER_CONFIG,
                      C.UPDATE_CONTROLLER_CONFIG})


class ControllerProcessor:
    """Answers the controller codes over a state, a heartbeat table and an event log."""

    def __init__(self, config: ControllerConfig, state: ReplicasState, heartbeats: HeartbeatManager,
                 journal: Journal, *, config_file: Path | None = None, store_dir: Path | None = None) -> None:
        """``store_dir``: where the state lives, named in the errors of a disk that refuses writes."""
        self.config = config
        self.state = state
        self.heartbeats = heartbeats
        self.journal = journal
        self.config_file = config_file
        self.store_dir = store_dir or config.store_dir
        self._write_lock = asyncio.Lock()
        self.on_master_changed: MasterChanged | None = None
        self.metrics: ControllerMetrics | None = None  # counting while metricsExporterType=PROM
        self._handlers: dict[int, Handler] = {
            C.BROKER_HEARTBEAT: self.broker_heartbeat,
            C.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            C.CONTROLLER_ELECT_MASTER: self.elect_master,
            C.CONTROLLER_REGISTER_BROKER: self.register_broker,
            C.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            C.CONTROLLER_GET_METADATA_INFO: self.get_metadata_info,
            C.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            C.UPDATE_CONTROLLER_CONFIG: self.update_controller_config,
            C.GET_CONTROLLER_CONFIG: self.get_controller_config,
            C.CLEAN_BROKER_DATA: self.clean_broker_data,
            C.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            C.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
        }

    @property
    def codes(self) -> list[int]:
        return list(self._handlers)

    async def process(self, request: RemotingCommand,
                      channel: object | None = None) -> RemotingCommand | None:
        """The response to ``request``; None for a code not handled here."""
        handler = self._handlers.get(request.code)
        if handler is None:
            return None
        metrics = self.metrics
        if metrics is None:
            return await self._handle(handler, request, channel)
        started = time.perf_counter_ns()
        _timed_out.set(False)
        status = FAILED
        try:
            response = await self._handle(handler, request, channel)
            if _timed_out.get():
                status = TIMEOUT
            elif response.code not in (RC.CONTROLLER_INVALID_REQUEST, RC.SYSTEM_ERROR):
                status = SUCCESS
            return response
        finally:
            metrics.on_request(request.code, status, (time.perf_counter_ns() - started) // 1000)

    async def _handle(self, handler: Handler, request: RemotingCommand,
                      channel: object | None) -> RemotingCommand:
        if request.code not in ANY_PEER and not self.journal.is_leader:
            return self._not_leader(request)
        try:
            return await handler(request, channel)
        except BolideError as exc:
            return request.make_response(RC.CONTROLLER_INVALID_REQUEST, f"{exc}")

    # -- liveness and elections -----------------------------------------------------------
    def alive(self, cluster: str, broker_name: str, broker_id: int | None) -> bool:
        return self.heartbeats.is_active(cluster, broker_name, broker_id)

    def live_info(self, cluster: str, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.heartbeats.live_info(cluster, broker_name, broker_id)

    async def commit(self, decide: Callable[[], Result]) -> Result:
        """Decide under the write lock, make the events durable and apply them; a result of
        CONTROLLER_NOT_LEADER when this controller is not (or stops being) the leader."""
        async with self._write_lock:
            if not self.journal.is_leader:
                return Result(RC.CONTROLLER_NOT_LEADER, self._not_leader_remark())
            result = decide()
            if result.events:
                started = time.perf_counter_ns()
                status = FAILED
                try:
                    await self.journal.write(result.events)
                    status = SUCCESS
                except NotLeaderError as exc:
                    if isinstance(exc, WriteTimeoutError):
                        status = TIMEOUT
                        _timed_out.set(True)
                    return Result(RC.CONTROLLER_NOT_LEADER, f"{NOT_LEADER}: {exc}")
                finally:
                    if self.metrics is not None:
                        self.metrics.on_append(status, (time.perf_counter_ns() - started) // 1000)
            return result

    def _not_leader_remark(self) -> str:
        leader = self.journal.leader_address
        return f"{NOT_LEADER} (the leader is {leader})" if leader else f"{NOT_LEADER} (no leader elected yet)"

    def _not_leader(self, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(RC.CONTROLLER_NOT_LEADER, self._not_leader_remark())

    async def elect(self, header: h.ElectMasterRequestHeader) -> Result:
        """Run an election; a new master is reported to ``on_master_changed``."""
        result = await self.commit(lambda: decisions.elect_master(
            self.state, header, self.alive, self.live_info, unclean=self.config.enable_elect_unclean_master))
        outcome = ELECTION_RESULTS.get(result.code)
        if outcome is not None and self.metrics is not None:
            self.metrics.on_election(header.cluster_name or "", header.broker_name or "", outcome)
        if result.code == RC.SUCCESS and self.config.notify_broker_role_changed and self.on_master_changed:
            assert isinstance(result.header, h.ElectMasterResponseHeader)
            self.on_master_changed(result.header, ElectMasterResponseBody.decode(result.body))
        return result

    @staticmethod
    def _answer(request: RemotingCommand, result: Result) -> RemotingCommand:
        return request.make_response(result.code, result.remark, result.header, result.body)

    async def _write(self, request: RemotingCommand, decide: Callable[[], Result]) -> RemotingCommand:
        try:
            return self._answer(request, await self.commit(decide))
        except OSError as exc:
            log.error("controller state write failed: %s", exc)
            return request.make_response(RC.SYSTEM_ERROR, f"the controller could not persist the change "
                                         f"({exc}); check the disk under {self.store_dir}")

    # -- handlers -------------------------------------------------------------------------
    async def broker_heartbeat(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        hb = request.read_header(h.BrokerHeartbeatRequestHeader)
        if hb.broker_id is None:
            return request.make_response(RC.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        self.heartbeats.on_heartbeat(hb.cluster_name, hb.broker_name, hb.broker_addr, hb.broker_id,
                                     timeout_ms=hb.heartbeat_timeout_mills, channel=channel, epoch=hb.epoch,
                                     max_offset=hb.max_offset, confirm_offset=hb.confirm_offset,
                                     election_priority=hb.election_priority)
        return request.make_response(RC.SUCCESS, "Heart beat success")

    async def alter_sync_state_set(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        header = request.read_header(h.AlterSyncStateSetRequestHeader)
        body = request.body_bytes()
        if not body:
            return request.make_response(RC.CONTROLLER_INVALID_REQUEST,
                                         "ALTER_SYNC_STATE_SET needs a SyncStateSet body")
        new = SyncStateSet.decode(body)
        return await self._write(request, lambda: decisions.alter_sync_state_set(
            self.state, header, new, self.alive))

    async def elect_master(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        header = request.read_header(h.ElectMasterRequestHeader)
        try:
            return self._answer(request, await self.elect(header))
        except OSError as exc:
            return request.make_response(RC.SYSTEM_ERROR, f"the controller could not persist the election "
                                         f"({exc}); check the disk under {self.store_dir}")

    async def register_broker(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        header = request.read_header(h.RegisterBrokerToControllerRequestHeader)
        if not header.broker_name or header.broker_id is None:
            return request.make_response(RC.CONTROLLER_INVALID_REQUEST,
                                         "REGISTER_BROKER needs brokerName and brokerId")
        return await self._write(request, lambda: decisions.register_broker(self.state, header, self.alive))

    async def get_replica_info(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        header = request.read_header(h.GetReplicaInfoRequestHeader)
        return self._answer(request, decisions.get_replica_info(self.state, header))

    async def get_metadata_info(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        journal = self.journal
        header = h.GetMetaDataResponseHeader(group=self.config.group, controller_leader_id=journal.leader_id,
                                             controller_leader_address=journal.leader_address,
                                             is_leader=journal.is_leader, peers=journal.peers_text)
        return request.make_response(RC.SUCCESS, None, header)

    async def get_sync_state_data(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        body = request.body_bytes()
        if not body:
            return request.make_response(RC.CONTROLLER_INVALID_REQUEST, "GET_SYNC_STATE_DATA needs a "
                                         "body: a JSON array of broker names, e.g. [\"broker-a\"]")
        names = decode_broker_names(body)
        data = decisions.sync_state_data(self.state, names, self.alive)
        return request.make_response(RC.SUCCESS, body=data.encode())

    async def clean_broker_data(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        header = request.read_header(h.CleanControllerBrokerDataRequestHeader)
        return await self._write(request, lambda: decisions.clean_broker_data(self.state, header, self.alive))

    async def get_next_broker_id(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        header = request.read_header(h.GetNextBrokerIdRequestHeader)
        return self._answer(request, decisions.get_next_broker_id(self.state, header))

    async def apply_broker_id(self, request: RemotingCommand, channel: object | None) -> RemotingCommand:
        header = request.read_header(h.ApplyBrokerIdRequestHeader)
        return await self._write(request, lambda: decisions.apply_broker_id(self.state, header))

    async def get_controller_config(self, request: RemotingCommand,
                                    channel: object | None) -> RemotingCommand:
        return request.make_response(RC.SUCCESS, body=self.config.to_properties_text().encode())

    async def update_controller_config(self, request: RemotingCommand,
                                       channel: object | None) -> RemotingCommand:
        """Properties text in the body; black-listed keys refused (NO_PERMISSION). Changes apply
        in memory (the listener and store settings at the next start) and go to the config file."""
        body = request.body_bytes()
        if not body:
            return request.make_response(RC.SUCCESS)
        props = parse_properties(body.decode("utf-8", "replace"))
        if props.keys() & self.config.black_list:
            return request.make_response(RC.NO_PERMISSION, "Can not update config in black list.")
        self.config = self.config.updated(props)  # ConfigError: answered as an invalid request
        known = {k: v for k, v in props.items() if k in self.config.to_properties()}
        if self.config_file is not None and known:
            try:
                await asyncio.to_thread(update_properties_file, self.config_file, known)
            except OSError as exc:
                return request.make_response(
                    RC.SYSTEM_ERROR, f"applied to the running controller, but not written to "
                    f"{self.config_file} ({exc.strerror or exc}), so a restart undoes it: "
                    "make the file writable")
        return request.make_response(RC.SUCCESS)
