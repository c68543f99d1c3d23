"""Recall handles as RocketMQ 5 writes them, and the recalled-messages file."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bolide.broker.timer_recall import KEEP_AFTER_DUE_MS, TimerRecalls, timer_recall_handle
from bolide.common.recall_handle import RecallError, decode_recall_handle, recall_handle


def test_handles_are_rocketmqs() -> None:
    # RecallMessageHandle.HandleV1.buildHandle: url-safe base64 of the space-joined fields
    java = base64.urlsafe_b64encode(
        b"v1 Orders broker-a 1700000000001 7F00000100002A9F0000000000000000"
    ).decode()
    assert recall_handle("Orders", "broker-a", 1700000000001, "7F00000100002A9F0000000000000000") == java
    assert decode_recall_handle(java) == (
        "Orders",
        "broker-a",
        1700000000001,
        "7F00000100002A9F0000000000000000",
    )
    props = {"TIMER_OUT_MS": "1700000000000", "UNIQ_KEY": "7F00000100002A9F0000000000000000"}
    assert timer_recall_handle("Orders", "broker-a", props) == java  # one ms past TIMER_OUT_MS
    assert timer_recall_handle("Orders", "broker-a", {"UNIQ_KEY": "x"}) is None


@pytest.mark.parametrize(
    "handle",
    [
        "",
        "not base64!",
        base64.urlsafe_b64encode(b"v2 T b 1 id").decode(),
        base64.urlsafe_b64encode(b"v1 T b notanumber id").decode(),
        base64.urlsafe_b64encode(b"v1 T b 1").decode(),
    ],
)
def test_what_is_not_a_handle_is_refused(handle: str) -> None:
    with pytest.raises(RecallError, match="recall handle is invalid"):
        decode_recall_handle(handle)


def test_recalls_are_used_once_kept_on_disk_and_forgotten_an_hour_after_due(tmp_path: Path) -> None:
    recalls = TimerRecalls(tmp_path / "timerRecalls.json")
    now = 10 * KEEP_AFTER_DUE_MS
    recalls.add("T", "old", now - KEEP_AFTER_DUE_MS - 1, now - 2 * KEEP_AFTER_DUE_MS)
    recalls.add("T", "a", now + 5000, now)
    assert set(recalls.due) == {("T", "a")}  # the one due over an hour ago went with the add
    recalls.persist()
    again = TimerRecalls(tmp_path / "timerRecalls.json")
    assert again.load() and again.due == {("T", "a"): now + 5000}
    assert not again.take("T", None) and not again.take("U", "a")
    assert again.take("T", "a") and not again.take("T", "a")
