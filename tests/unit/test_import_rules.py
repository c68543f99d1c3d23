"""The layering rules of the design, checked on the source: imports point downward only."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "bolide"

# package -> packages of bolide it may import (besides itself and bolide.errors)
ALLOWED = {
    "common": set(),
    "store": {"common"},
    "protocol": {"common"},
    "remoting": {"common", "protocol"},
    # Prometheus' text and its HTTP endpoint, shared by the broker and the controller
    "metrics": {"common"},
    "controller": {"common", "protocol", "remoting", "metrics"},
    # enableControllerInNamesrv runs a controller beside the NameServer
    "namesrv": {"common", "protocol", "remoting", "controller"},
    "broker": {"common", "protocol", "remoting", "store", "metrics"},
    "client": {"common", "protocol", "remoting"},
    "spark": {"common", "client", "store"},
    "cli": {"common", "store", "protocol", "remoting", "namesrv", "controller", "broker", "client",
            "spark", "testing", "metrics"},
    # test helpers sit at the top beside cli (nothing imports them); the fuzzer's record
    # targets exercise the Spark readers' decoder
    "testing": {"common", "store", "protocol", "remoting", "namesrv", "controller", "broker", "client",
                "spark", "metrics"},
}
NETWORK_MODULES = {"socket", "asyncio", "selectors", "ssl", "http", "urllib"}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.parent != SRC)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_layers_import_downward(path: Path) -> None:
    package = path.relative_to(SRC).parts[0]
    allowed = ALLOWED.get(package)
    assert allowed is not None, f"package {package} has no layering rule in this test"
    for line, name in _imports(path):
        parts = name.split(".")
        if parts[0] != "bolide" or len(parts) < 2:
            continue
        target = parts[1]
        if target in (package, "errors", "__init__"):
            continue
        assert target in allowed, f"{path.name}:{line} imports bolide.{target} from {package}"


@pytest.mark.parametrize("path", sorted((SRC / "store").rglob("*.py")),
                         ids=lambda p: p.name)
def test_store_never_imports_the_network(path: Path) -> None:
    for line, name in _imports(path):
        assert name.split(".")[0] not in NETWORK_MODULES, f"{path.name}:{line} imports {name}"


def test_nothing_imports_testing_helpers() -> None:
    for path in SRC.rglob("*.py"):
        if path.relative_to(SRC).parts[0] in ("testing", "cli"):
            continue
        for line, name in _imports(path):
            assert not name.startswith("bolide.testing"), f"{path}:{line} imports {name}"


@pytest.mark.parametrize("path", sorted((SRC / "client").rglob("*.py")), ids=lambda p: p.name)
def test_client_never_imports_servers_or_the_store(path: Path) -> None:
    """The client speaks the protocol only: no store (records are read with bolide.common.records),
    no broker, no NameServer, no test helpers."""
    for line, name in _imports(path):
        parts = name.split(".")
        if parts[0] == "bolide" and len(parts) > 1:
            assert parts[1] not in ("store", "broker", "namesrv", "testing", "cli", "spark"), \
                f"{path.name}:{line} imports {name}"
