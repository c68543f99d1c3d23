"""The Node.js RocketMQ clients as small drivers for interop tests: ``ali-ons`` (remoting; pinned in
``interop/node-client/package.json`` and ``package-lock.json``) and ``rocketmq-client-nodejs``
(RocketMQ 5, gRPC; ``interop/node5-client/``, whose ``driver.js`` runs ``scenario HOST:PORT``).

``interop/node-client/driver.js`` offers ``produce <namesrv> <topic> <n>`` and
``consume <namesrv> <topic> <group> <n> <timeoutSec>`` (see its header comment). ``npm ci`` installs
the locked packages once into ``interop/.cache/node-client/node_modules`` (git-ignored) and again only
when ``package.json`` or ``package-lock.json`` change; the driver finds them through ``NODE_PATH``.
``python -m bolide.testing.nodeclient prepare`` installs them ahead of the tests (``make interop-deps``).
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

_NODE_HINT = ("install Node.js 18+ with npm (Debian: apt-get install nodejs npm) and make sure node and "
              "npm are on PATH")
INSTALL_TIMEOUT = 600.0
_MANIFESTS = ("package.json", "package-lock.json")


NODE_CLIENTS = {"node-client": "ali-ons", "node5-client": "rocketmq-client-nodejs"}  # directory: package


def node_dirs(name: str = "node-client") -> tuple[Path, Path]:
    """A driver's source directory and its git-ignored install directory."""
    return interop_dir() / name, interop_dir() / ".cache" / name


def _manifest_digest(src: Path) -> str:
    digest = hashlib.sha256()
    for name in _MANIFESTS:
        digest.update(name.encode() + b"\0" + (src / name).read_bytes() + b"\0")
    return digest.hexdigest()


def install_node_client(name: str = "node-client") -> Path:
    """``npm ci`` the locked packages of ``interop/<name>`` into the cache (once, serialised between
    test processes) and return its ``node_modules``. Raises :class:`RocketMQUnavailable` without
    node/npm or on failure."""
    src, cache = node_dirs(name)
    package = NODE_CLIENTS[name]
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        raise RocketMQUnavailable(f"{', '.join(missing)} not found on PATH; the Node.js client interop "
                                  f"test needs them: {_NODE_HINT}")
    if not all((src / name).is_file() for name in (*_MANIFESTS, "driver.js")):
        raise RocketMQUnavailable(f"{src} lacks package.json, package-lock.json or driver.js; run from a "
                                  "source checkout or set BOLIDE_INTEROP_DIR")
    cache.mkdir(parents=True, exist_ok=True)
    modules, stamp = cache / "node_modules", cache / ".installed"
    with open(cache / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            digest = _manifest_digest(src)
            if modules.is_dir() and stamp.is_file() and stamp.read_text().strip() == digest:
                return modules
            stamp.unlink(missing_ok=True)
            for name in _MANIFESTS:
                shutil.copyfile(src / name, cache / name)
            print(f"bolide: installing the Node.js client ({package}) with npm ci into {cache}",
                  file=sys.stderr, flush=True)
            cmd = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
            try:
                proc = subprocess.run(cmd, cwd=cache, capture_output=True, text=True,
                                      timeout=INSTALL_TIMEOUT, check=False)
            except subprocess.TimeoutExpired:
                raise RocketMQUnavailable(f"npm ci in {cache} did not finish in {INSTALL_TIMEOUT:.0f}s; "
                                          "check that the npm registry is reachable") from None
            if proc.returncode != 0 or not (modules / package).is_dir():
                raise RocketMQUnavailable(f"npm ci failed in {cache} (exit {proc.returncode}); check that "
                                          f"the npm registry is reachable:\n{proc.stdout[-4000:]}"
                                          f"{proc.stderr[-4000:]}")
            stamp.write_text(digest + "\n")
            return modules
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def node_client_command(name: str = "node-client") -> list[str]:
    """Install the packages if needed and return the driver's command line (run it with
    :func:`node_env` of the same ``name``)."""
    install_node_client(name)
    src, _ = node_dirs(name)
    return ["node", str(src / "driver.js")]


def node_env(home: Path | None = None, name: str = "node-client") -> dict[str, str]:
    """The environment for a driver: ``NODE_PATH`` pointing at the installed packages; ``home``
    (if given) becomes ``HOME``."""
    _, cache = node_dirs(name)
    env = dict(os.environ)
    env["NODE_PATH"] = str(cache / "node_modules")
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
        env["HOME"] = str(home)
    return env


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bolide.testing.nodeclient prepare``: install the packages ahead of the tests."""
    return prepare_main(argv, "bolide.testing.nodeclient", "the Node.js client interop tests",
                        lambda: [f"RocketMQ Node.js client ({package}) ready ({install_node_client(name)})"
                                 for name, package in NODE_CLIENTS.items()])


if __name__ == "__main__":
    raise SystemExit(main())
