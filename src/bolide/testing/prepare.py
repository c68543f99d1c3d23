"""``python -m bolide.testing.prepare``: every interop toolchain's ``prepare`` at once (``make
interop-deps``).

The RocketMQ jars and the Go driver (Maven, the Go module proxy), the Node.js clients (npm), the
RocketMQ 5 Python client and the C++ client (PyPI) share no files, and each mostly waits on a
registry, so they run side by side; each one's output is printed whole when it ends, and the
exit status is the first failure's (each decides on its own whether a missing tool fails, as
under ``CI``).
Only the standard library is used, so this runs before the project's own dependencies are
installed (``PYTHONPATH=src``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence

STEPS = ("bolide.testing.rocketmq", "bolide.testing.nodeclient", "bolide.testing.pyclient5",
         "bolide.testing.cppclient")


def run_all(modules: Sequence[str] = STEPS) -> int:
    """Start ``python -m <module> prepare`` for each module, wait for all; the first non-zero
    exit status, or 0."""
    started = time.monotonic()
    procs = [(module, subprocess.Popen([sys.executable, "-m", module, "prepare"],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True))
             for module in modules]
    status = 0
    for module, proc in procs:
        output, _ = proc.communicate()
        took = time.monotonic() - started  # when it was seen to end
        print(f"== {module} prepare (exit {proc.returncode}, done by {took:.0f} s)\n{output.rstrip()}",
              flush=True)
        if proc.returncode != 0 and status == 0:
            status = proc.returncode
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        print("usage: python -m bolide.testing.prepare", file=sys.stderr)
        return 2
    return run_all()


if __name__ == "__main__":
    sys.exit(main())
