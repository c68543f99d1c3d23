"""CPU time of the broker's plain-ACL check of one request (``aclEnable=true``) and of its ACL
2.0 check (authentication and authorization, a normal user with three ACL entries): a send
of 100 B and 1 KiB as the Java client writes it (SEND_MESSAGE_V2, signed), a pull, and a
heartbeat of one consumer; and of the client's signing. Best of 5 passes of 20,000 each.

    .venv/bin/python bench/acl_check.py
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bolide.broker.acl import PlainAcl, check_request
from bolide.broker.auth.checks import AuthHook
from bolide.broker.auth.metadata import AuthMetadata
from bolide.protocol.bodies.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from bolide.protocol.bodies.client import ConsumerData, HeartbeatData, SubscriptionData
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting.hooks import AclClientRPCHook

ROUNDS, PASSES = 20_000, 5
ACCOUNTS = """\
accounts:
  - accessKey: bench-account
    secretKey: bench-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [BenchTopic=PUB|SUB, Other=SUB]
"""
SEND = {"a": "bench_pg", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": "1732700000000", "h": "0", "i": "KEYS\x01k1\x02UNIQ_KEY\x01C0A80001000018B4AAC2\x02",
        "j": "0", "k": "false", "m": "false"}
PULL = {"consumerGroup": "bench_cg", "topic": "BenchTopic", "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "15000",
        "subscription": "*", "subVersion": "0", "expressionType": "TAG"}


def best_us(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(PASSES):
        started = time.process_time()
        for _ in range(ROUNDS):
            fn()
        best = min(best, time.process_time() - started)
    return best / ROUNDS * 1e6


def acl2_hook(root: Path) -> AuthHook:
    """ACL 2.0 with the plain-ACL account as a normal user and its permissions as entries."""
    metadata = AuthMetadata(root / "authMetadata.json")
    metadata.create_user(UserInfo(username="bench-account", password="bench-secret"))
    metadata.put_acl(AclInfo(subject="User:bench-account", policies=[PolicyInfo(entries=[
        PolicyEntryInfo(resource="Topic:BenchTopic", actions=["Pub", "Sub"], decision="Allow"),
        PolicyEntryInfo(resource="Topic:Other", actions=["Sub"], decision="Allow"),
        PolicyEntryInfo(resource="Group:*", actions=["Sub"], decision="Allow")])]), None)
    return AuthHook(metadata, "DefaultCluster", authn=True, authz=True)


def main() -> None:
    hook = AclClientRPCHook("bench-account", "bench-secret")
    heartbeat = HeartbeatData(client_id="127.0.0.1@bench", consumer_data_set=[ConsumerData(
        group_name="bench_cg", subscription_data_set=[SubscriptionData(topic="BenchTopic")])])
    cases = [("send 100 B", RequestCode.SEND_MESSAGE_V2, SEND, b"x" * 100),
             ("send 1 KiB", RequestCode.SEND_MESSAGE_V2, SEND, b"x" * 1024),
             ("pull", RequestCode.PULL_MESSAGE, PULL, b""),
             ("heartbeat", RequestCode.HEART_BEAT, {}, heartbeat.encode())]
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / "plain_acl.yml"
        path.write_text(ACCOUNTS)
        acl = PlainAcl(path)
        state = acl.load()
        acl2 = acl2_hook(Path(root))
        for name, code, ext, body in cases:
            request = RemotingCommand.request(code, ext_fields=dict(ext), body=body)
            hook.before_request("127.0.0.1:10911", request)
            check_us = best_us(lambda r=request: check_request(state, "127.0.0.1:50000", r))
            acl2_us = best_us(lambda r=request: acl2.before_request("127.0.0.1:50000", r))

            def sign(c: int = code, e: dict[str, str] = ext, b: bytes = body) -> None:
                hook.before_request("127.0.0.1:10911", RemotingCommand.request(c, ext_fields=dict(e), body=b))

            print(f"{name:12} broker check {check_us:6.2f} µs   ACL 2.0 check {acl2_us:6.2f} µs   "
                  f"client signing {best_us(sign):6.2f} µs")


if __name__ == "__main__":
    main()
