"""``bolide bench client`` against Bolide and a real Apache RocketMQ broker in the same run.

    .venv/bin/python bench/run_client.py                    # RocketMQ 5.3.3, full run
    .venv/bin/python bench/run_client.py --version 4.9.7 -- --quick

Starts a RocketMQ NameServer + broker (the interop harness, ``make interop-deps`` first) in a
temporary directory, waits until its routes reach the NameServer, then runs
``bolide bench client --rocketmq <namesrv>`` with the options after ``--``; the JSON document
is printed and kept in ``bench/results/client-YYYY-MM-DD.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bolide.client import Admin, MQClientError
from bolide.testing.rocketmq import VERSIONS, BrokerSettings, RocketMQ

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = "import sys; sys.argv[0] = 'bolide'; from bolide.cli.main import main; main()"


async def wait_for_route(namesrv: str, topic: str = "TBW102", timeout: float = 60.0) -> None:
    async with Admin(namesrv) as admin, asyncio.timeout(timeout):
        while True:
            try:
                await admin.topic_route(topic)
                return
            except MQClientError:
                await asyncio.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", choices=VERSIONS, default="5.3.3")
    parser.add_argument("bench_args", nargs="*", help="options of `bolide bench client` (after --)")
    args = parser.parse_args()
    output = ROOT / "bench" / "results" / f"client-{time.strftime('%Y-%m-%d')}.json"
    with (tempfile.TemporaryDirectory(prefix="bench-client-rmq-") as tmp,
          RocketMQ(args.version, Path(tmp)) as rmq):
        rmq.start_namesrv()
        rmq.start_broker(BrokerSettings(Path(tmp) / "store"))
        asyncio.run(wait_for_route(rmq.namesrv_addr))
        cmd = [sys.executable, "-c", LAUNCH, "bench", "client", "--rocketmq", rmq.namesrv_addr,
               "--output", str(output), *args.bench_args]
        return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
