"""Shared fixtures: stores on temp dirs with tiny segments, and the consistency check that
every store test ends with."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bolide.store import MessageStore, StoreConfig
from bolide.store.verify import verify_store

SMALL_COMMIT_LOG = 64 * 1024  # bytes per CommitLog segment in tests
SMALL_CONSUME_QUEUE = 100 * 20  # 100 entries per ConsumeQueue file in tests


def small_config(root: Path, **overrides: object) -> StoreConfig:
    """A config with tiny segments so tests cross segment boundaries quickly."""
    values: dict[str, object] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": SMALL_COMMIT_LOG,
        "mapped_file_size_consume_queue": SMALL_CONSUME_QUEUE,
    }
    values.update(overrides)
    return StoreConfig(**values)  # type: ignore[arg-type]


def assert_consistent(config: StoreConfig) -> None:
    """Run the store verifier (what `bolide store verify` runs) and fail on any problem."""
    report = verify_store(config.store_path_root_dir, config)
    assert report.ok, "store verify found problems:\n" + "\n".join(map(str, report.problems))


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
