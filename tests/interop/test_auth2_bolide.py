"""ACL 2.0 on a Bolide broker (``authenticationEnabled``, ``authorizationEnabled``, a super user
from ``initAuthenticationUser``): mqadmin 5.3.3, signing as that user through conf/tools.yml,
creates a user and its ACL and reads them back; the Java 5.3.3 client signing as the new user
sends, batches and consumes on what its ACL allows, and gets RocketMQ 5.3's refusals for a
wrong password and for no signature; unsigned mqadmin is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from client_roundtrip import run_driver, unavailable, with_servers

from bolide.testing.rocketmq import (
    JAVA_SCENARIOS_MAIN,
    RocketMQ,
    RocketMQUnavailable,
    java_client_command,
)
from bolide.testing.servers import Servers

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

ROOT = ("bolide-root", "bolide-root-secret")
APP = ("bolide-app", "bolide-app-secret")
N = 3
AUTH = {"authentication_enabled": True, "authorization_enabled": True,
        "init_authentication_user": f'{{"username":"{ROOT[0]}","password":"{ROOT[1]}"}}'}


def test_mqadmin_and_the_java_client_against_acl_2(tmp_path: Path) -> None:
    try:
        mqadmin = RocketMQ("5.3.3", tmp_path / "mqadmin5", tools_account=ROOT)
        unsigned = RocketMQ("5.3.3", tmp_path / "mqadmin5-unsigned")
        java = java_client_command("5.3.3", home=tmp_path / "jhome", main=JAVA_SCENARIOS_MAIN)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")

    async def test(s: Servers) -> tuple[list[str], list[str], list[list[str]]]:
        b = s.broker_addr
        for rmq in (mqadmin, unsigned):
            rmq.namesrv_port = s.namesrv.port
        out = await asyncio.to_thread(mqadmin.mqadmin_batch, [
            ["updateTopic", "-b", b, "-t", "Auth2", "-r", "2", "-w", "2"],
            ["createUser", "-b", b, "-u", APP[0], "-p", APP[1]],
            ["createAcl", "-b", b, "-s", f"User:{APP[0]}", "-r", "Topic:Auth2,Group:auth2_cg",
             "-a", "Pub,Sub,Get", "-d", "Allow"],
            ["getUser", "-b", b, "-u", APP[0]],
            ["listAcl", "-b", b, "-s", APP[0]]])
        refused = await asyncio.to_thread(unsigned.mqadmin_batch,
                                          [["updateTopic", "-b", b, "-t", "Auth2Refused"]])
        assert s.broker.topics.get("Auth2Refused") is None
        lines = await run_driver([*java, "acl", s.namesrv_addr, "Auth2", "auth2_cg", str(N), *APP,
                                  "60"], tmp_path / "acl.log", prefixes=("SEND", "MSG", "REFUSED"))
        return out, refused, lines

    out, refused, lines = with_servers(tmp_path, test, **AUTH)
    update_topic, create_user, create_acl, get_user, list_acl = out
    assert "create topic to" in update_topic and "success" in update_topic, update_topic
    assert "create user to" in create_user and "success" in create_user, create_user
    assert "create acl to" in create_acl and "success" in create_acl, create_acl
    assert APP[0] in get_user and "Normal" in get_user and "enable" in get_user, get_user
    assert "Topic:Auth2" in list_acl and "Group:auth2_cg" in list_acl and "Allow" in list_acl, list_acl
    assert "success" not in refused[0], refused
    sends = [f for f in lines if f[0] == "SEND"]
    assert [f[1] for f in sends] == ["sync"] * N + ["batch"] and all(f[2] == "SEND_OK" for f in sends)
    got = {f[1] for f in lines if f[0] == "MSG"}
    assert got == {f"acl-{i}" for i in range(N)} | {"acl-batch-0", "acl-batch-1"}
    why = {f[1]: f[2] for f in lines if f[0] == "REFUSED"}
    assert "check signature failed." in why["wrong-secret"], why
    assert "username cannot be null." in why["unsigned"], why
