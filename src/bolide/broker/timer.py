"""Timer messages: RocketMQ 5's delivery at a given time (``Message.setDeliverTimeMs``,
``setDelayTimeMs``, ``setDelayTimeSec``: properties TIMER_DELIVER_MS, TIMER_DELAY_MS,
TIMER_DELAY_SEC) with RocketMQ's rules for which sends are timer messages and which are refused.

RocketMQ 5 keeps them in a timer wheel of its own files. Bolide keeps them in the delay levels'
queues (``SCHEDULE_TOPIC_XXXX``): the send is stored with ``DELAY`` set to the longest level not
longer than the wait, its due time in ``TIMER_DELIVER_MS`` and what is left of the wait once that
level ends in ``TIMER_DELAY_MS``; each time a level delivers it, the schedule service puts it into
the next level for what is left (:func:`bolide.store.delay.timer_level`) until it is due, then
into its topic with ``TIMER_OUT_MS`` (the due time, as RocketMQ's timer wheel delivers it). The
wait is on disk and survives restarts and failover to a slave, at a precision of half the
shortest level (0.5 s with the default levels).

A waiting message is stored so that a RocketMQ 5 broker opening the store delivers it at its time
too: RocketMQ's schedule service drops ``TIMER_DELIVER_MS`` and ``TIMER_DELAY_SEC`` when a level
delivers, and its put hook sends a message that still has ``TIMER_DELAY_MS`` (and no
``TIMER_OUT_MS``) into its timer wheel for that long. Waiting messages of older Bolide versions
(``TIMER_OUT_MS`` and ``DELAY``) are read too, and stored the new way at their next level.
"""

from __future__ import annotations

from bolide.common import properties as P
from bolide.protocol.codes import ResponseCode
from bolide.store.delay import timer_level

_TIMER_KEYS = (P.TIMER_DELAY_SEC, P.TIMER_DELAY_MS, P.TIMER_DELIVER_MS)
_HOP_KEYS = frozenset((P.TIMER_DELAY_SEC, P.TIMER_DELAY_MS, P.TIMER_OUT_MS, P.DELAY_TIME_LEVEL))
PRECISION_MS = 1000  # RocketMQ's timerPrecisionMs: due times are rounded down to it


class TimerRefusal(Exception):
    """A timer message the broker refuses; ``code`` is the response code to answer."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def timer_properties(props: dict[str, str], now_ms: int, delay_millis: dict[int, int], *,
                     enabled: bool, max_delay_s: int) -> dict[str, str] | None:
    """The properties a timer message is stored with (its due time in ``TIMER_OUT_MS``, the
    first level it waits in as ``DELAY``); None when ``props`` make no timer message (none of
    the timer keys, a delay level, or a message the timers already handled), or when it is due
    now (sent as it is). Raises TimerRefusal (RocketMQ's refusals)."""
    if not any(key in props for key in _TIMER_KEYS) or P.TIMER_OUT_MS in props:
        return None
    level_text = props.get(P.DELAY_TIME_LEVEL, "")
    if level_text.isdecimal() and int(level_text) > 0:  # a delay level wins, as in RocketMQ
        return {k: v for k, v in props.items() if k not in _TIMER_KEYS}
    if not enabled:
        raise TimerRefusal(ResponseCode.SYSTEM_ERROR,
                           "accurate timer message is not enabled, timerWheelEnable is false "
                           "(set timerWheelEnable=true in broker.conf)")
    try:
        if P.TIMER_DELAY_SEC in props:
            due = now_ms + int(props[P.TIMER_DELAY_SEC]) * 1000
        elif P.TIMER_DELAY_MS in props:
            due = now_ms + int(props[P.TIMER_DELAY_MS])
        else:
            due = int(props[P.TIMER_DELIVER_MS])
    except ValueError:
        raise TimerRefusal(ResponseCode.MESSAGE_ILLEGAL,
                           "timer message illegal: its " + ", ".join(
                               f"{k}={props[k]!r}" for k in _TIMER_KEYS if k in props)
                           + " is not a whole number") from None
    if due <= now_ms:
        if P.TIMER_DEL_UNIQKEY in props:
            raise TimerRefusal(ResponseCode.MESSAGE_ILLEGAL,
                               "timer message illegal: a cancellation must be due in the future")
        return None
    if due - now_ms > max_delay_s * 1000:
        raise TimerRefusal(ResponseCode.MESSAGE_ILLEGAL,
                           f"timer message illegal, the delay time should not be bigger than the "
                           f"max delay {max_delay_s * 1000}ms (timerMaxDelaySec)")
    if P.TIMER_DEL_UNIQKEY in props:
        raise TimerRefusal(ResponseCode.MESSAGE_ILLEGAL,
                           "cancelling a timer message (TIMER_DEL_UNIQKEY) is not supported: the "
                           "message would be delivered as it is")
    due -= due % PRECISION_MS
    return timer_hop(props, due, now_ms, delay_millis)


def timer_due(props: dict[str, str]) -> int | None:
    """The due time of a timer message: ``TIMER_OUT_MS`` (one delivered, or one waiting as older
    Bolide versions stored it), else ``TIMER_DELIVER_MS`` (one waiting in the delay levels); None
    for other messages."""
    for key in (P.TIMER_OUT_MS, P.TIMER_DELIVER_MS):
        text = props.get(key, "")
        if text.lstrip("-").isdecimal():
            return int(text)
    return None


def timer_hop(props: dict[str, str], due: int, now_ms: int,
              delay_millis: dict[int, int]) -> dict[str, str]:
    """The properties of a timer message due at ``due``, stored at ``now_ms``: waiting in its
    next level (``DELAY``, ``TIMER_DELIVER_MS`` = due, ``TIMER_DELAY_MS`` = what is left once
    that level ends), or due (``TIMER_OUT_MS`` = ``TIMER_DELIVER_MS`` = due, for its topic)."""
    out = {k: v for k, v in props.items() if k not in _HOP_KEYS}
    out[P.TIMER_DELIVER_MS] = str(due)
    level = timer_level(due - now_ms, delay_millis)
    if level is None:
        out[P.TIMER_OUT_MS] = str(due)
        return out
    out[P.DELAY_TIME_LEVEL] = str(level)
    left = due - now_ms - delay_millis[level]
    if left > 0:  # what RocketMQ waits for in its timer wheel once the level delivers
        out[P.TIMER_DELAY_MS] = str(left)
    return out


def waiting_timer(props: dict[str, str]) -> bool:
    """Whether ``props`` (as :func:`timer_properties` made them) wait in a delay level."""
    return P.DELAY_TIME_LEVEL in props and P.TIMER_DELIVER_MS in props


def next_hop(props: dict[str, str], now_ms: int, delay_millis: dict[int, int]) -> dict[str, str] | None:
    """The properties a scheduled timer message (``DELAY`` removed) goes on with when a level
    delivers it: into its next level, or due, into its topic (:func:`timer_hop`); None for a
    message that is no waiting timer message (a delay-level message, a consumer's retry of a
    delivered timer message: ``TIMER_OUT_MS`` in the past)."""
    due = timer_due(props)
    if due is None or (P.TIMER_OUT_MS in props and timer_level(due - now_ms, delay_millis) is None):
        return None
    return timer_hop(props, due, now_ms, delay_millis)
