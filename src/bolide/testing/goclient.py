"""The official Apache RocketMQ Go clients built into small drivers for interop tests: the
remoting one (``rocketmq-client-go/v2``, pinned in ``interop/go-client/go.mod``) and the RocketMQ 5
gRPC one (``rocketmq-clients/golang/v5``, in ``interop/go5-client/go.mod``).

``interop/go-client/main.go`` offers ``produce <namesrv> <topic> <n>`` and
``consume <namesrv> <topic> <group> <n> <timeoutSec>`` (see its package comment);
``interop/go5-client/main.go`` offers ``scenario <endpoint>``. The modules and the build cache
live in ``interop/.gocache`` (git-ignored), so a CI run downloads them once; the binaries go to
``interop/.gocache/bin/``. ``python -m bolide.testing.rocketmq prepare`` builds them too (``make
interop-deps``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bolide.testing.rocketmq import RocketMQUnavailable, interop_dir

_GO_HINT = "install Go 1.25+ (https://go.dev/dl/) and make sure go is on PATH"
BUILD_TIMEOUT = 900.0


GO_CLIENT = "go-client"  # interop/<this>: rocketmq-client-go/v2 over remoting
GO5_CLIENT = "go5-client"  # interop/<this>: the RocketMQ 5 gRPC client


def go_dirs(name: str = GO_CLIENT) -> tuple[Path, Path]:
    """The Go module source of driver ``name`` and the git-ignored cache directory."""
    return interop_dir() / name, interop_dir() / ".gocache"


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


def go_client_binary(name: str = GO_CLIENT) -> Path:
    """Build ``interop/<name>`` (once; rebuilt when a source file is newer) and return the binary."""
    src, cache = go_dirs(name)
    if shutil.which("go") is None:
        raise RocketMQUnavailable(f"go not found on PATH; the Go client interop test needs it: {_GO_HINT}")
    if not (src / "go.mod").is_file():
        raise RocketMQUnavailable(f"{src / 'go.mod'} does not exist; run from a source checkout or set "
                                  "BOLIDE_INTEROP_DIR")
    binary = cache / "bin" / name.replace("-", "")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            newest = max(p.stat().st_mtime for p in src.iterdir() if p.is_file())
            if binary.is_file() and binary.stat().st_mtime >= newest:
                return binary
            print(f"bolide: building the RocketMQ Go client driver {name} (modules cached in {cache})",
                  file=sys.stderr, flush=True)
            # unoptimized (-N) and without inlining (-l): a third less compile time on an empty
            # build cache, and the drivers' speed is not what the tests measure
            cmd = ["go", "build", "-gcflags=all=-N -l", "-o", str(binary), "."]
            proc = subprocess.run(cmd, cwd=src, env=go_env(), capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT, check=False)
            if proc.returncode != 0 or not binary.is_file():
                raise RocketMQUnavailable(f"go build failed in {src} (exit {proc.returncode}):\n"
                                          f"{proc.stdout[-4000:]}{proc.stderr[-4000:]}")
            return binary
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
