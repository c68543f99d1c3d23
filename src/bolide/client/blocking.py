"""The blocking client API: the classes of :mod:`bolide.client` with the same names, arguments
and results, whose methods block instead of returning coroutines.

::

    from bolide.client.blocking import Producer
    from bolide.client import Message

    with Producer("127.0.0.1:9876", group="pg") as producer:
        result = producer.send(Message("Orders", b"hi"))

Each client object runs the asyncio client on an event loop in a background thread of its
own, started on first use; ``close()`` stops that loop and joins the thread (and the threads
of its pool, where plain-function listeners run), so no thread is left behind. After
``os.fork()`` the child's object starts a fresh loop on first use; a consumer started in the
parent is not running in the child: call ``start()`` there again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

from bolide.client import admin as _admin
from bolide.client import producer as _producer
from bolide.client import pull_consumer as _pull
from bolide.client import push_consumer as _push
from bolide.client import simple_consumer as _simple
from bolide.client import transaction as _tx
from bolide.client.admin_acl import AclVersion
from bolide.client.admin_cold_data import ColdDataFlowCtrInfo
from bolide.client.admin_lists import GroupEntry
from bolide.client.admin_static import StaticTopicChange
from bolide.client.admin_stats import TopicGroupStats
from bolide.client.admin_trace import TraceView
from bolide.client.admin_types import GroupProgress, ResetPlan
from bolide.client.errors import ClientStateError
from bolide.client.filtering import MessageSelector
from bolide.client.results import PullResult, SendResult, SendStatus
from bolide.client.selector import MessageQueueSelector
from bolide.common.message import Message, MessageExt
from bolide.protocol.bodies.admin import (
    BrokerClusterAclConfig,
    BrokerStatsData,
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStatsList,
    GroupForbidden,
    ProducerConnection,
    ProducerInfo,
    QueryConsumeQueueResponseBody,
    TopicOffset,
)
from bolide.protocol.bodies.auth import AclInfo, UserInfo
from bolide.protocol.bodies.broker import (
    SubscriptionGroupConfig,
    TimerMetricsSerializeWrapper,
    TopicConfig,
    TopicConfigAndQueueMapping,
)
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.bodies.controller import BrokerReplicasInfo, ElectMasterResponseBody
from bolide.protocol.bodies.ha import HARuntimeInfo
from bolide.protocol.bodies.route import BrokerMemberGroup, ClusterInfo, TopicRouteData
from bolide.protocol.bodies.static_topic import TopicQueueMappingDetail
from bolide.protocol.headers.controller import ElectMasterResponseHeader, GetMetaDataResponseHeader

T = TypeVar("T")
C = TypeVar("C")


class LoopThread:
    """An event loop running in a background thread, started on demand, fork-aware."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        _LOOP_THREADS.add(self)

    @property
    def running(self) -> bool:
        """True when this process's loop thread is running."""
        return self._thread is not None and self._pid == os.getpid()

    @property
    def thread(self) -> threading.Thread | None:
        """The loop's thread (None when not started)."""
        return self._thread

    def forked(self) -> bool:
        """True (once) in a child process: the parent's loop thread does not exist here."""
        if self._pid == os.getpid():
            return False
        self._loop = self._thread = None  # the child has copies of the objects but no thread
        self._pid = os.getpid()
        return True

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, started (in a new thread) on first use in this process."""
        with self._lock:
            self.forked()
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=main, name=self.name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def submit(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; a future of its result."""
        loop = self.loop()
        if threading.current_thread() is self._thread:
            raise ClientStateError("a blocking client method was called on its own event loop thread: "
                                   "use the asyncio client (bolide.client) inside coroutines")
        return asyncio.run_coroutine_threadsafe(coro, loop)  # type: ignore[arg-type]

    def run(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the loop and wait for its result (its exception is raised here)."""
        return self.submit(coro).result()

    def stop(self) -> None:
        """Cancel what still runs, shut the thread pool down, stop the loop, join the thread."""
        with self._lock:
            if self.forked() or self._loop is None or self._thread is None:
                return
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        asyncio.run_coroutine_threadsafe(_shutdown(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


_LOOP_THREADS: weakref.WeakSet[LoopThread] = weakref.WeakSet()


def _unlock_after_fork() -> None:
    """A lock another thread held at the fork (starting or stopping a loop) stays held in the
    child, where that thread does not exist: give every LoopThread a fresh one."""
    for runner in list(_LOOP_THREADS):
        runner._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_unlock_after_fork)


async def _shutdown() -> None:
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()


B = TypeVar("B", bound=type)


def _documented_as(twin: type) -> Callable[[B], B]:
    """Give the methods and properties of a blocking class that have no docstring the one of
    the same name on its asyncio ``twin`` (the blocking call does the same, waiting for it)."""
    def apply(cls: B) -> B:
        for name, value in list(vars(cls).items()):
            if name.startswith("_"):
                continue
            doc = inspect.getdoc(getattr(twin, name, None)) if hasattr(twin, name) else None
            if isinstance(value, property) and not value.__doc__ and doc:
                setattr(cls, name, property(value.fget, value.fset, value.fdel, doc))
            elif inspect.isfunction(value) and not value.__doc__ and doc:
                value.__doc__ = doc
        return cls
    return apply


class _Blocking(Generic[C]):
    """Holds the asyncio client object ``C`` and the loop thread it runs on."""

    _REPLAYED: tuple[str, ...] = ()  # configuration calls repeated on the fresh object after a fork

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._runner = LoopThread(f"bolide-client-{type(self).__name__}")
        self._core_obj: C | None = factory()
        self._calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._closed = False

    @property
    def _core(self) -> C:
        if self._closed:
            raise ClientStateError(f"this {type(self).__name__} is closed: create a new one")
        if self._runner.forked() or self._core_obj is None:
            core = self._factory()
            for name, args, kwargs in self._calls:
                getattr(core, name)(*args, **kwargs)
            self._core_obj = core
        return self._core_obj

    def _configure(self, name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self._core, name)(*args, **kwargs)
        self._calls.append((name, args, kwargs))
        return result

    def _run(self, make: Callable[[C], Awaitable[T]]) -> T:
        core = self._core
        return self._runner.run(make(core))

    @property
    def loop_thread(self) -> threading.Thread | None:
        """The background thread (None before first use and after close)."""
        return self._runner.thread

    def close(self) -> None:
        """Close the client, stop its event loop and join its thread."""
        if self._closed:
            return
        core = self._core_obj
        try:
            if core is not None and self._runner.running:
                self._runner.run(core.close())  # type: ignore[attr-defined]
        finally:
            self._closed = True
            self._runner.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def client_id(self) -> str:
        """This client's id (``ip@instance``), as brokers list it."""
        return self._core.client_id  # type: ignore[attr-defined, no-any-return]


@_documented_as(_producer.Producer)
class Producer(_Blocking[_producer.Producer]):
    """Blocking :class:`bolide.client.Producer`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: _producer.Producer(*args, **kwargs))

    def start(self) -> Producer:
        self._run(lambda c: c.start())
        return self

    def send(self, msg: Message, *, queue: MessageQueue | None = None,
             selector: MessageQueueSelector | None = None, arg: Any = None,
             timeout_ms: int | None = None) -> SendResult:
        return self._run(lambda c: c.send(msg, queue=queue, selector=selector, arg=arg,
                                          timeout_ms=timeout_ms))

    def send_async(self, msg: Message, **kwargs: Any) -> concurrent.futures.Future[SendResult]:
        """Send in the background; returns a ``concurrent.futures.Future`` of the SendResult."""
        core = self._core
        return self._runner.submit(core.send(msg, **kwargs))

    def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None,
                    selector: MessageQueueSelector | None = None, arg: Any = None) -> None:
        self._run(lambda c: c.send_oneway(msg, queue=queue, selector=selector, arg=arg))

    def send_batch(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                   timeout_ms: int | None = None) -> SendResult:
        return self._run(lambda c: c.send_batch(messages, queue=queue, timeout_ms=timeout_ms))

    def send_batch_async(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout_ms: int | None = None) -> concurrent.futures.Future[SendResult]:
        """:meth:`send_batch` in the background; returns a ``concurrent.futures.Future``."""
        core = self._core
        return self._runner.submit(core.send_batch(messages, queue=queue, timeout_ms=timeout_ms))

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(lambda c: c.publish_queues(topic))

    def request(self, msg: Message, *, timeout_ms: int = 3000, queue: MessageQueue | None = None,
                selector: MessageQueueSelector | None = None, arg: Any = None) -> MessageExt:
        return self._run(lambda c: c.request(msg, timeout_ms=timeout_ms, queue=queue,
                                             selector=selector, arg=arg))

    def recall_message(self, topic: str, recall_handle: str, *, timeout_ms: int | None = None) -> str:
        return self._run(lambda c: c.recall_message(topic, recall_handle, timeout_ms=timeout_ms))


@_documented_as(_tx.TransactionProducer)
class TransactionProducer(Producer):
    """Blocking :class:`bolide.client.TransactionProducer`. The local executor runs in the
    calling thread (a coroutine function on the client's loop); the check listener in the
    client's thread pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _Blocking.__init__(self, lambda: _tx.TransactionProducer(*args, **kwargs))

    def register_check_listener(self, listener: _tx.CheckListener) -> None:
        self._configure("register_check_listener", listener)

    def send_message_in_transaction(self, msg: Message, local_executor: _tx.LocalExecutor,
                                    arg: Any = None) -> _tx.TransactionSendResult:
        core: _tx.TransactionProducer = self._core  # type: ignore[assignment]
        sent = self._runner.run(core.send_half(msg))
        state, error = _tx.LocalTransactionState.ROLLBACK, None
        if sent.status is SendStatus.SEND_OK:
            if inspect.iscoroutinefunction(local_executor):
                state, error = self._runner.run(core.execute_local(local_executor, msg, arg))
            else:
                state, error = _run_local(local_executor, msg, arg)
        self._runner.run(core.end_transaction(msg, sent, state, error))
        return core.transaction_result(sent, state)

    @property
    def checks_answered(self) -> int:
        """How many transaction checks of the broker this producer has answered."""
        return self._core.checks_answered  # type: ignore[attr-defined, no-any-return]


def _run_local(local_executor: _tx.LocalExecutor, msg: Message,
               arg: Any) -> tuple[_tx.LocalTransactionState, BaseException | None]:
    try:
        return _tx.as_state(local_executor(msg, arg), "the local transaction executor"), None
    except Exception as exc:
        return _tx.LocalTransactionState.UNKNOWN, exc


@_documented_as(_push.PushConsumer)
class PushConsumer(_Blocking[_push.PushConsumer]):
    """Blocking :class:`bolide.client.PushConsumer`; plain-function listeners run in the
    consumer's thread pool, coroutine listeners on its loop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: _push.PushConsumer(*args, **kwargs))

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._configure("subscribe", topic, expression)

    def register_listener(self, listener: _push.Listener) -> None:
        self._configure("register_listener", listener)

    def start(self) -> PushConsumer:
        self._run(lambda c: c.start())
        return self

    def assignment(self) -> set[MessageQueue]:
        return self._run(_async(lambda c: c.assignment()))

    @property
    def rebalances(self) -> int:
        """Completed rebalance rounds."""
        return self._core.rebalances


@_documented_as(_pull.PullConsumer)
class PullConsumer(_Blocking[_pull.PullConsumer]):
    """Blocking :class:`bolide.client.PullConsumer`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: _pull.PullConsumer(*args, **kwargs))

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._configure("subscribe", topic, expression)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        queues = list(queues)
        if self._core.started:
            self._run(_async(lambda c: c.assign(queues)))
            self._calls.append(("assign", (queues,), {}))
        else:
            self._configure("assign", queues)

    def start(self) -> PullConsumer:
        self._run(lambda c: c.start())
        return self

    def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        return self._run(lambda c: c.poll(timeout_ms))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(lambda c: c.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(lambda c: c.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(lambda c: c.seek_to_end(mq))

    def committed(self, mq: MessageQueue) -> int | None:
        return self._run(lambda c: c.committed(mq))

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        self._run(lambda c: c.commit(offsets))

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(lambda c: c.fetch_message_queues(topic))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._run(lambda c: c.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._run(lambda c: c.max_offset(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(lambda c: c.offset_for_timestamp(mq, timestamp_ms))

    def assignment(self) -> set[MessageQueue]:
        return self._run(_async(lambda c: c.assignment()))


@_documented_as(_simple.SimpleConsumer)
class SimpleConsumer(_Blocking[_simple.SimpleConsumer]):
    """Blocking :class:`bolide.client.SimpleConsumer`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: _simple.SimpleConsumer(*args, **kwargs))

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._configure("subscribe", topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self._configure("unsubscribe", topic)

    def start(self) -> SimpleConsumer:
        self._run(lambda c: c.start())
        return self

    def receive(self, max_messages: int = 16, invisible_duration_ms: int = 30_000,
                await_duration_ms: int | None = None) -> list[MessageExt]:
        return self._run(lambda c: c.receive(max_messages, invisible_duration_ms, await_duration_ms))

    def ack(self, msg: MessageExt) -> None:
        self._run(lambda c: c.ack(msg))

    def change_invisible_duration(self, msg: MessageExt, invisible_duration_ms: int) -> None:
        self._run(lambda c: c.change_invisible_duration(msg, invisible_duration_ms))


@_documented_as(_admin.Admin)
class Admin(_Blocking[_admin.Admin]):
    """Blocking :class:`bolide.client.admin.Admin`: every coroutine method of it, blocking."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: _admin.Admin(*args, **kwargs))

    def start(self) -> Admin:
        self._run(lambda c: c.start())
        return self

    def cluster_info(self) -> ClusterInfo:
        return self._run(lambda c: c.cluster_info())

    def topic_list(self) -> list[str]:
        return self._run(lambda c: c.topic_list())

    def topic_route(self, topic: str) -> TopicRouteData:
        return self._run(lambda c: c.topic_route(topic))

    def master_addrs(self, cluster: str | None = None) -> list[str]:
        return self._run(lambda c: c.master_addrs(cluster))

    def broker_runtime_info(self, addr: str) -> dict[str, str]:
        return self._run(lambda c: c.broker_runtime_info(addr))

    def broker_consume_stats(self, addr: str, *, order_only: bool = False) -> ConsumeStatsList:
        return self._run(lambda c: c.broker_consume_stats(addr, order_only=order_only))

    def producer_table(self, addr: str) -> dict[str, list[ProducerInfo]]:
        return self._run(lambda c: c.producer_table(addr))

    def consume_queue(self, addr: str, topic: str, queue_id: int, index: int, count: int = 10,
                      group: str | None = None) -> QueryConsumeQueueResponseBody:
        return self._run(lambda c: c.consume_queue(addr, topic, queue_id, index, count, group))

    def clean_expired_cq(self, **kwargs: Any) -> dict[str, str]:
        return self._run(lambda c: c.clean_expired_cq(**kwargs))

    def ha_status(self, broker_addr: str) -> HARuntimeInfo:
        return self._run(lambda c: c.ha_status(broker_addr))

    def topic_stats(self, topic: str) -> dict[MessageQueue, TopicOffset]:
        return self._run(lambda c: c.topic_stats(topic))

    def create_topic(self, topic: str, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.create_topic(topic, **kwargs))

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        return self._run(lambda c: c.delete_topic(topic, cluster=cluster))

    def create_subscription_group(self, config: SubscriptionGroupConfig, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.create_subscription_group(config, **kwargs))

    def delete_subscription_group(self, group: str, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.delete_subscription_group(group, **kwargs))

    def set_consume_mode(self, topic: str, group: str, mode: str, pop_share_queue_num: int = 0,
                         **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.set_consume_mode(topic, group, mode, pop_share_queue_num, **kwargs))

    def consumer_progress(self, group: str, topic: str | None = None) -> GroupProgress:
        return self._run(lambda c: c.consumer_progress(group, topic))

    def consumer_connection(self, group: str) -> ConsumerConnection:
        return self._run(lambda c: c.consumer_connection(group))

    def queue_owners(self, group: str) -> dict[MessageQueue, str]:
        return self._run(lambda c: c.queue_owners(group))

    def consumer_running_info(self, group: str, client_id: str, *,
                              jstack: bool = False) -> ConsumerRunningInfo:
        return self._run(lambda c: c.consumer_running_info(group, client_id, jstack=jstack))

    def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        return self._run(lambda c: c.producer_connection(group, topic))

    def consume_message_directly(self, group: str, client_id: str, msg_id: str,
                                 topic: str | None = None) -> ConsumeMessageDirectlyResult:
        return self._run(lambda c: c.consume_message_directly(group, client_id, msg_id, topic))

    def update_acl_account(self, access_key: str, secret_key: str, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.update_acl_account(access_key, secret_key, **kwargs))

    def delete_acl_account(self, access_key: str, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.delete_acl_account(access_key, **kwargs))

    def update_global_white_addrs(self, addresses: Iterable[str], **kwargs: Any) -> list[str]:
        addresses = list(addresses)
        return self._run(lambda c: c.update_global_white_addrs(addresses, **kwargs))

    def acl_versions(self, **kwargs: Any) -> list[AclVersion]:
        return self._run(lambda c: c.acl_versions(**kwargs))

    def acl_config(self, **kwargs: Any) -> dict[str, BrokerClusterAclConfig]:
        return self._run(lambda c: c.acl_config(**kwargs))

    def create_user(self, username: str, password: str, user_type: str | None = None,
                    **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.create_user(username, password, user_type, **kwargs))

    def update_user(self, username: str, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.update_user(username, **kwargs))

    def delete_user(self, username: str, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.delete_user(username, **kwargs))

    def get_user(self, username: str, **kwargs: Any) -> UserInfo | None:
        return self._run(lambda c: c.get_user(username, **kwargs))

    def list_users(self, name_part: str | None = None, **kwargs: Any) -> list[UserInfo]:
        return self._run(lambda c: c.list_users(name_part, **kwargs))

    def put_acl(self, subject: str, resources: Iterable[str], actions: Iterable[str],
                decision: str = "Allow", source_ips: Iterable[str] | None = None,
                **kwargs: Any) -> list[str]:
        resources, actions = list(resources), list(actions)
        ips = None if source_ips is None else list(source_ips)
        return self._run(lambda c: c.put_acl(subject, resources, actions, decision, ips, **kwargs))

    def delete_acl(self, subject: str, resource: str | None = None, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.delete_acl(subject, resource, **kwargs))

    def get_acl(self, subject: str, **kwargs: Any) -> AclInfo | None:
        return self._run(lambda c: c.get_acl(subject, **kwargs))

    def list_acls(self, subject_part: str | None = None, resource_part: str | None = None,
                  **kwargs: Any) -> list[AclInfo]:
        return self._run(lambda c: c.list_acls(subject_part, resource_part, **kwargs))

    def copy_users(self, from_addr: str, to_addr: str, usernames: Iterable[str] | None = None) -> list[str]:
        names = None if usernames is None else list(usernames)
        return self._run(lambda c: c.copy_users(from_addr, to_addr, names))

    def copy_acls(self, from_addr: str, to_addr: str, subjects: Iterable[str] | None = None) -> list[str]:
        chosen = None if subjects is None else list(subjects)
        return self._run(lambda c: c.copy_acls(from_addr, to_addr, chosen))

    def online_consumers(self, group: str, topic: str) -> list[str]:
        return self._run(lambda c: c.online_consumers(group, topic))

    def broker_config(self, broker_addr: str) -> dict[str, str]:
        return self._run(lambda c: c.broker_config(broker_addr))

    def update_broker_config(self, changes: Mapping[str, object], **kwargs: Any) -> list[str]:
        changes = dict(changes)
        return self._run(lambda c: c.update_broker_config(changes, **kwargs))

    def namesrv_config(self) -> dict[str, dict[str, str]]:
        return self._run(lambda c: c.namesrv_config())

    def update_namesrv_config(self, changes: Mapping[str, object]) -> list[str]:
        changes = dict(changes)
        return self._run(lambda c: c.update_namesrv_config(changes))

    def controller_metadata(self, controller: str) -> GetMetaDataResponseHeader:
        return self._run(lambda c: c.controller_metadata(controller))

    def sync_state_data(self, controller: str, broker_names: Sequence[str]) -> BrokerReplicasInfo:
        return self._run(lambda c: c.sync_state_data(controller, broker_names))

    def controller_config(self, controllers: str | Sequence[str]) -> dict[str, dict[str, str]]:
        return self._run(lambda c: c.controller_config(controllers))

    def update_controller_config(self, changes: Mapping[str, object],
                                 controllers: str | Sequence[str]) -> list[str]:
        changes = dict(changes)
        return self._run(lambda c: c.update_controller_config(changes, controllers))

    def elect_master(self, controller: str, cluster: str, broker_name: str,
                     broker_id: int) -> tuple[ElectMasterResponseHeader, ElectMasterResponseBody]:
        return self._run(lambda c: c.elect_master(controller, cluster, broker_name, broker_id))

    def clean_broker_metadata(self, controller: str, broker_name: str, **kwargs: Any) -> None:
        return self._run(lambda c: c.clean_broker_metadata(controller, broker_name, **kwargs))

    def subscription_group(self, group: str, **kwargs: Any) -> dict[str, SubscriptionGroupConfig | None]:
        return self._run(lambda c: c.subscription_group(group, **kwargs))

    def topic_clusters(self, topic: str) -> list[str]:
        return self._run(lambda c: c.topic_clusters(topic))

    def update_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        return self._run(lambda c: c.update_kv_config(namespace, key, value))

    def export_configs(self, cluster: str) -> dict[str, Any]:
        return self._run(lambda c: c.export_configs(cluster))

    def set_commit_log_read_ahead(self, mode: int, **kwargs: Any) -> dict[str, str]:
        return self._run(lambda c: c.set_commit_log_read_ahead(mode, **kwargs))

    def user_topics(self, broker_addr: str, *, special: bool = False) -> dict[str, TopicConfig]:
        return self._run(lambda c: c.user_topics(broker_addr, special=special))

    def user_subscription_groups(self, broker_addr: str) -> dict[str, SubscriptionGroupConfig]:
        return self._run(lambda c: c.user_subscription_groups(broker_addr))

    def export_metadata(self, **kwargs: Any) -> dict[str, Any]:
        return self._run(lambda c: c.export_metadata(**kwargs))

    def kv_config(self, namespace: str, key: str) -> str | None:
        return self._run(lambda c: c.kv_config(namespace, key))

    def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        return self._run(lambda c: c.delete_kv_config(namespace, key))

    def update_topic_perm(self, topic: str, perm: int, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.update_topic_perm(topic, perm, **kwargs))

    def delete_expired_commit_log(self, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.delete_expired_commit_log(**kwargs))

    def clone_group_offset(self, source: str, dest: str, topic: str) -> dict[MessageQueue, int]:
        return self._run(lambda c: c.clone_group_offset(source, dest, topic))

    def create_topic_list(self, topics: Sequence[TopicConfig], **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.create_topic_list(topics, **kwargs))

    def create_subscription_group_list(self, groups: Sequence[GroupEntry], **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.create_subscription_group_list(groups, **kwargs))

    def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        return self._run(lambda c: c.wipe_write_perm(broker_name))

    def add_write_perm(self, broker_name: str) -> dict[str, int]:
        return self._run(lambda c: c.add_write_perm(broker_name))

    def broker_stats(self, broker_addr: str, name: str, key: str) -> BrokerStatsData | None:
        return self._run(lambda c: c.broker_stats(broker_addr, name, key))

    def stats_all(self, topic: str | None = None, *, active_only: bool = False) -> list[TopicGroupStats]:
        return self._run(lambda c: c.stats_all(topic, active_only=active_only))

    def consumer_offsets_by_client(self, topic: str, group: str, client_id: str | None = None,
                                   ) -> dict[str, dict[MessageQueue, int]]:
        return self._run(lambda c: c.consumer_offsets_by_client(topic, group, client_id))

    def check_rocksdb_cq_write_progress(self, **kwargs: Any) -> dict[str, dict[str, Any]]:
        return self._run(lambda c: c.check_rocksdb_cq_write_progress(**kwargs))

    def export_rocksdb_config_to_json(self, *args: Any, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.export_rocksdb_config_to_json(*args, **kwargs))

    def export_metrics(self, cluster: str) -> dict[str, Any]:
        return self._run(lambda c: c.export_metrics(cluster))

    def update_cold_data_flow_ctr_group_config(self, group: str, threshold: int, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.update_cold_data_flow_ctr_group_config(group, threshold, **kwargs))

    def remove_cold_data_flow_ctr_group_config(self, group: str, **kwargs: Any) -> list[str]:
        return self._run(lambda c: c.remove_cold_data_flow_ctr_group_config(group, **kwargs))

    def cold_data_flow_ctr_info(self, **kwargs: Any) -> dict[str, ColdDataFlowCtrInfo | None]:
        return self._run(lambda c: c.cold_data_flow_ctr_info(**kwargs))

    def message_trace(self, msg_id: str, **kwargs: Any) -> list[TraceView]:
        return self._run(lambda c: c.message_trace(msg_id, **kwargs))

    def queues(self, topic: str) -> list[tuple[MessageQueue, str]]:
        return self._run(lambda c: c.queues(topic))

    def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int, *,
                             dry_run: bool = False) -> ResetPlan:
        return self._run(lambda c: c.reset_offset_by_time(group, topic, timestamp_ms, dry_run=dry_run))

    def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        return self._run(lambda c: c.view_message(msg_id, topic))

    def query_by_key(self, topic: str, key: str, **kwargs: Any) -> list[MessageExt]:
        return self._run(lambda c: c.query_by_key(topic, key, **kwargs))

    def read_messages(self, mq: MessageQueue, offset: int, count: int, **kwargs: Any) -> list[MessageExt]:
        return self._run(lambda c: c.read_messages(mq, offset, count, **kwargs))

    def pull_records(self, mq: MessageQueue, offsets: Sequence[int],
                     **kwargs: Any) -> list[tuple[PullResult, bytes]]:
        return self._run(lambda c: c.pull_records(mq, offsets, **kwargs))

    def pull_records_later(self, mq: MessageQueue, offsets: Sequence[int], **kwargs: Any,
                           ) -> concurrent.futures.Future[list[tuple[PullResult, bytes]]]:
        """:meth:`pull_records` sent now, its answers in the future returned: the caller works
        on while the pulls are in flight."""
        return self._runner.submit(self._core.pull_records(mq, offsets, **kwargs))

    def min_max_offset(self, mq: MessageQueue, addr: str) -> tuple[int, int]:
        return self._run(lambda c: c.min_max_offset(mq, addr))

    def search_offset(self, mq: MessageQueue, addr: str, timestamp_ms: int) -> int:
        return self._run(lambda c: c.search_offset(mq, addr, timestamp_ms))

    def timer_metrics(self, broker_addr: str) -> TimerMetricsSerializeWrapper:
        return self._run(lambda c: c.timer_metrics(broker_addr))

    def query_correction_offset(self, broker_addr: str, topic: str, compare_group: str,
                                filter_groups: Sequence[str] = ()) -> dict[int, int]:
        return self._run(lambda c: c.query_correction_offset(broker_addr, topic, compare_group,
                                                             filter_groups))

    def resume_check_half_message(self, topic: str, msg_id: str) -> str:
        return self._run(lambda c: c.resume_check_half_message(topic, msg_id))

    def update_and_get_group_read_forbidden(self, broker_addr: str, group: str, topic: str,
                                            readable: bool | None = None) -> GroupForbidden:
        return self._run(lambda c: c.update_and_get_group_read_forbidden(broker_addr, group, topic, readable))

    def broker_member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup:
        return self._run(lambda c: c.broker_member_group(cluster, broker_name))

    def topic_config(self, broker_addr: str, topic: str) -> TopicConfigAndQueueMapping | None:
        return self._run(lambda c: c.topic_config(broker_addr, topic))

    def create_static_topic(self, broker_addr: str, config: TopicConfig, detail: TopicQueueMappingDetail,
                            force: bool = False) -> None:
        self._run(lambda c: c.create_static_topic(broker_addr, config, detail, force))

    def broker_topic_stats(self, broker_addr: str, topic: str) -> dict[MessageQueue, TopicOffset]:
        return self._run(lambda c: c.broker_topic_stats(broker_addr, topic))

    def static_topic_configs(self, topic: str) -> dict[str, TopicConfigAndQueueMapping]:
        return self._run(lambda c: c.static_topic_configs(topic))

    def update_static_topic(self, topic: str, queue_num: int, **kwargs: Any) -> StaticTopicChange:
        return self._run(lambda c: c.update_static_topic(topic, queue_num, **kwargs))

    def remap_static_topic(self, topic: str, **kwargs: Any) -> StaticTopicChange:
        return self._run(lambda c: c.remap_static_topic(topic, **kwargs))

    def apply_static_topic_file(self, topic: str, path: str | Path, *, remap: bool,
                                force: bool = False) -> StaticTopicChange:
        return self._run(lambda c: c.apply_static_topic_file(topic, path, remap=remap, force=force))


def _async(fn: Callable[[C], T]) -> Callable[[C], Awaitable[T]]:
    """Run a plain method on the loop thread (the consumers' state belongs to it)."""
    async def call(core: C) -> T:
        return fn(core)
    return lambda core: call(core)


__all__ = ["Admin", "LoopThread", "Producer", "PullConsumer", "PushConsumer", "TransactionProducer"]
