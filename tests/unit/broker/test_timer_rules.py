"""Timer messages (RocketMQ 5's TIMER_DELIVER_MS / TIMER_DELAY_MS / TIMER_DELAY_SEC) on the
delay levels: which sends are timer messages, what they are stored with, RocketMQ's refusals,
and the chain of levels a message waits in."""

from __future__ import annotations

import pytest

from bolide.broker.timer import TimerRefusal, next_hop, timer_due, timer_properties, waiting_timer
from bolide.common import properties as P
from bolide.common.message import Message
from bolide.protocol.codes import ResponseCode
from bolide.store.delay import parse_delay_levels, timer_level

LEVELS = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
NOW = 1_700_000_000_000


def stored(props: dict[str, str], **kw: object) -> dict[str, str] | None:
    options = {"enabled": True, "max_delay_s": 3 * 86400, **kw}
    return timer_properties(props, NOW, LEVELS, **options)  # type: ignore[arg-type]


def test_the_longest_level_that_fits_then_what_is_left() -> None:
    assert [timer_level(ms, LEVELS) for ms in (0, 499, 500, 4999, 5000, 90 * 60_000)] == [
        None, None, 1, 1, 2, 17]
    assert timer_level(3 * 86400_000, LEVELS) == 18  # 2 h at a time
    remaining, hops = 95 * 60_000 + 7_000, []
    while (level := timer_level(remaining, LEVELS)) is not None:
        hops.append(level)
        remaining -= LEVELS[level]
    assert hops == [17, 16, 9, 2, 1, 1]  # 1h, 30m, 5m, 5s, 1s, 1s
    assert remaining == 0


def test_what_a_timer_message_is_stored_with() -> None:
    at = stored({P.TIMER_DELIVER_MS: str(NOW + 90 * 60_000 + 700), "k": "v"})
    assert at is not None
    due = NOW + 90 * 60_000  # rounded down to the precision, 1 s
    # waiting in 1 h; what is left after it is what RocketMQ's timer wheel would wait for
    assert at == {"k": "v", P.TIMER_DELIVER_MS: str(due), P.DELAY_TIME_LEVEL: "17",
                  P.TIMER_DELAY_MS: str(30 * 60_000)}
    assert waiting_timer(at)
    sec = stored({P.TIMER_DELAY_SEC: "30"})
    assert sec == {P.TIMER_DELIVER_MS: str(NOW + 30_000), P.DELAY_TIME_LEVEL: "4"}  # 30 s: none left
    assert stored({P.TIMER_DELAY_MS: "7000"}) == {
        P.TIMER_DELIVER_MS: str(NOW + 7000), P.DELAY_TIME_LEVEL: "2", P.TIMER_DELAY_MS: "2000"}
    # due in less than half the shortest level: for its topic at once, with its due time
    soon = stored({P.TIMER_DELAY_MS: "400"})
    assert soon == {P.TIMER_DELIVER_MS: str(NOW), P.TIMER_OUT_MS: str(NOW)}
    assert not waiting_timer(soon)
    # not timer messages: none of the keys, due now, or already handled
    assert stored({"k": "v"}) is None
    assert stored({P.TIMER_DELIVER_MS: str(NOW - 5)}) is None
    assert stored({P.TIMER_DELAY_MS: "5000", P.TIMER_OUT_MS: "1"}) is None
    # a delay level wins and the timer keys go, as in RocketMQ
    assert stored({P.TIMER_DELAY_MS: "5000", P.DELAY_TIME_LEVEL: "3"}) == {P.DELAY_TIME_LEVEL: "3"}


def test_a_waiting_message_as_rocketmq_5_reads_it() -> None:
    """RocketMQ's schedule service drops TIMER_DELIVER_MS and TIMER_DELAY_SEC as a level delivers
    (ScheduleMessageService.messageTimeUp); its put hook sends a message with TIMER_DELAY_MS and
    no TIMER_OUT_MS into its timer wheel for that long (HookUtils.checkIfTimerMessage): the
    message comes due at the time Bolide would deliver it."""
    due = NOW + 95 * 60_000 + 7_000
    at = stored({P.TIMER_DELAY_SEC: str(95 * 60 + 7)})
    assert at is not None and P.TIMER_OUT_MS not in at and P.TIMER_DELAY_SEC not in at
    level_ends = NOW + LEVELS[int(at[P.DELAY_TIME_LEVEL])]
    after_level = {k: v for k, v in at.items()
                   if k not in (P.DELAY_TIME_LEVEL, P.TIMER_DELIVER_MS, P.TIMER_DELAY_SEC)}
    assert level_ends + int(after_level[P.TIMER_DELAY_MS]) == due


@pytest.mark.parametrize(("props", "options", "code", "text"), [
    ({P.TIMER_DELAY_SEC: "soon"}, {}, ResponseCode.MESSAGE_ILLEGAL, "is not a whole number"),
    ({P.TIMER_DELAY_SEC: str(4 * 86400)}, {}, ResponseCode.MESSAGE_ILLEGAL, "max delay 259200000ms"),
    ({P.TIMER_DELAY_SEC: "5"}, {"enabled": False}, ResponseCode.SYSTEM_ERROR, "timerWheelEnable=true"),
    ({P.TIMER_DELAY_SEC: "5", P.TIMER_DEL_UNIQKEY: "x"}, {}, ResponseCode.MESSAGE_ILLEGAL, "not supported"),
])
def test_refusals(props: dict[str, str], options: dict[str, object], code: int, text: str) -> None:
    with pytest.raises(TimerRefusal, match=text) as refused:
        stored(props, **options)
    assert refused.value.code == code


def test_the_next_hop_of_a_scheduled_timer_message() -> None:
    waiting = {P.TIMER_DELIVER_MS: str(NOW + 12_000), P.TIMER_DELAY_MS: "2000", "k": "v"}
    assert next_hop(waiting, NOW, LEVELS) == {  # 10 s, then 2 s left
        P.TIMER_DELIVER_MS: str(NOW + 12_000), P.DELAY_TIME_LEVEL: "3", P.TIMER_DELAY_MS: "2000", "k": "v"}
    assert next_hop(waiting, NOW + 12_000, LEVELS) == {  # due: for its topic
        P.TIMER_DELIVER_MS: str(NOW + 12_000), P.TIMER_OUT_MS: str(NOW + 12_000), "k": "v"}
    # as older versions stored it: due in TIMER_OUT_MS; stored the new way at its next level
    old = {P.TIMER_OUT_MS: str(NOW + 12_000), P.TIMER_DELIVER_MS: str(NOW + 12_345)}
    assert next_hop(old, NOW, LEVELS) == {
        P.TIMER_DELIVER_MS: str(NOW + 12_000), P.DELAY_TIME_LEVEL: "3", P.TIMER_DELAY_MS: "2000"}
    # due: delivered as it is (a consumer's retry of a delivered timer message too)
    assert next_hop({P.TIMER_OUT_MS: str(NOW + 100)}, NOW, LEVELS) is None
    assert next_hop({P.TIMER_OUT_MS: str(NOW - 60_000), P.TIMER_DELIVER_MS: "1"}, NOW, LEVELS) is None
    assert next_hop({P.TIMER_OUT_MS: "garbage"}, NOW, LEVELS) is None
    assert next_hop({}, NOW, LEVELS) is None
    assert timer_due({P.TIMER_DELIVER_MS: "garbage"}) is None


def test_the_client_sets_the_timer_properties() -> None:
    msg = Message("T", b"x")
    msg.deliver_time_ms = NOW
    msg.delay_time_ms = 1500
    assert (msg.deliver_time_ms, msg.delay_time_ms) == (NOW, 1500)
    assert msg.properties == {P.TIMER_DELIVER_MS: str(NOW), P.TIMER_DELAY_MS: "1500"}
    msg.deliver_time_ms = msg.delay_time_ms = None
    assert msg.properties == {}
