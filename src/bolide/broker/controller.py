"""The Broker process: a RemotingServer with the broker's processors over a MessageStore,
long polling woken by dispatch, SYNC_FLUSH waiters, NameServer registration, and the topic
configs and consumer offsets kept in ``<storePathRootDir>/config/``."""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from bolide.broker.acl import AclFileWatcher, AclValidator, PlainAcl
from bolide.broker.acting_master import ActingMaster
from bolide.broker.auth.checks import AuthHook
from bolide.broker.auth.metadata import AuthMetadata, AuthRefused
from bolide.broker.auth.migrate import migrated
from bolide.broker.auth.rocketmq_sync import RocketMQAuthSync
from bolide.broker.auth.setup import initial_users, inner_hooks
from bolide.broker.clients import ClientManager
from bolide.broker.cold_data import ColdDataFlowControl
from bolide.broker.config import BrokerConfig
from bolide.broker.dead_letter import store_dead_letter
from bolide.broker.escape import EscapeBridge
from bolide.broker.flush_waiters import FlushWaiters
from bolide.broker.ha import HAMaster, HASlave
from bolide.broker.ha.autoswitch import AutoSwitchHA
from bolide.broker.ha.slave_sync import SlaveSync
from bolide.broker.housekeeping import ClientHousekeeping
from bolide.broker.long_polling import PullHoldService
from bolide.broker.loop_lag import LoopLagMonitor
from bolide.broker.metrics.collect import BrokerMetrics
from bolide.broker.persistence import ConfigPersister
from bolide.broker.pop import PopService
from bolide.broker.pop_takeover import ReviveTakeoverMark, ReviveTakeoverReport, take_over_pop_revive
from bolide.broker.pre_online import go_online
from bolide.broker.processors.acl_admin import AclAdminProcessor
from bolide.broker.processors.acting import ActingMasterProcessor
from bolide.broker.processors.admin import AdminProcessor
from bolide.broker.processors.admin_lists import AdminListProcessor
from bolide.broker.processors.admin_stats import AdminStatsProcessor
from bolide.broker.processors.assignment import AssignmentProcessor
from bolide.broker.processors.auth_admin import AuthAdminProcessor
from bolide.broker.processors.broker_ops import BrokerOpsProcessor
from bolide.broker.processors.cold_data import ColdDataProcessor
from bolide.broker.processors.consumer import ConsumerProcessor
from bolide.broker.processors.consumer_relay import ConsumerRelayProcessor
from bolide.broker.processors.consumer_status import ConsumerStatusProcessor
from bolide.broker.processors.group_admin import GroupAdminProcessor
from bolide.broker.processors.ha_admin import HAAdminProcessor
from bolide.broker.processors.lock import LockProcessor
from bolide.broker.processors.pop import PopProcessor
from bolide.broker.processors.pull import PullProcessor
from bolide.broker.processors.query import QueryProcessor
from bolide.broker.processors.queue_cleanup import QueueCleanupProcessor
from bolide.broker.processors.read_mode import ReadModeProcessor
from bolide.broker.processors.recall import RecallProcessor
from bolide.broker.processors.replicas import ReplicasProcessor
from bolide.broker.processors.reply import ReplyProcessor
from bolide.broker.processors.reset_offset import ResetOffsetProcessor
from bolide.broker.processors.rocksdb_admin import RocksDBAdminProcessor
from bolide.broker.processors.send import SendProcessor
from bolide.broker.processors.send_back import SendBackProcessor
from bolide.broker.processors.transaction import EndTransactionProcessor
from bolide.broker.proxy import GrpcEndpoint
from bolide.broker.proxy.consumer import orderly
from bolide.broker.queue_locks import QueueLocks
from bolide.broker.rebalance_notify import notify_consumer_ids_changed
from bolide.broker.registration import BrokerRegistration
from bolide.broker.replicas.controller_client import ControllerClient
from bolide.broker.replicas.manager import ReplicasManager
from bolide.broker.replicas.roles import RoleSwitch
from bolide.broker.request_modes import MessageRequestModes
from bolide.broker.schedule import ScheduleService
from bolide.broker.static_forward import BrokerDirectory
from bolide.broker.static_topics import FILE_NAME as STATIC_TOPICS_FILE
from bolide.broker.static_topics import StaticTopicMappings
from bolide.broker.stats import BrokerStats
from bolide.broker.stats_items import StatsItems
from bolide.broker.subscription_groups import SubscriptionGroupManager
from bolide.broker.timer_recall import TimerRecalls
from bolide.broker.timer_takeover import TakeoverMark, TakeoverRefused, TakeoverReport, take_over_timer_wheel
from bolide.broker.topic_attributes import TopicAttributeError, is_compaction, retention_hours
from bolide.broker.topic_config import TopicConfigManager
from bolide.broker.transaction import TransactionalMessages, TransactionCheckService
from bolide.common.recall_handle import RecallError, decode_recall_handle
from bolide.common.sql92 import SelectorCache
from bolide.common.waiting import cancel_and_wait
from bolide.errors import ConfigError
from bolide.metrics.exposition import render
from bolide.metrics.http import MetricsEndpoint
from bolide.metrics.settings import serves_prometheus
from bolide.protocol.bodies.broker import TopicConfig
from bolide.protocol.bodies.route import MASTER_ID
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Channel, RemotingClient, RemotingServer
from bolide.remoting.tls import TlsServerConfig
from bolide.store import BrokerRole, MessageStore, StoreConfig
from bolide.store.config_files import ConsumerOffsetManager, DelayOffsetManager
from bolide.store.timer_metrics import TimerMetrics

log = logging.getLogger(__name__)


class BrokerController:
    """Owns a broker's store, managers, server and timers.

    ``start()`` binds first (``listenPort`` 0 picks a free port), then opens the store with that
    port as its store host port, so offset message ids point back at this broker.

    ``config/topics.json`` and ``config/consumerOffset.json`` are read at start; the topics are
    written after every change, the offsets every ``flushConsumerOffsetInterval`` ms, both by
    threads of their own, and both once more at close.
    """

    def __init__(self, config: BrokerConfig | None = None, store_config: StoreConfig | None = None,
                 tls: TlsServerConfig | None = None) -> None:
        self.config = config if config is not None else BrokerConfig()
        self._store_config = store_config if store_config is not None else StoreConfig()
        self.role = self._store_config.broker_role
        if self.config.enable_controller_mode:
            # fenced until the controller gives the role: a slave's store refuses sends
            self.role = BrokerRole.SLAVE
            self._store_config = self._store_config.replace(  # enable: the AutoSwitch HA's epochs
                broker_role=BrokerRole.SLAVE, enable_controller_mode=True)
        elif self.role is BrokerRole.SLAVE and self.config.broker_id <= 0:
            raise ConfigError(f"brokerRole=SLAVE with brokerId={self.config.broker_id}: a slave "
                              "needs brokerId > 0 (1, 2, ...); brokerId=0 is the master")
        if (self.role is not BrokerRole.SLAVE and self.config.broker_id != 0
                and not self.config.enable_controller_mode):
            log.warning("brokerRole=%s: using brokerId=0 instead of %d (a master is always 0)",
                        self.role.value, self.config.broker_id)
            self.config = self.config.replace(broker_id=0)
        self.ha_master: HAMaster | None = None
        self.ha_slave: HASlave | None = None
        self.slave_sync: SlaveSync | None = None  # a slave's copy of the master's metadata
        # controller mode (enableControllerMode): the controller's registration and role changes
        self.replicas: ReplicasManager | None = None
        self.role_switch: RoleSwitch | None = None
        tls = (tls or TlsServerConfig()).resolved()  # tls.server.* keys: clients' connections
        tls_context, self.tls_mode = tls.server_context(), tls.tls_mode
        self._tls = tls
        idle_s = self.config.server_channel_max_idle_s
        self.server = RemotingServer(self.config.bind_address, self.config.listen_port,
                                     tls=tls_context, tls_mode=self.tls_mode, idle_timeout_s=idle_s,
                                     proxy_protocol=self.config.proxy_protocol_enable)
        self.server.on_channel_close(self._channel_closed)
        # the VIP ("fast") port, listenPort - 2, which Java clients up to 4.4 use by default
        self.fast_server: RemotingServer | None = None
        if self.config.vip_channel_enabled:
            fast_port = self.config.listen_port - 2 if self.config.listen_port >= 2 else 0
            self.fast_server = RemotingServer(self.config.bind_address, fast_port,
                                              processors=self.server.processors,
                                              tls=tls_context, tls_mode=self.tls_mode,
                                              idle_timeout_s=idle_s,
                                              proxy_protocol=self.config.proxy_protocol_enable)
            self.fast_server.on_channel_close(self._channel_closed)
        # plain ACL (aclEnable): every request is checked before its processor runs
        self.acl: PlainAcl | None = None
        self._acl_watcher: AclFileWatcher | None = None
        if self.config.acl_enable:
            self.acl = PlainAcl(self.config.acl_file_path())
            self._acl_watcher = AclFileWatcher(self.acl)
            self.server.processors.add_hook(AclValidator(self.acl))
        config_dir = self._store_config.config_dir
        # ACL 2.0: users and ACLs, administered whether or not the checks are on (as RocketMQ)
        self.auth = AuthMetadata(config_dir / AuthMetadata.FILE_NAME)
        self._rocketmq_auth = RocketMQAuthSync(self.auth, config_dir)
        self._initial_users = initial_users(self.config)
        cfg = self.config
        if cfg.authentication_enabled or cfg.authorization_enabled:
            self.server.processors.add_hook(AuthHook(
                self.auth, cfg.broker_cluster_name, authn=cfg.authentication_enabled,
                authz=cfg.authorization_enabled, authn_white=cfg.authentication_whitelist,
                authz_white=cfg.authorization_whitelist))
        self.topics = TopicConfigManager(self.config, config_dir / "topics.json")
        self.offsets = ConsumerOffsetManager(config_dir / ConsumerOffsetManager.FILE_NAME)
        self.delay_offsets = DelayOffsetManager(config_dir / DelayOffsetManager.FILE_NAME)
        self.timer_recalls = TimerRecalls(config_dir / TimerRecalls.FILE_NAME)
        self.request_modes = MessageRequestModes(config_dir / MessageRequestModes.FILE_NAME)
        self._recalls_persister = ConfigPersister("bolide-recalls-persist", self.timer_recalls.persist)
        self.timer_metrics = TimerMetrics(config_dir / TimerMetrics.FILE_NAME)  # GET_TIMER_METRICS
        self._timer_metrics_persister = ConfigPersister(
            "bolide-timer-metrics-persist", self.timer_metrics.persist,
            self.config.flush_delay_offset_interval_ms / 1000)
        self._topics_persister = ConfigPersister("bolide-topics-persist", self.topics.persist)
        self.static_topics = StaticTopicMappings(self.config.broker_name,
                                                 config_dir / STATIC_TOPICS_FILE)
        self._static_persister = ConfigPersister("bolide-static-topics-persist",
                                                 self.static_topics.persist)
        self._offsets_persister = ConfigPersister("bolide-offsets-persist", self.offsets.persist,
                                                  self.config.flush_consumer_offset_interval_ms / 1000)
        self.subscription_groups = SubscriptionGroupManager(
            self.config, config_dir / "subscriptionGroup.json")
        self._groups_persister = ConfigPersister("bolide-groups-persist",
                                                 self.subscription_groups.persist)
        self._persisting = False
        self.clients = ClientManager(self.config.max_client_groups)
        self.selectors = SelectorCache()  # compiled SQL92 subscriptions (enablePropertyFilter)
        self.clients.on_consumer.append(self.subscription_groups.find)
        self.stats = BrokerStats()
        self.stats_items = StatsItems(self.config.broker_cluster_name)  # VIEW_BROKER_STATS_DATA
        self.cold_data = ColdDataFlowControl(lambda: self.config, self.config.max_client_groups)
        self.queue_locks = QueueLocks(self.config.max_client_groups)
        self.housekeeping = ClientHousekeeping(self.clients, self.config.channel_expired_timeout_ms)
        self.loop_lag = LoopLagMonitor()
        # useTLS: the broker's own connections (NameServers, a slave's master) start with TLS
        self.namesrv_client = RemotingClient(tls=tls.outbound_context() if self.config.use_tls else None,
                                             hooks=inner_hooks(self.config))
        self.broker_directory = BrokerDirectory(self)  # static topic requests forwarded
        self._store: MessageStore | None = None
        self._flush_waiters: FlushWaiters | None = None
        self._pull_holds: PullHoldService | None = None
        self._pop: PopService | None = None
        self.schedule: ScheduleService | None = None
        self.timer_takeover: TakeoverReport | None = None  # RocketMQ's waiting timer messages
        self.pop_takeover: ReviveTakeoverReport | None = None  # RocketMQ's pops left unacknowledged
        self._delay_persister: ConfigPersister | None = None
        self.registration: BrokerRegistration | None = None
        self.grpc: GrpcEndpoint | None = None
        self.metrics: BrokerMetrics | None = None  # counting while metricsExporterType=PROM
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.transactions = TransactionalMessages(self)
        self.transaction_check = TransactionCheckService(self, self.transactions)
        # enableSlaveActingMaster: the group's lowest live id, and (a slave) whether it acts
        self.acting_master: ActingMaster | None = None
        self.acting = False  # a slave serving as its group's master (bolide.broker.acting_master)
        self._online: asyncio.Task[None] | None = None  # a returning master's pre-online step
        self.init_max_offset = 0  # the CommitLog's end when the store opened
        self.escape = EscapeBridge(self)  # what an acting master's services write

    # -- state available once started --------------------------------------------------------
    @property
    def store(self) -> MessageStore:
        if self._store is None:
            raise RuntimeError("the broker is not started: await start() first")
        return self._store

    @property
    def flush_waiters(self) -> FlushWaiters:
        assert self._flush_waiters is not None
        return self._flush_waiters

    @property
    def pull_holds(self) -> PullHoldService:
        assert self._pull_holds is not None
        return self._pull_holds

    @property
    def pop(self) -> PopService:
        """Consumption by receive and acknowledge (RocketMQ 5's pop), for the gRPC endpoint and
        the remoting POP_MESSAGE family alike."""
        assert self._pop is not None
        return self._pop

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def broker_addr(self) -> str:
        """The address registered with NameServers and embedded in offset message ids."""
        return f"{self.config.broker_ip1}:{self.port}"

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> BrokerController:
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._load_config_files)
        await self.server.start()
        if self.fast_server is not None:
            try:
                await self.fast_server.start()
            except OSError as exc:  # the main port works: run without the VIP port
                log.warning("the VIP port %d (listenPort - 2) is not available (%s): Java clients "
                            "up to 4.4 need setVipChannelEnabled(false)", self.config.listen_port - 2,
                            exc.strerror or exc)
                self.fast_server = None
            except BaseException:
                await self.server.close()
                raise
        store_config = self._store_config.replace(store_host=self.config.broker_ip1,
                                                  listen_port=self.port)
        store = MessageStore(store_config)
        try:
            await asyncio.to_thread(store.open)
        except BaseException:
            await self.server.close()
            if self.fast_server is not None:
                await self.fast_server.close()
            raise
        self._store = store
        self.init_max_offset = store.max_phy_offset  # EXCHANGE_BROKER_HA_INFO's flush offset
        self._topics_persister.start()
        self._static_persister.start()
        self.static_topics.on_change.append(lambda _topic: self._static_persister.request())
        self._offsets_persister.start()
        self._groups_persister.start()
        self._recalls_persister.start()
        self._timer_metrics_persister.start()
        self._persisting = True
        self.subscription_groups.on_change.append(self._groups_persister.request)
        self.topics.on_change.append(self._persist_topics)
        self._flush_waiters = FlushWaiters(loop, store)
        self._pull_holds = PullHoldService(loop, self.config.max_held_pulls)
        store.add_dispatch_listener(self._pull_holds.on_dispatch)
        self._pop = PopService(store, self.offsets, max_attempts=self._pop_attempts,
                               orderly=lambda group: orderly(self.subscription_groups.get(group)),
                               dead_letter=functools.partial(store_dead_letter, self),
                               client_alive=self._grpc_client_alive,
                               max_in_flight=self.config.grpc_max_in_flight)
        self._pop.loop = loop
        store.add_dispatch_listener(self._pop.on_dispatch)
        self.schedule = ScheduleService(loop, store, self.delay_offsets, self.timer_recalls,
                                        self._recalls_persister.request, self.timer_metrics)
        self._delay_persister = ConfigPersister("bolide-delay-persist", self.schedule.persist,
                                                self.config.flush_delay_offset_interval_ms / 1000)
        self._delay_persister.start()
        controller_mode = self.config.enable_controller_mode
        # a returning master of an acting-master group first takes its slaves' offsets
        cfg = self.config
        pre_online = (cfg.enable_slave_acting_master and cfg.broker_id == MASTER_ID
                      and cfg.total_replicas > 1 and not cfg.skip_pre_online)
        if self.role is not BrokerRole.SLAVE:  # a slave replays the master's deliveries
            await self._take_over_timer_wheel(store)
            if not pre_online:
                self.schedule.start()
        # controller mode: replication starts with the role (bolide.broker.replicas.roles)
        ha_addr = "" if controller_mode else await self._start_ha(store)
        for processor in (SendProcessor(self), PullProcessor(self), ConsumerProcessor(self),
                          AdminProcessor(self), SendBackProcessor(self), LockProcessor(self),
                          QueryProcessor(self), AdminStatsProcessor(self),
                          EndTransactionProcessor(self), ResetOffsetProcessor(self),
                          HAAdminProcessor(self), ConsumerRelayProcessor(self),
                          AclAdminProcessor(self), AuthAdminProcessor(self), QueueCleanupProcessor(self),
                          ReplyProcessor(self), RecallProcessor(self), PopProcessor(self),
                          AssignmentProcessor(self), AdminListProcessor(self), GroupAdminProcessor(self),
                          ConsumerStatusProcessor(self), ReadModeProcessor(self),
                          RocksDBAdminProcessor(self), ColdDataProcessor(self),
                          BrokerOpsProcessor(self), ReplicasProcessor(self),
                          ActingMasterProcessor(self)):
            for code in processor.CODES:
                self.server.register(code, processor)
        if self.config.grpc_server_port >= 0 and self.role is BrokerRole.SLAVE and not controller_mode:
            log.warning("grpcServerPort=%d: a slave serves no gRPC clients (they send and receive "
                        "through the master's endpoint)", self.config.grpc_server_port)
        elif self.config.grpc_server_port >= 0:
            self.grpc = GrpcEndpoint(self, self.config.bind_address, self.config.grpc_server_port,
                                     self._tls)
            try:
                await self.grpc.start()
            except BaseException:
                self.grpc = None
                await self.close()
                raise
        await self._start_metrics()
        self.registration = BrokerRegistration(self.config, self.topics, self.namesrv_client,
                                               self.broker_addr, ha_addr, self.static_topics)
        if self.ha_slave is not None or controller_mode:
            learn_ha = not self.config.ha_master_address
            sync = self.slave_sync = SlaveSync(self)

            def registered(r: RemotingCommand) -> None:
                if controller_mode:  # the controller names the master, the answer its HA address
                    if self.role_switch is not None and learn_ha:
                        self.role_switch.registered(r.ext_fields.get("haServerAddr"))
                    return
                if learn_ha and self.ha_slave is not None:
                    self.ha_slave.set_master(r.ext_fields.get("haServerAddr"))
                sync.set_master(r.ext_fields.get("masterAddr"))
            self.registration.on_registered = registered
            if not controller_mode:
                sync.start()
        for tc in list(self.topics.table.values()):
            self._apply_topic_retention(tc)
        self.topics.on_change.append(self._topic_changed)
        self.static_topics.on_change.append(lambda _topic: self._register_soon())
        if self.config.enable_slave_acting_master:
            self.acting_master = ActingMaster(self)
        if controller_mode:  # registers with the NameServers once the role is known
            await self._start_replicas()
        elif pre_online:
            self._online = loop.create_task(self._go_online(), name="bolide-pre-online")
        else:
            await self.registration.start()
        if self.acting_master is not None:
            self.acting_master.start()
        if self.ha_slave is not None:
            self.ha_slave.start()
        self.housekeeping.start()
        self.loop_lag.start()
        if self._acl_watcher is not None:
            self._acl_watcher.start()
        if self.role is not BrokerRole.SLAVE:  # the master checks half messages
            self.transaction_check.start()
        return self

    async def _go_online(self) -> None:
        """The pre-online step (:mod:`bolide.broker.pre_online`), then the schedule and the
        registrations start."""
        await go_online(self)
        assert self.schedule is not None and self.registration is not None
        self.schedule.start()
        await self.registration.start()
        log.info("%s is online", self.config.broker_name)

    @property
    def online(self) -> bool:
        """Registered with the NameServers (a returning master is not until its pre-online
        step is done)."""
        return self.registration is not None and self.registration.started

    async def set_special_services(self, on: bool) -> None:
        """A slave with enableSlaveActingMaster starts (``on``) or stops acting as its group's
        master: the delay-level schedule and the transaction check run, writing escaped
        (RocketMQ's changeSpecialServiceStatus). A master always runs them."""
        if self.role is not BrokerRole.SLAVE or on == self.acting:
            return
        log.warning("%s acting as master of %s", "now" if on else "no longer",
                    self.config.broker_name)
        self.acting = on
        schedule = self.schedule
        assert schedule is not None
        if on:
            schedule.escape = self.transaction_check.escape = self.escape.put
            schedule.start()
            self.transaction_check.start()
        else:
            await schedule.close()
            await self.transaction_check.close()
            schedule.escape = self.transaction_check.escape = None

    async def _start_replicas(self) -> None:
        """Controller mode: register with the controller in the background; the role follows."""
        switch = self.role_switch = RoleSwitch(self)
        try:
            await switch.start()
        except BaseException:
            await self.close()
            raise
        client = ControllerClient(self.namesrv_client, self.config.broker_cluster_name,
                                  self.config.broker_name)
        self.replicas = ReplicasManager(self.config, client, self._store_config.broker_identity_path,
                                        switch)
        self.replicas.start()

    def set_broker_id(self, broker_id: int, ha_addr: str | None) -> None:
        """Controller mode: the id this broker registers with the NameServers (0 as master,
        its controller id as slave) and, as master, its HA address."""
        self.config = self.config.replace(broker_id=broker_id)
        if self.registration is not None:
            self.registration.config = self.config
            if ha_addr is not None:
                self.registration.ha_addr = ha_addr

    async def take_over_timer_wheel(self) -> None:
        """Controller mode: what a master does at start, done when it first becomes master."""
        await self._take_over_timer_wheel(self.store)

    async def _start_ha(self, store: MessageStore) -> str:
        """Start the HA listener (masters) or prepare the HA client (slaves); returns the
        HA address to register ("ip:port")."""
        ha_port = self.config.ha_listen_port
        if ha_port < 0:
            ha_port = self.port + 1  # 4.9.x: always listenPort + 1
        if self.role is BrokerRole.SLAVE:
            self.ha_slave = HASlave(store, self.config)
            return f"{self.config.broker_ip1}:{ha_port}"
        self.ha_master = HAMaster(store, self.config)
        try:
            await self.ha_master.start(self.config.bind_address, ha_port)
        except OSError as exc:
            log.error("the HA port %d is not available (%s): slaves cannot replicate from this "
                      "master; free the port or set haListenPort", ha_port, exc.strerror or exc)
            return f"{self.config.broker_ip1}:{ha_port}"
        return f"{self.config.broker_ip1}:{self.ha_master.port}"

    @property
    def sync_master(self) -> HAMaster | AutoSwitchHA | None:
        """The HA service whose replicas a SYNC_MASTER's sends wait for (None otherwise); in
        controller mode the AutoSwitch HA (all in-sync replicas with allAckInSyncStateSet,
        else inSyncReplicas of them: the master alone by default, as RocketMQ)."""
        if self.role is not BrokerRole.SYNC_MASTER:
            return None
        if self.config.enable_controller_mode:
            switch = self.role_switch
            return switch.replication.ha if switch is not None else None
        return self.ha_master

    def _load_config_files(self) -> None:
        if self.acl is not None:
            state = self.acl.load()
            log.info("plain ACL on: %d accounts and %d global white addresses from %s",
                     len(state.accounts), len(state.global_white), self.acl.main_file)
        created = self._rocketmq_auth.load()
        for user in self._initial_users:
            if user.username not in self.auth.users:
                self.auth.create_user(user)
                created.append(user.username)
        if self.config.migrate_auth_from_v1_enabled:
            created += self._migrate_plain_acl()
        if created:
            log.info("ACL 2.0: created the users %s", ", ".join(created))
        if created or self.auth.users or self.auth.acls:
            self.auth.persist()  # RocketMQ's databases then hold what this broker has
        for what, loaded in (("topic configs", self.topics.load()),
                             ("consumer offsets", self.offsets.load()),
                             ("delay offsets", self.delay_offsets.load()),
                             ("static topic mappings", self.static_topics.load()),
                             ("recalled timer messages", self.timer_recalls.load()),
                             ("timer metrics", self.timer_metrics.load()),
                             ("consumer groups' request modes", self.request_modes.load()),
                             ("subscription groups", self.subscription_groups.load())):
            if not loaded:
                log.info("no %s to load in %s: starting with none", what, self._store_config.config_dir)

    async def _start_metrics(self) -> None:
        """Prometheus' endpoint with RocketMQ 5's metrics (metricsExporterType=PROM)."""
        config = self.config
        if not serves_prometheus(config.metrics_exporter_type, config.metrics_prom_exporter_port):
            return
        metrics = BrokerMetrics(self, config.metrics_otel_cardinality_limit, config.metrics_labels())
        endpoint = MetricsEndpoint(lambda: render(metrics.families()),
                                   config.metrics_prom_exporter_host or config.broker_ip1,
                                   config.metrics_prom_exporter_port)
        try:
            await endpoint.start()
        except BaseException:
            await self.close()
            raise
        self.metrics, self.metrics_endpoint = metrics, endpoint
        self.server.processors.on_served = metrics.on_served  # the VIP port's table too

    async def _take_over_timer_wheel(self, store: MessageStore) -> None:
        """Messages a RocketMQ 5 broker's pops left unacknowledged in this store are handed out
        again (:mod:`bolide.broker.pop_takeover`, reading the pop checkpoints in its timer wheel
        too), then the timer messages it left waiting go into the delay levels
        (:mod:`bolide.broker.timer_takeover`)."""
        revive_mark = ReviveTakeoverMark(self._store_config.config_dir / ReviveTakeoverMark.FILE_NAME)
        revive_mark.load()
        self.pop_takeover = await take_over_pop_revive(
            store, self.pop, self.offsets, revive_mark, broker_name=self.config.broker_name,
            topic_exists=lambda topic: self.topics.get(topic) is not None,
            group_exists=lambda group: self.subscription_groups.find(group) is not None)
        mark = TakeoverMark(self._store_config.config_dir / TakeoverMark.FILE_NAME)
        mark.load()
        try:
            self.timer_takeover = await take_over_timer_wheel(store, mark, metrics=self.timer_metrics)
        except TakeoverRefused as exc:
            log.error("%s", exc)

    def _migrate_plain_acl(self) -> list[str]:
        """Users and ACLs for the plain-ACL accounts that are no users yet (RocketMQ 5.3's
        migrateAuthFromV1Enabled); an account that cannot be carried over is logged."""
        try:
            state = self.acl.state if self.acl is not None else PlainAcl(self.config.acl_file_path()).load()
        except ConfigError as exc:
            raise ConfigError(f"migrateAuthFromV1Enabled=true needs the plain-ACL accounts: {exc}") from None
        created = []
        for account in state.configs:
            if not account.access_key or account.access_key in self.auth.users:
                continue
            user, acl = migrated(account)
            try:
                self.auth.create_user(user)
                if acl is not None:
                    self.auth.put_acl(acl, None)
            except AuthRefused as exc:
                log.error("ACL 2.0: the plain-ACL account %s cannot be migrated: %s", account.access_key, exc)
                continue
            created.append(account.access_key)
        return created

    def _pop_attempts(self, group: str) -> int:
        """Deliveries of a popped message before its group's dead letter queue."""
        settings = self.subscription_groups.get(group)
        return (settings.retry_max_times if settings is not None else 16) + 1

    def _grpc_client_alive(self, client_id: str) -> bool:
        return self.grpc is not None and self.grpc.clients.alive(client_id)

    def _persist_topics(self, topic: TopicConfig) -> None:
        self._topics_persister.request()

    def _topic_changed(self, topic: TopicConfig) -> None:
        self._apply_topic_retention(topic)
        self._register_soon()

    def _register_soon(self) -> None:
        if self.registration is not None:
            self.registration.request_register()

    def _apply_topic_retention(self, topic: TopicConfig) -> None:
        """The topic's ``retention.hours`` attribute as the store's per-topic floor (none once
        the attribute or the topic is gone), and its ``cleanup.policy`` (compacted or not)."""
        current = self.topics.get(topic.topic_name)
        compacted = current is not None and is_compaction(current.attributes)
        if compacted or topic.topic_name in self.store.compacted_topics():
            self.store.set_topic_compaction(topic.topic_name, compacted)  # cleanup.policy
        try:
            hours = retention_hours(current.attributes) if current is not None else None
        except TopicAttributeError as exc:
            log.warning("topic %s: %s; no per-topic retention applied", topic.topic_name, exc)
            hours = None
        if hours is not None or topic.topic_name in self.store.topic_retention():
            self.store.set_topic_retention(topic.topic_name, hours)

    def _channel_closed(self, channel: Channel) -> None:
        for group in self.clients.unregister(channel):
            self.consumer_group_changed(group)

    async def recall_timer_message(self, topic: str, handle: str) -> str:
        """Recall the timer message of ``topic`` whose send answered ``handle`` (recorded on
        disk before this returns); its UNIQ_KEY. RecallError when the handle names no timer
        message of this broker and topic still to come."""
        handle_topic, broker_name, due_ms, uniq_key = decode_recall_handle(handle)
        if handle_topic != topic:
            raise RecallError(f"recall failed, topic not match: the handle names {handle_topic}")
        if broker_name != self.config.broker_name:
            raise RecallError(f"recall failed: the handle names broker {broker_name}, not this one "
                              f"({self.config.broker_name}); recall on the broker that took the send")
        now_ms = int(time.time() * 1000)
        if not now_ms < due_ms <= now_ms + self.config.timer_max_delay_sec * 1000:
            raise RecallError("recall failed, timestamp invalid: the message is due already")
        self.timer_recalls.add(topic, uniq_key, due_ms, now_ms)
        await asyncio.to_thread(self.timer_recalls.persist)
        return uniq_key

    def consumer_group_changed(self, group: str) -> None:
        """A consumer joined or left ``group``, or its subscriptions changed: tell its clients
        to rebalance now (NOTIFY_CONSUMER_IDS_CHANGED), unless the group turned that off."""
        settings = self.subscription_groups.get(group)
        if settings is None or settings.notify_consumer_ids_changed_enable:
            notify_consumer_ids_changed(group, self.clients.consumer_channels(group))

    async def close(self) -> None:
        """Stop registering, answer held pulls, close the server, write the config files, then
        close the store."""
        if self._online is not None:
            await cancel_and_wait([self._online])
        if self.replicas is not None:
            await self.replicas.close()
        if self.acting_master is not None:
            await self.acting_master.close()
        if self.role_switch is not None:
            await self.role_switch.close()
        if self.registration is not None:
            await self.registration.close()
        if self.slave_sync is not None:
            await self.slave_sync.close()
        if self.ha_slave is not None:
            await self.ha_slave.close()
        if self.ha_master is not None:
            await self.ha_master.close()
        await self.housekeeping.close()
        await self.loop_lag.close()
        if self._acl_watcher is not None:
            await self._acl_watcher.close()
        if self.schedule is not None:
            await self.schedule.close()
        await self.transaction_check.close()
        if self._pull_holds is not None:
            self._pull_holds.wake_all()
        if self._pop is not None:
            self._pop.close()
        if self.grpc is not None:
            await self.grpc.close()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.close()
        await self.server.close()
        if self.fast_server is not None:
            await self.fast_server.close()
        await self.namesrv_client.close()
        if self._persisting:
            self._persisting = False
            await asyncio.to_thread(self._topics_persister.stop)
            await asyncio.to_thread(self._static_persister.stop)
            await asyncio.to_thread(self._offsets_persister.stop)
            await asyncio.to_thread(self._groups_persister.stop)
            await asyncio.to_thread(self._recalls_persister.stop)
            await asyncio.to_thread(self._timer_metrics_persister.stop)
            if self._delay_persister is not None:
                await asyncio.to_thread(self._delay_persister.stop)
        if self._store is not None:
            store, self._store = self._store, None
            await asyncio.to_thread(store.close)
