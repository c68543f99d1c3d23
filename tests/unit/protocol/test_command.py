"""RemotingCommand helpers and the opaque counter."""

from __future__ import annotations

import threading

from bolide.protocol import (
    DEFAULT_VERSION,
    LanguageCode,
    OpaqueCounter,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_command,
)
from bolide.protocol.headers import GetRouteInfoRequestHeader, PullMessageResponseHeader


def test_request_and_response_flags() -> None:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                      GetRouteInfoRequestHeader(topic="T"), opaque=7,
                                      serialize_type=SerializeType.ROCKETMQ)
    assert request.ext_fields == {"topic": "T"} and request.flag == 0
    assert not request.is_response and not request.is_oneway
    response = request.make_response(ResponseCode.SUCCESS, body=b"{}")
    assert response.opaque == 7 and response.flag == 1 and response.is_response
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert response.language == LanguageCode.JAVA and response.version == DEFAULT_VERSION
    assert not response.is_oneway


def test_oneway_requests() -> None:
    cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, oneway=True)
    assert cmd.flag == 2 and cmd.is_oneway
    assert not RemotingCommand(0, flag=3).is_oneway  # a response is never oneway


def test_response_takes_a_header_object_and_extra_fields() -> None:
    request = RemotingCommand(RequestCode.PULL_MESSAGE, opaque=23)
    header = PullMessageResponseHeader(next_begin_offset=41, min_offset=0, max_offset=41)
    response = request.make_response(ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", header,
                                     ext_fields={"extra": "1"})
    assert response.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "41",
                                   "minOffset": "0", "maxOffset": "41", "extra": "1"}
    assert response.read_header(PullMessageResponseHeader) == header


def test_requests_get_fresh_opaques() -> None:
    first = RemotingCommand.request(RequestCode.HEART_BEAT).opaque
    second = RemotingCommand.request(RequestCode.HEART_BEAT).opaque
    assert second == first + 1 or second == 0


def test_opaque_counter_wraps_to_zero() -> None:
    counter = OpaqueCounter(2**31 - 2)
    assert [next(counter) for _ in range(3)] == [2**31 - 2, 2**31 - 1, 0]


def test_opaque_counter_is_thread_safe() -> None:
    counter = OpaqueCounter()
    seen: list[list[int]] = [[] for _ in range(4)]

    def take(out: list[int]) -> None:
        out.extend(counter.next() for _ in range(5000))

    threads = [threading.Thread(target=take, args=(out,)) for out in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    values = [v for out in seen for v in out]
    assert sorted(values) == list(range(20000))


def test_body_as_buffers() -> None:
    cmd = RemotingCommand(0, flag=1, body=[b"ab", memoryview(b"cde")])
    assert cmd.body_length == 5 and cmd.body_bytes() == b"abcde"
    parts = encode_command(cmd)
    assert len(parts) == 3 and bytes(parts[2]) == b"cde"
    assert "5 bytes" in repr(cmd) and "SUCCESS(0)" in repr(cmd)


def test_make_response_ext_equals_make_response() -> None:
    request = RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=99, version=317,
                              serialize_type=SerializeType.ROCKETMQ)
    ext = {"msgId": "X", "queueId": "1"}
    fast = request.make_response_ext(ResponseCode.FLUSH_DISK_TIMEOUT, ext, "slow disk")
    assert fast == request.make_response(ResponseCode.FLUSH_DISK_TIMEOUT, "slow disk",
                                         ext_fields=ext)
    assert fast.ext_fields is ext and fast.is_response and fast.opaque == 99
