"""The broker's metrics under RocketMQ 5's names and labels (its ``BrokerMetricsManager``), so
dashboards made for RocketMQ read a Bolide broker: counters the processors add to as they
serve (only while an exporter is on), gauges computed at each scrape, and the process's own.

Every series carries RocketMQ's common labels: ``cluster``, ``node_type="broker"``,
``node_id`` (the broker name), and those of ``metricsLabel``. The counters' label sets are
bounded (``metricsOtelCardinalityLimit`` per counter): past it, new topic and group combinations
are counted under ``__other__`` (the topic's, or the group's for dead letters).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import time
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from bolide.broker.topic_config import PERM_READ, SYSTEM_TOPICS
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.metrics.exposition import Family, HistogramValue, Labels
from bolide.protocol.codes import RequestCode, ResponseCode, version_name

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

# RocketMQ's bucket bounds of rocketmq_message_size (bytes) and rocketmq_rpc_latency (ms)
SIZE_BOUNDS = (1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
LATENCY_BOUNDS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_LATENCY_BOUNDS_S = tuple(ms / 1000 for ms in LATENCY_BOUNDS_MS)
# held until a message comes or the wait ends when answered later (is_long_polling)
_LONG_POLLING_CODES = frozenset({RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE,
                                 RequestCode.POP_MESSAGE})
OTHER = "__other__"
NORMAL, FIFO, DELAY, TRANSACTION = "normal", "fifo", "delay", "transaction"  # RocketMQ's values
SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"
_SYSTEM_TOPICS = SYSTEM_TOPICS | {"RMQ_SYS_TRACE_TOPIC"}  # RocketMQ's, with its rmq_sys_ prefix
_DELAY_KEYS = ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__STARTDELIVERTIME")
def message_type(encoded_properties: bytes | str | None, *, half: bool = False) -> str:
    """RocketMQ's message_type label of a send, from its encoded properties."""
    if half:
        return TRANSACTION
    if not encoded_properties:
        return NORMAL
    text = encoded_properties if isinstance(encoded_properties, str) else encoded_properties.decode(
        "utf-8", "replace")
    if "\x01" not in text:
        return NORMAL
    if "__SHARDINGKEY" in text and _has(text, "__SHARDINGKEY"):
        return FIFO
    if ("DELAY" in text or "TIMER_" in text) and any(_has(text, key) for key in _DELAY_KEYS):
        return DELAY
    return NORMAL


def _has(text: str, key: str) -> bool:
    """Whether encoded properties (``k\x01v\x02...``) have ``key``."""
    return text.startswith(key + "\x01") or f"\x02{key}\x01" in text


def _older(oldest: int, stored: int) -> int:
    """The earlier of two store times (0 and negatives: none)."""
    if stored <= 0:
        return oldest
    return stored if oldest == 0 or stored < oldest else oldest


def is_system(topic: str, group: str = "") -> bool:
    return (topic in _SYSTEM_TOPICS or topic.startswith("rmq_sys_")
            or group.lower().startswith(SYSTEM_GROUP_PREFIX))


def _code_label(code: int, codes: type[RequestCode] | type[ResponseCode]) -> str:
    """RocketMQ's label of a request or response code: its name in lower case, or the number."""
    try:
        return codes(code).name.lower()
    except ValueError:
        return str(code)


def _flag(value: bool) -> str:
    return "true" if value else "false"


class BrokerMetrics:
    """What the broker counts and shows; ``limit`` bounds the counters' label sets."""

    def __init__(self, broker: BrokerController, limit: int,
                 extra_labels: dict[str, str] | None = None) -> None:
        self.broker = broker
        self.limit = limit
        config = broker.config
        self.common: Labels = (("cluster", config.broker_cluster_name), ("node_type", "broker"),
                               ("node_id", config.broker_name), *sorted((extra_labels or {}).items()))
        # (topic, type) -> [messages, bytes, messages per size bucket of SIZE_BOUNDS and +Inf]
        self._in: dict[tuple[str, str], list[int]] = {}
        self._out: dict[tuple[str, str], list[int]] = {}  # (topic, group) -> [messages, bytes]
        self._dlq: dict[tuple[str, str], int] = {}  # (group, topic) -> messages
        self._pulled: dict[tuple[str, str, int], int] = {}  # (group, topic, queue) -> next offset
        # (request code, response code, long polling) -> [count, seconds, per latency bucket...]
        self._rpc: dict[tuple[int, int, bool], list[float]] = {}
        self._commits = self._rollbacks = 0
        self.started = time.time()

    # -- counting (the processors) ---------------------------------------------------------
    def _key(self, table: Mapping[tuple[str, str], object], key: tuple[str, str]) -> tuple[str, str]:
        """``key``, or its first part as ``__other__`` once ``table`` holds ``limit`` keys."""
        if key in table or len(table) < self.limit:
            return key
        return (OTHER, key[1])

    def on_put(self, topic: str, kind: str, messages: int, wrote_bytes: int) -> None:
        """``messages`` of ``topic`` stored, ``wrote_bytes`` in all."""
        counts = self._in.get((topic, kind))
        if counts is None:
            counts = self._in.setdefault(self._key(self._in, (topic, kind)), [0] * (3 + len(SIZE_BOUNDS)))
        counts[0] += messages
        counts[1] += wrote_bytes
        size = wrote_bytes // messages if messages > 1 else wrote_bytes
        counts[2 + bisect_left(SIZE_BOUNDS, size)] += messages

    def on_get(self, topic: str, group: str, messages: int, size: int) -> None:
        """``messages`` of ``topic`` (``size`` bytes) handed to ``group``."""
        counts = self._out.get((topic, group))
        if counts is None:
            counts = self._out.setdefault(self._key(self._out, (topic, group)), [0, 0])
        counts[0] += messages
        counts[1] += size

    def on_pull(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        """A pull of ``group`` on a queue answered; its next pull starts at ``next_offset``
        (RocketMQ's pull offset: what was pulled and not yet committed is in flight)."""
        key = (group, topic, queue_id)
        if key in self._pulled or len(self._pulled) < self.limit:
            self._pulled[key] = next_offset

    def on_served(self, code: int, response_code: int, seconds: float, later: bool) -> None:
        """A remoting request answered ``seconds`` after it arrived (``later``: not at once)."""
        key = (code, response_code, later and code in _LONG_POLLING_CODES)
        counts = self._rpc.get(key)
        if counts is None:
            if len(self._rpc) >= self.limit:
                return
            counts = self._rpc[key] = [0.0] * (3 + len(LATENCY_BOUNDS_MS))
        counts[0] += 1
        counts[1] += seconds
        counts[2 + bisect_left(_LATENCY_BOUNDS_S, seconds)] += 1

    def on_dead_letter(self, group: str, topic: str) -> None:
        key = self._key(self._dlq, (group, topic))
        self._dlq[key] = self._dlq.get(key, 0) + 1

    def on_end_transaction(self, committed: bool) -> None:
        if committed:
            self._commits += 1
        else:
            self._rollbacks += 1

    # -- a scrape ----------------------------------------------------------------------------
    def families(self) -> list[Family]:
        """Every metric family as it stands now."""
        return [*self._counters(), self._rpc_latency(), *self._broker_gauges(), *self._client_gauges(),
                *self._lag_gauges(), *self._store_gauges(), *self._process()]

    def _rpc_latency(self) -> Family:
        latency = Family("rocketmq_rpc_latency_milliseconds", "histogram",
                         "Time from a request's arrival to its answer")
        for (code, response_code, long_polling), (_, seconds, *buckets) in sorted(self._rpc.items()):
            labels = self._labels(("protocol_type", "remoting"),
                                  ("request_code", _code_label(code, RequestCode)),
                                  ("response_code", _code_label(response_code, ResponseCode)),
                                  ("is_long_polling", _flag(long_polling)), ("result", "success"))
            cumulative = [int(c) for c in itertools.accumulate(buckets)]
            latency.add(labels, HistogramValue(LATENCY_BOUNDS_MS, cumulative, seconds * 1000))
        return latency

    def _labels(self, *pairs: tuple[str, str]) -> Labels:
        return (*self.common, *pairs)

    def _counters(self) -> Iterable[Family]:
        msgs_in = Family("rocketmq_messages_in_total", "counter", "Total number of incoming messages")
        bytes_in = Family("rocketmq_throughput_in_total", "counter", "Total traffic of incoming messages")
        sizes = Family("rocketmq_message_size", "histogram", "Incoming messages size")
        for (topic, kind), (messages, size, *buckets) in sorted(self._in.items()):
            labels = self._labels(("topic", topic), ("message_type", kind),
                                  ("is_system", _flag(is_system(topic))))
            msgs_in.add(labels, messages)
            bytes_in.add(labels, size)
            sizes.add(labels, HistogramValue(SIZE_BOUNDS, list(itertools.accumulate(buckets)), size))
        msgs_out = Family("rocketmq_messages_out_total", "counter", "Total number of outgoing messages")
        bytes_out = Family("rocketmq_throughput_out_total", "counter", "Total traffic of outgoing messages")
        for (topic, group), (messages, size) in sorted(self._out.items()):
            labels = self._labels(("topic", topic), ("consumer_group", group),
                                  ("is_system", _flag(is_system(topic, group))))
            msgs_out.add(labels, messages)
            bytes_out.add(labels, size)
        dlq = Family("rocketmq_send_to_dlq_messages_total", "counter", "Consumer send to DLQ messages")
        for (group, topic), count in sorted(self._dlq.items()):
            dlq.add(self._labels(("consumer_group", group), ("topic", topic),
                                 ("is_system", _flag(is_system(topic, group)))), count)
        commits = Family("rocketmq_commit_messages_total", "counter", "Total number of commit messages")
        rollbacks = Family("rocketmq_rollback_messages_total", "counter", "Total number of rollback messages")
        if self._commits:
            commits.add(self._labels(), self._commits)
        if self._rollbacks:
            rollbacks.add(self._labels(), self._rollbacks)
        return (msgs_in, bytes_in, sizes, msgs_out, bytes_out, dlq, commits, rollbacks)

    def _broker_gauges(self) -> Iterable[Family]:
        broker = self.broker
        perm = Family("rocketmq_broker_permission", "gauge", "Broker permission")
        perm.add(self._labels(), broker.config.broker_permission)
        topics = Family("rocketmq_topic_number", "gauge", "Active topic number")
        topics.add(self._labels(), len(broker.topics.table))
        groups = Family("rocketmq_consumer_group_number", "gauge", "Active subscription group number")
        groups.add(self._labels(), len(broker.subscription_groups.names()))
        return (perm, topics, groups)

    def _client_gauges(self) -> Iterable[Family]:
        clients = self.broker.clients
        producers: dict[tuple[str, str], int] = {}
        for members in clients.producers.values():
            for channel in members:
                info = clients.channel_info(channel)
                if info is not None:
                    key = (info.language.lower(), version_name(info.version).lower())
                    producers[key] = producers.get(key, 0) + 1
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group, group_info in clients.consumers.items():
            mode = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push", "CONSUME_POP": "pop"}.get(
                group_info.consume_type or "", (group_info.consume_type or "").lower())
            for channel in group_info.clients:
                info = clients.channel_info(channel)
                if info is not None:
                    member = (group, info.language.lower(), version_name(info.version).lower(), mode)
                    consumers[member] = consumers.get(member, 0) + 1
        out = Family("rocketmq_producer_connections", "gauge", "Producer connections")
        for (language, version), count in sorted(producers.items()):
            out.add(self._labels(("language", language), ("version", version), ("protocol_type", "remoting")),
                    count)
        into = Family("rocketmq_consumer_connections", "gauge", "Consumer connections")
        for (group, language, version, mode), count in sorted(consumers.items()):
            into.add(self._labels(("consumer_group", group), ("language", language), ("version", version),
                                  ("consume_mode", mode), ("protocol_type", "remoting"),
                                  ("is_system", _flag(is_system("", group)))), count)
        return (out, into)

    def _lag_gauges(self) -> Iterable[Family]:
        """Per online group and subscribed topic, as RocketMQ's ConsumerLagCalculator: messages
        not committed (lag), those pulled or popped and not committed or acknowledged
        (inflight), those not yet handed out (ready), and how long the oldest not committed and
        the oldest not handed out have waited."""
        broker = self.broker
        store, offsets, pop = broker.store, broker.offsets, broker.pop
        lag = Family("rocketmq_consumer_lag_messages", "gauge", "Consumer lag messages")
        lag_ms = Family("rocketmq_consumer_lag_latency_milliseconds", "gauge", "Consumer lag time")
        inflight = Family("rocketmq_consumer_inflight_messages", "gauge", "Consumer inflight messages")
        queueing_ms = Family("rocketmq_consumer_queueing_latency_milliseconds", "gauge",
                             "Consumer queueing time")
        ready = Family("rocketmq_consumer_ready_messages", "gauge", "Consumer ready messages")
        now_ms = int(time.time() * 1000)
        for group, info in sorted(broker.clients.consumers.items()):
            for topic in sorted(info.subscriptions):
                tc = broker.topics.get(topic)
                if tc is None or not tc.perm & PERM_READ:
                    continue
                behind = out = waiting = 0
                oldest_unconsumed = oldest_unpulled = 0
                for queue_id in range(tc.read_queue_nums):
                    top = store.get_max_offset_in_queue(topic, queue_id)
                    popped = pop.progress_of(group, topic, queue_id)
                    committed = popped[0] if popped is not None else offsets.query(group, topic, queue_id)
                    start = top if committed is None or committed < 0 else min(committed, top)
                    if popped is not None:  # popped: the leases out; pulled: pulled, not committed
                        out_here, pulled = popped[1], min(max(popped[2], start), top)
                    else:
                        pulled = min(max(self._pulled.get((group, topic, queue_id), start), start), top)
                        out_here = pulled - start
                    behind += top - start
                    out += out_here
                    waiting += top - pulled
                    oldest_unconsumed = _older(oldest_unconsumed,
                                               store.get_message_store_timestamp(topic, queue_id, start))
                    oldest_unpulled = _older(oldest_unpulled,
                                             store.get_message_store_timestamp(topic, queue_id, pulled))
                labels = self._labels(("topic", topic), ("consumer_group", group),
                                      ("is_retry", _flag(topic.startswith(RETRY_GROUP_TOPIC_PREFIX))),
                                      ("is_system", _flag(is_system(topic, group))))
                lag.add(labels, behind)
                lag_ms.add(labels, max(0, now_ms - oldest_unconsumed) if oldest_unconsumed else 0)
                inflight.add(labels, min(out, behind))
                ready.add(labels, waiting)
                queueing_ms.add(labels, max(0, now_ms - oldest_unpulled) if oldest_unpulled else 0)
        return (lag, lag_ms, inflight, queueing_ms, ready)

    def _store_gauges(self) -> Iterable[Family]:
        store = self.broker.store
        disk = (("storage_medium", "disk"), ("storage_type", "local"))
        size = Family("rocketmq_storage_size_bytes", "gauge", "Used bytes of the store's disk")
        with contextlib.suppress(OSError):
            size.add(self._labels(*disk), shutil.disk_usage(store.config.commit_log_dir).used)
        reserve = Family("rocketmq_storage_message_reserve_time_milliseconds", "gauge",
                         "Age of the oldest message in the store")
        first = store.look_message_by_offset(store.min_phy_offset) if store.max_phy_offset > 0 else None
        if first is not None:
            reserve.add(self._labels(*disk), max(0, int(time.time() * 1000) - first.store_timestamp))
        flush = Family("rocketmq_storage_flush_behind_bytes", "gauge", "Bytes written and not yet flushed")
        flush.add(self._labels(*disk), max(0, store.max_phy_offset - store.commit_log.flushed_offset))
        dispatch = Family("rocketmq_storage_dispatch_behind_bytes", "gauge",
                          "Bytes written and not yet in their ConsumeQueues")
        dispatch.add(self._labels(*disk), max(0, store.dispatcher.behind()))
        return (size, reserve, flush, dispatch)

    def _process(self) -> Iterable[Family]:
        """Prometheus' usual process metrics, and the anonymous memory Bolide keeps flat."""
        families = []
        cpu = Family("process_cpu_seconds_total", "counter", "Total user and system CPU time in seconds")
        times = os.times()
        cpu.add((), times.user + times.system)
        families.append(cpu)
        start = Family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch")
        start.add((), self.started)
        families.append(start)
        memory = _memory()
        for name, key, text in (("process_resident_memory_bytes", "VmRSS", "Resident memory size in bytes"),
                                ("process_virtual_memory_bytes", "VmSize", "Virtual memory size in bytes"),
                                ("bolide_anonymous_memory_bytes", "RssAnon",
                                 "Anonymous resident memory of the broker in bytes (message data lives "
                                 "in the page cache, not here)")):
            if key in memory:
                family = Family(name, "gauge", text)
                family.add((), memory[key])
                families.append(family)
        with contextlib.suppress(OSError):
            fds = Family("process_open_fds", "gauge", "Number of open file descriptors")
            fds.add((), len(os.listdir("/proc/self/fd")))
            families.append(fds)
        return families


def _memory() -> dict[str, int]:
    """VmRSS, VmSize and RssAnon of this process in bytes (Linux; empty elsewhere)."""
    found: dict[str, int] = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmSize", "RssAnon"):
                    found[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return found

