"""``bolide admin`` commands for plain ACL (brokers with ``aclEnable=true``): updateAclConfig,
deleteAclConfig, updateGlobalWhiteAddr, clusterAclConfigVersion and getAclConfig, with
mqadmin's options. They need an admin account: ``bolide admin --access-key AK --secret-key SK``."""

from __future__ import annotations

import click

from bolide.cli.admin_common import admin_options, emit, fmt_time, table, target_options, with_admin
from bolide.client.admin_acl import AclVersion
from bolide.protocol.bodies.admin import BrokerClusterAclConfig

PERMS = click.Choice(["PUB", "SUB", "PUB|SUB", "SUB|PUB", "DENY"])


def _list(text: str | None) -> list[str] | None:
    return None if text is None else [item.strip() for item in text.split(",") if item.strip()]


@click.command("updateAclConfig")
@admin_options
@target_options
@click.option("-a", "--access-key", "account", required=True, help="The account's access key.")
@click.option("-s", "--secret-key", "secret", required=True, help="Its secret key.")
@click.option("-w", "--white-remote-address", help="Addresses that skip its checks, e.g. 192.168.0.*.")
@click.option("-i", "--default-topic-perm", type=PERMS, help="Permission on topics not listed.")
@click.option("-u", "--default-group-perm", type=PERMS, help="Permission on groups not listed.")
@click.option("-t", "--topic-perms", help="Per topic, comma-separated: topicA=PUB|SUB,topicB=DENY.")
@click.option("-g", "--group-perms", help="Per group, comma-separated: groupA=SUB,groupB=DENY.")
@click.option("-m", "--admin", "is_admin", type=click.BOOL, default=False, show_default=True,
              help="May create and delete topics and groups and change ACL.")
def update_acl_config(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                      account: str, secret: str, white_remote_address: str | None,
                      default_topic_perm: str | None, default_group_perm: str | None,
                      topic_perms: str | None, group_perms: str | None, is_admin: bool) -> None:
    """Create or change an ACL account on brokers (50); options left out keep its values."""
    addrs = with_admin(namesrv, lambda admin: admin.update_acl_account(
        account, secret, white_remote_address=white_remote_address, admin=is_admin,
        default_topic_perm=default_topic_perm, default_group_perm=default_group_perm,
        topic_perms=_list(topic_perms), group_perms=_list(group_perms),
        broker_addr=broker_addr, cluster=cluster))
    emit(output, {"accessKey": account, "brokers": addrs},
         table(f"Account {account} created or updated", ["broker"], ([a] for a in addrs)))


@click.command("deleteAclConfig")
@admin_options
@target_options
@click.option("-a", "--access-key", "account", required=True, help="The account to delete.")
def delete_acl_config(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                      account: str) -> None:
    """Delete an ACL account from brokers (51)."""
    addrs = with_admin(namesrv, lambda admin: admin.delete_acl_account(
        account, broker_addr=broker_addr, cluster=cluster))
    emit(output, {"accessKey": account, "brokers": addrs},
         table(f"Account {account} deleted", ["broker"], ([a] for a in addrs)))


@click.command("updateGlobalWhiteAddr")
@admin_options
@target_options
@click.option("-g", "--global-white-remote-addresses", "addresses", required=True,
              help="Comma-separated patterns, e.g. 10.10.103.*,192.168.0.* ('' empties the list).")
@click.option("-p", "--acl-file-full-path", help="The ACL file to change (default: the broker's main one).")
def update_global_white_addr(namesrv: str, output: str, broker_addr: str | None,
                             cluster: str | None, addresses: str, acl_file_full_path: str | None) -> None:
    """Replace the global white list: clients from these addresses skip every ACL check (53)."""
    listed = _list(addresses) or []
    addrs = with_admin(namesrv, lambda admin: admin.update_global_white_addrs(
        listed, acl_file=acl_file_full_path, broker_addr=broker_addr, cluster=cluster))
    emit(output, {"globalWhiteRemoteAddresses": listed, "brokers": addrs},
         table("Global white addresses updated", ["broker", "addresses"],
               ([a, ",".join(listed)] for a in addrs)))


@click.command("clusterAclConfigVersion")
@admin_options
@target_options
def cluster_acl_config_version(namesrv: str, output: str, broker_addr: str | None,
                               cluster: str | None) -> None:
    """The ACL data version of each broker and of each of its ACL files (52)."""
    found: list[AclVersion] = with_admin(namesrv, lambda admin: admin.acl_versions(
        broker_addr=broker_addr, cluster=cluster))
    rows = [[v.cluster_name, v.broker_name, v.broker_addr, path, d.counter, fmt_time(d.timestamp)]
            for v in found for path, d in sorted(v.files.items())]
    doc = [{"clusterName": v.cluster_name, "brokerName": v.broker_name, "brokerAddr": v.broker_addr,
            "version": v.version.to_json_obj(),
            "files": {path: d.to_json_obj() for path, d in sorted(v.files.items())}} for v in found]
    emit(output, doc, table("ACL config versions", ["cluster", "brokerName", "brokerAddr", "file",
                                                    "counter", "updated"], rows))


@click.command("getAclConfig")
@admin_options
@target_options
def get_acl_config(namesrv: str, output: str, broker_addr: str | None, cluster: str | None) -> None:
    """The global white addresses and the accounts of each broker (54)."""
    found: dict[str, BrokerClusterAclConfig] = with_admin(
        namesrv, lambda admin: admin.acl_config(broker_addr=broker_addr, cluster=cluster))
    doc = [{"brokerAddr": addr, **config.to_json_obj()} for addr, config in found.items()]
    tables = []
    for addr, config in found.items():
        rows = [[c.access_key, c.admin, c.default_topic_perm, c.default_group_perm,
                 ",".join(c.topic_perms or ()), ",".join(c.group_perms or ()),
                 c.white_remote_address] for c in config.plain_access_configs]
        tables.append(table(f"{addr}: global white addresses "
                            f"{','.join(config.global_white_addrs) or '(none)'}",
                            ["accessKey", "admin", "defaultTopicPerm", "defaultGroupPerm",
                             "topicPerms", "groupPerms", "whiteRemoteAddress"], rows))
    emit(output, doc, *tables)


COMMANDS = [update_acl_config, delete_acl_config, update_global_white_addr,
            cluster_acl_config_version, get_acl_config]
