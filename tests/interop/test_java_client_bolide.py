"""The official Apache RocketMQ Java client (rocketmq-client 4.9.7 and 5.3.3, unmodified) against Bolide:
a DefaultMQProducer sends messages with tags and keys through an auto-created topic, then a
DefaultMQPushConsumer (clustering, CONSUME_FROM_FIRST_OFFSET) receives every one of them; also
over TLS (``-Dtls.enable=true``) against servers that enforce it, and with message traces
(``enableMsgTrace``), which Bolide's Admin reads back.

The client is ``interop/java-client/BolideClient.java``, run as a separate JVM against an
in-process NameServer + Broker on free ports. Needs java, javac and mvn (the jars come from Maven
Central once, into ``interop/.m2``): without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from client_roundtrip import Sent, consumer_reports_itself, create_topic, expected, round_trip, unavailable

from bolide.cli.main import cli
from bolide.client.admin import Admin
from bolide.client.admin_trace import TraceView
from bolide.remoting.tls import TlsServerConfig
from bolide.testing.rocketmq import RocketMQUnavailable, java_client_command
from bolide.testing.servers import Servers

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_java_producer_and_push_consumer_against_bolide(tmp_path: Path, version: str) -> None:
    try:
        java = java_client_command(version, home=tmp_path / "jclient")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    round_trip(java, tmp_path, "BolideJavaClientTopic", "bolide_java_client_cg", consume_timeout_sec=60)


def test_java_push_consumer_answers_running_info_relayed_by_bolide(tmp_path: Path) -> None:
    """GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus) reaches the Java consumer through the
    broker, which relays its report (with its thread stacks); then the round trip goes on."""
    try:
        java = java_client_command("4.9.7", home=tmp_path / "jclient")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    round_trip(java, tmp_path, "BolideJavaStatusTopic", "bolide_java_status_cg", consume_timeout_sec=60,
               before=lambda s, topic: create_topic(s, topic), while_consuming=consumer_reports_itself)


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_java_client_over_tls_against_bolide(tmp_path: Path, version: str) -> None:
    """``-Dtls.enable=true``: the Java client's connections to the NameServer and the broker
    start with TLS; both servers enforce it (tls.server.mode=enforcing), so a plain connection
    would be closed and the round trip could not pass."""
    try:
        java = java_client_command(version, home=tmp_path / "jclient",
                                   jvm_options=["-Dtls.enable=true"])
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    tls_dir = Path(__file__).resolve().parents[1] / "data" / "tls"
    tls = TlsServerConfig(mode="enforcing", cert_path=str(tls_dir / "server.crt"),
                          key_path=str(tls_dir / "server.key"))
    round_trip(java, tmp_path, "BolideJavaTlsTopic", "bolide_java_tls_cg", consume_timeout_sec=60,
               tls=tls, use_tls=True)


TRACE_TOPIC, TRACE_GROUP = "BolideJavaTraceTopic", "bolide_java_trace_cg"


async def _traced(s: Servers, sent: list[Sent]) -> None:
    """Each message's trace, as the Java clients wrote it to Bolide's trace topic: sent by the
    producer group (with its topic, tags, keys and offset id) and consumed by the group."""
    async with Admin(s.namesrv_addr) as admin:
        async with asyncio.timeout(60):
            for i, m in enumerate(sent):
                while True:  # the broker indexes the trace messages as it dispatches them
                    views: list[TraceView] = await admin.message_trace(m.msg_id)
                    if {v.type for v in views} >= {"Pub", "SubAfter"}:
                        break
                    await asyncio.sleep(0.2)
                [pub] = [v for v in views if v.type == "Pub"]
                assert (pub.group, pub.status, pub.topic) == ("bolide_interop_pg", "success", TRACE_TOPIC)
                assert (pub.tags, pub.keys) == expected(i)[1:] and pub.offset_msg_id, pub
                subs = [v for v in views if v.type == "SubAfter"]
                assert {(v.group, v.status) for v in subs} == {(TRACE_GROUP, "success")}, views
    doc = await asyncio.to_thread(_cli_trace, s.namesrv_addr, sent[0].msg_id)
    assert [v["type"] for v in doc][:1] == ["Pub"] and "SubAfter" in {v["type"] for v in doc}


def _cli_trace(ns: str, msg_id: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(cli, ["admin", "queryMsgTraceById", "-n", ns, "-i", msg_id, "-O", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_java_clients_trace_messages_through_bolide(tmp_path: Path, version: str) -> None:
    """enableMsgTrace: the Java producer and push consumer send their traces to
    RMQ_SYS_TRACE_TOPIC (traceTopicEnable=true on the broker); ``Admin.message_trace`` and
    ``bolide admin queryMsgTraceById`` read them back by message id."""
    try:
        java = java_client_command(version, home=tmp_path / "jclient", jvm_options=["-Dbolide.trace=true"])
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    round_trip(java, tmp_path, TRACE_TOPIC, TRACE_GROUP, consume_timeout_sec=60, after=_traced,
               trace_topic_enable=True)
