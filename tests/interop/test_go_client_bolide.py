"""The official Apache RocketMQ Go client (rocketmq-client-go/v2 v2.1.2, unmodified) against Bolide:
a producer sends messages with tags and keys through an auto-created topic (sync sends), then a push
consumer (clustering, ConsumeFromFirstOffset) receives every one of them; the consumer answers
GET_CONSUMER_RUNNING_INFO relayed by the broker while it waits for messages.

The client is ``interop/go-client/main.go``, built once into ``interop/.gocache/bin`` and run as a
separate process against an in-process NameServer + Broker on free ports. Needs go (the modules come
from the Go module proxy once, into ``interop/.gocache``): without it the module is skipped, or fails
when ``CI`` is set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from client_roundtrip import consumer_reports_itself, create_topic, round_trip, unavailable

from bolide.testing.goclient import go_client_binary, go_env
from bolide.testing.rocketmq import RocketMQUnavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]


def test_go_producer_and_push_consumer_against_bolide(tmp_path: Path) -> None:
    try:
        binary = str(go_client_binary())
    except RocketMQUnavailable as exc:
        unavailable(f"Go client unavailable: {exc}")
    round_trip([binary], tmp_path, "BolideGoClientTopic", "bolide_go_client_cg", consume_timeout_sec=80,
               env=go_env(home=tmp_path / "goclient-home"))


def test_go_push_consumer_answers_running_info_relayed_by_bolide(tmp_path: Path) -> None:
    """GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus) reaches the Go consumer through the
    broker, which relays its report (with its goroutine stacks, which the Go client writes into
    the JSON unescaped: the parser takes them as fastjson does); then the round trip goes on."""
    try:
        binary = str(go_client_binary())
    except RocketMQUnavailable as exc:
        unavailable(f"Go client unavailable: {exc}")

    round_trip([binary], tmp_path, "BolideGoStatusTopic", "bolide_go_status_cg", consume_timeout_sec=80,
               env=go_env(home=tmp_path / "goclient-home"), before=lambda s, topic: create_topic(s, topic),
               while_consuming=consumer_reports_itself)
