"""TLS between clients and servers (RocketMQ's tls.server.mode): a permissive NameServer and
Broker serve TLS and plain clients on the same port, an enforcing one closes plain
connections, the broker registers over TLS with useTLS, a client checks the certificate when
given a CA file, and settings that cannot work are refused with the key to fix. The
certificate is tests/data/tls/server.crt (self-signed for localhost and 127.0.0.1)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client import Admin, ClientConfig, ConsumeFrom, Message, Producer, PullConsumer
from bolide.errors import ConfigError, RemotingConnectError, RemotingError
from bolide.protocol import RemotingCommand, RequestCode
from bolide.protocol.bodies import HeartbeatData
from bolide.remoting import RemotingClient
from bolide.remoting.tls import TlsMode, TlsServerConfig, client_context
from bolide.testing.servers import running_servers

TLS_DIR = Path(__file__).resolve().parents[1] / "data" / "tls"
CERT, KEY = str(TLS_DIR / "server.crt"), str(TLS_DIR / "server.key")
OTHER_CA = str(TLS_DIR / "other-ca.crt")  # a self-signed certificate that signed nothing here


def tls(mode: str) -> TlsServerConfig:
    return TlsServerConfig(mode=mode, cert_path=CERT, key_path=KEY)


async def round_trip(config: ClientConfig, topic: str) -> None:
    async with Producer(config, "tls-pg") as producer:
        for i in range(3):
            await producer.send(Message(topic, b"tls-%d" % i))
    consumer = PullConsumer(config, f"{topic}-cg", consume_from=ConsumeFrom.FIRST_OFFSET,
                            rebalance_interval_ms=200, suspend_ms=500)
    consumer.subscribe(topic)
    got: list[bytes] = []
    async with consumer, asyncio.timeout(20):
        while len(got) < 3:
            got += [m.body for m in await consumer.poll(1000)]
    assert sorted(got) == [b"tls-0", b"tls-1", b"tls-2"]


def test_a_permissive_server_serves_tls_and_plain_clients(tmp_path: Path) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", tls=tls("permissive")) as s:
            assert s.broker.server.tls_mode is TlsMode.PERMISSIVE
            await round_trip(ClientConfig(s.namesrv_addr, use_tls=True), "TlsTopic")
            await round_trip(ClientConfig(s.namesrv_addr), "PlainTopic")
            # the client checks the server's certificate against a CA file when given one
            await round_trip(ClientConfig(s.namesrv_addr, use_tls=True, tls_ca_file=CERT),
                             "VerifiedTopic")
            async with Admin(ClientConfig(s.namesrv_addr, use_tls=True,
                                          tls_ca_file=OTHER_CA)) as admin:
                with pytest.raises(RemotingConnectError, match=r"TLS handshake with .* failed"):
                    await admin.topic_list()
            assert all(ch.remote_address.startswith("127.0.0.1:") for ch in s.broker.server.channels)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_an_enforcing_server_closes_plain_connections(tmp_path: Path) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", tls=tls("enforcing"), use_tls=True) as s:
            await round_trip(ClientConfig(s.namesrv_addr, use_tls=True), "TlsOnly")
            assert s.broker.registration is not None  # registered with the NameServer over TLS
            for addr in (s.namesrv_addr, s.broker_addr):
                async with RemotingClient(connect_timeout_ms=2000) as plain:
                    with pytest.raises(RemotingError):
                        await plain.invoke(addr, _heartbeat(), 2000)
            async with RemotingClient(tls=client_context()) as secure:
                assert (await secure.invoke(s.broker_addr, _heartbeat(), 2000)).code == 0

    asyncio.run(asyncio.wait_for(main(), 60))


def _heartbeat() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=HeartbeatData(client_id="t@1").encode())


def test_settings_that_cannot_work_are_refused(tmp_path: Path) -> None:
    assert TlsServerConfig(mode="permissive").server_context() is not None  # self-signed
    with pytest.raises(ConfigError, match="use disabled, permissive or enforcing"):
        TlsServerConfig(mode="on")
    with pytest.raises(ConfigError, match="cannot load the TLS certificate"):
        TlsServerConfig(mode="enforcing", cert_path=KEY, key_path=KEY).server_context()
    assert TlsServerConfig().server_context() is None  # not set: remoting plain
    props = tmp_path / "tls.properties"  # RocketMQ's tls.config.file
    props.write_text(f"tls.server.mode=enforcing\ntls.server.certPath={CERT}\n"
                     f"tls.server.keyPath={KEY}\n")
    resolved = TlsServerConfig(config_file=str(props)).resolved()
    assert resolved.tls_mode is TlsMode.ENFORCING and resolved.server_context() is not None
    conf = tmp_path / "broker.conf"
    conf.write_text(f"tls.server.mode=permissive\ntls.server.certPath={CERT}\n"
                    f"tls.server.keyPath={KEY}\n")
    assert TlsServerConfig.from_properties(conf).tls_mode is TlsMode.PERMISSIVE
    with pytest.raises(Exception, match="set use_tls=True"):
        ClientConfig("127.0.0.1:9876", tls_ca_file=CERT)


def test_a_connection_that_never_sends_is_closed(tmp_path: Path) -> None:
    """Before its first byte a connection is not served yet: it is closed after a timeout
    rather than kept open for ever."""
    from bolide.remoting import RemotingServer

    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0, tls=tls("permissive").server_context(),
                                tls_mode=TlsMode.PERMISSIVE)
        await server.start()
        assert server._server is not None
        server._server._first_byte_timeout = 0.2  # type: ignore[union-attr]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            async with asyncio.timeout(10):
                assert await reader.read() == b""  # closed by the server
            writer.close()
        finally:
            await server.close()

    asyncio.run(main())


def test_the_spark_source_connects_over_tls_with_its_options(tmp_path: Path) -> None:
    """Options useTLS and tlsCaFile of the ``rocketmq`` source and sink: its broker calls
    (queue bounds here) go over TLS to servers that enforce it."""
    from bolide.spark.cluster import Cluster
    from bolide.spark.options import SparkOptionError, read_options, write_options

    async def main() -> None:
        async with running_servers(tmp_path / "store", tls=tls("enforcing"), use_tls=True) as s:
            config = ClientConfig(s.namesrv_addr, use_tls=True)
            async with Producer(config, "tls-pg") as producer:
                await producer.send(Message("TlsSpark", b"one"))
            base = {"nameserver": s.namesrv_addr, "topic": "TlsSpark"}

            def bounds(options: dict[str, str]) -> int:  # blocking calls: off the servers' loop
                with Cluster(read_options(options, streaming=False).nameserver) as cluster:
                    found = cluster.bounds(cluster.queues(["TlsSpark"]))
                return sum(hi for _, hi in found.values())

            assert await asyncio.to_thread(bounds, {**base, "usetls": "true", "tlscafile": CERT}) == 1
            with pytest.raises(RemotingError):
                await asyncio.to_thread(bounds, base)
            sink = write_options({**base, "usetls": "true"})  # Spark gives keys in lower case
            assert isinstance(sink.nameserver, ClientConfig) and sink.nameserver.use_tls
            with pytest.raises(SparkOptionError, match="tlsCaFile needs"):
                read_options({**base, "tlscafile": CERT}, streaming=False)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_broken_handshake_closes_only_its_connection(tmp_path: Path) -> None:
    """Bytes that start like TLS but are not a handshake: that connection is closed (with a
    warning) and the server goes on serving TLS and plain clients."""
    async def main() -> None:
        async with running_servers(tmp_path / "store", tls=tls("permissive")) as s:
            host, port = s.broker_addr.rsplit(":", 1)
            for junk in (b"\x16\x03\x01\x00\x05hello" + bytes(200), b"\x16" * 5000):
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(junk)
                async with asyncio.timeout(15):
                    while await reader.read(4096):
                        pass  # until the server closes it
                writer.close()
            async with RemotingClient(tls=client_context()) as secure, RemotingClient() as plain:
                assert (await secure.invoke(s.broker_addr, _heartbeat(), 2000)).code == 0
                assert (await plain.invoke(s.broker_addr, _heartbeat(), 2000)).code == 0

    asyncio.run(asyncio.wait_for(main(), 60))


def test_without_a_certificate_a_permissive_server_serves_tls_with_a_self_signed_one(tmp_path: Path) -> None:
    """RocketMQ's test mode: tls.server.mode set, no certPath / keyPath."""
    async def main() -> None:
        async with running_servers(tmp_path / "store", tls=TlsServerConfig(mode="permissive")) as s:
            await round_trip(ClientConfig(s.namesrv_addr, use_tls=True), "SelfSigned")
            await round_trip(ClientConfig(s.namesrv_addr), "PlainToo")

    asyncio.run(asyncio.wait_for(main(), 60))
