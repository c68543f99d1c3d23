"""Client certificates (``tls.server.need.client.auth=require`` with ``tls.server.trustCertPath``):
on the gRPC port a TLS client must present a certificate the trusted CA signed, and is refused
without one or with another CA's; plain-text clients of a permissive port are not asked. On a
remoting port the same. ``require`` on the gRPC port without ``trustCertPath`` is refused at
start, naming the key. With NameServer and broker enforcing TLS and requiring certificates, the
broker registers with its ``tls.client.certPath`` certificate, and Bolide's client, ``bolide
admin`` and the Spark source connect with theirs (``tls_cert_file``, ``--tls-cert``,
``tlsCertFile``)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import ssl
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bolide.cli.main import cli
from bolide.client import Admin, ClientConfig, Message, Producer, SendStatus
from bolide.errors import BolideError, ConfigError
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.remoting import RemotingClient
from bolide.remoting.selfsigned import self_signed
from bolide.remoting.tls import TlsServerConfig
from bolide.spark.cluster import Cluster
from bolide.spark.options import SparkOptionError, read_options
from bolide.testing.servers import Servers, running_servers
from bolide.testing.v5calls import V5Calls

DAY = datetime.timedelta(days=1)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def authority(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A CA: its key and self-signed certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY).not_valid_after(now + DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def client_certificate(ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], name: str,
                       directory: Path) -> tuple[Path, Path]:
    """A client certificate ``ca`` signed, and its key: (certificate file, key file)."""
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY).not_valid_after(now + DAY)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_file, key_file = directory / f"{name}.pem", directory / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(_pem_key(key))
    return cert_file, key_file


class Pki:
    """A trusted CA (``ca.pem``), a client it signed and a client another CA signed."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        trusted = authority("bolide-test-ca")
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_bytes(trusted[1].public_bytes(serialization.Encoding.PEM))
        self.client = client_certificate(trusted, "client", directory)
        self.stranger = client_certificate(authority("another-ca"), "stranger", directory)

    def tls(self, mode: str) -> TlsServerConfig:
        return TlsServerConfig(mode=mode, need_client_auth="require", trust_cert_path=str(self.ca_file))


def grpc_channel(port: int, client: tuple[Path, Path] | None) -> grpc.aio.Channel:
    """A TLS channel trusting the broker's self-signed certificate, presenting ``client``."""
    _, server_cert = self_signed()
    key = cert = None
    if client is not None:
        cert, key = client[0].read_bytes(), client[1].read_bytes()
    credentials = grpc.ssl_channel_credentials(server_cert, private_key=key, certificate_chain=cert)
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials)


async def heartbeat(channel: grpc.aio.Channel) -> int:
    request = pb.HeartbeatRequest(group=pb.Resource(name="mtls_g"), client_type=pb.PRODUCER)
    return (await V5Calls(channel)("Heartbeat", request, timeout=5)).status.code


async def refused(channel: grpc.aio.Channel) -> bool:
    try:
        await heartbeat(channel)
    except grpc.aio.AioRpcError as exc:
        return exc.code() is grpc.StatusCode.UNAVAILABLE
    return False


def run(tmp_path: Path, test: object, tls: TlsServerConfig, **options: object) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", tls=tls, grpc_server_port=0, **options) as s:
            await test(s)  # type: ignore[operator]

    asyncio.run(asyncio.wait_for(main(), 60))


def test_the_grpc_port_requires_a_certificate_the_trusted_ca_signed(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")

    async def test(s: Servers) -> None:
        port = s.broker.grpc.port  # type: ignore[union-attr]
        async with grpc_channel(port, pki.client) as channel:
            assert await heartbeat(channel) == pb.OK
        async with grpc_channel(port, None) as channel:
            assert await refused(channel)
        async with grpc_channel(port, pki.stranger) as channel:
            assert await refused(channel)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert await heartbeat(channel) == pb.OK  # plain text is not asked for one

    run(tmp_path, test, pki.tls("permissive"))


def remoting_context(client: tuple[Path, Path] | None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if client is not None:
        context.load_cert_chain(client[0], client[1])
    return context


def test_a_remoting_port_requires_a_certificate_the_trusted_ca_signed(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")

    async def test(s: Servers) -> None:
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        async with RemotingClient(tls=remoting_context(pki.client)) as client:
            assert (await client.invoke(s.broker_addr, request, 5000)).code == ResponseCode.SUCCESS
        for other in (None, pki.stranger):
            async with RemotingClient(tls=remoting_context(other)) as client:
                with pytest.raises(BolideError):
                    await client.invoke(s.broker_addr, request, 5000)

    run(tmp_path, test, pki.tls("permissive"))


def test_servers_and_clients_that_all_require_certificates(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    cert, key = (str(f) for f in pki.client)
    tls = dataclasses.replace(pki.tls("enforcing"), client_cert_path=cert, client_key_path=key)

    async def test(s: Servers) -> None:
        # the broker registered over TLS with its own certificate
        assert s.namesrv.processor.routes.broker_live_info(s.broker_addr) is not None
        config = ClientConfig(s.namesrv_addr, use_tls=True, tls_cert_file=cert, tls_key_file=key)
        async with Admin(config) as admin:
            await admin.create_topic("MtlsTopic", read_queue_nums=1, write_queue_nums=1)
        async with Producer(config, "mtls_pg") as producer:
            sent = await producer.send(Message("MtlsTopic", b"signed"))
        assert sent.status is SendStatus.SEND_OK
        async with Admin(ClientConfig(s.namesrv_addr, use_tls=True)) as admin:
            with pytest.raises(BolideError):
                await admin.cluster_info()
        # the Spark source's options: its broker calls present the certificate too
        base = {"nameserver": s.namesrv_addr, "topic": "MtlsTopic", "usetls": "true"}

        def stored_by_spark_source(options: dict[str, str]) -> int:  # blocking: off the loop
            with Cluster(read_options(options, streaming=False).nameserver) as cluster:
                return sum(hi for _, hi in cluster.bounds(cluster.queues(["MtlsTopic"])).values())

        assert await asyncio.to_thread(stored_by_spark_source,
                                       {**base, "tlscertfile": cert, "tlskeyfile": key}) == 1
        with pytest.raises(SparkOptionError, match="tlsKeyFile"):
            read_options({**base, "tlscertfile": cert}, streaming=False)
        result = await asyncio.to_thread(CliRunner().invoke, cli, [
            "admin", "--tls-cert", cert, "--tls-key", key, "clusterList", "-n", s.namesrv_addr,
            "--output", "json"])
        assert result.exit_code == 0, result.output
        assert s.broker_addr in result.output

    run(tmp_path, test, tls, use_tls=True)


def test_require_on_the_grpc_port_needs_a_trusted_ca(tmp_path: Path) -> None:
    async def main() -> None:
        tls = TlsServerConfig(need_client_auth="require")
        async with running_servers(tmp_path / "store", tls=tls, grpc_server_port=0):
            pass

    with pytest.raises(ConfigError, match=r"tls\.server\.trustCertPath"):
        asyncio.run(asyncio.wait_for(main(), 60))
