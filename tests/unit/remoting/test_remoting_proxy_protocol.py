"""PROXY protocol headers on a remoting server, as RocketMQ's HandshakeHandler takes them: the
address in a v1 or v2 header becomes the channel's remote address (the socket's peer stays
``peer_address``), a header split over several reads works, LOCAL and UNKNOWN headers keep the
real address, TLS may follow the header (permissive mode), and a malformed, truncated or too
long header closes only its own connection with a log line naming the cause. With the key off
a header is refused."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
from remoting_kit import ECHO, LOOPS, RawPeer, run, serving

from bolide.protocol import RemotingCommand
from bolide.protocol.haproxy import encode_v1, encode_v2
from bolide.remoting import RemotingServer
from bolide.remoting.channel import Channel
from bolide.remoting.selfsigned import load_into, self_signed
from bolide.remoting.tls import TlsMode, client_context

SOURCE, DEST = ("203.0.113.7", 41001), ("10.0.0.5", 10911)
TLVS = ((0x01, b"h2"), (0xE0, b"vpce-0123456789abcdef"), (0xEA, b"\xff\x00binary"))


def tls_options(mode: str) -> dict[str, object]:
    if mode == "plain":
        return {}
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_into(context, *self_signed())
    return {"tls": context, "tls_mode": TlsMode.PERMISSIVE}


async def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


def header_bytes_held(server: RemotingServer) -> int:
    """How many bytes of PROXY headers the server has read and not finished yet."""
    listener = server._server
    waiting = getattr(listener, "_waiting", None)
    if waiting is not None:  # TLS: the listener reads headers
        return sum(len(p.read) for p in waiting.values())
    return sum(ch._proxy_reader.pending for ch in server.channels if ch._proxy_reader is not None)


async def served_channel(server: RemotingServer, peer: RawPeer) -> Channel:
    local = peer.writer.get_extra_info("sockname")
    [channel] = [ch for ch in server.channels if ch.peer_address == f"{local[0]}:{local[1]}"]
    return channel


async def echo_through(peer: RawPeer, tls: bool) -> RemotingCommand:
    if tls:
        await peer.writer.start_tls(client_context())
    peer.send(RemotingCommand.request(ECHO, body=b"after the header"))
    return await peer.read_command()


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("mode", ["plain", "permissive"])
def test_the_address_in_a_header_is_the_channels(loop: str, mode: str) -> None:
    async def scenario() -> None:
        async with serving(**tls_options(mode)) as (server, client, addr):
            cases = [(encode_v1(SOURCE, DEST), "203.0.113.7:41001", ()),
                     (encode_v2(SOURCE, DEST, tlvs=TLVS), "203.0.113.7:41001", TLVS),
                     (encode_v1(("2001:db8::7", 5000), ("2001:db8::1", 10911)), "[2001:db8::7]:5000", ()),
                     (encode_v2(("2001:db8::7", 5000), ("2001:db8::1", 10911)), "[2001:db8::7]:5000", ())]
            for tls in (False, True) if mode == "permissive" else (False,):
                for header, expected, tlvs in cases:
                    peer = await RawPeer.connect(addr)
                    peer.writer.write(header)
                    response = await echo_through(peer, tls)
                    assert response.body == b"after the header"
                    channel = await served_channel(server, peer)
                    assert channel.remote_address == expected
                    assert channel.peer_address.startswith("127.0.0.1:")
                    assert channel.proxy is not None and channel.proxy.tlvs == tlvs
                    peer.close()
            # no header: the socket's peer, as before
            assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
            [plain] = [ch for ch in server.channels if ch.proxy is None]
            assert plain.remote_address == plain.peer_address

    run(loop, scenario())


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("mode", ["plain", "permissive"])
def test_local_and_unknown_headers_keep_the_real_address(loop: str, mode: str) -> None:
    async def scenario() -> None:
        async with serving(**tls_options(mode)) as (server, _, addr):
            for header in (encode_v2(None, None, local=True), encode_v2(SOURCE, DEST, local=True),
                           encode_v2(None, None), encode_v1(None, None),
                           encode_v2(("203.0.113.7", 0), DEST)):  # port 0: RocketMQ ignores it
                peer = await RawPeer.connect(addr)
                peer.writer.write(header)
                assert (await echo_through(peer, False)).code == 0
                channel = await served_channel(server, peer)
                assert channel.remote_address == channel.peer_address
                peer.close()

    run(loop, scenario())


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("mode", ["plain", "permissive"])
def test_a_header_split_over_several_reads(loop: str, mode: str) -> None:
    async def scenario() -> None:
        async with serving(**tls_options(mode)) as (server, _, addr):
            for header in (encode_v1(SOURCE, DEST), encode_v2(SOURCE, DEST, tlvs=TLVS)):
                peer = await RawPeer.connect(addr)
                cuts = [1, 5, 13, 17, len(header)]  # inside the signature, the fixed part, the rest
                start = 0
                for cut in cuts[:-1]:
                    peer.writer.write(header[start:cut])
                    await wait_until(lambda cut=cut: header_bytes_held(server) == cut)  # type: ignore[misc]
                    start = cut
                peer.writer.write(header[start:])
                response = await echo_through(peer, mode == "permissive")
                assert response.body == b"after the header"
                channel = await served_channel(server, peer)
                assert channel.remote_address == "203.0.113.7:41001"
                peer.close()

    run(loop, scenario())


BAD_HEADERS = [
    (b"PROXY TCP4 203.0.113.7 10.0.0.5 41001\r\n", "6 expected"),
    (b"PROXY TCP4 2001:db8::7 10.0.0.5 41001 10911\r\n", "not an IPv4 address"),
    (b"PROXY TCP4 203.0.113.7 10.0.0.5 41001 70000\r\n", "0 to 65535 expected"),
    (b"PROXY UDP4 203.0.113.7 10.0.0.5 41001 10911\r\n", "TCP4, TCP6 or UNKNOWN expected"),
    (b"PROXY TCP4 " + b"1" * 120, "without CRLF in its first 107 bytes"),
    (b"PROXY TCP4 203.0.113.7 10.0.0.5 41001 10911\n", "LF alone"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x31\x11\x00\x0c" + bytes(12), "version 3"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x22\x11\x00\x0c" + bytes(12), "command 2"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x21\x41\x00\x0c" + bytes(12), "0x41 unknown"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x08" + bytes(8), "12 expected"),
    (encode_v2(SOURCE, DEST)[:14] + b"\x00\x11" + encode_v2(SOURCE, DEST)[16:] + b"\xe0\x00\x09ab",
     "overruns the header"),
    (b"PROXX TCP4 ...\r\n", "over the 16777216-byte limit"),  # no header: read as a frame
]


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("mode", ["plain", "permissive"])
def test_a_bad_header_closes_only_its_connection(loop: str, mode: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with serving(**tls_options(mode)) as (server, client, addr):
            assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
            for header, cause in BAD_HEADERS:
                caplog.clear()
                peer = await RawPeer.connect(addr)
                peer.writer.write(header)
                assert await peer.closed_by_peer()
                await wait_until(lambda cause=cause: cause in caplog.text)  # type: ignore[misc]
                assert "127.0.0.1:" in caplog.text  # names the connection's peer
                # the other client is still served, on its connection of before
                assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
            # a connection ending within its header is closed and logged
            caplog.clear()
            peer = await RawPeer.connect(addr)
            peer.writer.write(encode_v2(SOURCE, DEST)[:20])
            await wait_until(lambda: header_bytes_held(server) == 20)
            peer.writer.write_eof()
            assert await peer.closed_by_peer()
            await wait_until(lambda: "within its PROXY protocol header (20 bytes" in caplog.text)
            assert len(server.channels) == 1

    with caplog.at_level(logging.WARNING):
        run(loop, scenario())


@pytest.mark.parametrize("mode", ["plain", "permissive"])
def test_with_the_key_off_a_header_is_refused(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with serving(proxy_protocol=False, **tls_options(mode)) as (server, client, addr):
            peer = await RawPeer.connect(addr)
            peer.writer.write(encode_v1(SOURCE, DEST))
            peer.send(RemotingCommand.request(ECHO))
            assert await peer.closed_by_peer()
            assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
            assert all(ch.remote_address.startswith("127.0.0.1:") for ch in server.channels)

    with caplog.at_level(logging.WARNING):
        run("asyncio", scenario())
    assert "bolideProxyProtocolEnable" in caplog.text
