"""``bolide admin``: mqadmin's commands, with mqadmin's names, over :class:`bolide.client.admin.Admin`.

Each command takes ``-n host:port`` (or NAMESRV_ADDR) and ``--output table|json``. The
commands live in :mod:`~bolide.cli.admin_topics`, :mod:`~bolide.cli.admin_brokers`,
:mod:`~bolide.cli.admin_groups`, :mod:`~bolide.cli.admin_consumers`,
:mod:`~bolide.cli.admin_messages`, :mod:`~bolide.cli.admin_ha`, :mod:`~bolide.cli.admin_controller`,
:mod:`~bolide.cli.admin_config`, :mod:`~bolide.cli.admin_stats`, :mod:`~bolide.cli.admin_checks`,
:mod:`~bolide.cli.admin_lists`, :mod:`~bolide.cli.admin_cold_data`, :mod:`~bolide.cli.admin_static`
and :mod:`~bolide.cli.admin_ops`
(MQAdminExt's operations that mqadmin has no command for); docs/admin.md describes each with
examples.
"""

from __future__ import annotations

import click

from bolide.cli import (
    admin_acl,
    admin_auth,
    admin_brokers,
    admin_checks,
    admin_cold_data,
    admin_config,
    admin_consumers,
    admin_controller,
    admin_groups,
    admin_ha,
    admin_lists,
    admin_messages,
    admin_ops,
    admin_static,
    admin_stats,
    admin_topics,
)
from bolide.cli.admin_common import connection_options


@click.group()
@connection_options
def admin() -> None:
    """RocketMQ administration (mqadmin command names): topics, groups, progress, messages."""


for _command in (*admin_topics.COMMANDS, *admin_brokers.COMMANDS, *admin_groups.COMMANDS,
                 *admin_consumers.COMMANDS, *admin_messages.COMMANDS, *admin_ha.COMMANDS,
                 *admin_controller.COMMANDS,
                 *admin_acl.COMMANDS, *admin_auth.COMMANDS, *admin_config.COMMANDS, *admin_stats.COMMANDS,
                 *admin_checks.COMMANDS, *admin_lists.COMMANDS, *admin_cold_data.COMMANDS,
                 *admin_ops.COMMANDS, *admin_static.COMMANDS):
    admin.add_command(_command)
