"""How the real-RocketMQ harness starts its JVMs (bolide.testing.rocketmq.JavaProcess): in a
process whose gRPC threads are busy (a test worker that has served gRPC; gRPC's fork handlers
stay on here, as outside the suite), and dying with the process that started them. Plain
shell commands stand in for the JVMs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

STARTS = textwrap.dedent('''
    import re, sys
    from concurrent import futures
    from pathlib import Path
    import grpc
    from bolide.testing.rocketmq import JavaProcess
    server = grpc.server(futures.ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    grpc.channel_ready_future(grpc.insecure_channel(f"127.0.0.1:{port}")).result(timeout=10)
    run = Path(sys.argv[1])
    for i in range(25):
        proc = JavaProcess("child", ["sh", "-c", "echo ready"], run / f"{i}.log", run)
        proc.wait_for_line(re.compile("ready"), 30)
        proc.popen.wait(30)
    print("all started")
''')

ORPHAN = textwrap.dedent('''
    import re, sys, time
    from pathlib import Path
    from bolide.testing.rocketmq import JavaProcess
    proc = JavaProcess("child", ["sh", "-c", "echo ready; exec sleep 120"], Path(sys.argv[1]) / "log",
                       Path(sys.argv[1]))
    proc.wait_for_line(re.compile("ready"), 30)
    print(proc.pid, flush=True)
    time.sleep(120)
''')


def _without_fork_setting() -> dict[str, str]:
    """The environment without GRPC_ENABLE_FORK_SUPPORT (tests/conftest.py turns gRPC's fork
    handlers off for the suite; the harness must not depend on that)."""
    return {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}


def test_children_start_beside_busy_grpc_threads(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", STARTS, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env=_without_fork_setting())
    assert proc.returncode == 0 and "all started" in proc.stdout, proc.stderr[-3000:]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_child_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    starter = subprocess.Popen([sys.executable, "-c", ORPHAN, str(tmp_path)], stdout=subprocess.PIPE,
                               text=True, env=_without_fork_setting())
    try:
        assert starter.stdout is not None
        child = int(starter.stdout.readline())
        assert _alive(child)
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait(30)
    deadline = time.monotonic() + 30
    while _alive(child):
        assert time.monotonic() < deadline, f"process {child} outlived the one that started it"
        time.sleep(0.05)
