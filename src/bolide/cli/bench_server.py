"""The server under test of ``bolide bench broker``: ``bolide start`` (NameServer + Broker in
one process) as a child process on free ports, its readiness, CPU time and memory, and its
clean stop (SIGTERM, then SIGKILL if it does not exit in time)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO

import click

from bolide.cli.bench_common import proc_status, reset_peak_rss

_LAUNCH = "import sys; sys.argv[0] = 'bolide'; from bolide.cli.main import main; main()"
_NAMESRV_LINE = re.compile(rb"NameServer listening on port (\d+)")
_BROKER_LINE = re.compile(rb"Broker \S+ listening on \S+:(\d+) ")
_GRPC_LINE = re.compile(rb"gRPC clients connect to \S+:(\d+) ")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ServerProcess:
    """``bolide start`` with its store and broker.conf in ``root``; output in ``server.log``."""

    def __init__(self, root: Path, flush_disk_type: str, settings: tuple[str, ...] = ()) -> None:
        self.root = root
        self.flush_disk_type = flush_disk_type
        self.settings = settings  # extra broker.conf lines, ``key=value``
        self.log_path = root / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.namesrv_port = 0
        self.broker_port = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None, "start() first"
        return self.proc.pid

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the server (ports 0: the kernel picks free ones) and wait until it prints the
        ports it listens on."""
        conf = self.root / "broker.conf"
        lines = ["brokerIP1=127.0.0.1", f"flushDiskType={self.flush_disk_type}", *self.settings]
        conf.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, "start", "--store", str(self.root / "store"),
             "--namesrv-port", "0", "--broker-port", "0", "-c", str(conf)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)  # Ctrl-C reaches the bench only; it stops the server
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.log_path.read_bytes()
            ns, broker = _NAMESRV_LINE.search(text), _BROKER_LINE.search(text)
            if ns and broker:
                self.namesrv_port, self.broker_port = int(ns.group(1)), int(broker.group(1))
                return
            if self.proc.poll() is not None:
                raise click.ClickException(
                    f"the server exited with status {self.proc.returncode} while starting:\n"
                    f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise click.ClickException(
                    f"the server did not report its ports within {timeout_s:.0f} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM, wait for a clean close, SIGKILL after ``timeout_s``; the exit status."""
        proc = self.proc
        if proc is None:
            return None
        try:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            return proc.returncode
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

    def grpc_port(self, timeout_s: float = 30.0) -> int:
        """The port of the broker's gRPC endpoint (``grpcServerPort`` in the settings), from
        the line ``bolide start`` prints once it listens."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = _GRPC_LINE.search(self.log_path.read_bytes())
            if found:
                return int(found.group(1))
            if not self.alive() or time.monotonic() > deadline:
                raise click.ClickException(f"the server reported no gRPC port:\n{self.log_tail()}")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the server so far (None off Linux)."""
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime

    def memory(self) -> dict[str, float]:
        """``VmHWM``, ``VmRSS``, ``RssAnon`` and ``RssFile`` of the server in MiB."""
        return proc_status(self.pid)

    def reset_peak_rss(self) -> bool:
        return reset_peak_rss(self.pid)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])


class AnonPeak:
    """The highest anonymous memory (``RssAnon``, MiB) of a server while the ``with`` block
    runs, sampled every 100 ms in a thread: :attr:`mib`."""

    def __init__(self, server: ServerProcess, interval_s: float = 0.1) -> None:
        self.server, self.interval_s = server, interval_s
        self.mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="anon-peak", daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.mib = max(self.mib, self.server.memory().get("RssAnon", 0.0))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> AnonPeak:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
