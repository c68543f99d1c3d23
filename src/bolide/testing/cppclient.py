"""The official RocketMQ C++ client (``rocketmq-client-cpp``) for interop tests of the remoting
broker: its library as built into the ``rocketmq`` wheel on PyPI (pinned in
``interop/cpp-client/requirements.txt``), driven through that wheel's ctypes binding by
``interop/cpp-client/driver.py`` (see its docstring for the commands).

``python -m bolide.testing.cppclient prepare`` (a step of ``make interop-deps``) creates the
virtual environment ``interop/.cache/cpp-client`` once and again when the requirements change.
The wheel holds a Linux x86-64 library only.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from pathlib import Path

from bolide.testing.pyvenv import install_requirements_venv
from bolide.testing.rocketmq import RocketMQUnavailable, interop_dir, prepare_main


def client_dirs() -> tuple[Path, Path]:
    """The driver's source directory and the git-ignored virtual environment."""
    return interop_dir() / "cpp-client", interop_dir() / ".cache" / "cpp-client"


def install_cpp_client() -> Path:
    """Create the virtual environment with the pinned client (once); its python. Raises
    :class:`RocketMQUnavailable` off Linux x86-64 or when the install fails."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise RocketMQUnavailable(
            f"the C++ client's wheel holds a Linux x86-64 library; this is {sys.platform} "
            f"{platform.machine()}: run these tests on Linux x86-64"
        )
    src, venv = client_dirs()
    return install_requirements_venv(src / "requirements.txt", venv, "the RocketMQ C++ client")


def cpp_command() -> list[str]:
    """Install the client if needed; the driver's command line (run it with
    :func:`bolide.testing.pyvenv.driver_env`)."""
    python = install_cpp_client()
    src, _ = client_dirs()
    return [str(python), str(src / "driver.py")]



def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bolide.testing.cppclient prepare``: install the client ahead of the tests."""
    return prepare_main(argv, "bolide.testing.cppclient", "the RocketMQ C++ client interop tests",
                        lambda: [f"RocketMQ C++ client ready ({install_cpp_client()})"])


if __name__ == "__main__":
    sys.exit(main())
