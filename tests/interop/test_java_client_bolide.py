"""The official Apache RocketMQ Java client (rocketmq-client 4.9.7 and 5.3.3, unmodified) against Bolide:
a DefaultMQProducer sends messages with tags and keys through an auto-created topic, then a
DefaultMQPushConsumer (clustering, CONSUME_FROM_FIRST_OFFSET) receives every one of them; also
over TLS (``-Dtls.enable=true``) against servers that enforce it.

The client is ``interop/java-client/BolideClient.java``, run as a separate JVM against an
in-process NameServer + Broker on free ports. Needs java, javac and mvn (the jars come from Maven
Central once, into ``interop/.m2``): without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from client_roundtrip import consumer_reports_itself, create_topic, round_trip, unavailable

from bolide.remoting.tls import TlsServerConfig
from bolide.testing.rocketmq import RocketMQUnavailable, java_client_command

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
