"""What every ``bolide admin`` command shares: ``-n`` and ``--output`` options, running an
:class:`~bolide.client.admin.Admin` coroutine with errors turned into click messages, rich
tables or JSON documents on stdout, and time arguments."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from bolide.client.admin import Admin
from bolide.client.config import ClientConfig
from bolide.common.fastjson import dumps_pretty
from bolide.errors import BolideError, RemotingConnectError

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_NAMESRV = "127.0.0.1:9876"
OUTPUTS = ("table", "json")


def namesrv_option(fn: F) -> F:
    return click.option("-n", "--namesrv", envvar="NAMESRV_ADDR", default=DEFAULT_NAMESRV, show_default=True,
                        help="NameServer address host:port (several joined by ';'); "
                             "env NAMESRV_ADDR.")(fn)


def output_option(fn: F) -> F:
    return click.option("--output", "-O", "output", type=click.Choice(OUTPUTS), default="table",
                        show_default=True, help="A rich table, or a JSON document.")(fn)


def export_dir_option(fn: F) -> F:
    """``-f``: the directory an export command writes its file in (mqadmin's default)."""
    return click.option("-f", "--file-path", default="/tmp/rocketmq/export", show_default=True,
                        type=click.Path(file_okay=False), help="The directory to write the file in.")(fn)


def write_export(file_path: str, name: str, doc: Any) -> Path:
    """Write ``doc`` into ``file_path/name`` as mqadmin's export commands do (indented JSON,
    its keys in fastjson's order); the file's path."""
    path = Path(file_path) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(dumps_pretty(doc))
    return path


def _remember(ctx: click.Context, param: click.Parameter, value: str | bool | None) -> object:
    if value:
        ctx.meta[f"bolide.{param.name}"] = value
    return value


def connection_options(fn: F) -> F:
    """``--tls`` (with ``--tls-cert`` and ``--tls-key``), ``--access-key`` and ``--secret-key``,
    kept for :func:`client_config`."""
    fn = click.option("--tls", is_flag=True, envvar="BOLIDE_TLS", expose_value=False,
                      callback=_remember, help="Connect over TLS (servers with tls.server.mode "
                      "permissive or enforcing); env BOLIDE_TLS=1.")(fn)
    fn = click.option("--tls-cert", envvar="BOLIDE_TLS_CERT", expose_value=False, callback=_remember,
                      type=click.Path(exists=True, dir_okay=False),
                      help="Present this PEM certificate (servers with "
                           "tls.server.need.client.auth=require); implies --tls; env BOLIDE_TLS_CERT.")(fn)
    fn = click.option("--tls-key", envvar="BOLIDE_TLS_KEY", expose_value=False, callback=_remember,
                      type=click.Path(exists=True, dir_okay=False),
                      help="The private key of --tls-cert (PEM); env BOLIDE_TLS_KEY.")(fn)
    fn = click.option("--secret-key", envvar="BOLIDE_SECRET_KEY", expose_value=False,
                      callback=_remember, help="Secret key of that account; env BOLIDE_SECRET_KEY.")(fn)
    return click.option("--access-key", envvar="BOLIDE_ACCESS_KEY", expose_value=False,
                        callback=_remember,
                        help="Sign every request with this plain-ACL account (brokers with "
                             "aclEnable=true) or ACL 2.0 user; env BOLIDE_ACCESS_KEY.")(fn)


def client_config(namesrv: str) -> str | ClientConfig:
    """The client settings of a command: ``namesrv``, over TLS with ``--tls``, signed with the
    ACL account that ``--access-key`` / ``--secret-key`` gave (on the command or on
    ``bolide admin``)."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    access_key, secret_key = meta.get("bolide.access_key"), meta.get("bolide.secret_key")
    cert, key = meta.get("bolide.tls_cert"), meta.get("bolide.tls_key")
    use_tls = bool(meta.get("bolide.tls")) or bool(cert)
    if not access_key and not secret_key and not use_tls:
        return namesrv
    if bool(access_key) != bool(secret_key):
        raise click.UsageError("give both --access-key and --secret-key (or BOLIDE_ACCESS_KEY "
                               "and BOLIDE_SECRET_KEY) to sign requests for ACL")
    if bool(cert) != bool(key):
        raise click.UsageError("give both --tls-cert and --tls-key (or BOLIDE_TLS_CERT and "
                               "BOLIDE_TLS_KEY): the client's certificate and its private key")
    return ClientConfig(namesrv, access_key=access_key or None, secret_key=secret_key or None,
                        use_tls=use_tls, tls_cert_file=cert or None, tls_key_file=key or None)


def target_options(fn: F) -> F:
    """``-b`` and ``-c``: the brokers a command changes (default: every master)."""
    fn = click.option("-c", "--cluster", help="Every master of this cluster (default: every master).")(fn)
    return click.option("-b", "--broker-addr", help="This broker only (host:port).")(fn)


def admin_options(fn: F) -> F:
    """``-n`` and ``--output``."""
    return namesrv_option(output_option(fn))


def run(coro: Awaitable[T]) -> T:
    """Run a coroutine; Bolide errors become click errors (their message says what to do)."""
    try:
        return asyncio.run(coro)  # type: ignore[arg-type]
    except RemotingConnectError as exc:
        raise click.ClickException(f"{exc} (give the NameServer with -n host:port or NAMESRV_ADDR)") from None
    except BolideError as exc:
        raise click.ClickException(str(exc)) from None


def with_admin(namesrv: str, job: Callable[[Admin], Awaitable[T]]) -> T:
    """Run ``job(admin)`` with a started Admin, closed afterwards."""
    async def main() -> T:
        async with Admin(client_config(namesrv)) as admin:
            return await job(admin)
    return run(main())


def console() -> Console:
    """A console on the current stdout; wide when not a terminal, so ids are never folded."""
    return Console(width=None if sys.stdout.isatty() else 250, soft_wrap=False, highlight=False)


def print_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, ensure_ascii=False, default=str))


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    t = Table(title=title, title_justify="left", min_width=len(title or "") + 2)
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    return t


def emit(output: str, doc: Any, *tables: Table, note: str | None = None) -> None:
    """Print ``doc`` as JSON, or the tables (and the note) for ``--output table``."""
    if output == "json":
        print_json(doc)
        return
    out = console()
    for t in tables:
        out.print(t)
    if note:
        out.print(note)


def kv_table(title: str | None, items: dict[str, Any]) -> Table:
    return table(title, ["key", "value"], sorted(items.items()))


def fmt_time(ms: int | None) -> str:
    """A store time in ms as local ``YYYY-MM-DD HH:MM:SS.mmm`` ('' for 0/None)."""
    if not ms or ms <= 0:
        return ""
    return datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="milliseconds")


def fmt_duration(ms: int | None) -> str:
    if ms is None:
        return "?"
    if ms < 1000:
        return f"{ms} ms"
    s = ms / 1000
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def parse_time(text: str) -> int:
    """A time as ms since the epoch: digits (ms), ``now``, ISO 8601 (``2024-05-01T10:00``,
    local time unless it has an offset), or mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000)
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        if "#" in value:
            day, _, clock = value.partition("#")
            parts = clock.split(":")
            millis = int(parts[3]) if len(parts) > 3 else 0
            stamp = datetime.fromisoformat(f"{day}T{':'.join(parts[:3])}")
            return int(stamp.timestamp() * 1000) + millis
        return int(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a time: give ms since the epoch, 'now', an ISO time like "
            "2024-05-01T10:00:00, or yyyy-MM-dd#HH:mm:ss:SSS") from None

