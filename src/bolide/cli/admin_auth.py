"""``bolide admin`` commands for ACL 2.0 (brokers with ``authenticationEnabled`` /
``authorizationEnabled``, Bolide's or RocketMQ 5.3's): createUser, updateUser, deleteUser,
getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl and listAcl, with mqadmin 5's
options. Sign them as a super user: ``bolide admin --access-key USER --secret-key PASSWORD``."""

from __future__ import annotations

import click

from bolide.cli.admin_common import admin_options, emit, table, target_options, with_admin
from bolide.protocol.bodies.auth import AclInfo, UserInfo

USER_TYPES = click.Choice(["Super", "Normal"], case_sensitive=False)
USER_STATUSES = click.Choice(["enable", "disable"], case_sensitive=False)


def _list(text: str | None) -> list[str]:
    return [] if text is None else [item.strip() for item in text.split(",") if item.strip()]


def _done(output: str, what: str, doc: dict[str, object], addrs: list[str]) -> None:
    emit(output, {**doc, "brokers": addrs}, table(what, ["broker"], ([a] for a in addrs)))


def _users(output: str, users: list[UserInfo]) -> None:
    emit(output, [u.to_json_obj() for u in users],
         table("Users", ["username", "password", "userType", "userStatus"],
               ([u.username, u.password, u.user_type, u.user_status] for u in users)))


def _acls(output: str, acls: list[AclInfo]) -> None:
    rows = [[a.subject, p.policy_type or "Custom", e.resource, ",".join(e.actions or ()),
             ",".join(e.source_ips or ()), e.decision]
            for a in acls for p in a.policies or () for e in p.entries or ()]
    emit(output, [a.to_json_obj() for a in acls],
         table("ACLs", ["subject", "policyType", "resource", "actions", "sourceIps", "decision"], rows))


@click.command("createUser")
@admin_options
@target_options
@click.option("-u", "--username", required=True, help="The user's name (its access key).")
@click.option("-p", "--password", required=True, help="Its password (the secret key it signs with).")
@click.option("-t", "--user-type", type=USER_TYPES, help="Super (every check passes) or Normal (default).")
def create_user(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                username: str, password: str, user_type: str | None) -> None:
    """Create an ACL 2.0 user on brokers (3001)."""
    addrs = with_admin(namesrv, lambda admin: admin.create_user(
        username, password, user_type, broker_addr=broker_addr, cluster=cluster))
    _done(output, f"User {username} created", {"username": username}, addrs)


@click.command("updateUser")
@admin_options
@target_options
@click.option("-u", "--username", required=True, help="The user to change.")
@click.option("-p", "--password", help="A new password.")
@click.option("-t", "--user-type", type=USER_TYPES, help="A new type.")
@click.option("-s", "--user-status", type=USER_STATUSES, help="enable or disable.")
def update_user(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                username: str, password: str | None, user_type: str | None,
                user_status: str | None) -> None:
    """Change a user's password, type or status on brokers (3002); others are kept."""
    if password is None and user_type is None and user_status is None:
        raise click.UsageError("give at least one of --password, --user-type, --user-status")
    addrs = with_admin(namesrv, lambda admin: admin.update_user(
        username, password=password, user_type=user_type, user_status=user_status,
        broker_addr=broker_addr, cluster=cluster))
    _done(output, f"User {username} updated", {"username": username}, addrs)


@click.command("deleteUser")
@admin_options
@target_options
@click.option("-u", "--username", required=True, help="The user to delete (with its ACL).")
def delete_user(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                username: str) -> None:
    """Delete a user and its ACL from brokers (3003)."""
    addrs = with_admin(namesrv, lambda admin: admin.delete_user(
        username, broker_addr=broker_addr, cluster=cluster))
    _done(output, f"User {username} deleted", {"username": username}, addrs)


@click.command("getUser")
@admin_options
@target_options
@click.option("-u", "--username", required=True, help="The user to show.")
def get_user(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
             username: str) -> None:
    """A user as the (first) broker has it (3004)."""
    found = with_admin(namesrv, lambda admin: admin.get_user(
        username, broker_addr=broker_addr, cluster=cluster))
    if found is None:
        raise click.ClickException(f"no user {username!r} on that broker: create it with createUser")
    _users(output, [found])


@click.command("listUser")
@admin_options
@target_options
@click.option("-f", "--filter", "name_part", help="Only users whose names contain this.")
def list_user(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
              name_part: str | None) -> None:
    """The users of the (first) broker (3005)."""
    _users(output, with_admin(namesrv, lambda admin: admin.list_users(
        name_part, broker_addr=broker_addr, cluster=cluster)))


def _acl_options(fn):  # type: ignore[no-untyped-def]
    for option in reversed((
            click.option("-s", "--subject", required=True, help="User:<name>"),
            click.option("-r", "--resources", required=True,
                         help="Comma-separated: Topic:orders, Group:app*, Cluster:c, *"),
            click.option("-a", "--actions", required=True,
                         help="Comma-separated: Pub, Sub, Create, Update, Delete, Get, List, All"),
            click.option("-d", "--decision", required=True,
                         type=click.Choice(["Allow", "Deny"], case_sensitive=False)),
            click.option("-i", "--source-ips", help="Comma-separated IPs or CIDRs (default: any)."))):
        fn = option(fn)
    return fn


def _put_acl(update: bool, namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
             subject: str, resources: str, actions: str, decision: str, source_ips: str | None) -> None:
    addrs = with_admin(namesrv, lambda admin: admin.put_acl(
        subject, _list(resources), _list(actions), decision, _list(source_ips) or None,
        update=update, broker_addr=broker_addr, cluster=cluster))
    _done(output, f"ACL of {subject} {'updated' if update else 'created'}",
          {"subject": subject, "resources": _list(resources)}, addrs)


@click.command("createAcl")
@admin_options
@target_options
@_acl_options
def create_acl(**options: str) -> None:
    """Add entries to a user's ACL on brokers (3006): one per resource."""
    _put_acl(False, **options)  # type: ignore[arg-type]


@click.command("updateAcl")
@admin_options
@target_options
@_acl_options
def update_acl(**options: str) -> None:
    """Replace or add entries of a user's ACL on brokers (3007)."""
    _put_acl(True, **options)  # type: ignore[arg-type]


@click.command("deleteAcl")
@admin_options
@target_options
@click.option("-s", "--subject", required=True, help="User:<name>")
@click.option("-r", "--resource", help="Only this entry (default: the whole ACL).")
def delete_acl(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
               subject: str, resource: str | None) -> None:
    """Delete a user's ACL, or one of its entries, from brokers (3008)."""
    addrs = with_admin(namesrv, lambda admin: admin.delete_acl(
        subject, resource, broker_addr=broker_addr, cluster=cluster))
    _done(output, f"ACL of {subject} deleted", {"subject": subject, "resource": resource}, addrs)


@click.command("getAcl")
@admin_options
@target_options
@click.option("-s", "--subject", required=True, help="User:<name>")
def get_acl(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
            subject: str) -> None:
    """A user's ACL on the (first) broker (3009)."""
    found = with_admin(namesrv, lambda admin: admin.get_acl(
        subject, broker_addr=broker_addr, cluster=cluster))
    _acls(output, [] if found is None else [found])


@click.command("listAcl")
@admin_options
@target_options
@click.option("-s", "--subject", "subject_part", help="Only subjects containing this.")
@click.option("-r", "--resource", "resource_part", help="Only entries whose resource contains this.")
def list_acl(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
             subject_part: str | None, resource_part: str | None) -> None:
    """The ACLs of the (first) broker (3010)."""
    _acls(output, with_admin(namesrv, lambda admin: admin.list_acls(
        subject_part, resource_part, broker_addr=broker_addr, cluster=cluster)))


@click.command("copyUser")
@admin_options
@click.option("-f", "--from-broker", required=True, help="The broker to copy from (host:port).")
@click.option("-t", "--to-broker", required=True, help="The broker to copy to (host:port).")
@click.option("-u", "--usernames", help="Comma-separated users (default: all of them).")
def copy_user(namesrv: str, output: str, from_broker: str, to_broker: str, usernames: str | None) -> None:
    """Copy users, passwords included, from one broker to another (users are per broker)."""
    names = with_admin(namesrv, lambda admin: admin.copy_users(
        from_broker, to_broker, _list(usernames) if usernames else None))
    _copied(output, "Users", from_broker, to_broker, "username", names)


@click.command("copyAcl")
@admin_options
@click.option("-f", "--from-broker", required=True, help="The broker to copy from (host:port).")
@click.option("-t", "--to-broker", required=True, help="The broker to copy to (host:port).")
@click.option("-s", "--subjects", help="Comma-separated User:<name> (default: every ACL).")
def copy_acl(namesrv: str, output: str, from_broker: str, to_broker: str, subjects: str | None) -> None:
    """Copy ACLs from one broker to another, merged into the target's (its users must exist)."""
    copied = with_admin(namesrv, lambda admin: admin.copy_acls(
        from_broker, to_broker, _list(subjects) if subjects else None))
    _copied(output, "ACLs", from_broker, to_broker, "subject", copied)


def _copied(output: str, what: str, from_broker: str, to_broker: str, column: str, names: list[str]) -> None:
    """What copyUser / copyAcl copied: JSON ``{"from", "to", "<column>s": [...]}`` or a table."""
    emit(output, {"from": from_broker, "to": to_broker, f"{column}s": names},
         table(f"{what} copied from {from_broker} to {to_broker}", [column], ([n] for n in names)))


COMMANDS = [create_user, update_user, delete_user, get_user, list_user, create_acl, update_acl,
            delete_acl, get_acl, list_acl, copy_user, copy_acl]
