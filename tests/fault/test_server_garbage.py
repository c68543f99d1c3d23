"""A real NameServer and Broker fed garbage on raw sockets: random bytes, cut frames, a huge
length prefix, a header longer than its frame, bad JSON, a binary header with bad lengths, an
unknown header codec, unknown request codes, headers missing required fields and stray
responses. A bad connection must be closed, or answered with an error when the frame itself is
sound; and a well-behaved RemotingClient on its own connection keeps getting correct answers
(a route lookup, a send and a pull of what it sent) before, during and after every attack."""

from __future__ import annotations

import asyncio
import json
import random
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bolide.protocol import RemotingCommand
from bolide.protocol.codec import CommandDecoder, encode_command_bytes
from bolide.protocol.codes import RESPONSE_FLAG, RequestCode, ResponseCode, SerializeType
from bolide.protocol.frame import MAX_FRAME_SIZE, encode_frame_bytes
from bolide.protocol.headers import (
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from bolide.remoting import RemotingClient
from bolide.store import StoreConfig
from bolide.testing.servers import Servers, running_servers
from conftest import assert_consistent

TIMEOUT = 10.0  # seconds for one server answer or one connection close
TEST_TIMEOUT = 60.0
TOPIC = "GarbageProof"
SERVERS = ("namesrv", "broker")
BINARY = SerializeType.ROCKETMQ


@dataclass
class Probe:
    """The well-behaved client and what it has checked so far."""

    servers: Servers
    client: RemotingClient
    rounds: int = 0

    async def check(self) -> None:
        """One route lookup, one send and a pull of that message: all must be right."""
        route = await self.client.invoke(self.servers.namesrv_addr, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="TBW102")))
        assert route.code == ResponseCode.SUCCESS, route
        body = b"probe-%d" % self.rounds
        header = SendMessageRequestHeader(producer_group="pg", topic=TOPIC, default_topic="TBW102",
                                          default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                          born_timestamp=1_700_000_000_000, flag=0,
                                          properties="WAIT\x01true\x02")
        sent = await self.client.invoke(self.servers.broker_addr, RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, header.to_v2(), body))
        assert sent.code == ResponseCode.SUCCESS, sent
        offset = int(sent.ext_fields["queueOffset"])
        # dispatch runs after the send is answered: a long poll (sysFlag suspend|subscription)
        # returns as soon as the message is in its consume queue
        pull = PullMessageRequestHeader(consumer_group="cg", topic=TOPIC, queue_id=0, queue_offset=offset,
                                        max_msg_nums=1, sys_flag=6, commit_offset=0,
                                        suspend_timeout_millis=int(TIMEOUT * 1000), subscription="*",
                                        sub_version=0)
        got = await self.client.invoke(self.servers.broker_addr,
                                       RemotingCommand.request(RequestCode.PULL_MESSAGE, pull),
                                       int(TIMEOUT * 1000) + 2000)
        assert got.code == ResponseCode.SUCCESS, got
        assert body in got.body_bytes()
        assert int(got.ext_fields["nextBeginOffset"]) == offset + 1
        self.rounds += 1

    async def keep_checking(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.check()
            await asyncio.sleep(0)


def verify_store(tmp_path: Path) -> None:
    """``bolide store verify`` on the broker's store, with the sizes running_servers gives it."""
    assert_consistent(StoreConfig(store_path_root_dir=str(tmp_path / "store"),
                                  mapped_file_size_commit_log=1024 * 1024,
                                  mapped_file_size_consume_queue=1000 * 20))


Attack = Callable[[str, str], Awaitable[None]]  # (address, target)


def run(tmp_path: Path, attack: Attack, target: str) -> None:
    """Start the servers, check the probe, attack ``target`` while the probe keeps checking,
    then check the probe again, and at last verify the broker's store."""

    async def main() -> None:
        async with running_servers(tmp_path / "store", auto_create_topic_enable=True) as servers, \
                RemotingClient() as client:
            probe = Probe(servers, client)
            await probe.check()
            stop = asyncio.Event()
            checking = asyncio.ensure_future(probe.keep_checking(stop))
            try:
                addr = servers.namesrv_addr if target == "namesrv" else servers.broker_addr
                await attack(addr, target)
                before = probe.rounds
                while probe.rounds < before + 2 and not checking.done():  # served during the attack's end
                    await asyncio.sleep(0.01)
            finally:
                stop.set()
                await checking  # re-raises any wrong answer the probe got
            await probe.check()
            assert probe.rounds >= 4

    asyncio.run(asyncio.wait_for(main(), TEST_TIMEOUT))
    verify_store(tmp_path)


# -- raw connections ----------------------------------------------------------------------------
async def connect(addr: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = addr.rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


async def assert_closed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The server closes the connection (EOF or reset) without answering."""
    try:
        data = await asyncio.wait_for(reader.read(), TIMEOUT)
    except ConnectionResetError:
        data = b""
    finally:
        writer.close()
    assert data == b"", f"the server answered garbage with {data[:80]!r} instead of closing"


async def read_command(reader: asyncio.StreamReader) -> RemotingCommand:
    prefix = await asyncio.wait_for(reader.readexactly(4), TIMEOUT)
    rest = await asyncio.wait_for(reader.readexactly(struct.unpack(">i", prefix)[0]), TIMEOUT)
    [cmd] = CommandDecoder().feed(prefix + rest)
    return cmd


def frame(header: bytes, body: bytes = b"", codec: int = SerializeType.JSON) -> bytes:
    return encode_frame_bytes(codec, header, body)


def json_request(code: int, opaque: int, ext: dict[str, object], body: bytes = b"") -> bytes:
    """A JSON request written by hand, ext values as given (ali-ons sends numbers too)."""
    header = {"code": code, "flag": 0, "language": "JAVA", "opaque": opaque, "version": 401, "extFields": ext}
    return frame(json.dumps(header).encode(), body)


def sound_request(target: str, opaque: int, codec: SerializeType = SerializeType.JSON) -> bytes:
    """A request that ``target`` answers with SUCCESS: a route lookup, or the broker's topic list."""
    if target == "namesrv":
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                      GetRouteInfoRequestHeader(topic="TBW102"), opaque=opaque,
                                      serialize_type=codec)
    else:
        cmd = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, opaque=opaque, serialize_type=codec)
    return encode_command_bytes(cmd)


async def assert_served(reader: asyncio.StreamReader, opaque: int) -> None:
    answer = await read_command(reader)
    assert answer.is_response and (answer.code, answer.opaque) == (ResponseCode.SUCCESS, opaque), answer


async def send_then_closed(addr: str, *chunks: bytes) -> None:
    reader, writer = await connect(addr)
    for chunk in chunks:
        writer.write(chunk)
        await writer.drain()
    await assert_closed(reader, writer)


# -- attacks that must close the connection -------------------------------------------------------
def _binary_header(remark_len: int, ext_len: int, tail: bytes = b"") -> bytes:
    fixed = struct.pack(">hbhii", RequestCode.GET_ROUTEINFO_BY_TOPIC, 0, 401, 7, 0)
    return fixed + struct.pack(">ii", remark_len, ext_len) + tail


CLOSING: dict[str, tuple[bytes, ...]] = {
    "random-bytes": (random.Random(7).randbytes(512),),
    "http-request": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",),
    "huge-length-prefix": (struct.pack(">ii", 0x7FFFFFFF, 0),),
    "length-one-over-the-limit": (struct.pack(">ii", MAX_FRAME_SIZE - 3, 0),),
    "negative-length": (struct.pack(">ii", -8, 0),),
    "length-below-the-header-word": (struct.pack(">i", 3) + b"abc",),
    "header-length-past-the-frame": (struct.pack(">ii", 12, 200) + b"{}" + b"\0" * 10,),
    "invalid-json": (frame(b'{"code":105,"opaque":1,"extFields":{"topic":'),),
    "json-not-an-object": (frame(b"[105,1]"),),
    "json-code-not-a-number": (frame(b'{"code":"105","opaque":1}'),),
    "json-bad-utf8": (frame(b'{"code":105,"opaque":1,"remark":"\xff\xfe"}'),),
    "binary-remark-length-past-the-end": (frame(_binary_header(1000, 0), codec=BINARY),),
    "binary-negative-ext-length": (frame(_binary_header(0, -1), codec=BINARY),),
    "binary-key-length-past-the-end": (
        frame(_binary_header(0, 10, struct.pack(">hi", 500, 2) + b"ab\0\0"), codec=BINARY),),
    "binary-header-too-short": (frame(b"\0\x69\0", codec=BINARY),),
    "unknown-header-codec": (frame(b'{"code":105,"opaque":1}', codec=5),),
    # after a sound request (answered), a broken frame on the same connection
    "good-then-garbage": (struct.pack(">ii", 8, 0x00FFFFFF) + b"\0" * 4,),
    # the server closes on EOF; this one has only a cut frame (written in the attack)
    "truncated-frame-then-eof": (),
}


@pytest.mark.parametrize("target", SERVERS)
@pytest.mark.parametrize("case", sorted(CLOSING))
def test_bad_bytes_close_the_connection_and_others_are_served(tmp_path: Path, case: str, target: str) -> None:
    chunks = CLOSING[case]

    async def attack(addr: str, target: str) -> None:
        reader, writer = await connect(addr)
        if case == "good-then-garbage":
            writer.write(sound_request(target, 1))
            await assert_served(reader, 1)
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        if case == "truncated-frame-then-eof":
            writer.write(sound_request(target, 1)[:-5])
            writer.write_eof()
        await assert_closed(reader, writer)

    run(tmp_path, attack, target)


def test_garbage_split_byte_by_byte_is_still_refused(tmp_path: Path) -> None:
    async def attack(addr: str, target: str) -> None:
        data = struct.pack(">ii", 20, 30) + b"x" * 30
        await send_then_closed(addr, *(data[i:i + 1] for i in range(len(data))))

    run(tmp_path, attack, "broker")


# -- sound frames with bad content: answered with an error, connection kept --------------------
@pytest.mark.parametrize("target", SERVERS)
def test_unknown_codes_are_answered_and_the_connection_stays_open(tmp_path: Path, target: str) -> None:
    async def attack(addr: str, target: str) -> None:
        reader, writer = await connect(addr)
        try:
            for opaque, code in enumerate((9999, -1, 0x7FFF, 2**31 - 1), start=100):
                writer.write(json_request(code, opaque, {}))
                answer = await read_command(reader)
                assert answer.is_response and answer.opaque == opaque, answer
                assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, answer
                assert answer.serialize_type == SerializeType.JSON
            binary = RemotingCommand(31_000, opaque=200, serialize_type=SerializeType.ROCKETMQ)
            writer.write(encode_command_bytes(binary))
            answer = await read_command(reader)
            assert (answer.code, answer.opaque) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, 200)
            assert answer.serialize_type == SerializeType.ROCKETMQ  # answered in the request's codec
            writer.write(sound_request(target, 201, SerializeType.ROCKETMQ))  # still serves real requests
            await assert_served(reader, 201)
        finally:
            writer.close()

    run(tmp_path, attack, target)


SEND_V2 = {"a": "pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
PULL = {"consumerGroup": "cg", "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
        "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}
BAD_FIELDS: dict[str, tuple[int, dict[str, object]]] = {
    "route-without-topic": (RequestCode.GET_ROUTEINFO_BY_TOPIC, {}),
    "send-without-fields": (RequestCode.SEND_MESSAGE_V2, {"b": "T"}),
    "send-queue-id-not-a-number": (RequestCode.SEND_MESSAGE_V2, {**SEND_V2, "e": "zero"}),
    # numbers past their Java types' ranges (parseInt/parseLong refuse them; records cannot hold them)
    "send-flag-over-int32": (RequestCode.SEND_MESSAGE_V2, {**SEND_V2, "h": str(2**31)}),
    "send-reconsume-times-over-int32": (RequestCode.SEND_MESSAGE_V2, {**SEND_V2, "j": str(2**40)}),
    "send-born-timestamp-over-int64": (RequestCode.SEND_MESSAGE_V2, {**SEND_V2, "g": str(2**64)}),
    "send-huge-queue-id": (RequestCode.SEND_MESSAGE_V2, {**SEND_V2, "e": str(10**30)}),
    "pull-negative-offset": (RequestCode.PULL_MESSAGE, {**PULL, "queueOffset": -5, "maxMsgNums": 99999999}),
    "pull-unknown-queue": (RequestCode.PULL_MESSAGE, {**PULL, "queueId": str(2**31 - 1)}),
    "query-offset-without-fields": (RequestCode.QUERY_CONSUMER_OFFSET, {"topic": 1}),
    "heartbeat-with-garbage-body": (RequestCode.HEART_BEAT, {}),
    "register-broker-with-garbage-body": (RequestCode.REGISTER_BROKER, {"brokerName": "x"}),
}


@pytest.mark.parametrize("target", SERVERS)
@pytest.mark.parametrize("case", sorted(BAD_FIELDS))
def test_sound_frames_with_bad_fields_get_an_answer(tmp_path: Path, case: str, target: str) -> None:
    code, ext = BAD_FIELDS[case]

    async def attack(addr: str, target: str) -> None:
        reader, writer = await connect(addr)
        try:
            request = json_request(code, 42, ext, b"a body" if code == RequestCode.SEND_MESSAGE_V2 else b"")
            if case.endswith("garbage-body"):
                header_len = struct.unpack(">i", request[4:8])[0] & 0xFFFFFF
                request = frame(request[8:8 + header_len], random.Random(3).randbytes(300))
            writer.write(request)
            answer = await read_command(reader)
            assert answer.is_response and answer.opaque == 42, answer
            if case not in ("pull-negative-offset", "pull-unknown-queue"):
                assert answer.code != ResponseCode.SUCCESS, answer
            if target == "broker" and "-over-int" in case:
                assert answer.code == ResponseCode.SYSTEM_ERROR, answer
                assert "outside the range" in (answer.remark or ""), answer
            writer.write(sound_request(target, 43))  # the connection still works
            await assert_served(reader, 43)
        finally:
            writer.close()

    run(tmp_path, attack, target)


@pytest.mark.parametrize("case", sorted(c for c in BAD_FIELDS if "-over-int" in c))
def test_a_refused_send_leaves_the_commit_log_clean(tmp_path: Path, case: str) -> None:
    """A send refused for a number its record field cannot hold, as the last write before the
    broker stops, leaves no bytes after the last record (a half-written header there made the
    store fail verification)."""
    code, ext = BAD_FIELDS[case]

    async def main() -> None:
        async with running_servers(tmp_path / "store", auto_create_topic_enable=True) as servers, \
                RemotingClient() as client:
            await Probe(servers, client).check()
            reader, writer = await connect(servers.broker_addr)
            try:
                writer.write(json_request(code, 7, ext, b"a body"))
                answer = await read_command(reader)
                assert answer.code == ResponseCode.SYSTEM_ERROR, answer
            finally:
                writer.close()

    asyncio.run(asyncio.wait_for(main(), TEST_TIMEOUT))
    verify_store(tmp_path)


@pytest.mark.parametrize("target", SERVERS)
def test_stray_responses_and_oneways_get_no_answer_and_break_nothing(tmp_path: Path, target: str) -> None:
    async def attack(addr: str, target: str) -> None:
        reader, writer = await connect(addr)
        try:
            stray = RemotingCommand(ResponseCode.SUCCESS, opaque=12345, flag=RESPONSE_FLAG, body=b"??")
            oneway = RemotingCommand.request(9999, opaque=12346, oneway=True)
            writer.write(encode_command_bytes(stray) + encode_command_bytes(oneway))
            writer.write(sound_request(target, 12347))
            await assert_served(reader, 12347)  # the first answer is the sound request's: nothing else came
        finally:
            writer.close()

    run(tmp_path, attack, target)


def test_many_bad_and_idle_connections_at_once(tmp_path: Path) -> None:
    rng = random.Random(11)

    async def attack(addr: str, target: str) -> None:
        idle = [await connect(addr) for _ in range(10)]  # half a frame each, then silence
        for _, writer in idle:
            writer.write(sound_request(target, 1)[:6])
        bad = [send_then_closed(addr, rng.randbytes(rng.randrange(8, 2000))) for _ in range(30)]
        bad += [send_then_closed(addr, struct.pack(">ii", rng.randrange(2**24, 2**31), 0)) for _ in range(10)]
        await asyncio.gather(*bad)
        for reader, writer in idle:  # the half frames are completed late and answered
            writer.write(sound_request(target, 1)[6:])
            await assert_served(reader, 1)
            writer.close()

    run(tmp_path, attack, "namesrv")
    run(tmp_path / "broker", attack, "broker")
