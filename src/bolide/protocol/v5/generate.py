"""Regenerate ``messaging_pb2.py`` and its type stub ``messaging_pb2.pyi`` from ``messaging.proto``
(needs the dev extra's grpcio-tools).

    python -m bolide.protocol.v5.generate

Only the message classes are generated: :mod:`bolide.broker.proxy.server` registers the
service's handlers itself, so no grpc stub module (and its version guard) is needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO = HERE / "messaging.proto"


def protoc_args(out_dir: Path) -> list[str]:
    """The protoc command line that compiles :data:`PROTO` into ``out_dir``."""
    from importlib.resources import files

    well_known = str(files("grpc_tools") / "_proto")
    return ["protoc", f"-I{HERE}", f"-I{well_known}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
            str(PROTO)]


def main() -> int:
    from grpc_tools import protoc

    return protoc.main(protoc_args(HERE))


if __name__ == "__main__":
    sys.exit(main())
