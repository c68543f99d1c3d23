"""The official RocketMQ 5 Python client (``rocketmq-python-client``, gRPC; pinned in
``interop/python5-client/requirements.txt``) in a virtual environment of its own, for interop
tests of the broker's gRPC endpoint.

It cannot share a process with Bolide: both register the ``apache.rocketmq.v2`` protobuf
messages. ``python -m bolide.testing.pyclient5 prepare`` (a step of ``make interop-deps``)
creates ``interop/.cache/python5-client`` once and again when the requirements change;
``interop/python5-client/driver.py`` runs in it (see its docstring).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bolide.testing.rocketmq import RocketMQUnavailable, interop_dir, prepare_main

INSTALL_TIMEOUT = 600.0


def client_dirs() -> tuple[Path, Path]:
    """The driver's source directory and the git-ignored virtual environment."""
    return interop_dir() / "python5-client", interop_dir() / ".cache" / "python5-client"


def _install_steps(venv: Path, python: Path, requirements: Path) -> list[list[str]]:
    """The commands that create ``venv`` with ``requirements``: with uv when it is installed
    beside this interpreter (``make venv`` puts it there; several times faster), else pip."""
    uv = Path(sys.executable).parent / "uv"
    if uv.is_file():
        return [[str(uv), "venv", "--quiet", "--python", sys.executable, str(venv)],
                [str(uv), "pip", "install", "--quiet", "--python", str(python), "-r", str(requirements)]]
    return [[sys.executable, "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "-r", str(requirements)]]


def install_python5_client() -> Path:
    """Create the virtual environment with the pinned client (once, serialised between test
    processes); its python. Raises :class:`RocketMQUnavailable` when that fails."""
    src, venv = client_dirs()
    requirements = src / "requirements.txt"
    if not requirements.is_file():
        raise RocketMQUnavailable(
            f"{requirements} is missing; run from a source checkout or set BOLIDE_INTEROP_DIR"
        )
    venv.parent.mkdir(parents=True, exist_ok=True)
    python, stamp = venv / "bin" / "python", venv / ".installed"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    with open(venv.parent / ".python5-client.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            if python.is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
                return python
            shutil.rmtree(venv, ignore_errors=True)
            print(f"bolide: installing the RocketMQ 5 Python client into {venv}", file=sys.stderr, flush=True)
            steps = _install_steps(venv, python, requirements)
            for cmd in steps:
                try:
                    proc = subprocess.run(
                        cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
                    )
                except subprocess.TimeoutExpired:
                    raise RocketMQUnavailable(
                        f"{' '.join(cmd[:4])} did not finish in {INSTALL_TIMEOUT:.0f}s; "
                        "check that PyPI is reachable"
                    ) from None
                if proc.returncode != 0:
                    raise RocketMQUnavailable(
                        f"{' '.join(cmd[:4])} failed (exit {proc.returncode}); check that "
                        f"PyPI is reachable:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
                    )
            stamp.write_text(digest + "\n")
            return python
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def python5_command() -> list[str]:
    """Install the client if needed; the driver's command line (run it with :func:`python5_env`)."""
    python = install_python5_client()
    src, _ = client_dirs()
    return [str(python), str(src / "driver.py")]


def python5_env(home: Path) -> dict[str, str]:
    """The driver's environment: ``HOME`` (the client writes its log under it) in ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["HOME"] = str(home)
    return env


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bolide.testing.pyclient5 prepare``: install the client ahead of the tests."""
    return prepare_main(argv, "bolide.testing.pyclient5", "the RocketMQ 5 Python client interop tests",
                        lambda: [f"RocketMQ 5 Python client ready ({install_python5_client()})"])


if __name__ == "__main__":
    sys.exit(main())
