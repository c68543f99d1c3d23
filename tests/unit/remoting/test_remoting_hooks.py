"""RPC hooks and plain-ACL signing: golden signatures from Java's HmacSHA1 and TreeMap, and a
signed call verified by the server."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac

import pytest
from remoting_kit import ECHO, LOOPS, run, serving

from bolide.errors import AclError
from bolide.protocol import RemotingCommand, ResponseCode
from bolide.remoting import AclClientRPCHook, AclVerifyRPCHook, RequestContext, RPCHook, acl_signature
from bolide.remoting.hooks import verify_signature

# Computed with javax.crypto.Mac("HmacSHA1") over a java.util.TreeMap's values + body, as
# RocketMQ's AclUtils.combineRequestContent and AclSigner.calSignature do.
GOLDEN_EXT = {"AccessKey": "RocketMQ", "topic": "TopicTest", "queueId": "3", "b": "Tópico", "Zed": "z"}
GOLDEN_SIGNATURE = "fqThnxth0vKkOXMM6v965kPoreA="  # secret "12345678", body b"hello body"
GOLDEN_TOKEN_SIGNATURE = "lBJAxv3ke6xvagX3v2rETxrIBbQ="  # secret "sk", no body


def test_signature_matches_java() -> None:
    assert acl_signature("12345678", GOLDEN_EXT, b"hello body") == GOLDEN_SIGNATURE
    ext = {"AccessKey": "ak", "SecurityToken": "tok", "topic": "T"}
    assert acl_signature("sk", ext) == GOLDEN_TOKEN_SIGNATURE


def test_signature_ignores_signature_and_unique_key_query_and_hashes_body_parts() -> None:
    ext = {**GOLDEN_EXT, "Signature": "old", "_UNIQUE_KEY_QUERY": "true"}
    body = memoryview(b"hello body")
    assert acl_signature("12345678", ext, [body[:3], b"", body[3:]]) == GOLDEN_SIGNATURE


def test_client_hook_signs_and_server_side_verifies() -> None:
    hook = AclClientRPCHook("ak", "sk", security_token="tok")
    request = RemotingCommand.request(105, ext_fields={"topic": "T", "Signature": "stale"})
    hook.before_request("127.0.0.1:9876", request)
    assert request.ext_fields == {"topic": "T", "AccessKey": "ak", "SecurityToken": "tok",
                                  "Signature": GOLDEN_TOKEN_SIGNATURE}
    assert verify_signature(request, "sk") and not verify_signature(request, "other")
    request.ext_fields["topic"] = "tampered"
    assert not verify_signature(request, "sk")
    with pytest.raises(ValueError, match="access key"):
        AclClientRPCHook("", "sk")


def test_verify_hook_rejections() -> None:
    verify = AclVerifyRPCHook({"ak": "sk"})
    with pytest.raises(AclError, match="no AccessKey"):
        verify.before_request("1.2.3.4:5", RemotingCommand.request(10))
    AclVerifyRPCHook({}, required=False).before_request("1.2.3.4:5", RemotingCommand.request(10))
    unknown = RemotingCommand.request(10, ext_fields={"AccessKey": "nobody", "Signature": "x"})
    with pytest.raises(AclError, match="not an ACL account"):
        verify.before_request("1.2.3.4:5", unknown)


@pytest.mark.parametrize("loop", LOOPS)
def test_signed_calls_pass_the_server_hook_and_bad_secrets_get_system_error(loop: str) -> None:
    class Recorder(RPCHook):
        def __init__(self) -> None:
            self.calls: list[tuple[str, int, int]] = []

        def after_response(self, remote_addr: str, request: RemotingCommand,
                           response: RemotingCommand) -> None:
            self.calls.append((remote_addr, request.opaque, response.opaque))

    async def scenario() -> None:
        recorder = Recorder()
        async with serving(hooks=[AclVerifyRPCHook({"RocketMQ": "12345678"})]) as (_, client, addr):
            client.add_hook(AclClientRPCHook("RocketMQ", "12345678"))
            client.add_hook(recorder)
            request = RemotingCommand.request(ECHO, ext_fields={"topic": "T"}, body=b"signed body")
            response = await client.invoke(addr, request, 2000)
            assert response.code == ResponseCode.SUCCESS and response.body == b"signed body"
            assert recorder.calls == [(addr, request.opaque, request.opaque)]
            client.hooks[0] = AclClientRPCHook("RocketMQ", "wrong")
            response = await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert response.remark is not None and "check signature failed" in response.remark

    run(loop, scenario())


@pytest.mark.parametrize("loop", LOOPS)
def test_a_ready_frame_answers_while_no_hook_is_registered(loop: str) -> None:
    """A processor's process_now_frame answers with encoded frames while the table has no
    hooks; with a hook, process_now answers (the hook sees the response object); a oneway
    request gets no answer either way."""
    from bolide.protocol import encode_command_bytes

    class Framed:
        def __init__(self) -> None:
            self.used: list[str] = []

        async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            raise AssertionError("process_now answers")

        def process_now(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            self.used.append("object")
            return request.make_response(0, "object")

        def process_now_frame(self, ctx: RequestContext, request: RemotingCommand) -> bytes:
            self.used.append("frame")
            return encode_command_bytes(request.make_response(0, "frame"))

    class Recorder(RPCHook):
        def __init__(self) -> None:
            self.remarks: list[str | None] = []

        def after_response(self, remote_addr: str, request: RemotingCommand,
                           response: RemotingCommand) -> None:
            self.remarks.append(response.remark)

    async def scenario() -> None:
        processor = Framed()
        async with serving() as (server, client, addr):
            server.register(ECHO + 1, processor)
            response = await client.invoke(addr, RemotingCommand.request(ECHO + 1), 2000)
            assert response.remark == "frame" and response.is_response
            await client.invoke_oneway(addr, RemotingCommand.request(ECHO + 1), 2000)
            async with asyncio.timeout(5):  # the oneway request served before the hook comes
                while len(processor.used) < 2:
                    await asyncio.sleep(0.01)
            recorder = Recorder()
            server.processors.add_hook(recorder)
            response = await client.invoke(addr, RemotingCommand.request(ECHO + 1), 2000)
            assert response.remark == "object" and recorder.remarks == ["object"]
        assert processor.used == ["frame", "frame", "object"]

    run(loop, scenario())


@pytest.mark.parametrize("loop", LOOPS)
def test_hooks_run_once_when_process_now_defers_to_process(loop: str) -> None:
    """A process_now that cannot answer (NOT_NOW) hands the request to process; the before
    hooks, already passed, do not run again (an ACL signature is checked once)."""
    from bolide.remoting import NOT_NOW

    class Deferring:
        async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            return request.make_response(0, "later")

        def process_now(self, ctx: RequestContext, request: RemotingCommand) -> object:
            return NOT_NOW

    class Counter(RPCHook):
        def __init__(self) -> None:
            self.before = 0

        def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
            self.before += 1

    async def scenario() -> None:
        counter = Counter()
        async with serving(hooks=[counter]) as (server, client, addr):
            server.register(ECHO + 2, Deferring())
            response = await client.invoke(addr, RemotingCommand.request(ECHO + 2), 2000)
            assert response.remark == "later" and counter.before == 1
            response = await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            assert counter.before == 2  # a processor without process_now: once as well

    run(loop, scenario())


def test_signed_values_follow_java_key_order_beyond_ascii() -> None:
    """Java orders keys by UTF-16 code units: a character past U+FFFF (a surrogate pair, from
    U+D800) sorts before U+FFFD, which Python's code point order puts after it."""
    ext = {"\uFFFD": "second", "\U0001F600": "first", "a": "zero"}
    mac = hmac.new(b"secret", b"zerofirstsecond", hashlib.sha1)
    assert acl_signature("secret", ext) == base64.b64encode(mac.digest()).decode()
    ascii_only = {"b": "2", "B": "1", "a": "3"}  # uppercase first, as in Java
    mac = hmac.new(b"secret", b"132", hashlib.sha1)
    assert acl_signature("secret", ascii_only) == base64.b64encode(mac.digest()).decode()
