"""Plain ACL on a Bolide broker (``aclEnable=true``) with the accounts file the interop tests'
RocketMQ brokers use (``interop/rocketmq/home/conf/plain_acl.yml``, copied): the official Java
(4.9.7, 5.3.3) and Go clients signing with AclClientRPCHook / WithCredentials send, batch and
consume, and get RocketMQ's refusals for a wrong secret or no signature; the Python client
meets the same answers as from RocketMQ 4.9.7 (test_client_against_rocketmq.py); mqadmin
4.9.7's ACL commands change the accounts, and 5.3.3's mqadmin signs through conf/tools.yml.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml
from client_roundtrip import acl_admin_scenario, acl_scenario, run_driver, unavailable, with_servers

from bolide.client import Admin, ClientConfig
from bolide.testing.goclient import go_client_binary, go_env
from bolide.testing.rocketmq import (
    JAVA_SCENARIOS_MAIN,
    RocketMQ,
    RocketMQUnavailable,
    interop_dir,
    java_client_command,
)
from bolide.testing.servers import Servers

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

ADMIN = ("bolide-admin", "bolide-admin-secret")
N = 4


def accounts(tmp_path: Path) -> Path:
    """A copy of the RocketMQ interop brokers' plain_acl.yml (ACL admin requests rewrite it)."""
    path = tmp_path / "conf" / "plain_acl.yml"
    path.parent.mkdir(parents=True)
    shutil.copy(interop_dir() / "rocketmq" / "home" / "conf" / "plain_acl.yml", path)
    return path


def with_acl(tmp_path: Path, test: object) -> object:
    return with_servers(tmp_path, test, acl_enable=True,  # type: ignore[arg-type]
                        acl_file=str(accounts(tmp_path)))


async def create(s: Servers, topic: str) -> None:
    async with Admin(ClientConfig(s.namesrv_addr, access_key=ADMIN[0], secret_key=ADMIN[1])) as admin:
        await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)


def check_driver_lines(lines: list[list[str]]) -> None:
    sends = [f for f in lines if f[0] == "SEND"]
    assert [f[1] for f in sends] == ["sync"] * N + ["batch"]
    assert all(f[2] == "SEND_OK" for f in sends)
    got = {f[1] for f in lines if f[0] == "MSG"}
    assert got == {f"acl-{i}" for i in range(N)} | {"acl-batch-0", "acl-batch-1"}
    refused = {f[1]: f[2] for f in lines if f[0] == "REFUSED"}
    assert "Check signature failed for accessKey=bolide-admin" in refused["wrong-secret"]
    assert "No accessKey is configured" in refused["unsigned"]


def test_python_client_meets_the_answers_of_rocketmq(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await acl_scenario(s.namesrv_addr, "ItAcl")
        await acl_admin_scenario(s.namesrv_addr, "ItAcl")

    with_acl(tmp_path, test)


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_java_client_signs_for_bolide(tmp_path: Path, version: str) -> None:
    try:
        java = java_client_command(version, home=tmp_path / "jhome", main=JAVA_SCENARIOS_MAIN)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")

    async def test(s: Servers) -> list[list[str]]:
        await create(s, "JavaAcl")
        return await run_driver([*java, "acl", s.namesrv_addr, "JavaAcl", "java_acl_cg", str(N),
                                 *ADMIN, "60"], tmp_path / "acl.log",
                                prefixes=("SEND", "MSG", "REFUSED"))

    check_driver_lines(with_acl(tmp_path, test))  # type: ignore[arg-type]


def test_go_client_signs_for_bolide(tmp_path: Path) -> None:
    try:
        go, env = [str(go_client_binary())], go_env(home=tmp_path / "goclient-home")
    except RocketMQUnavailable as exc:
        unavailable(f"Go client unavailable: {exc}")

    async def test(s: Servers) -> list[list[str]]:
        await create(s, "GoAcl")
        return await run_driver([*go, "acl", s.namesrv_addr, "GoAcl", "go_acl_cg", str(N), *ADMIN,
                                 "60"], tmp_path / "acl.log", env, prefixes=("SEND", "MSG", "REFUSED"))

    check_driver_lines(with_acl(tmp_path, test))  # type: ignore[arg-type]


def test_mqadmin_acl_commands_against_bolide(tmp_path: Path) -> None:
    try:
        signed = RocketMQ("4.9.7", tmp_path / "mqadmin", tools_account=ADMIN)
        signed5 = RocketMQ("5.3.3", tmp_path / "mqadmin5", tools_account=ADMIN)
        unsigned = RocketMQ("4.9.7", tmp_path / "mqadmin-unsigned")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    path = accounts(tmp_path / "acl")

    async def test(s: Servers) -> tuple[list[str], list[str], list[str], dict]:
        b = s.broker_addr
        for rmq in (signed, signed5, unsigned):
            rmq.namesrv_port = s.namesrv.port
        changes = [["updateTopic", "-b", b, "-t", "MqAcl", "-r", "2", "-w", "2"],
                   ["updateAclConfig", "-b", b, "-a", "mq-writer", "-s", "mq-writer-secret",
                    "-i", "DENY", "-u", "SUB", "-t", "MqAcl=PUB", "-m", "false"],
                   ["getAclConfig", "-b", b],
                   ["clusterAclConfigVersion", "-b", b],
                   ["updateGlobalWhiteAddr", "-b", b, "-g", "10.1.2.*,10.1.3.*"]]
        out = await asyncio.to_thread(signed.mqadmin_batch, changes)
        written = yaml.safe_load(path.read_text())
        out += await asyncio.to_thread(signed.mqadmin_batch,
                                       [["deleteAclConfig", "-b", b, "-a", "mq-writer"]])
        out5 = await asyncio.to_thread(signed5.mqadmin_batch,
                                       [["updateTopic", "-b", b, "-t", "MqAcl5", "-r", "1", "-w", "1"]])
        refused = await asyncio.to_thread(unsigned.mqadmin_batch,
                                          [["updateTopic", "-b", b, "-t", "MqRefused"]])
        assert s.broker.topics.get("MqAcl") is not None and s.broker.topics.get("MqAcl5") is not None
        assert s.broker.topics.get("MqRefused") is None
        assert s.broker.acl is not None and "mq-writer" not in s.broker.acl.state.accounts
        return out, out5, refused, written

    out, out5, refused, written = with_servers(tmp_path, test, acl_enable=True, acl_file=str(path))
    update_topic, update_acl, get_acl, versions, white, delete = out
    assert "create topic to" in update_topic and "success" in update_topic, update_topic
    assert "create or update plain access config to" in update_acl and "success" in update_acl, update_acl
    writer = next(a for a in written["accounts"] if a["accessKey"] == "mq-writer")
    assert writer["topicPerms"] == ["MqAcl=PUB"] and writer["defaultTopicPerm"] == "DENY"
    assert "mq-writer" in get_acl and "bolide-reader" in get_acl, get_acl
    assert "get broker's plain access config version success" in versions, versions
    assert "update global white remote addresses to" in white and "success" in white, white
    assert written["globalWhiteRemoteAddresses"] == ["10.1.2.*", "10.1.3.*"]
    assert "delete plain access config account from" in delete and "success" in delete, delete
    assert "create topic to" in out5[0] and "success" in out5[0], out5
    assert "success" not in refused[0], refused  # mqadmin prints the refusal on stderr
