"""The official Apache RocketMQ Go client (``rocketmq-client-go/v2``, pinned in
``interop/go-client/go.mod``) built into a small driver for interop tests.

``interop/go-client/main.go`` offers ``produce <namesrv> <topic> <n>`` and
``consume <namesrv> <topic> <group> <n> <timeoutSec>`` (see its package comment). The modules and the
build cache live in ``interop/.gocache`` (git-ignored), so a CI run downloads them once; the binary
goes to ``interop/.gocache/bin/goclient``. ``python -m bolide.testing.rocketmq prepare`` builds it
too (``make interop-deps``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bolide.testing.rocketmq import RocketMQUnavailable, interop_dir

_GO_HINT = "install Go 1.22+ (https://go.dev/dl/) and make sure go is on PATH"
BUILD_TIMEOUT = 900.0


def go_dirs() -> tuple[Path, Path]:
    """The Go module source and the git-ignored cache directory."""
    return interop_dir() / "go-client", interop_dir() / ".gocache"


def go_env(home: Path | None = None) -> dict[str, str]:
    """The environment for ``go`` and for the built client: caches inside the project, no toolchain
    download; ``home`` (if given) becomes ``HOME``, where the client may write its files."""
    _, cache = go_dirs()
    env = dict(os.environ)
    env.update(GOMODCACHE=str(cache / "mod"), GOCACHE=str(cache / "build"), GOTOOLCHAIN="local",
               GOFLAGS="-mod=mod")
    env.setdefault("GOPROXY", "https://proxy.golang.org,direct")
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
        env["HOME"] = str(home)
    return env


def go_client_binary() -> Path:
    """Build ``interop/go-client`` (once; rebuilt when a source file is newer) and return the binary."""
    src, cache = go_dirs()
    if shutil.which("go") is None:
        raise RocketMQUnavailable(f"go not found on PATH; the Go client interop test needs it: {_GO_HINT}")
    if not (src / "go.mod").is_file():
        raise RocketMQUnavailable(f"{src / 'go.mod'} does not exist; run from a source checkout or set "
                                  "BOLIDE_INTEROP_DIR")
    binary = cache / "bin" / "goclient"
    binary.parent.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            newest = max(p.stat().st_mtime for p in src.iterdir() if p.is_file())
            if binary.is_file() and binary.stat().st_mtime >= newest:
                return binary
            print(f"bolide: building the RocketMQ Go client driver (modules cached in {cache})",
                  file=sys.stderr, flush=True)
            cmd = ["go", "build", "-o", str(binary), "."]
            proc = subprocess.run(cmd, cwd=src, env=go_env(), capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT, check=False)
            if proc.returncode != 0 or not binary.is_file():
                raise RocketMQUnavailable(f"go build failed in {src} (exit {proc.returncode}):\n"
                                          f"{proc.stdout[-4000:]}{proc.stderr[-4000:]}")
            return binary
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
