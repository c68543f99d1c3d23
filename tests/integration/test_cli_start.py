"""``bolide start`` runs a NameServer and a Broker (with its gRPC endpoint), and SIGTERM stops
both cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path


def test_start_then_sigterm(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from bolide.cli.main import main; main()", "start", "--store", str(store),
         "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # blocks until the servers print that they listen
            lines.append(line)
            if line.startswith("Press Ctrl+C"):
                break
        text = "".join(lines)
        assert "NameServer listening on port" in text and "Broker broker-a listening on" in text
        assert "RocketMQ 5 gRPC clients connect to 127.0.0.1:" in text  # both kinds by default
        assert "(endpoints; TLS or plain text)" in text
        assert (store / "abort").exists()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "stopped" in out
    assert not (store / "abort").exists()
