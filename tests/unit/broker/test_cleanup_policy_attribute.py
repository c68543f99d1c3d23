"""The ``cleanup.policy`` topic attribute: RocketMQ 5's DELETE / COMPACTION, fixed once the
topic exists."""

from __future__ import annotations

import pytest

from bolide.broker.topic_attributes import (
    TopicAttributeError,
    apply_changes,
    check_unchangeable,
    cleanup_policy,
    is_compaction,
)


def test_cleanup_policy_values() -> None:
    assert apply_changes(None, "+cleanup.policy=COMPACTION") == {"cleanup.policy": "COMPACTION"}
    assert apply_changes(None, "+cleanup.policy=DELETE") == {"cleanup.policy": "DELETE"}
    assert cleanup_policy(None) == "DELETE" and cleanup_policy({}) == "DELETE"
    assert is_compaction({"cleanup.policy": "COMPACTION"})
    assert not is_compaction({"cleanup.policy": "DELETE"})
    for bad in ("+cleanup.policy=compaction", "+cleanup.policy=COMPACT", "+cleanup.policy="):
        with pytest.raises(TopicAttributeError, match="DELETE or COMPACTION"):
            apply_changes(None, bad)


def test_cleanup_policy_is_unchangeable() -> None:
    check_unchangeable(None, {"cleanup.policy": "DELETE"})  # DELETE is the default
    check_unchangeable({"cleanup.policy": "COMPACTION"}, {"cleanup.policy": "COMPACTION", "a": "1"})
    with pytest.raises(TopicAttributeError, match="cannot change once the topic exists"):
        check_unchangeable({}, {"cleanup.policy": "COMPACTION"})
    with pytest.raises(TopicAttributeError, match="cannot change"):
        check_unchangeable({"cleanup.policy": "COMPACTION"}, {})
