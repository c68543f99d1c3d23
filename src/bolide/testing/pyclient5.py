"""The official RocketMQ 5 Python client (``rocketmq-python-client``, gRPC; pinned in
``interop/python5-client/requirements.txt``) in a virtual environment of its own, for interop
tests of the broker's gRPC endpoint.

It cannot share a process with Bolide: both register the ``apache.rocketmq.v2`` protobuf
messages. ``python -m bolide.testing.pyclient5 prepare`` (a step of ``make interop-deps``)
creates ``interop/.cache/python5-client`` once and again when the requirements change;
``interop/python5-client/driver.py`` runs in it (see its docstring).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from bolide.testing.pyvenv import install_requirements_venv
from bolide.testing.rocketmq import interop_dir, prepare_main


def client_dirs() -> tuple[Path, Path]:
    """The driver's source directory and the git-ignored virtual environment."""
    return interop_dir() / "python5-client", interop_dir() / ".cache" / "python5-client"


def install_python5_client() -> Path:
    """Create the virtual environment with the pinned client (once, serialised between test
    processes); its python. Raises :class:`RocketMQUnavailable` when that fails."""
    src, venv = client_dirs()
    return install_requirements_venv(src / "requirements.txt", venv, "the RocketMQ 5 Python client")


def python5_command() -> list[str]:
    """Install the client if needed; the driver's command line (run it with
    :func:`bolide.testing.pyvenv.driver_env`)."""
    python = install_python5_client()
    src, _ = client_dirs()
    return [str(python), str(src / "driver.py")]



def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bolide.testing.pyclient5 prepare``: install the client ahead of the tests."""
    return prepare_main(argv, "bolide.testing.pyclient5", "the RocketMQ 5 Python client interop tests",
                        lambda: [f"RocketMQ 5 Python client ready ({install_python5_client()})"])


if __name__ == "__main__":
    sys.exit(main())
