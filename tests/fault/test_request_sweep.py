"""Every request code the NameServer and the Broker serve, sent with header fields and bodies made
at random from a fixed seed (the header codec, language and version too): plausible values with
a few wrong ones (not numbers, past their Java types, empty, system topics), bodies shaped like
the protocol's JSON beans with values of the wrong types, other JSON and random bytes. Each
two-way request must be answered, every error with a remark naming its cause; no processor may
fail with an unexpected exception (a logged traceback); and afterwards a well-behaved client is
still served and the store verifies; for a master flushing asynchronously or on every put,
and for a slave.

New processors are swept as soon as they are registered."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import pkgutil
import random
from pathlib import Path
from typing import Any

import pytest
from test_server_garbage import Probe, verify_store

import bolide.protocol.bodies as bodies
import bolide.protocol.headers as headers
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies.bean import Bean
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from bolide.protocol.headers.base import Header
from bolide.protocol.headers.namesrv import UnregisterBrokerRequestHeader
from bolide.remoting import AclClientRPCHook, RemotingClient
from bolide.remoting.tls import TlsServerConfig, client_context
from bolide.store.config import BrokerRole, FlushDiskType
from bolide.testing.servers import Servers, running_servers
from conftest import no_traceback_logged

SEED = 20261127
PER_CODE = 40  # requests per request code
TEST_TIMEOUT = 240.0
VERSIONS = (0, 1, 317, 373, 401, 409, 453, 463, -1, 32767)  # the client's version code
ONEWAY = {RequestCode.END_TRANSACTION}  # sent oneway by every client; unanswered for bad states

WRONG = ("", "-1", "2147483648", "-2147483649", "4294967296", "-9223372036854775809", "9" * 40,
         "abc", "1.5", " 1", "true", "null", "\x00", "\x01\x02", "é", "a" * 300, "%RETRY%g",
         "%DLQ%g", "TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "*", "||",
         "a || b", "127.0.0.1:1", "0:0", "[]", "{}")
JSON_SCALARS: tuple[Any, ...] = (0, 1, -1, 2**31, 2**63, 10**30, 1.5, "", "x", "SweepT", "g",
                                 True, False, None, "127.0.0.1:1", "%RETRY%g", "*", "0")
OTHER_BODIES = (b"", b"{}", b"[]", b"null", b"1", b"\xff\xfe", b"a=b\nc", b"x" * 5000)


def _classes(package: Any, base: type) -> list[Any]:
    """The subclasses of ``base`` defined in the modules of ``package``."""
    found = []
    for module in pkgutil.iter_modules(package.__path__):
        loaded = importlib.import_module(f"{package.__name__}.{module.name}")
        found += [c for _, c in inspect.getmembers(loaded, inspect.isclass) if issubclass(c, base)]
    return found


FIELD_KINDS = {f.wire: f.kind for c in _classes(headers, Header) for f in c.FIELDS}
FIELDS = sorted(FIELD_KINDS)
BEANS = sorted((c for c in _classes(bodies, Bean) if c.JSON_FIELDS), key=lambda c: c.__name__)


def plausible(key: str, rnd: random.Random, servers: Servers) -> str:
    """A value a client could send for header field ``key``."""
    kind, name = FIELD_KINDS[key], key.lower()
    if kind == "an integer":
        return rnd.choice(("0", "1", "3", "16", "1000", "-1"))
    if kind == "a boolean":
        return rnd.choice(("true", "false"))
    if kind == "a number":
        return "0.5"
    if "addr" in name:
        return rnd.choice((servers.broker_addr, servers.namesrv_addr))
    if "topic" in name:
        return rnd.choice(("SweepT", "SweepT2", "%RETRY%g", "TBW102"))
    if "group" in name:
        return rnd.choice(("g", "%RETRY%g", "CID_RMQ_SYS_TRANS"))
    if "brokername" in name or name == "bname":
        return servers.broker.config.broker_name
    if "cluster" in name:
        return servers.broker.config.broker_cluster_name
    if "msgid" in name:
        return "7F00000100002A9F0000000000000000"
    return rnd.choice(("x", "*", "1", "", "k1"))


def ext_fields(rnd: random.Random, servers: Servers) -> dict[str, str]:
    if rnd.random() < 0.3:  # a few fields, all of them wrong
        return {k: rnd.choice(WRONG) for k in rnd.sample(FIELDS, rnd.randint(0, 12))}
    ext = {k: plausible(k, rnd, servers) for k in FIELDS if rnd.random() < 0.9}
    for k in rnd.sample(FIELDS, rnd.randint(0, 3)):
        ext[k] = rnd.choice(WRONG)
    return ext


def json_value(rnd: random.Random, depth: int) -> Any:
    r = rnd.random()
    if depth > 3 or r < 0.45:
        return rnd.choice(JSON_SCALARS)
    if r < 0.6:
        return [json_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    if r < 0.75:
        return {str(rnd.choice(JSON_SCALARS)): json_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))}
    return bean_like(rnd, depth + 1)


def bean_like(rnd: random.Random, depth: int) -> dict[str, Any]:
    """Most of one bean's JSON keys, each with a value of any type."""
    bean = rnd.choice(BEANS)
    return {f.names[0]: json_value(rnd, depth + 1) for f in bean.JSON_FIELDS if rnd.random() < 0.85}


def body(rnd: random.Random) -> bytes:
    r = rnd.random()
    if r < 0.5:
        return json.dumps(bean_like(rnd, 0)).encode()
    if r < 0.85:
        return rnd.choice(OTHER_BODIES)
    return rnd.randbytes(rnd.randint(0, 200))


async def sweep(servers: Servers, client: RemotingClient, rnd: random.Random) -> int:
    """Send PER_CODE random requests for every code each server serves; returns how many."""
    sent = 0
    for addr, table in ((servers.broker_addr, servers.broker.server.processors),
                        (servers.namesrv_addr, servers.namesrv.server.processors)):
        for code in table.codes:
            for _ in range(PER_CODE):
                # codes past int16 (RocketMQ 5's pop family, 2000xx) only fit JSON headers: the
                # binary one has 16 bits for the code (Java would send it truncated)
                kinds = list(SerializeType) if code < 1 << 15 else [SerializeType.JSON]
                request = RemotingCommand(code, ext_fields=ext_fields(rnd, servers), body=body(rnd),
                                          serialize_type=rnd.choice(kinds),
                                          language=rnd.choice(list(LanguageCode)),
                                          version=rnd.choice(VERSIONS))
                timeout = request.ext_fields.get("heartbeatTimeoutMillis", "")
                if code == RequestCode.REGISTER_BROKER and timeout.lstrip("-").isdigit():
                    # a registration that expires during the sweep makes the NameServer close
                    # its connection (as RocketMQ's does): the sweep's own, mid-sweep
                    request.ext_fields["heartbeatTimeoutMillis"] = str(max(int(timeout), 600_000))
                if code in ONEWAY:
                    await client.invoke_oneway(addr, request)
                    continue
                answer = await client.invoke(addr, request, timeout_ms=10_000)
                sent += 1
                assert answer.is_response, answer
                if answer.code != ResponseCode.SUCCESS:
                    assert answer.remark, (code, request.ext_fields, answer)
    return sent


async def register_again(servers: Servers, client: RemotingClient) -> None:
    """Undo what the sweep did to the broker's registration: its UNREGISTER_BROKER took the
    broker off the NameServer until its next registration, and its DELETE_TOPIC_IN_NAMESRV may
    have dropped routes that a registration with an unchanged DataVersion does not bring back
    (as with RocketMQ's NameServer). Unregistered, the broker's next registration is its first:
    every topic it has is routed again."""
    config = servers.broker.config
    header = UnregisterBrokerRequestHeader(
        broker_name=config.broker_name, broker_addr=servers.broker_addr,
        cluster_name=config.broker_cluster_name, broker_id=config.broker_id)
    answer = await client.invoke(servers.namesrv_addr,
                                 RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header))
    assert answer.code == ResponseCode.SUCCESS, answer
    assert await servers.broker.registration.register_all() == 1


# the broker's roles: a master flushing asynchronously (the probe sends and pulls before and
# after), one flushing every put, a slave (it refuses sends: no probe), a master with plain
# ACL whose client signs with an account that may not use every topic and group, and servers
# that take TLS only
ROLES: dict[str, dict[str, Any]] = {
    "async-flush-master": {},
    "sync-flush-master": {"flush_disk_type": FlushDiskType.SYNC_FLUSH},
    "slave": {"broker_role": BrokerRole.SLAVE},
    "acl-master": {},
    "tls-master": {},
}
TLS_DIR = Path(__file__).resolve().parents[1] / "data" / "tls"
ACL_ACCOUNTS = """\
accounts:
  - accessKey: sweep-account
    secretKey: sweep-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
    topicPerms: [SCHEDULE_TOPIC_XXXX=DENY, "%DLQ%g=SUB"]
    groupPerms: [g=SUB, other=DENY]
"""


def role_settings(tmp_path: Path, role: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The server options and client options of ``role``."""
    if role == "tls-master":
        tls = TlsServerConfig(mode="enforcing", cert_path=str(TLS_DIR / "server.crt"),
                              key_path=str(TLS_DIR / "server.key"))
        return {"tls": tls, "use_tls": True}, {"tls": client_context()}
    if role != "acl-master":
        return {}, {}
    accounts = tmp_path / "plain_acl.yml"
    accounts.write_text(ACL_ACCOUNTS)
    return ({"acl_enable": True, "acl_file": str(accounts)},
            {"hooks": [AclClientRPCHook("sweep-account", "sweep-secret")]})


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_code_answers_random_fields_and_bodies_without_a_traceback(tmp_path: Path, role: str) -> None:
    slave = role == "slave"
    server_options, client_options = role_settings(tmp_path, role)

    async def main() -> int:
        async with running_servers(tmp_path / "store", auto_create_topic_enable=True,
                                   store_options=ROLES[role], broker_id=1 if slave else 0,
                                   **server_options) as servers, \
                RemotingClient(**client_options) as client:
            probe = Probe(servers, client)
            if not slave:
                await probe.check()
            sent = await sweep(servers, client, random.Random(SEED))
            await register_again(servers, client)
            if not slave:
                await probe.check()
            return sent

    with no_traceback_logged():
        sent = asyncio.run(asyncio.wait_for(main(), TEST_TIMEOUT))
    assert sent >= 40 * PER_CODE  # both servers' tables were swept
    verify_store(tmp_path)
