"""``bolide controller seed``: a group peer's first Raft state from a lone controller's event
log (:mod:`bolide.controller.seed`), run offline for each peer before the group's first start."""

from __future__ import annotations

from pathlib import Path

import click

from bolide.controller import ControllerConfig
from bolide.controller.replicas import BrokerGroup
from bolide.controller.seed import SEED_INDEX, SEED_TERM, read_seed, seed_peer
from bolide.errors import BolideError


def _describe(group: BrokerGroup) -> str:
    master = "no master" if group.master_broker_id is None else f"master {group.master_broker_id}"
    ids = ", ".join(str(i) for i in sorted(group.addresses)) or "none"
    in_sync = ", ".join(str(i) for i in sorted(group.sync_state_set)) or "none"
    return (f"  {group.cluster_name}/{group.broker_name}: {master} (epoch {group.master_epoch}), "
            f"in sync {in_sync} (epoch {group.sync_state_set_epoch}), broker ids {ids}")


@click.command("seed")
@click.option("-c", "--config", "conf", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The controller.conf of the group peer to seed (controllerDLegerPeers lists "
                   "the group, controllerDLegerSelfId this peer).")
@click.option("--from", "source", required=True, type=click.Path(path_type=Path),
              help="The stopped lone controller's directory (<controllerStorePath>/<selfId>) or "
                   "its controller-events.log.")
def seed(conf: str, source: Path) -> None:
    """Write a group peer's first state from a lone controller's event log.

    Run it for every peer of the new group, from the same log, before the group's first start:
    each peer then starts with the same snapshot (the same sha256 is printed for each). The lone
    controller must be stopped; its log is not changed. Refused when the peer already has Raft
    state or the configuration is not a group's."""
    try:
        config = ControllerConfig.from_properties(conf)
        found = read_seed(source)
        raft = seed_peer(config, found)
    except (BolideError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if found.replay.dropped_bytes:
        click.echo(f"Left out a torn tail: {found.replay.describe_cut(found.path)}")
    groups = found.state.groups
    click.echo(f"Seeded controller {config.self_id} of {len(config.peers)} ({raft}) from {found.path}: "
               f"{len(found.replay.events)} events, {len(groups)} broker groups; snapshot at index "
               f"{SEED_INDEX} term {SEED_TERM}, sha256 {found.digest}")
    for name in sorted(groups):
        click.echo(_describe(groups[name]))
    click.echo("Seed every peer of the group from this log (each must show this sha256) before "
               "starting any of them.")
