"""The pure parts of the ``rocketmq`` source: option parsing, offset resolution and JSON form,
range splitting and admission control (no Spark session, no servers)."""

from __future__ import annotations

import itertools
import json

import pytest

from bolide.spark import offsets as O
from bolide.spark.options import EARLIEST, LATEST, SparkOptionError, read_options, write_options

A0, A1, B0 = ("T", "broker-a", 0), ("T", "broker-a", 1), ("T", "broker-b", 0)
BOUNDS = {A0: (2, 10), A1: (0, 5), B0: (0, 7)}


def test_read_options_defaults_and_errors() -> None:
    batch = read_options({"nameserver": "ns:9876", "topic": "T, U ,T"}, streaming=False)
    assert batch.topics == ("T", "U") and batch.starting == "earliest" and batch.ending == "latest"
    stream = read_options({"nameserver": "ns", "topic": "T", "maxtriggerdelay": "30s"}, streaming=True)
    assert stream.starting == "latest" and stream.max_trigger_delay_ms == 30_000
    for options, message in [
        ({"topic": "T"}, "nameserver is required"),
        ({"nameserver": "n"}, "topic is required"),
        ({"nameserver": "n", "topic": "T", "startingoffsets": "first"}, "neither earliest, latest nor JSON"),
        ({"nameserver": "n", "topic": "T", "startingoffsets": '{"T": {"0": "x"}}'}, "offsets are integers"),
        ({"nameserver": "n", "topic": "T", "startingoffsets": '{"U": {"0": 1}}'}, "does not name"),
        ({"nameserver": "n", "topic": "T", "endingoffsets": "earliest"}, "not allowed"),
        ({"nameserver": "n", "topic": "T", "minpartitions": "0"}, "at least 1"),
        ({"nameserver": "n", "topic": "T", "failondataloss": "maybe"}, "true or false"),
        ({"nameserver": "n", "topic": "T", "maxoffsetspertrigger": "2", "minoffsetspertrigger": "3"},
         "exceeds"),
    ]:
        with pytest.raises(SparkOptionError, match=message):
            read_options(options, streaming=False)
    with pytest.raises(SparkOptionError, match="batch reads only"):
        read_options({"nameserver": "n", "topic": "T", "endingoffsets": "latest"}, streaming=True)


def test_write_options() -> None:
    opts = write_options({"nameserver": "n", "topic": "T", "retrytimes": "0", "batchsize": "16"})
    assert (opts.topic, opts.retry_times, opts.batch_size) == ("T", 0, 16)
    with pytest.raises(SparkOptionError, match="unknown write option"):
        write_options({"nameserver": "n", "tpoic": "T"})


def test_resolve_words_and_json() -> None:
    assert O.resolve("earliest", BOUNDS, missing=LATEST) == {A0: 2, A1: 0, B0: 0}
    assert O.resolve("latest", BOUNDS, missing=EARLIEST) == {A0: 10, A1: 5, B0: 7}
    spec = {"T": {"broker-a": {"0": 4, "1": -1}}}
    assert O.resolve(spec, BOUNDS, missing=EARLIEST) == {A0: 4, A1: 5, B0: 0}
    assert O.resolve({"T": {"0": 3}}, BOUNDS, missing=LATEST) == {A0: 3, A1: 5, B0: 3}
    O.check_known_queues(spec, BOUNDS, "startingOffsets")
    with pytest.raises(SparkOptionError, match="does not have"):
        O.check_known_queues({"T": {"broker-a": {"7": 1}}}, BOUNDS, "startingOffsets")


def test_json_form_is_sorted_and_round_trips() -> None:
    offsets = {("T", "b", 10): 1, ("T", "b", 2): 2, ("S", "a", 0): 3}
    text = json.dumps(O.to_json(offsets))
    assert text == '{"S": {"a": {"0": 3}}, "T": {"b": {"2": 2, "10": 1}}}'
    assert O.from_json(json.loads(text)) == offsets
    with pytest.raises(SparkOptionError, match="not of the form"):
        O.from_json({"T": [1, 2]})


def test_split_gives_at_least_min_partitions() -> None:
    parts = O.ranges({A0: 2, A1: 0}, {A0: 10, A1: 5, B0: 0})
    assert parts == [O.QueueRange("T", "broker-a", 0, 2, 10), O.QueueRange("T", "broker-a", 1, 0, 5)]
    assert O.split(parts, None) == parts and O.split(parts, 2) == parts
    pieces = O.split(parts, 5)
    assert len(pieces) >= 5 and sum(p.size for p in pieces) == 13
    for key in (A0, A1):  # contiguous, in order, covering each range
        mine = [p for p in pieces if p.key == key]
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))


def test_rate_limit_shares_by_backlog() -> None:
    start = {A0: 0, A1: 0, B0: 7}
    latest = {A0: 9, A1: 3, B0: 7}
    assert O.rate_limit(start, latest, 4) == {A0: 3, A1: 1, B0: 7}
    assert O.rate_limit(start, latest, 100) == latest
    assert O.backlog(start, O.rate_limit(start, latest, 5)) == 5
    one_each = O.rate_limit({A0: 0, A1: 0}, {A0: 1, A1: 1}, 1)
    assert O.backlog({A0: 0, A1: 0}, one_each) == 1


def test_clamp_start_fails_or_skips() -> None:
    assert O.clamp_start(A0, 5, 2, fail_on_data_loss=True) == 5
    with pytest.raises(O.DataLossError, match=r"messages 0\.\.1 of queue T/broker-a/0"):
        O.clamp_start(A0, 0, 2, fail_on_data_loss=True)
    assert O.clamp_start(A0, 0, 2, fail_on_data_loss=False) == 2
