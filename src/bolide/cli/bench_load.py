"""Load-generator processes of ``bolide bench broker``.

Each worker process runs one asyncio loop (uvloop when installed) with one or more
connections to the broker. A connection keeps a window of requests outstanding: every
response that arrives is answered by a new request in the same ``data_received`` call, and
all the new requests of one call go out in one write. Request frames are encoded before
timing and cut at their variable fields (the opaque and the UNIQ_KEY counters, fixed
width), so building a request is a join of a few ``bytes``; a response is matched by its
opaque after parsing only its header. With ``rate`` set, a pacer issues requests on a 1 ms
tick instead (open loop).

Timing: the parent hands every worker the same start time (``time.monotonic``, one clock
for all processes). Requests flow from then on; those that complete in the measured window,
after ``warmup_s``, are counted, with their latency (write to response).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import resource
import signal
import struct
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import orjson

from bolide.common import Message
from bolide.common.waiting import wait_for
from bolide.protocol.bodies import encode_batch_body
from bolide.protocol.codec import encode_command_bytes
from bolide.protocol.codes import RequestCode, SerializeType
from bolide.protocol.command import RemotingCommand
from bolide.protocol.frame import PREFIX_SIZE, Frame, FrameDecoder
from bolide.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from bolide.protocol.serialize_binary import decode_binary_header
from bolide.remoting import run

PRODUCER_GROUP = "bench_producer"
CONSUMER_GROUP = "bench_consumer"
OPAQUE_BASE = 1_000_000_000  # opaques stay ten digits long in a JSON header up to 1,999,999,999
PULL_SUBSCRIPTION_FLAG = 0x4  # the subscription travels with the pull: no HEART_BEAT needed
_UNIQ_SLOT = b"QQQQQQQQ"  # stands for 8 hex digits of the UNIQ_KEY (never in a body: see _body)
_OPAQUE, _UNIQ = 0, 1
_BINARY_HEAD = struct.Struct(">hbhi")  # ROCKETMQ header: code, language, version, opaque
_I32 = struct.Struct(">i")
TICK_S = 0.001


@dataclass(frozen=True)
class LoadSpec:
    """What one worker process does."""

    kind: str  # "send" (one message per request), "batch" or "pull"
    worker: int
    host: str
    port: int
    topic: str
    queues: tuple[int, ...]
    body_size: int = 100
    batch: int = 1  # messages per SEND_BATCH_MESSAGE request
    window: int = 32  # requests outstanding at once, all connections together
    connections: int = 1
    warmup_s: float = 1.0
    duration_s: float = 10.0
    rate: float | None = None  # messages per second of this worker; None: closed loop
    codec: int = SerializeType.JSON
    pull_ends: tuple[int, ...] = ()  # the max offset of each of ``queues`` (pull)
    pull_batch: int = 32  # maxMsgNums of a pull


def _body(size: int) -> bytes:
    """A body of lower-case letters a-p, so it never contains the UNIQ_KEY slot."""
    return bytes(random.choices(b"abcdefghijklmnop", k=size))


class Template:
    """A request frame cut at its variable fields: the opaque and each UNIQ_KEY counter."""

    __slots__ = ("kinds", "segments")

    def __init__(self, frame: bytes, codec: int) -> None:
        if codec == SerializeType.JSON:
            token = b'"opaque":%d' % OPAQUE_BASE
            marks = [(frame.index(token) + len(token) - 10, 10, _OPAQUE)]
        else:
            marks = [(PREFIX_SIZE + 5, 4, _OPAQUE)]
        at = frame.find(_UNIQ_SLOT)
        while at >= 0:
            marks.append((at, len(_UNIQ_SLOT), _UNIQ))
            at = frame.find(_UNIQ_SLOT, at + len(_UNIQ_SLOT))
        marks.sort()
        self.segments: list[bytes] = []
        self.kinds: list[int] = []
        pos = 0
        for at, width, kind in marks:
            self.segments.append(frame[pos:at])
            self.kinds.append(kind)
            pos = at + width
        self.segments.append(frame[pos:])

    def emit(self, out: list[bytes], opaque: bytes, seq: int) -> int:
        """Append the frame's parts with these values to ``out``; returns the next ``seq``."""
        segments = self.segments
        out.append(segments[0])
        i = 1
        for kind in self.kinds:
            if kind == _OPAQUE:
                out.append(opaque)
            else:
                out.append(b"%08X" % (seq & 0xFFFFFFFF))
                seq += 1
            out.append(segments[i])
            i += 1
        return seq


def _request_frame(code: int, header: Any, body: bytes, codec: int, opaque: int) -> bytes:
    cmd = RemotingCommand.request(code, header, body, opaque=opaque,
                                  serialize_type=SerializeType(codec))
    return encode_command_bytes(cmd)


def _parse_json(frame: Frame) -> tuple[int, int, dict[str, Any]]:
    obj = orjson.loads(frame.header)
    return obj["opaque"], obj["code"], obj


def _parse_binary(frame: Frame) -> tuple[int, int, Any]:
    code, _language, _version, opaque = _BINARY_HEAD.unpack_from(frame.header)
    return opaque, code, None


class SendSource:
    """SEND_MESSAGE_V2 (one message) or SEND_BATCH_MESSAGE requests over ``queues`` in turn."""

    def __init__(self, spec: LoadSpec, connection: int) -> None:
        self.codec = spec.codec
        self.json = spec.codec == SerializeType.JSON
        self.messages = spec.batch if spec.kind == "batch" else 1
        uniq = f"{os.getpid() & 0xFFFFFFFF:08X}{spec.worker:04X}{connection:04X}{random.getrandbits(32):08X}"
        self.templates = [self._template(spec, queue, uniq) for queue in spec.queues]
        self.opaque = OPAQUE_BASE
        self.seq = 0
        self.turn = 0

    def _template(self, spec: LoadSpec, queue: int, uniq: str) -> Template:
        props = {"TAGS": "TagA", "UNIQ_KEY": uniq + _UNIQ_SLOT.decode(), "WAIT": "true"}
        if spec.kind == "batch":
            members = [Message(spec.topic, _body(spec.body_size), properties=dict(props))
                       for _ in range(spec.batch)]
            body, code = encode_batch_body(members), RequestCode.SEND_BATCH_MESSAGE
            header_props = "WAIT\x01true\x02"
        else:
            body, code = _body(spec.body_size), RequestCode.SEND_MESSAGE_V2
            header_props = "".join(f"{k}\x01{v}\x02" for k, v in props.items())
        header = SendMessageRequestHeader(
            producer_group=PRODUCER_GROUP, topic=spec.topic, default_topic="TBW102",
            default_topic_queue_nums=4, queue_id=queue, sys_flag=0,
            born_timestamp=int(time.time() * 1000), flag=0, properties=header_props,
            reconsume_times=0, batch=spec.kind == "batch").to_v2()
        return Template(_request_frame(code, header, body, self.codec, OPAQUE_BASE), self.codec)

    def emit(self, out: list[bytes], pending: dict[int, float], now: float) -> bool:
        opaque = self.opaque
        self.opaque = opaque + 1
        templates = self.templates
        template = templates[self.turn % len(templates)]
        self.turn += 1
        value = b"%d" % opaque if self.json else _I32.pack(opaque)
        self.seq = template.emit(out, value, self.seq)
        pending[opaque] = now
        return True

    def parse(self, frame: Frame) -> tuple[int, int, int]:
        """(opaque, response code, messages) of a response."""
        opaque, code, _ = (_parse_json if self.json else _parse_binary)(frame)
        return opaque, code, self.messages


class PullSource:
    """PULL_MESSAGE requests of ``pull_batch`` messages from every offset of the queues in
    turn, wrapping around at the end; the frames are encoded in advance, the opaque of each
    is its index."""

    def __init__(self, spec: LoadSpec, connection: int) -> None:
        self.json = spec.codec == SerializeType.JSON
        self.frames: list[bytes] = []
        self.offsets: list[int] = []
        chunks = [(queue, offset) for queue, end in zip(spec.queues, spec.pull_ends, strict=True)
                  for offset in range(0, end, spec.pull_batch)]
        for queue, offset in chunks[connection::spec.connections]:
            header = PullMessageRequestHeader(
                consumer_group=CONSUMER_GROUP, topic=spec.topic, queue_id=queue,
                queue_offset=offset, max_msg_nums=spec.pull_batch,
                sys_flag=PULL_SUBSCRIPTION_FLAG, commit_offset=0, suspend_timeout_millis=0,
                subscription="*", sub_version=0, expression_type="TAG")
            self.frames.append(_request_frame(RequestCode.PULL_MESSAGE, header, b"", spec.codec,
                                              len(self.frames)))
            self.offsets.append(offset)
        if not self.frames:
            raise ValueError("a puller has no queue to read: pre-fill the topic first")
        self.turn = 0

    def emit(self, out: list[bytes], pending: dict[int, float], now: float) -> bool:
        n = len(self.frames)
        for _ in range(n):
            index = self.turn % n
            self.turn += 1
            if index not in pending:
                out.append(self.frames[index])
                pending[index] = now
                return True
        return False

    def parse(self, frame: Frame) -> tuple[int, int, int]:
        if self.json:
            opaque, code, obj = _parse_json(frame)
            ext = obj.get("extFields") or {}
        else:
            cmd = decode_binary_header(frame.header)
            opaque, code, ext = cmd.opaque, cmd.code, cmd.ext_fields
        if code:
            return opaque, code, 0
        return opaque, code, int(ext["nextBeginOffset"]) - self.offsets[opaque]


class Recorder:
    """The figures of one worker: what completed inside the measured window."""

    def __init__(self, begin: float, end: float) -> None:
        self.begin = begin
        self.end = end
        self.count = 0
        self.total = 0  # messages acknowledged, measured or not
        self.requests = 0
        self.bytes = 0
        self.latencies = array("d")
        self.errors: dict[int, int] = {}
        self.first_error: str | None = None
        self.skipped = 0  # paced requests not sent because the window was full

    def failed(self, code: int, frame: Frame) -> None:
        self.errors[code] = self.errors.get(code, 0) + 1
        if self.first_error is None:
            header = (orjson.loads(frame.header) if frame.serialize_type == SerializeType.JSON
                      else {"remark": decode_binary_header(frame.header).remark})
            self.first_error = f"response code {code}: {header.get('remark')}"


class LoadConnection(asyncio.Protocol):
    """One connection keeping ``window`` requests of ``source`` outstanding."""

    def __init__(self, source: SendSource | PullSource, rec: Recorder, window: int,
                 closed_loop: bool, broken: asyncio.Event) -> None:
        self.source = source
        self.broken = broken  # set when a connection is lost before the end
        self.rec = rec
        self.window = window
        self.closed_loop = closed_loop
        self.decoder = FrameDecoder()
        self.pending: dict[int, float] = {}
        self.transport: asyncio.Transport | None = None
        self.lost: str | None = None
        self.idle = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.pending or exc is not None or time.perf_counter() < self.rec.end:
            self.lost = f"the broker closed the connection ({exc or 'EOF'})"
            self.broken.set()
        self.idle.set()

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        rec = self.rec
        pending = self.pending
        parse = self.source.parse
        measuring = rec.begin <= now <= rec.end
        for frame in self.decoder.feed(data):
            key, code, messages = parse(frame)
            sent = pending.pop(key, None)
            if sent is None:
                rec.errors[-1] = rec.errors.get(-1, 0) + 1
                continue
            if code:
                rec.failed(code, frame)
                continue
            rec.total += messages
            if measuring:
                rec.count += messages
                rec.requests += 1
                rec.bytes += len(frame.body)
                rec.latencies.append(now - sent)
        if now >= rec.end:
            if not pending:
                self.idle.set()
        elif self.closed_loop:
            self.send(self.window - len(pending), now)

    def send(self, n: int, now: float) -> int:
        """Write up to ``n`` more requests (fewer when the window is full); returns how many."""
        n = min(n, self.window - len(self.pending))
        if n <= 0 or self.transport is None or self.transport.is_closing():
            return 0
        out: list[bytes] = []
        emit = self.source.emit
        pending = self.pending
        sent = 0
        while sent < n and emit(out, pending, now):
            sent += 1
        if out:
            self.transport.write(b"".join(out))
        return sent


async def _pace(conns: list[LoadConnection], rec: Recorder, start: float, rate: float) -> None:
    """Issue requests at ``rate`` per second from ``start`` to the end of the window."""
    issued = 0
    turn = 0
    while (now := time.perf_counter()) < rec.end:
        due = int((now - start) * rate) - issued
        if due > 0:
            issued += due
            share = [due // len(conns)] * len(conns)
            for _ in range(due % len(conns)):
                share[turn % len(conns)] += 1
                turn += 1
            for conn, n in zip(conns, share, strict=True):
                sent = conn.send(n, now)
                if now >= rec.begin:
                    rec.skipped += n - sent
        await asyncio.sleep(TICK_S)


async def _work(spec: LoadSpec, pipe: Connection) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    source_type: Callable[[LoadSpec, int], SendSource | PullSource] = (
        PullSource if spec.kind == "pull" else SendSource)
    sources = [source_type(spec, c) for c in range(spec.connections)]
    rec = Recorder(float("inf"), float("inf"))
    per_conn = max(1, spec.window // spec.connections)
    closed_loop = spec.rate is None
    broken = asyncio.Event()
    conns: list[LoadConnection] = []
    for source in sources:
        _, conn = await loop.create_connection(
            lambda s=source: LoadConnection(s, rec, per_conn, closed_loop, broken),
            spec.host, spec.port)
        conns.append(conn)

    async def until(when: float) -> None:
        """Sleep until ``when``; raise at once if a connection is lost meanwhile."""
        with contextlib.suppress(TimeoutError):
            await wait_for(broken.wait(), max(0.0, when - time.perf_counter()))
        if broken.is_set():
            raise ConnectionError(next(c.lost for c in conns if c.lost))

    pipe.send(("ready", None))
    start_at = pipe.recv()  # blocks the loop on purpose: nothing is in flight yet
    if start_at is None:
        raise RuntimeError("stopped before the start")
    start = start_at - time.monotonic() + time.perf_counter()
    rec.begin = start + spec.warmup_s
    rec.end = rec.begin + spec.duration_s
    await until(start)
    pacer = None
    if spec.rate is None:
        for conn in conns:
            conn.send(per_conn, time.perf_counter())
    else:
        pacer = asyncio.ensure_future(_pace(conns, rec, start, spec.rate))
    await until(rec.begin)
    cpu0 = _cpu_seconds()
    await until(rec.end)
    cpu = _cpu_seconds() - cpu0
    if pacer is not None:
        await pacer
    try:
        async with asyncio.timeout(30):
            for conn in conns:
                if conn.pending:
                    await conn.idle.wait()
    except TimeoutError:
        pass
    lost = next((c.lost for c in conns if c.lost), None)
    unanswered = sum(len(c.pending) for c in conns)
    for conn in conns:
        if conn.transport is not None:
            conn.transport.close()
    return {
        "worker": spec.worker, "count": rec.count, "total": rec.total, "requests": rec.requests,
        "bytes": rec.bytes, "seconds": spec.duration_s, "cpu_s": cpu, "latencies": rec.latencies.tobytes(),
        "errors": rec.errors, "first_error": rec.first_error or lost, "skipped": rec.skipped,
        "unanswered": unanswered,
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker_main(spec: LoadSpec, pipe: Connection) -> None:
    """Entry point of a worker process (``multiprocessing`` spawn): report ``("ready",
    None)``, wait for the start time, run, then send ``("done", figures)`` or ``("error",
    message)``. Ctrl-C is left to the parent, which stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = run(_work(spec, pipe))
    except BaseException as exc:  # reported to the parent, which decides
        with contextlib.suppress(OSError):
            pipe.send(("error", f"worker {spec.worker}: {type(exc).__name__}: {exc}"))
    else:
        with contextlib.suppress(OSError):
            pipe.send(("done", result))
    finally:
        pipe.close()
