"""Typed headers: the @CFNotNull rule both ways, Java's parsing rules, the short-name send
header, and a round trip of every header class."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import bolide.protocol.headers as H
from bolide.errors import HeaderFieldError
from bolide.protocol import RequestCode
from bolide.protocol.headers.base import FieldSpec, Header
from bolide.protocol.serialize_json import decode_json_header

HEADER_CLASSES: list[type[Header]] = sorted(
    (c for c in vars(H).values() if isinstance(c, type) and issubclass(c, Header) and c is not Header),
    key=lambda c: c.__name__,
)

SEND_V2 = {"a": "pg", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "2", "f": "0",
           "g": "1700000000123", "h": "0", "i": "TAGS\x01TagA", "j": "0", "k": "false",
           "m": "false", "n": "broker-a"}


def sample(spec: FieldSpec) -> str:
    return {"an integer": "-7", "a boolean": "true", "a number": "1.5"}.get(spec.kind, "v x")


def test_every_header_class_round_trips_its_fields() -> None:
    assert len(HEADER_CLASSES) >= 50
    for cls in HEADER_CLASSES:
        ext = {s.wire: sample(s) for s in cls.FIELDS}
        header = cls.from_ext_fields(ext)
        assert header.to_ext_fields() == ext, cls.__name__
        assert cls.from_ext_fields({**ext, "unknown": "x"}) == header


def test_missing_required_request_field_names_it() -> None:
    ext = {k: v for k, v in SEND_V2.items() if k != "b"}
    with pytest.raises(HeaderFieldError, match=r"SendMessageRequestHeaderV2: field 'b' is required") as err:
        H.decode_send_request_header(RequestCode.SEND_MESSAGE_V2, ext)
    assert err.value.field == "b" and err.value.header == "SendMessageRequestHeaderV2"
    with pytest.raises(HeaderFieldError, match="'consumerGroup'"):
        H.PullMessageRequestHeader.from_ext_fields({"topic": "T"})


@pytest.mark.parametrize("value", ["", "x", "1.5", "9" * 5 + "z"])
def test_unparsable_integer_names_field_and_value(value: str) -> None:
    with pytest.raises(HeaderFieldError, match=f"field 'queueId' is {value!r}, not an integer"):
        H.GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T", "queueId": value})


def test_required_response_fields_cannot_be_left_out() -> None:
    header = H.SendMessageResponseHeader(msg_id="ID", queue_id=1, queue_offset=None)  # type: ignore[arg-type]
    with pytest.raises(HeaderFieldError, match="'queueOffset' is required but None"):
        header.to_ext_fields()
    with pytest.raises(TypeError):
        H.QueryConsumerOffsetResponseHeader()  # type: ignore[call-arg]


def test_required_response_fields_are_always_written_as_strings() -> None:
    assert H.GetMaxOffsetResponseHeader(offset=0).to_ext_fields() == {"offset": "0"}
    pull = H.PullMessageResponseHeader(next_begin_offset=5, min_offset=0, max_offset=9)
    assert pull.to_ext_fields() == {"suggestWhichBrokerId": "0", "nextBeginOffset": "5",
                                    "minOffset": "0", "maxOffset": "9"}
    query = H.QueryMessageResponseHeader(index_last_update_timestamp=1, index_last_update_phyoffset=2)
    assert query.to_ext_fields() == {"indexLastUpdateTimestamp": "1", "indexLastUpdatePhyoffset": "2"}


def test_send_header_short_and_long_names() -> None:
    v2 = H.decode_send_request_header(RequestCode.SEND_MESSAGE_V2, SEND_V2)
    assert isinstance(v2, H.SendMessageRequestHeaderV2)
    assert (v2.topic, v2.queue_id, v2.born_timestamp, v2.unit_mode, v2.bname) == (
        "TopicTest", 2, 1700000000123, False, "broker-a")
    assert v2.max_reconsume_times is None
    v1 = v2.to_v1()
    assert type(v1) is H.SendMessageRequestHeader
    ext = v1.to_ext_fields()
    assert ext["producerGroup"] == "pg" and ext["bname"] == "broker-a" and "n" not in ext
    assert H.decode_send_request_header(RequestCode.SEND_MESSAGE, ext) == v1
    assert v1.to_v2().to_ext_fields() == SEND_V2
    batch = H.decode_send_request_header(RequestCode.SEND_BATCH_MESSAGE, {**SEND_V2, "m": "true"})
    assert batch.batch is True


def test_ali_ons_send_header_after_json_coercion() -> None:
    cmd = decode_json_header(
        b'{"code":310,"language":"JAVA","opaque":1,"flag":0,"version":121,"extFields":{"a":"pg",'
        b'"b":"T","c":"TBW102","d":4,"e":0,"f":0,"g":1700000000123,"h":0,"i":"","j":0,"k":false,"l":16}}'
    )
    header = H.decode_send_request_header(cmd.code, cmd.ext_fields)
    assert header.default_topic_queue_nums == 4 and header.unit_mode is False
    assert header.max_reconsume_times == 16 and header.properties == ""


def test_booleans_parse_like_java() -> None:
    parse = H.GetRouteInfoRequestHeader.from_ext_fields
    assert parse({"topic": "T", "acceptStandardJsonOnly": "TRUE"}).accept_standard_json_only is True
    assert parse({"topic": "T", "acceptStandardJsonOnly": "yes"}).accept_standard_json_only is False
    assert parse({"topic": "T"}).accept_standard_json_only is None


def test_pull_request_from_the_spec_example() -> None:
    ext = {"bname": "broker-a", "commitOffset": "0", "consumerGroup": "cg", "expressionType": "TAG",
           "maxMsgNums": "32", "queueId": "0", "queueOffset": "41", "subVersion": "1700000000000",
           "suspendTimeoutMillis": "15000", "sysFlag": "2", "topic": "TopicTest"}
    pull = H.PullMessageRequestHeader.from_ext_fields(ext)
    assert pull.suspend and not pull.has_commit_offset and not pull.has_subscription
    assert pull.queue_offset == 41 and pull.subscription is None
    assert pull.to_ext_fields() == ext


def test_defaults_of_optional_fields_are_written_like_java_primitives() -> None:
    back = H.ConsumerSendMsgBackRequestHeader(offset=1234, group="cg", delay_level=0)
    assert back.to_ext_fields() == {"offset": "1234", "group": "cg", "delayLevel": "0",
                                    "unitMode": "false"}
    register = H.RegisterBrokerRequestHeader(broker_name="b", broker_addr="1.2.3.4:10911",
                                             cluster_name="c", ha_server_addr="1.2.3.4:10912",
                                             broker_id=0)
    assert register.to_ext_fields()["compressed"] == "false"
    assert register.to_ext_fields()["bodyCrc32"] == "0"


@settings(max_examples=300)
@given(st.sampled_from(HEADER_CLASSES), st.dictionaries(st.text(max_size=12), st.text(max_size=12)))
def test_any_ext_map_gives_a_header_or_a_header_field_error(cls: type[Header], ext: dict[str, str]) -> None:
    wires = [s.wire for s in cls.FIELDS]
    ext = {**{w: ext.get(w, "") for w in wires[::2]}, **ext}
    try:
        header = cls.from_ext_fields(ext)
    except HeaderFieldError:
        return
    assert cls.from_ext_fields(header.to_ext_fields()) == header


@pytest.mark.parametrize(("queue_id", "offset"), [(0, 0), (7, 123456789012), (2**31 - 1, -1)])
def test_send_response_ext_is_the_response_headers_ext_fields(queue_id: int, offset: int) -> None:
    """The hot path's extFields literal stays what the header class writes."""
    from bolide.protocol.headers.send import send_response_ext

    header = H.SendMessageResponseHeader(msg_id="7F00000100002A9F0000000000000000",
                                         queue_id=queue_id, queue_offset=offset)
    assert send_response_ext(header.msg_id, queue_id, offset) == header.to_ext_fields()


@settings(max_examples=300)
@given(st.integers(-2**31, 2**31 - 1), st.lists(st.text("0123456789ABCDEF", min_size=32, max_size=32),
                                                 min_size=0, max_size=3).map(",".join),
       st.integers(0, 2**31 - 1), st.integers(-1, 2**63 - 1))
def test_send_ok_frame_is_the_encoded_response(opaque: int, msg_id: str, queue_id: int, offset: int) -> None:
    """The hot path's ready frame stays the bytes of the response command, encoded."""
    from bolide.protocol import RemotingCommand, encode_command_bytes
    from bolide.protocol.headers.send import send_ok_frame, send_response_ext

    request = RemotingCommand.request(310, opaque=opaque)
    response = request.make_response_ext(0, send_response_ext(msg_id, queue_id, offset))
    assert send_ok_frame(opaque, msg_id, queue_id, offset) == encode_command_bytes(response)
