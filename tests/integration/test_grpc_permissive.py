"""The broker's gRPC port in its default mode (permissive, RocketMQ's): TLS and plain-text gRPC
clients on the one port (TLS with the self-signed certificate made at start), each call seen
from the client's own address (the consumer connections, a plain ACL white list), relayed
connections ended by either side, and bytes that are no gRPC harming no other client.

Clients reach the broker through a small TCP forwarder whose connections come from 127.0.0.2,
so their address differs from the relay's 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from bolide.broker.proxy.front import GrpcFront
from bolide.client import Admin
from bolide.protocol.haproxy import Address, encode_v1, encode_v2
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.remoting.selfsigned import self_signed
from bolide.remoting.tls import TlsMode, TlsServerConfig
from bolide.testing.proxy_forwarder import ProxyForwarder
from bolide.testing.servers import Servers, running_servers
from bolide.testing.v5calls import CLIENT, V5Calls, message
from conftest import wait_until

SOURCE = "127.0.0.2"  # the forwarder's address towards the broker (all of 127/8 is loopback)


class Forwarder:
    """Listens on 127.0.0.1 and forwards each connection to ``target`` from ``SOURCE``; the
    source address of each forwarded connection in ``sources`` ("host:port")."""

    def __init__(self, target: int) -> None:
        self.target, self.sources = target, []  # type: ignore[var-annotated]
        self.port = 0

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
            writer.write_eof()
        except (ConnectionError, OSError):
            writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target, local_addr=(SOURCE, 0))
        host, port = up_writer.get_extra_info("sockname")[:2]
        self.sources.append(f"{host}:{port}")
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        writer.close()
        up_writer.close()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Forwarder]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        async with server:
            yield self


def tls_channel(port: int) -> grpc.aio.Channel:
    """A gRPC channel over TLS that trusts the broker's self-signed certificate."""
    _, cert = self_signed()
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(cert))


def front_of(s: Servers) -> GrpcFront:
    assert s.broker.grpc is not None and s.broker.grpc.mode is TlsMode.PERMISSIVE
    front = s.broker.grpc._front
    assert front is not None
    return front


def as_client(n: int) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", f"127.0.0.2@{n}@0@test"), *CLIENT[1:])


def consumer_heartbeat(group: str) -> pb.HeartbeatRequest:
    return pb.HeartbeatRequest(group=pb.Resource(name=group), client_type=pb.SIMPLE_CONSUMER)


def run(tmp_path: Path, test: object, tls: TlsServerConfig | None = None, **options: object) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", tls=tls, grpc_server_port=0, **options) as s:
            await test(s)  # type: ignore[operator]

    asyncio.run(asyncio.wait_for(main(), 60))


def test_tls_and_plain_clients_share_the_port_each_seen_from_its_own_address(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        front = front_of(s)
        port = s.broker.grpc.port  # type: ignore[union-attr]
        send = pb.SendMessageRequest(messages=[message("P5", b"x", "ID-P")])
        fwd = Forwarder(port)
        async with (fwd.running(),
                    grpc.aio.insecure_channel(f"127.0.0.1:{fwd.port}") as plain,
                    tls_channel(fwd.port) as secure,
                    grpc.aio.insecure_channel(f"127.0.0.1:{port}") as direct):
            for n, channel in enumerate((plain, secure)):
                v5 = V5Calls(channel, as_client(n))
                assert (await v5("SendMessage", send)).status.code == pb.OK
                assert (await v5("Heartbeat", consumer_heartbeat("perm_g"))).status.code == pb.OK
            assert (await V5Calls(direct)("SendMessage", send)).status.code == pb.OK
            assert front.relayed == 3 and len(fwd.sources) == 2
            # consumerConnection shows each client at its own address, not the relay's
            async with Admin(s.namesrv_addr) as admin:
                connections = (await admin.consumer_connection("perm_g")).connection_set
            seen = {c.client_id: c.client_addr for c in connections}
            assert seen == {"127.0.0.2@0@0@test": fwd.sources[0], "127.0.0.2@1@0@test": fwd.sources[1]}
        await wait_until(lambda: front.relayed == 0, timeout=10)

    run(tmp_path, test)


ACCOUNTS = """\
globalWhiteRemoteAddresses:
  - 127.0.0.2
accounts:
  - accessKey: someone
    secretKey: some-secret
"""


def test_a_plain_acl_white_list_sees_the_clients_address(tmp_path: Path) -> None:
    accounts = tmp_path / "conf" / "plain_acl.yml"
    accounts.parent.mkdir()
    accounts.write_text(ACCOUNTS)

    async def test(s: Servers) -> None:
        port = s.broker.grpc.port  # type: ignore[union-attr]
        send = pb.SendMessageRequest(messages=[message("W5", b"x", "ID-W")])
        fwd = Forwarder(port)
        async with (fwd.running(),
                    grpc.aio.insecure_channel(f"127.0.0.1:{fwd.port}") as plain,
                    tls_channel(fwd.port) as secure,
                    grpc.aio.insecure_channel(f"127.0.0.1:{port}") as direct,
                    tls_channel(port) as direct_tls):
            for channel in (plain, secure):  # from 127.0.0.2: white-listed, unsigned calls pass
                assert (await V5Calls(channel)("SendMessage", send)).status.code == pb.OK
            for channel in (direct, direct_tls):  # from 127.0.0.1: they must sign
                assert (await V5Calls(channel)("SendMessage", send)).status.code == pb.UNAUTHORIZED

    run(tmp_path, test, acl_enable=True, acl_file=str(accounts))


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """Whether the server ends the connection (EOF or reset) within 10 s, whatever it sends."""
    try:
        async with asyncio.timeout(10):
            while await reader.read(1 << 16):
                pass
    except ConnectionError:
        pass
    return True


def test_relayed_connections_end_from_either_side_and_garbage_harms_no_one(tmp_path: Path) -> None:
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

    async def test(s: Servers) -> None:
        front = front_of(s)
        port = s.broker.grpc.port  # type: ignore[union-attr]
        front.first_byte_timeout = 0.5
        send = pb.SendMessageRequest(messages=[message("G5", b"x", "ID-G")])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as steady, tls_channel(port) as steady_tls:
            calls = (V5Calls(steady), V5Calls(steady_tls))
            for v5 in calls:
                assert (await v5("SendMessage", send)).status.code == pb.OK
            assert front.relayed == 2
            # the client ends: its relay ends
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(preface)
            await wait_until(lambda: front.relayed == 3, timeout=5)
            sock.close()
            await wait_until(lambda: front.relayed == 2, timeout=5)
            # the server ends: bytes no gRPC listener takes, plain or TLS, and a half-closed
            # connection; a connection that sends nothing is closed by the front
            for garbage, half_close in ((b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", False),
                                        (b"\x16\x03\x01\x00\x05hello" + b"\x00" * 64, False),
                                        (preface, True), (b"", False)):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(garbage)
                if half_close:
                    writer.write_eof()
                assert await closed_by_server(reader), garbage
                writer.close()
            await wait_until(lambda: front.relayed == 2 and len(front.clients) == 2, timeout=10)
            for v5 in calls:  # the steady clients served on, on their connections
                assert (await v5("SendMessage", send)).status.code == pb.OK
            assert front.relayed == 2

    run(tmp_path, test)


def test_the_endpoint_closing_ends_its_relays(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        front = front_of(s)
        port = s.broker.grpc.port  # type: ignore[union-attr]
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        assert (await V5Calls(channel)("SendMessage", pb.SendMessageRequest(
            messages=[message("C5", b"x", "ID-C")]))).status.code == pb.OK
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x16")  # a TLS handshake begun and never finished
        await wait_until(lambda: front.relayed == 2, timeout=5)
        await s.broker.grpc.close()  # type: ignore[union-attr]
        assert await closed_by_server(reader)
        assert front.relayed == 0 and not front.clients
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        writer.close()
        await channel.close()

    run(tmp_path, test)


@pytest.mark.parametrize("mode", ["disabled", "enforcing"])
def test_disabled_and_enforcing_are_grpcios_own_port_without_the_relay(tmp_path: Path, mode: str) -> None:
    """``disabled``: plain text only; ``enforcing`` without a certificate: TLS only, with the
    self-signed one; neither has the relay in front."""
    async def test(s: Servers) -> None:
        assert s.broker.grpc is not None and s.broker.grpc._front is None
        port = s.broker.grpc.port
        send = pb.SendMessageRequest(messages=[message("M5", b"x", "ID-M")])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as plain, tls_channel(port) as secure:
            served, refused = (plain, secure) if mode == "disabled" else (secure, plain)
            assert (await V5Calls(served)("SendMessage", send)).status.code == pb.OK
            with pytest.raises(grpc.aio.AioRpcError):
                await V5Calls(refused)("SendMessage", send, timeout=3)

    run(tmp_path, test, tls=TlsServerConfig(mode=mode), use_tls=mode == "enforcing")


def test_a_proxy_protocol_header_names_the_client(tmp_path: Path) -> None:
    """A load balancer's PROXY protocol header (v1, and v2 with TLVs) before a plain or a TLS
    gRPC connection: the broker sees the client it names (consumerConnection); a malformed
    header closes only its own connection."""
    async def test(s: Servers) -> None:
        port = s.broker.grpc.port  # type: ignore[union-attr]
        clients = {"v1": ("198.51.100.7", 40001), "v2": ("2001:db8::7", 40002)}

        def v1(_client: Address, server: Address) -> bytes:
            return encode_v1(clients["v1"], server)

        def v2(_client: Address, server: Address) -> bytes:
            return encode_v2(clients["v2"], ("2001:db8::1", server[1]), tlvs=((0xE0, b"vpc-1"),))

        async with (ProxyForwarder(f"127.0.0.1:{port}", v1) as first,
                    ProxyForwarder(f"127.0.0.1:{port}", v2) as second):
            async with (grpc.aio.insecure_channel(first.address) as plain,
                        tls_channel(int(second.address.rpartition(":")[2])) as secure):
                for n, channel in enumerate((plain, secure)):
                    v5 = V5Calls(channel, as_client(n))
                    assert (await v5("Heartbeat", consumer_heartbeat("pp_g"))).status.code == pb.OK
                async with Admin(s.namesrv_addr) as admin:
                    connections = (await admin.consumer_connection("pp_g")).connection_set
                seen = {c.client_id: c.client_addr for c in connections}
                assert seen == {"127.0.0.2@0@0@test": "198.51.100.7:40001",
                                "127.0.0.2@1@0@test": "2001:db8::7:40002"}, seen
            # a malformed header: that connection is closed, the port goes on serving
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"PROXY TCP4 not-an-address\r\n")
            assert await closed_by_server(reader)
            writer.close()
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as direct:
                assert (await V5Calls(direct)("Heartbeat", consumer_heartbeat("pp_g"))).status.code == pb.OK

    run(tmp_path, test)
