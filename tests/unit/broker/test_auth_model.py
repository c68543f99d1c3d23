"""ACL 2.0's model and checks without a server: resources, the entry that decides (with
RocketMQ 5.3's ordering, quirks included), what each request code touches, the metadata's
validation and refusal texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.broker.auth.checks import authenticate, authorize, wanted_resources
from bolide.broker.auth.metadata import AuthMetadata, AuthRefused
from bolide.broker.auth.model import (
    ALLOW,
    DENY,
    Acl,
    Policy,
    PolicyEntry,
    Resource,
    deciding_entry,
    java_small_sort,
)
from bolide.protocol.bodies.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from bolide.protocol.bodies.client import ConsumerData, HeartbeatData, SubscriptionData
from bolide.protocol.command import RemotingCommand


def test_resources_parse_print_and_cover() -> None:
    assert Resource.parse("*") == Resource("Any", None, "ANY")
    assert Resource.parse("topic:orders") == Resource("Topic", "orders", "LITERAL")
    assert Resource.parse("Group:app*").key == "Group:app*"
    assert Resource.parse("Topic:*").key == "Topic:*"
    assert Resource.parse("Topic:a*b") == Resource("Topic", "a*b", "LITERAL")
    assert Resource.parse("Queue:x") is None and Resource.parse(" ") is None
    orders = Resource.literal("Topic", "orders")
    assert Resource.parse("*").covers(Resource.literal("Group", "g"))
    assert Resource.parse("Topic:ord*").covers(orders)
    assert not Resource.parse("Group:ord*").covers(orders)
    assert not Resource.parse("Topic:order").covers(orders)


def _entry(resource: str, decision: str, actions: tuple[str, ...] = ("Pub",),
           ips: list[str] | None = None) -> PolicyEntry:
    found = Resource.parse(resource)
    assert found is not None
    return PolicyEntry(found, list(actions), decision, ips)


def _decide(*entries: PolicyEntry, resource: str = "Topic:foo", ip: str = "10.1.2.3") -> str | None:
    wanted = Resource.parse(resource)
    assert wanted is not None
    entry = deciding_entry(Acl("User:u", [Policy("Custom", list(entries))]), wanted, ("Pub",), ip)
    return None if entry is None else entry.decision


def test_the_deciding_entry_follows_rocketmq_order_even_where_it_depends_on_storage_order() -> None:
    """RocketMQ 5.3's comparator is not an order: its sort's outcome depends on where the
    entries are stored, and a shorter prefix wins over a longer one."""
    assert _decide(_entry("Topic:*", ALLOW), _entry("Topic:foo", DENY)) == DENY
    assert _decide(_entry("Topic:foo", DENY), _entry("Topic:*", ALLOW)) == ALLOW
    assert _decide(_entry("Topic:f*", DENY), _entry("Topic:foo*", ALLOW)) == DENY
    assert _decide(_entry("*", DENY), _entry("Topic:foo", ALLOW)) == ALLOW
    assert _decide(_entry("Topic:foo", ALLOW), _entry("Topic:foo", DENY)) == ALLOW
    assert _decide(_entry("Topic:bar", ALLOW)) is None
    assert _decide(_entry("Topic:foo", ALLOW, ("Sub",))) is None  # no action in common
    assert _decide(_entry("Topic:foo", ALLOW, ("All",))) == ALLOW
    assert _decide(_entry("Topic:foo", ALLOW, ips=["10.0.0.0/8"])) == ALLOW
    assert _decide(_entry("Topic:foo", ALLOW, ips=["10.1.2.4"])) is None


def test_java_small_sort_is_a_run_then_binary_insertion() -> None:
    items = [5, 1, 4, 2, 3, 3, 0]
    java_small_sort(items, lambda a, b: (a > b) - (a < b))  # type: ignore[arg-type]
    assert items == sorted(items)
    desc = [9, 8, 7, 1]
    java_small_sort(desc, lambda a, b: (a > b) - (a < b))  # type: ignore[arg-type]
    assert desc == [1, 7, 8, 9]


def test_the_default_policy_counts_only_when_no_custom_entry_matches() -> None:
    acl = Acl("User:u", [Policy("Custom", [_entry("Topic:bar", DENY)]),
                         Policy("Default", [_entry("Topic:*", ALLOW)])])
    foo, bar = Resource.literal("Topic", "foo"), Resource.literal("Topic", "bar")
    assert deciding_entry(acl, foo, ("Pub",), "1.2.3.4").decision == ALLOW  # type: ignore[union-attr]
    assert deciding_entry(acl, bar, ("Pub",), "1.2.3.4").decision == DENY  # type: ignore[union-attr]


def _request(code: int, body: bytes = b"", **ext: str) -> RemotingCommand:
    request = RemotingCommand(code=code, body=body)
    request.ext_fields.update(ext)
    return request


def _keys(request: RemotingCommand) -> list[tuple[str, tuple[str, ...]]]:
    return [(r.key, actions) for r, actions in wanted_resources(request, "C1")]


def test_what_each_request_touches() -> None:
    assert _keys(_request(310, b="T", a="P")) == [("Topic:T", ("Pub",))]
    assert _keys(_request(310, b="%RETRY%g", a="g")) == [("Group:g", ("Sub",))]
    assert _keys(_request(11, topic="T", consumerGroup="g")) == [("Topic:T", ("Sub",)), ("Group:g", ("Sub",))]
    assert _keys(_request(15, topic="%RETRY%g", consumerGroup="g")) == [("Group:g", ("Sub", "Update"))]
    assert _keys(_request(17, topic="T")) == [("Topic:T", ("Create",))]
    assert _keys(_request(215, topic="T")) == [("Topic:T", ("Delete",))]
    assert _keys(_request(3001, username="u")) == [("Cluster:C1", ("Update",))]
    assert _keys(_request(208, consumerGroup="g", topicList="A;B")) == [
        ("Group:g", ("Get",)), ("Topic:A", ("Get",)), ("Topic:B", ("Get",))]
    assert _keys(_request(37)) == []  # END_TRANSACTION of an old client: no topic, no check
    assert _keys(_request(25)) == []  # UPDATE_BROKER_CONFIG: RocketMQ 5.3 does not check it
    heartbeat = HeartbeatData(client_id="c", consumer_data_set=[ConsumerData(
        group_name="g", subscription_data_set=[SubscriptionData(topic="T"),
                                               SubscriptionData(topic="%RETRY%g")])])
    assert _keys(_request(34, heartbeat.encode())) == [("Group:g", ("Sub",)), ("Topic:T", ("Sub",))]
    with pytest.raises(AuthRefused, match="parse authorization context error"):
        wanted_resources(_request(34, b"not json"), "C1")


def _metadata(tmp_path: Path) -> AuthMetadata:
    metadata = AuthMetadata(tmp_path / "authMetadata.json")
    metadata.create_user(UserInfo(username="root", password="rootpw", user_type="super"))
    metadata.create_user(UserInfo(username="app", password="apppw"))
    return metadata


def test_authentication_texts(tmp_path: Path) -> None:
    metadata = _metadata(tmp_path)
    authenticate(metadata, "app", lambda pw: pw == "apppw")
    for key, signed, text in ((None, True, "username cannot be null."),
                              ("nobody", True, "User:nobody is not found."),
                              ("app", False, "check signature failed.")):
        with pytest.raises(AuthRefused) as refused:
            authenticate(metadata, key, lambda pw, ok=signed: ok)
        assert str(refused.value) == text
    metadata.update_user(UserInfo(username="app", user_status="disable"))
    with pytest.raises(AuthRefused, match=r"^User:app is disabled\.$"):
        authenticate(metadata, "app", lambda pw: True)


def test_authorization_texts_and_super_users(tmp_path: Path) -> None:
    metadata = _metadata(tmp_path)
    topic = [(Resource.literal("Topic", "T"), ("Pub",))]
    authorize(metadata, "root", topic, "127.0.0.1:5000")  # a super user needs no ACL
    with pytest.raises(AuthRefused) as refused:
        authorize(metadata, "app", topic, "127.0.0.1:5000")
    assert str(refused.value) == ("User:app has no permission to access Topic:T from 127.0.0.1, "
                                  "no matched policies.")
    metadata.put_acl(AclInfo(subject="User:app", policies=[PolicyInfo(entries=[
        PolicyEntryInfo(resource="Topic:T", actions=["Pub"], decision="Deny")])]), None)
    with pytest.raises(AuthRefused, match="the decision is deny"):
        authorize(metadata, "app", topic, "127.0.0.1:5000")
    metadata.put_acl(AclInfo(subject="User:app", policies=[PolicyInfo(entries=[
        PolicyEntryInfo(resource="Topic:T", actions=["Pub", "Sub"], decision="Allow")])]), None)
    authorize(metadata, "app", topic, "127.0.0.1:5000")  # the entry on Topic:T was replaced
    assert len(metadata.acls["User:app"].policies[0].entries) == 1


def test_acl_validation_texts(tmp_path: Path) -> None:
    metadata = _metadata(tmp_path)

    def put(subject: str = "User:app", **entry: object) -> None:
        fields = {"resource": "Topic:T", "actions": ["Pub"], "decision": "Allow", **entry}
        metadata.put_acl(AclInfo(subject=subject, policies=[PolicyInfo(
            entries=[PolicyEntryInfo(**fields)])]), None)  # type: ignore[arg-type]

    for kwargs, text in (({"resource": "Queue:x"}, "The resource is null."),
                         ({"actions": ["Jump"]}, "The actions is empty."),
                         ({"actions": ["Any"]}, "The actions can not be Any."),
                         ({"source_ips": ["300.1.1.1"]}, "The source ip is invalid."),
                         ({"decision": "Maybe"}, "The decision is null or illegal."),
                         ({"subject": "User:ghost"}, "The subject of User:ghost is not exist.")):
        with pytest.raises(AuthRefused) as refused:
            put(**kwargs)
        assert str(refused.value) == text
    with pytest.raises(AuthRefused, match="The user is existed"):
        metadata.create_user(UserInfo(username="app", password="x"))


def test_metadata_survives_a_reload_and_deletes_cascade(tmp_path: Path) -> None:
    metadata = _metadata(tmp_path)
    metadata.put_acl(AclInfo(subject="User:app", policies=[
        PolicyInfo(entries=[PolicyEntryInfo(resource="Topic:T", actions=["Pub"], decision="Allow",
                                            source_ips=["10.0.0.0/8"])]),
        PolicyInfo(policy_type="Default", entries=[
            PolicyEntryInfo(resource="Group:*", actions=["Sub"], decision="Deny")])]), None)
    metadata.persist()
    again = AuthMetadata(metadata.path)
    assert again.load()
    assert again.users == metadata.users and again.acls == metadata.acls
    assert [a.subject for a in again.list_acls(None, "Group")] == ["User:app"]
    assert again.list_acls(None, "Group")[0].policies[0].policy_type == "Default"
    again.delete_acl("User:app", "Default", "Group:*")
    assert [p.policy_type for p in again.acls["User:app"].policies] == ["Custom"]
    again.delete_user("app")
    assert "User:app" not in again.acls and [u.username for u in again.list_users(None)] == ["root"]


def test_plain_acl_accounts_migrate_as_rocketmq_migrates_them() -> None:
    from bolide.broker.auth.migrate import migrated
    from bolide.protocol.bodies.admin import PlainAccessConfig

    user, acl = migrated(PlainAccessConfig(
        access_key="orders-svc", secret_key="s3cret", default_topic_perm="DENY",
        default_group_perm="SUB", topic_perms=["Orders=PUB|SUB", "Audit=SUB"],
        group_perms=["orders-cg=SUB"]))
    assert (user.username, user.password, user.user_type) == ("orders-svc", "s3cret", "Normal")
    assert acl is not None and acl.subject == "User:orders-svc"
    custom, default = acl.policies  # type: ignore[misc]
    assert [(e.resource, e.actions, e.decision) for e in custom.entries] == [  # type: ignore[union-attr]
        ("Topic:Orders", ["Pub", "Sub"], "Allow"), ("Topic:Audit", ["Sub"], "Allow"),
        ("Group:orders-cg", ["Sub"], "Allow")]
    assert default.policy_type == "Default" and [(e.resource, e.actions, e.decision)  # type: ignore[union-attr]
                                                  for e in default.entries] == [
        ("Topic:*", ["All"], "Deny"), ("Group:*", ["Sub"], "Allow")]
    admin, none = migrated(PlainAccessConfig(access_key="ops", secret_key="s3cret-ops", admin=True))
    assert admin.user_type == "Super" and none is None
