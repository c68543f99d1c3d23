"""The data version rule of a returning master's pre-online step (bolide.broker.pre_online)."""

from __future__ import annotations

from bolide.broker.pre_online import not_older
from bolide.store.config_files import DataVersion


def version(state: int | None, counter: int, timestamp: int) -> DataVersion:
    return DataVersion(counter=counter, timestamp=timestamp, state_version=state)


def test_the_slaves_data_is_taken_unless_the_masters_is_newer() -> None:
    ours = version(0, 5, 2000)
    assert not_older(version(0, 5, 2000), ours)  # the same: the slave's (RocketMQ's compare <= 0)
    assert not_older(version(0, 6, 1000), ours)  # the counter comes before the timestamp
    assert not not_older(version(0, 4, 9000), ours)
    assert not_older(version(0, 5, 2001), ours) and not not_older(version(0, 5, 1999), ours)
    assert not_older(version(1, 0, 0), ours)  # the state version first
    assert not not_older(version(None, 9, 9000), version(1, 0, 0))  # 4.9 files: state 0


def test_a_missing_version_counts_as_the_lowest() -> None:
    assert not_older(None, None)
    assert not_older(version(None, 0, 0), None)
    assert not not_older(None, version(0, 1, 1))
