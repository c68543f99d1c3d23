"""Entry point of the ``bolide`` command: one sub-group per module of this package."""

from __future__ import annotations

import logging

import click

from bolide import __version__
from bolide.cli.admin import admin
from bolide.cli.bench import bench
from bolide.cli.pipeline import pipeline
from bolide.cli.produce_consume import consume, produce
from bolide.cli.server import broker, controller, namesrv, start
from bolide.cli.store import store


@click.group()
@click.version_option(__version__, prog_name="bolide")
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages.")
def cli(verbose: bool) -> None:
    """Bolide: a RocketMQ-compatible message broker in Python."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


cli.add_command(store)
cli.add_command(bench)
cli.add_command(start)
cli.add_command(namesrv)
cli.add_command(controller)
cli.add_command(broker)
cli.add_command(admin)
cli.add_command(produce)
cli.add_command(consume)
cli.add_command(pipeline)


def main() -> None:
    cli()
