"""A virtual environment of its own for an interop client published on PyPI: created from the
client's pinned ``requirements.txt`` once, and again when that file changes (a digest in
``.installed``), serialised between test processes by a lock file beside it."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bolide.testing.rocketmq import RocketMQUnavailable

INSTALL_TIMEOUT = 600.0


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


def install_requirements_venv(requirements: Path, venv: Path, what: str) -> Path:
    """Create ``venv`` with ``requirements`` unless it is there and current; its python.
    Raises :class:`RocketMQUnavailable` naming the fix when that fails."""
    if not requirements.is_file():
        raise RocketMQUnavailable(
            f"{requirements} is missing; run from a source checkout or set BOLIDE_INTEROP_DIR"
        )
    venv.parent.mkdir(parents=True, exist_ok=True)
    python, stamp = venv / "bin" / "python", venv / ".installed"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    with open(venv.parent / f".{venv.name}.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            if python.is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
                return python
            shutil.rmtree(venv, ignore_errors=True)
            print(f"bolide: installing {what} into {venv}", file=sys.stderr, flush=True)
            for cmd in _install_steps(venv, python, requirements):
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


def driver_env(home: Path) -> dict[str, str]:
    """A driver's environment: this one without ``PYTHON*`` variables (the driver runs in its
    own virtual environment), ``HOME`` (where clients write their logs) in ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["HOME"] = str(home)
    return env
