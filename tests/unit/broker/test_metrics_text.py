"""The metrics' pure parts: Prometheus' text format (checked with prometheus_client's own
parser), RocketMQ's version names and message types."""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from bolide.broker.metrics.collect import message_type
from bolide.common import properties as P
from bolide.metrics.exposition import Family, HistogramValue, escape, render
from bolide.protocol.codes import V4_5_2, V4_9_8, V5_0_0, V5_3_3, version_name


def test_the_text_parses_as_prometheus_reads_it() -> None:
    counter = Family("rocketmq_messages_in_total", "counter", "Total number of incoming messages")
    counter.add((("cluster", "c"), ("topic", 'we"ird\\to\npic')), 12)
    gauge = Family("rocketmq_storage_flush_behind_bytes", "gauge", "Bytes not flushed")
    gauge.add((), 0.25)
    histogram = Family("rocketmq_message_size", "histogram", "Incoming messages size")
    histogram.add((("topic", "T"),), HistogramValue((1024, 4096), [3, 4, 5], 9000))
    empty = Family("rocketmq_send_to_dlq_messages_total", "counter", "none yet")
    text = render([counter, gauge, histogram, empty])
    assert "rocketmq_send_to_dlq" not in text  # a family without samples is left out
    families = {f.name: f for f in text_string_to_metric_families(text)}
    messages = families["rocketmq_messages_in"]  # the parser drops a counter's _total
    assert messages.type == "counter"
    assert [(s.labels, s.value) for s in messages.samples] == [
        ({"cluster": "c", "topic": 'we"ird\\to\npic'}, 12.0)]
    assert families["rocketmq_storage_flush_behind_bytes"].samples[0].value == 0.25
    buckets = {s.labels.get("le"): s.value for s in families["rocketmq_message_size"].samples
               if s.name.endswith("_bucket")}
    assert buckets == {"1024.0": 3.0, "4096.0": 4.0, "+Inf": 5.0}
    assert {s.name: s.value for s in families["rocketmq_message_size"].samples
            if not s.name.endswith("_bucket")} == {"rocketmq_message_size_sum": 9000.0,
                                                    "rocketmq_message_size_count": 5.0}
    assert escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert math.isnan(next(text_string_to_metric_families(
        render([Family("x", "gauge", "h", [((), float("nan"))])]))).samples[0].value)


def test_client_versions_by_rocketmqs_names() -> None:
    assert version_name(V4_9_8) == "V4_9_8"
    assert version_name(V5_3_3) == "V5_3_3"
    assert version_name(V5_0_0) == "V5_0_0"
    assert version_name(V4_5_2) == "V4_5_2"
    assert version_name(V4_9_8 - 1) == "V4_9_8_SNAPSHOT"
    assert version_name(100) == "100"  # a 3.x client: by number


def test_message_types_as_rocketmq_labels_them() -> None:
    def props(**kv: str) -> str:
        return P.encode_properties(kv)

    assert message_type(None) == "normal"
    assert message_type(props(TAGS="a", KEYS="k")) == "normal"
    assert message_type(props(__SHARDINGKEY="g")) == "fifo"
    assert message_type(props(DELAY="3")) == "delay"
    assert message_type(props(TIMER_DELIVER_MS="1")) == "delay"
    assert message_type(props(TAGS="a", NODELAY="1").decode()) == "normal"  # whole keys only
    assert message_type(props(TAGS="a"), half=True) == "transaction"
