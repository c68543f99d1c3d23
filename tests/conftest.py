"""Shared fixtures: stores on temp dirs with tiny segments, the consistency check that every
store test ends with, and the helpers of tests against in-process servers."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

# gRPC's fork handlers crash a forked child while the process's gRPC threads are busy (a worker
# that has served gRPC): the tests fork (os.fork, preexec_fn), so they are off for the suite
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

import pytest
from hypothesis import settings

from bolide.client import (
    Admin,
    ClientConfig,
    ConsumeFrom,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    create_reply_message,
)
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.store import MessageStore, StoreConfig, retention
from bolide.store.verify import verify_store
from bolide.testing.servers import Servers, running_servers
from xdist_scheduling import (  # noqa: F401  (hooks: pytest finds them in this module)
    pytest_collection_modifyitems,
    pytest_xdist_make_scheduler,
    xdist_scope,
)

SMALL_COMMIT_LOG = 64 * 1024  # bytes per CommitLog segment in tests
SMALL_CONSUME_QUEUE = 100 * 20  # 100 entries per ConsumeQueue file in tests

# Tests never assert wall-clock times: no per-example deadline (the workers share the cores)
settings.register_profile("bolide", deadline=None)
settings.load_profile("bolide")


def unavailable(message: str) -> NoReturn:
    """Skip on a developer machine without a tool or package; fail when ``CI`` is set."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)", pytrace=False)
    pytest.skip(message)


def small_config(root: Path, **overrides: object) -> StoreConfig:
    """A config with tiny segments so tests cross segment boundaries quickly."""
    values: dict[str, object] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": SMALL_COMMIT_LOG,
        "mapped_file_size_consume_queue": SMALL_CONSUME_QUEUE,
    }
    values.update(overrides)
    return StoreConfig(**values)  # type: ignore[arg-type]


def expire_all_but_the_last_segment(store: MessageStore) -> None:
    """Age every CommitLog segment but the newest past fileReservedTime (72 h) and run
    retention at 04:30 local time until they are gone (the store's ``deleteWhen`` must hold
    04; at most deleteFileBatchMax files go a run)."""
    store.flush()
    assert store.wait_dispatched(10)
    for cq in store.consume_queues():
        cq.flush()
    segments = [mf.path for mf in store.commit_log.files.files]
    t = time.localtime()
    now = int(time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 4, 30, 0, 0, 0, -1)) * 1000)
    for path in segments[:-1]:
        os.utime(path, ((now - 100 * 3_600_000) / 1000,) * 2)
    for _ in range(len(segments)):
        if store.min_phy_offset == int(segments[-1].name):
            break
        store.run_retention(now)
    assert store.min_phy_offset == int(segments[-1].name)


def assert_consistent(config: StoreConfig) -> None:
    """Run the store verifier (what `bolide store verify` runs) and fail on any problem."""
    report = verify_store(config.store_path_root_dir, config)
    assert report.ok, "store verify found problems:\n" + "\n".join(map(str, report.problems))


HOST_USAGE_CAP = 60  # percent: under diskMaxUsedSpaceRatio's 75


@pytest.fixture(autouse=True)
def _host_disk_usage_capped(monkeypatch: pytest.MonkeyPatch,
                            tmp_path_factory: pytest.TempPathFactory) -> None:
    """In-process stores see the disk of the tests' temporary directories as at most
    HOST_USAGE_CAP % used: a host disk past 75 % would make retention delete files whatever a
    test set up. Other file systems (a disk-full test's tmpfs) and usage a test injects (its own
    ``read_disk_usage`` or ``os.statvfs``) read as they are."""
    real_read, real_statvfs = retention.read_disk_usage, os.statvfs
    host_dev = os.stat(tmp_path_factory.getbasetemp()).st_dev

    def read(path: Path) -> int:
        usage = real_read(path)
        while not path.exists() and path.parent != path:
            path = path.parent
        try:
            same_disk = os.stat(path).st_dev == host_dev
        except OSError:
            return usage
        return min(usage, HOST_USAGE_CAP) if same_disk and os.statvfs is real_statvfs else usage

    monkeypatch.setattr(retention, "read_disk_usage", read)


@pytest.fixture
def store_config(tmp_path: Path) -> StoreConfig:
    return small_config(tmp_path / "store")


@pytest.fixture
def open_store(store_config: StoreConfig) -> Iterator[Callable[..., MessageStore]]:
    """Open stores on ``store_config`` (with overrides); all are closed and verified at the end."""
    opened: list[MessageStore] = []

    def factory(**overrides: object) -> MessageStore:
        cfg = store_config.replace(**overrides) if overrides else store_config
        store = MessageStore(cfg).open()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()
    if opened:
        assert_consistent(opened[-1].config)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local SparkSession for tests/spark; skipped without java or the spark extra."""
    import shutil
    import sys

    missing = None
    if shutil.which("java") is None:
        missing = "java is not on PATH: the Spark tests need Java 17"
    else:
        try:
            import pyspark.sql as sql
        except ImportError:
            missing = "the spark extra is not installed (make test installs it; or pip install -e '.[spark]')"
    if missing is not None:
        unavailable(missing)
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        os.environ.setdefault(name, sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (sql.SparkSession.builder.master("local[2]").appName("bolide-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def run_with_servers(tmp_path: Path, test: Callable[[Servers], Awaitable[None]], *,
                     timeout: float = 30.0, store_options: dict[str, Any] | None = None,
                     **broker_options: Any) -> None:
    """Run ``test`` against an in-process NameServer + Broker on ``tmp_path / "store"``,
    failing it after ``timeout`` seconds."""
    async def main() -> None:
        async with running_servers(tmp_path / "store", store_options=store_options,
                                   **broker_options) as servers:
            await asyncio.wait_for(test(servers), timeout)

    asyncio.run(main())


T = TypeVar("T")


async def until(probe: Callable[[], T | Awaitable[T]], what: str, timeout: float = 40.0) -> T:
    """Poll ``probe`` (sync or async) until it returns something truthy; return that. Fails
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        await asyncio.sleep(0.05)


async def acting_namesrv(tmp_path: Path, notify: bool = True) -> NamesrvController:
    """A started in-process NameServer for slave acting master (``supportActingMaster``, and
    ``notifyMinBrokerIdChanged`` with ``notify``) on a free port; close it at the end."""
    namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json"),
                                              support_acting_master=True,
                                              notify_min_broker_id_changed=notify),
                                host="127.0.0.1", port=0)
    await namesrv.start()
    return namesrv


async def wait_until(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    """Wait for ``predicate`` to hold, checking as the loop runs; TimeoutError after ``timeout``."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def send_to_first_queue(namesrv: str, topic: str, bodies: list[bytes]) -> MessageQueue:
    """Send ``bodies`` in order to the first queue of ``topic`` (created on first send); that
    queue."""
    async with Producer(namesrv, "tests_pg") as producer:
        queue = (await producer.publish_queues(topic))[0]
        for body in bodies:
            await producer.send(Message(topic, body), queue=queue)
    return queue


async def send_then_push_consume(producer: str | ClientConfig, consumer: str | ClientConfig,
                                 topic: str, count: int = 4) -> list[bytes]:
    """Create ``topic`` (2 queues) and send ``count`` messages ``m0``... with ``producer``'s
    settings, then consume them all with a push consumer of ``consumer``'s settings (group
    ``<topic>-cg``); the bodies received, sorted."""
    async with Admin(producer) as admin:
        await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
    async with Producer(producer, "tests_pg") as sender:
        for i in range(count):
            await sender.send(Message(topic, b"m%d" % i))
    seen: list[MessageExt] = []

    async def listener(msgs: list[MessageExt], ctx: object) -> None:
        seen.extend(msgs)

    push = PushConsumer(consumer, f"{topic}-cg", listener=listener,
                        consume_from=ConsumeFrom.FIRST_OFFSET)
    push.subscribe(topic)
    async with push:
        await wait_until(lambda: len(seen) >= count)
    return sorted(m.body for m in seen)


def replying_consumer(namesrv: str, topic: str, group: str, *, prefix: bytes = b"re:",
                      consume_from: ConsumeFrom = ConsumeFrom.FIRST_OFFSET,
                      answered: list[str] | None = None) -> tuple[PushConsumer, Producer]:
    """A push consumer of ``topic`` that answers each request with ``prefix + body``
    (create_reply_message), and the producer it replies with; start (and close) both.
    ``answered`` collects the bodies answered."""
    replier = Producer(namesrv, f"{group}_replier")

    async def listener(msgs: list[MessageExt], ctx: object) -> None:
        for m in msgs:
            await replier.send(create_reply_message(m, prefix + m.body))
            if answered is not None:
                answered.append(m.body.decode())

    consumer = PushConsumer(namesrv, group, listener=listener, consume_from=consume_from)
    consumer.subscribe(topic)
    return consumer, replier


class _Tracebacks(logging.Handler):
    """Collects the records that carry a traceback or are errors."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.found: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.found.append(self.format(record))


@contextmanager
def no_traceback_logged() -> Iterator[None]:
    """Fail when a ``bolide`` logger records a traceback or an error within the block (checked
    only when the block itself succeeds)."""
    caught = _Tracebacks()
    logger = logging.getLogger("bolide")
    logger.addHandler(caught)
    try:
        yield
    finally:
        logger.removeHandler(caught)
    assert not caught.found, "\n\n".join(caught.found[:5])
