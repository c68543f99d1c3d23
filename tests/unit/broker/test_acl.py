"""Plain ACL on the broker, piece by piece: permissions, address patterns, the resources each
request code needs, the checks in RocketMQ's order, and the files' loading and rewriting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from bolide.broker.acl import PlainAcl, check_request, compile_pattern, needed_resources
from bolide.broker.acl.permissions import DENY, PUB, SUB, allows, parse_perm, parse_resource_perms
from bolide.errors import AclError, ConfigError
from bolide.protocol.bodies.admin import PlainAccessConfig
from bolide.protocol.bodies.client import ConsumerData, HeartbeatData, SubscriptionData
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting.hooks import AclClientRPCHook

ACL_YML = """\
# accounts of the tests
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: admin-key
    secretKey: 12345678
    admin: true
  - accessKey: app-key-1
    secretKey: app-secret
    whiteRemoteAddress: 192.168.0.{1,2}
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Orders=PUB|SUB
      - Audit=SUB
    groupPerms:
      - blocked-group=DENY
"""


@pytest.fixture
def acl(tmp_path: Path) -> PlainAcl:
    path = tmp_path / "conf" / "plain_acl.yml"
    path.parent.mkdir()
    path.write_text(ACL_YML)
    acl = PlainAcl(path)
    acl.load()
    return acl


def signed(code: int, ext: dict[str, str], access_key: str = "app-key-1",
           secret_key: str = "app-secret", body: bytes = b"") -> RemotingCommand:
    request = RemotingCommand.request(code, ext_fields=dict(ext), body=body)
    AclClientRPCHook(access_key, secret_key).before_request("broker:10911", request)
    return request


def test_permission_names_and_checks() -> None:
    assert [parse_perm(t) for t in ("PUB", "SUB", " PUB|SUB ", "SUB|PUB", "DENY", "ALL", None)] == [
        PUB, SUB, PUB | SUB, PUB | SUB, DENY, DENY, DENY]
    assert allows(PUB, PUB | SUB) and allows(SUB, SUB) and not allows(PUB, SUB)
    assert not allows(SUB, DENY | SUB)  # DENY wins
    assert parse_resource_perms(["g=SUB"], groups=True) == {"%RETRY%g": SUB}
    with pytest.raises(ConfigError, match="topicA=SUB"):
        parse_resource_perms(["no-permission"], groups=False)


@pytest.mark.parametrize(("pattern", "host", "expected"), [
    ("*", "1.2.3.4", True),
    ("", "1.2.3.4", False),
    ("192.168.0.10", "192.168.0.10", True),
    ("192.168.0.10", "192.168.0.11", False),
    ("192.168.0.10,192.168.0.11", "192.168.0.11", True),
    ("192.168.0.{1,2}", "192.168.0.2", True),
    ("192.168.0.{1,2}", "192.168.0.3", False),
    ("192.168.*.*", "192.168.77.1", True),
    ("192.168.*.*", "192.169.0.1", False),
    ("10.10.1-20.*", "10.10.20.255", True),
    ("10.10.1-20.*", "10.10.21.0", False),
    ("10.10.1.5-9", "10.10.1.9", True),
    ("::1", "0:0:0:0:0:0:0:1", True),
    ("1050:0:0:0:5:600:300c:*", "1050::5:600:300c:326b", True),
    ("1050:0:0:0:5:600:300c:1-ff", "1050::5:600:300c:100", False),
    ("192.168.*.*", "::1", False),
])
def test_address_patterns(pattern: str, host: str, expected: bool) -> None:
    assert compile_pattern(pattern).matches(host) is expected


@pytest.mark.parametrize("pattern", ["192.168.0", "300.1.1.1", "*.1.1.1", "10.1-5.7.8",
                                     "10.9-5.*.*", "1050::300c:*", "1.2.{3,4}.5"])
def test_address_patterns_rocketmq_refuses_are_config_errors(pattern: str) -> None:
    with pytest.raises(ConfigError, match="white remote address"):
        compile_pattern(pattern)


def test_the_resources_each_request_code_needs() -> None:
    def needs(code: int, ext: dict[str, str], body: bytes = b"") -> dict[str, int]:
        return needed_resources(RemotingCommand.request(code, ext_fields=ext, body=body))

    assert needs(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "Orders"}) == {"Orders": PUB}
    assert needs(RequestCode.SEND_BATCH_MESSAGE, {"a": "pg", "b": "Orders"}) == {"Orders": PUB}
    assert needs(RequestCode.SEND_MESSAGE_V2, {"a": "cg", "b": "%RETRY%cg"}) == {"%RETRY%cg": SUB}
    assert needs(RequestCode.SEND_MESSAGE, {"producerGroup": "pg", "topic": "%RETRY%cg"}) == {}
    assert needs(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "cg"}) == {
        "T": SUB, "%RETRY%cg": SUB}
    assert needs(RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "T", "consumerGroup": "cg"}) == {
        "T": SUB, "%RETRY%cg": SUB}
    for pop_code in (RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE,
                     RequestCode.CHANGE_MESSAGE_INVISIBLETIME):
        assert needs(pop_code, {"topic": "T", "consumerGroup": "cg"}) == {"T": SUB, "%RETRY%cg": SUB}
    assert needs(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "cg"}) == {"%RETRY%cg": SUB}
    assert needs(RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "pg"}) == {}
    assert needs(RequestCode.QUERY_MESSAGE, {"topic": "T"}) == {"T": SUB}
    assert needs(RequestCode.GET_BROKER_RUNTIME_INFO, {}) == {}
    heartbeat = HeartbeatData(client_id="c", consumer_data_set=[ConsumerData(
        group_name="cg", subscription_data_set=[SubscriptionData(topic="T1"),
                                                SubscriptionData(topic="%RETRY%cg")])])
    assert needs(RequestCode.HEART_BEAT, {}, heartbeat.encode()) == {"%RETRY%cg": SUB, "T1": SUB}
    with pytest.raises(AclError, match="cannot read the heartbeat"):
        needs(RequestCode.HEART_BEAT, {}, b"{not json")


def test_checks_in_rocketmq_order(acl: PlainAcl) -> None:
    state = acl.state
    unsigned = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext_fields={"b": "Orders"})
    check_request(state, "10.10.103.7:5000", unsigned)  # global white list: nothing else checked
    with pytest.raises(AclError, match=r"^No accessKey is configured"):
        check_request(state, "127.0.0.1:5000", unsigned)
    with pytest.raises(AclError, match=r"^No acl config for stranger"):
        check_request(state, "127.0.0.1:5000", signed(10, {"topic": "Orders"}, "stranger", "x" * 8))
    wrong = signed(RequestCode.SEND_MESSAGE_V2, {"b": "Secret"}, secret_key="not-the-secret")
    with pytest.raises(AclError, match=r"^Check signature failed for accessKey=app-key-1"):
        check_request(state, "127.0.0.1:5000", wrong)
    check_request(state, "192.168.0.2:5000", wrong)  # the account's white list skips the rest

    send = signed(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "Orders"}, body=b"body")
    check_request(state, "127.0.0.1:5000", send)
    send.body = b"tampered"
    with pytest.raises(AclError, match="Check signature failed"):
        check_request(state, "127.0.0.1:5000", send)
    for topic, why in (("Audit", "No default permission for topic:Audit"),  # SUB only
                       ("Other", "No default permission for topic:Other")):  # default DENY
        with pytest.raises(AclError, match=rf"^{why}: accessKey=app-key-1 needs PUB"):
            check_request(state, "127.0.0.1:5000", signed(310, {"a": "pg", "b": topic}))
    pull = {"topic": "Audit", "consumerGroup": "any-group"}
    check_request(state, "127.0.0.1:5000", signed(RequestCode.PULL_MESSAGE, pull))
    with pytest.raises(AclError, match=r"^No default permission for group:blocked-group"):
        check_request(state, "127.0.0.1:5000", signed(
            RequestCode.PULL_MESSAGE, {**pull, "consumerGroup": "blocked-group"}))
    trace = signed(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "RMQ_SYS_TRACE_TOPIC"})
    check_request(state, "127.0.0.1:5000", trace)  # traces go through whatever the topic's perms

    create = {"topic": "New", "defaultTopic": "TBW102", "readQueueNums": "1",
              "writeQueueNums": "1", "perm": "6"}
    with pytest.raises(AclError, match=r"^Need admin permission for request code=17"):
        check_request(state, "127.0.0.1:5000", signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create))
    check_request(state, "127.0.0.1:5000", signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create,
                                                  "admin-key", "12345678"))
    check_request(state, "127.0.0.1:5000", signed(RequestCode.SEND_MESSAGE_V2, {"b": "Anything"},
                                                  "admin-key", "12345678"))
    # RocketMQ 5's changes of how groups are served: a read ban, cold data thresholds, read mode
    for code, fields in ((RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN, {"group": "g", "topic": "Audit"}),
                         (RequestCode.UPDATE_COLD_DATA_FLOW_CTR_CONFIG, {}),
                         (RequestCode.REMOVE_COLD_DATA_FLOW_CTR_CONFIG, {}),
                         (RequestCode.SET_COMMITLOG_READ_MODE, {"readMode": "1"})):
        with pytest.raises(AclError, match=rf"^Need admin permission for request code={int(code)}"):
            check_request(state, "127.0.0.1:5000", signed(code, fields))
        check_request(state, "127.0.0.1:5000", signed(code, fields, "admin-key", "12345678"))


def test_signature_variants_of_other_clients_are_accepted(acl: PlainAcl) -> None:
    """5.x clients sign _UNIQUE_KEY_QUERY too; the Go client leaves SecurityToken out."""
    from bolide.remoting.hooks import acl_signature

    ext = {"topic": "Audit", "key": "k", "_UNIQUE_KEY_QUERY": "true", "AccessKey": "app-key-1"}
    request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext_fields=dict(ext))
    request.ext_fields["Signature"] = acl_signature("app-secret", ext, b"", {"Signature"})
    check_request(acl.state, "127.0.0.1:1", request)
    ext = {"topic": "Audit", "key": "k", "AccessKey": "app-key-1", "SecurityToken": "tok"}
    request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext_fields=dict(ext))
    request.ext_fields["Signature"] = acl_signature(
        "app-secret", {k: v for k, v in ext.items() if k != "SecurityToken"})
    check_request(acl.state, "127.0.0.1:1", request)


def test_admin_changes_rewrite_the_files_and_bump_their_versions(acl: PlainAcl) -> None:
    before = acl.main_version()
    acl.update_account(PlainAccessConfig(access_key="new-account", secret_key="new-secret",
                                         default_topic_perm="PUB", topic_perms=["Orders=SUB"]))
    data = yaml.safe_load(acl.main_file.read_text())
    assert [a["accessKey"] for a in data["accounts"]] == ["admin-key", "app-key-1", "new-account"]
    assert data["dataVersion"][0]["counter"] == before.counter + 1
    assert acl.main_version().counter == before.counter + 1
    account = acl.state.accounts["new-account"]
    assert account.perms == {"Orders": SUB} and account.default_topic_perm == PUB

    # a change keeps what it does not set (RocketMQ's merge) and the file's other accounts
    acl.update_account(PlainAccessConfig(access_key="app-key-1", secret_key="app-secret-2",
                                         admin=False))
    account = acl.state.accounts["app-key-1"]
    assert account.secret_key == "app-secret-2" and account.perms["Audit"] == SUB
    with pytest.raises(ConfigError, match="length should longer than 6"):
        acl.update_account(PlainAccessConfig(access_key="short", secret_key="12345678"))
    with pytest.raises(ConfigError, match="Parse resource permission error"):
        acl.update_account(PlainAccessConfig(access_key="new-account", secret_key="new-secret",
                                             topic_perms=["T=ALL"]))

    assert acl.delete_account("new-account") and "new-account" not in acl.state.accounts
    assert not acl.delete_account("new-account")
    acl.update_global_white(["127.0.0.*", " "])
    assert [p.text for p in acl.state.global_white] == ["127.0.0.*"]
    with pytest.raises(ConfigError, match="white remote address"):
        acl.update_global_white(["300.0.0.1"])
    with pytest.raises(ConfigError, match="not one of this broker's ACL files"):
        acl.update_global_white(["127.0.0.1"], str(acl.main_file.parent / "other.yml"))


def test_files_in_the_acl_directory_and_reloads(acl: PlainAcl) -> None:
    extra = acl.acl_dir / "team" / "more.yaml"
    extra.parent.mkdir(parents=True)
    extra.write_text("accounts:\n  - accessKey: team-account\n    secretKey: team-secret\n"
                     "  - accessKey: admin-key\n    secretKey: elsewhere\n")
    assert acl.reload_if_changed()
    assert acl.state.accounts["team-account"].source == extra
    # as in RocketMQ the acl/ files are read before the main one: the first definition counts
    assert acl.state.accounts["admin-key"].secret_key == "elsewhere"
    assert not acl.reload_if_changed()

    good = acl.state
    extra.write_text("accounts: [ {accessKey: team-account\n")  # broken YAML
    os.utime(extra, ns=(1, 1))
    assert not acl.reload_if_changed()
    assert acl.state is good  # the accounts stay as they were
    extra.write_text("accounts:\n  - accessKey: team-account\n    secretKey: short\n")
    with pytest.raises(ConfigError, match=r"more\.yaml: The accessKey=team-account"):
        acl.load()
    extra.unlink()
    assert acl.reload_if_changed() and "team-account" not in acl.state.accounts
