"""Coverage-guided fuzzing (atheris, libFuzzer) of the decoders that read bytes from outside:
the frame splitter, both header codecs, the command decoder, the broker's property rewrite,
the CommitLog scan of recovery and dispatch, the pull path's choice of ConsumeQueue entries,
the Spark readers' record decoder, the SQL92 selectors consumers subscribe with, the PROXY
protocol headers load balancers put before a connection, and the logs
read back at start (the controllers' event and Raft logs, RocketMQ's pop revive records) with
the controllers' Raft messages. The
compiled twins (``bolide.protocol._codec``, ``bolide.store._fastscan``) run beside their Python
versions on every input, so a crash in C ends the run with the input that caused it, and any
difference between the two is a failure.

    python -m bolide.testing.fuzz TARGET [libFuzzer options] [CORPUS_DIR ...]
    python -m bolide.testing.fuzz frames -max_total_time=300 fuzz-corpus/frames
    python -m bolide.testing.fuzz --list

An empty (or new) corpus directory starts with the target's seeds, valid inputs built here;
with none, a temporary one is used. Decoders may refuse an input only with
:class:`~bolide.errors.ProtocolError` (the SQL92 parser with its SelectorError, and a compiled
selector answers every message with True or False); every other exception is a finding. ``make fuzz`` runs
every target for a while; the tests run each for a fixed number of inputs with a fixed seed.
"""

from __future__ import annotations

import contextlib
import importlib
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

TargetFn = Callable[[bytes], None]


class Mismatch(AssertionError):
    """A compiled twin and its Python version disagree on an input."""


# -- seeds ------------------------------------------------------------------------------------------
def _seed_frames() -> list[bytes]:
    from bolide.protocol.codec import encode_command_bytes
    from bolide.protocol.codes import RequestCode, SerializeType
    from bolide.protocol.command import RemotingCommand
    from bolide.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader

    send = SendMessageRequestHeader(
        producer_group="g", topic="T", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=1, sys_flag=0, born_timestamp=1795743383747, flag=0,
        properties="TAGS\x01A\x02UNIQ_KEY\x01AC110001\x02WAIT\x01true\x02", reconsume_times=0)
    pull = PullMessageRequestHeader(
        consumer_group="c", topic="T", queue_id=0, queue_offset=5, max_msg_nums=32, sys_flag=2,
        commit_offset=0, suspend_timeout_millis=15000, subscription="A || B", sub_version=1,
        expression_type="TAG")
    out = []
    for codec in (SerializeType.JSON, SerializeType.ROCKETMQ):
        out.append(encode_command_bytes(RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, send.to_v2(), b"hello", opaque=7, serialize_type=codec)))
        out.append(encode_command_bytes(RemotingCommand.request(
            RequestCode.PULL_MESSAGE, pull, opaque=8, serialize_type=codec, remark="r")))
    return out


def _seed_headers(codec: int) -> list[bytes]:
    from bolide.protocol.frame import FrameDecoder

    frames = FrameDecoder().feed(b"".join(_seed_frames()))
    return [frame.header for frame in frames if frame.serialize_type == codec]


def _seed_records() -> list[bytes]:
    from bolide.common.hosts import encode_host
    from bolide.store.record import encode_record

    out = b""
    for i, (topic, body, props) in enumerate([("T", b"body", b"TAGS\x01A\x02KEYS\x01k1 k2\x02"),
                                              ("Topic2", b"", b"")]):
        out += encode_record(topic, i, body, props, born_timestamp=1,
                             born_host=encode_host("127.0.0.1:5000"), store_timestamp=2,
                             store_host=encode_host("127.0.0.1:10911"), queue_offset=i,
                             physical_offset=len(out))
    return [out]


def _seed_properties() -> list[bytes]:
    return [b"TAGS\x01A\x02WAIT\x01true\x02CLUSTER\x01c\x02", b"WAIT\x01false", b""]


# -- targets ----------------------------------------------------------------------------------------
def _frames() -> TargetFn:
    import atheris

    from bolide.errors import ProtocolError
    from bolide.protocol import frame as frame_module
    from bolide.protocol.codec import decode_command

    compiled = frame_module._compiled

    def feed(data: bytes, cuts: list[int], use_compiled: bool) -> tuple[list[Any], bool]:
        frame_module._compiled = compiled if use_compiled else None
        try:
            decoder, frames = frame_module.FrameDecoder(4096), []
            for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
                try:
                    frames += decoder.feed(data[a:b])
                except ProtocolError:
                    return frames, True
            return frames, False
        finally:
            frame_module._compiled = compiled

    def target(raw: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(raw)
        cuts = sorted({fdp.ConsumeIntInRange(0, 64) for _ in range(fdp.ConsumeIntInRange(0, 3))})
        data = fdp.ConsumeBytes(fdp.remaining_bytes())
        cuts = [c for c in cuts if c <= len(data)]
        found = feed(data, cuts, True)
        if compiled is not None and found != feed(data, cuts, False):
            raise Mismatch(f"compiled and Python frame splitting differ on {data!r} cut at {cuts}")
        for frame in found[0]:
            with contextlib.suppress(ProtocolError):
                decode_command(frame)

    return target


def _json_header() -> TargetFn:
    from bolide.errors import ProtocolError
    from bolide.protocol import serialize_json as sj

    def target(data: bytes) -> None:
        try:
            expected: Any = sj.decode_json_header_pure(data)
        except ProtocolError as exc:
            expected = exc
        compiled = sj._compiled.decode_json_header(data) if sj._compiled is not None else None
        if compiled is not None and compiled != expected:
            raise Mismatch(f"compiled JSON header decode gives {compiled!r}, Python {expected!r}")
        if not isinstance(expected, ProtocolError):
            with contextlib.suppress(ProtocolError):
                sj.encode_json_header(expected)

    return target


def _binary_header() -> TargetFn:
    from bolide.errors import ProtocolError
    from bolide.protocol.serialize_binary import decode_binary_header, encode_binary_header

    def target(data: bytes) -> None:
        try:
            cmd = decode_binary_header(data)
        except ProtocolError:
            return
        with contextlib.suppress(ProtocolError):
            encode_binary_header(cmd)

    return target


def _properties() -> TargetFn:
    import atheris

    from bolide.broker.processors import send  # imported uninstrumented (PLAIN_IMPORTS)

    # what the target runs, instrumented in place (the rest of the broker package is not)
    for fn in (send.broker_properties, send.stored_properties, send.stored_properties_pure,
               send._without):
        atheris.instrument_func(fn)

    def target(data: bytes) -> None:
        text = data.decode("latin-1")
        for dead in (False, True):
            expected = send.stored_properties_pure(text, send.broker_properties("c"), dead=dead)
            if send.stored_properties(text, send.broker_properties("c"), dead=dead) != expected:
                raise Mismatch(f"compiled property rewrite differs on {text!r} (dead={dead})")

    return target


def _records() -> TargetFn:
    import numpy as np

    from bolide.spark import record_columns as rc

    def target(data: bytes) -> None:
        buf = rc.RecordBuffer(data)
        pos, got = 0, []
        while True:  # the walk resumes past what it refuses, one byte at a time
            starts, after = buf.walk(pos, len(data), 8)
            py_starts, py_after = buf.walk_python(pos, len(data), 8)
            if after != py_after or not np.array_equal(starts, py_starts):
                raise Mismatch(f"compiled record walk differs at {pos} on {data!r}")
            got += list(starts)
            pos = after if after > pos else pos + 1
            if pos >= len(data):
                break
        candidates = np.array(sorted(set(got) | {0, len(data) // 2, len(data)}), np.int64)
        ok, recs = buf.classify(candidates)
        py_ok, py_recs = buf.classify_python(candidates)
        if not np.array_equal(ok, py_ok):
            raise Mismatch(f"compiled record classify differs on {data!r}")
        for name in ("total", "body_len", "topic_len", "queue_offset"):
            if not np.array_equal(recs.head[name][ok], py_recs.head[name][ok]):
                raise Mismatch(f"compiled record classify gives another {name} on {data!r}")
        taken = recs.select(ok)
        if len(taken):
            for which in (rc.BODY, rc.TOPIC, rc.PROPERTIES):
                if not buf.part(taken, which).equals(buf._pieces(taken).take(
                        np.arange(2 * which, 6 * len(taken), 6))):
                    raise Mismatch(f"compiled gather of piece {which} differs on {data!r}")

    return target


def _decoder() -> TargetFn:
    from bolide.spark import record_columns as rc

    twins = ("_walk_compiled", "_classify_compiled", "_gather_compiled", "_split_compiled")
    compiled = {name: getattr(rc, name) for name in twins}

    def decode(data: bytes, use_compiled: bool) -> Any:
        for name in twins:
            setattr(rc, name, compiled[name] if use_compiled else None)
        try:
            buf = rc.RecordBuffer(data)
            starts, _ = buf.walk(0, len(data), 1 << 16)
            ok, recs = buf.classify(starts)
            taken = recs.select(ok)
            return buf.decode(taken, "broker-a") if len(taken) else None
        finally:
            for name in twins:
                setattr(rc, name, compiled[name])

    def target(data: bytes) -> None:
        got, expected = decode(data, True), decode(data, False)
        if (got is None) != (expected is None) or (got is not None and not got.equals(expected)):
            raise Mismatch(f"the compiled columnar decoder differs on {data!r}")

    return target


def _scan() -> TargetFn:
    from bolide.store import fastscan

    def target(data: bytes) -> None:
        for check_crc in (False, True):
            expected = fastscan.scan_runs_python(data, 0, 0, check_crc, 1 << 16, {})
            if fastscan.scan_runs(data, 0, 0, check_crc) != expected:
                raise Mismatch(f"the compiled CommitLog scan differs on {data!r} (crc={check_crc})")

    return target


def _select_args(data: bytes) -> tuple[Any, ...] | None:
    """(entries, n, seg, seg_start, codes, tags, limits, as_bytes) from a fuzz input: a flags
    byte, an entry count, the entries, then 4 tag codes, 2 tags of 4 bytes, the 6 limits (4
    bytes each), the segment's start and the segment's bytes."""
    if len(data) < 2:
        return None
    flags, n = data[0], data[1] % 9
    p = 2
    entries = data[p:p + 20 * n]
    p += 20 * n
    fixed = data[p:p + 16 + 8 + 24 + 4]
    if len(fixed) < 52:
        return None
    codes = struct.unpack_from(">4i", fixed, 0)[: 1 + (flags >> 4) % 4] if flags & 2 else None
    tags = (fixed[16:20].rstrip(b"\x00"), fixed[20:24].rstrip(b"\x00")) if flags & 4 else None
    limits = tuple(x % (1 << 20) for x in struct.unpack_from(">6i", fixed, 24))
    seg_start = struct.unpack_from(">i", fixed, 48)[0] % 4096
    return entries, n, data[p + 52:], seg_start, codes, tags, limits, bool(flags & 1)


def _select() -> TargetFn:
    from bolide.store import entry_select as es

    def run(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
        entries, n, seg, seg_start, codes, tags, limits, as_bytes = args
        buffers: Any = bytearray() if as_bytes else []
        qoffsets: list[int] = []
        view = memoryview(seg)
        out = fn(entries, 0, n, view, seg_start, seg_start + len(seg), codes, tags, limits,
                 buffers, qoffsets, (100, 0, 0, 0))
        return out, bytes(buffers) if as_bytes else [bytes(b) for b in buffers], qoffsets

    def target(data: bytes) -> None:
        args = _select_args(data)
        if args is None or es._compiled is None:
            return
        if run(es._compiled, args) != run(es.select_entries_python, args):
            raise Mismatch(f"the compiled ConsumeQueue entry selection differs on {data!r}")

    return target


def _seed_select() -> list[bytes]:
    from bolide.common.hashing import java_string_hash

    seg = _seed_records()[0]
    first = struct.unpack_from(">i", seg, 0)[0]
    entries = (struct.pack(">qiq", 0, first, java_string_hash("A"))
               + struct.pack(">qiq", first, len(seg) - first, 0))
    fixed = (struct.pack(">4i", java_string_hash("A"), 0, 1, 2) + b"A\x00\x00\x00" + b"B\x00\x00\x00"
             + struct.pack(">6i", 1 << 19, 1 << 18, 32, 1 << 16, 8, 1 << 15) + struct.pack(">i", 0))
    return [bytes([flags, 2]) + entries + fixed + seg for flags in (0, 1, 2, 6, 7)]


def _sql92() -> TargetFn:
    from bolide.common.sql92 import SelectorError, compile_selector

    def target(data: bytes) -> None:
        text, _, rest = data.decode("utf-8", "replace").partition("\x00")
        try:
            selector = compile_selector(text)
        except SelectorError:
            return
        props = dict(item.partition("=")[::2] for item in rest.split("\x01") if item)
        answer = selector.matches(props)
        if not isinstance(answer, bool):
            raise AssertionError(f"{text!r} answered {answer!r} for {props!r}")

    return target


def _seed_sql92() -> list[bytes]:
    return [b"a > 5\x00a=10", b"a BETWEEN 1 AND 3 OR b IN ('x', 'y')\x00b=x\x01a=2",
            b"NOT (c IS NULL) AND d CONTAINS 'q'\x00d=aqb", b"x = 5.5e3 AND y <> TRUE\x00x=5500\x01y=false",
            b"n >= -10L AND TAGS STARTSWITH 'ev' AND k NOT ENDSWITH 'z'\x00n=3\x01TAGS=even\x01k=ab"]


def _proxy_header() -> TargetFn:
    """A connection's first bytes: a PROXY header (whole, or asking for more), or a refusal;
    a header read from the whole input reads the same from any longer input."""
    from bolide.protocol.haproxy import ProxyHeaderError, parse_header

    def target(data: bytes) -> None:
        try:
            header = parse_header(data, max_v2_length=4096)
        except ProxyHeaderError:
            return
        if header is None:
            return
        if not 0 < header.length <= len(data) or parse_header(data[:header.length]) != header:
            raise AssertionError(f"header {header!r} of {len(data)} input bytes")
        _ = header.client, header.tlv_text()

    return target


def _seed_proxy_header() -> list[bytes]:
    from bolide.protocol.haproxy import encode_v1, encode_v2

    src, dst = ("203.0.113.7", 41001), ("10.0.0.5", 10911)
    return [encode_v1(src, dst), encode_v1(("2001:db8::7", 5), ("::1", 6)), encode_v1(None, None),
            encode_v2(src, dst, tlvs=((0x01, b"h2"), (0xE0, b"vpce-1"))) + b"\x00\x00\x00\x10",
            encode_v2(("2001:db8::7", 5), ("::1", 6)), encode_v2(None, None, local=True)]


# Modules imported before the instrumentation starts, for targets that bring in a large
# package whose instrumentation alone takes longer than the fuzzing, and run none of its code
# (the same coverage at a fixed seed): properties' module brings in the whole broker (the
# factory instruments the functions it runs with atheris.instrument_func), record_columns the
# store (records runs none of it; decoder and scan do, so they keep it instrumented).
PLAIN_IMPORTS: dict[str, tuple[str, ...]] = {"properties": ("bolide.broker.processors.send",),
                                             "records": ("bolide.store",)}

def _logs() -> TargetFn:
    """The durable logs a broker or controller reads back at start, and the controllers' Raft
    messages: the first byte picks the decoder, the rest is its input."""
    from bolide.controller import event_log
    from bolide.controller.raft import messages, storage
    from bolide.errors import ProtocolError
    from bolide.store import pop_revive_log as revive

    def target(data: bytes) -> None:
        if not data:
            return
        which, rest = data[0] % 6, data[1:]
        if which == 0:
            with contextlib.suppress(ProtocolError):
                messages.decode_message(rest)
        elif which in (1, 2):  # a log stops at its first bad record, and says why
            read = storage.read_records if which == 1 else event_log.read_records
            _, good, why = read(rest)
            if good > len(rest) or (good < len(rest)) != bool(why):
                raise AssertionError(f"log read {good} of {len(rest)} bytes, reason {why!r}")
        else:
            tag = (revive.CK_TAG, revive.ACK_TAG, revive.BATCH_ACK_TAG)[which - 3]
            with contextlib.suppress(revive.ReviveRecordError):
                revive.decode_record(tag, rest, "broker-a")

    return target


def _seed_logs() -> list[bytes]:
    from bolide.controller.event_log import encode_record as event_record
    from bolide.controller.events import ElectMaster
    from bolide.controller.raft import messages as m
    from bolide.controller.raft.storage import encode_record as raft_record

    entries = (m.LogEntry(2, b""), m.LogEntry(2, b'[{"type":"ELECT_MASTER"}]'))
    return [
        b"\x00" + m.encode_message(m.AppendRequest(3, "n0", 5, 2, entries, 4)),
        b"\x00" + m.encode_message(m.SnapshotRequest(3, "n0", 9, 2, b'{"groups":[]}')),
        b"\x01" + raft_record(1, entries[0]) + raft_record(2, entries[1]),
        b"\x02" + event_record(ElectMaster("b", 1)) + event_record(ElectMaster("b", None)),
        b"\x03" + b'{"so":10,"n":3,"d":[0,1,4],"pt":1700000000000,"it":30000,"c":"g","t":"T",'
                   b'"q":1,"bm":0,"bn":"broker-a","ro":7,"rq":0}',
        b"\x04" + b'{"ao":11,"so":10,"c":"g","t":"T","q":1,"pt":1700000000000,"bn":"broker-a","rq":0}',
        b"\x05" + b'{"aol":[11,13],"so":10,"c":"g","t":"T","q":1,"pt":1700000000000,"rq":0}',
    ]


TARGETS: dict[str, tuple[Callable[[], TargetFn], Callable[[], list[bytes]]]] = {
    "frames": (_frames, _seed_frames),
    "json-header": (_json_header, lambda: _seed_headers(0)),
    "binary-header": (_binary_header, lambda: _seed_headers(1)),
    "properties": (_properties, _seed_properties),
    "records": (_records, _seed_records),
    "decoder": (_decoder, _seed_records),
    "scan": (_scan, _seed_records),
    "select": (_select, _seed_select),
    "sql92": (_sql92, _seed_sql92),
    "logs": (_logs, _seed_logs),
    "proxy-header": (_proxy_header, _seed_proxy_header),
}


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "--list"):
        print(__doc__.strip() if args[:1] != ["--list"] else "\n".join(TARGETS))
        return
    name = args.pop(0)
    if name not in TARGETS:
        sys.exit(f"unknown fuzz target {name!r}; one of: {', '.join(TARGETS)}")
    try:
        import atheris
    except ImportError:
        sys.exit("atheris is not installed: pip install atheris (make test installs it)")
    factory, seeds = TARGETS[name]
    for module in PLAIN_IMPORTS.get(name, ()):
        importlib.import_module(module)
    with atheris.instrument_imports(include=["bolide"]):  # what the target imports: its coverage
        target = factory()
    corpora = [Path(a) for a in args if not a.startswith("-")]
    if not corpora:  # no corpus given: a temporary one
        corpora = [Path(tempfile.mkdtemp(prefix=f"bolide-fuzz-{name}-"))]
        args.append(str(corpora[0]))
    corpora[0].mkdir(parents=True, exist_ok=True)
    if not any(corpora[0].iterdir()):  # an empty corpus starts from the target's seeds
        for i, seed in enumerate(seeds()):
            (corpora[0] / f"seed-{i}").write_bytes(seed)
    atheris.Setup([sys.argv[0], *args], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
