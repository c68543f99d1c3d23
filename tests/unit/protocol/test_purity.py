"""The protocol package is a pure codec: no network or event-loop imports, and it works the
same with or without orjson."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bolide.common import fastjson
from bolide.protocol import serialize_json
from bolide.protocol.bodies import TopicStatsTable
from bolide.protocol.serialize_json import decode_json_header, encode_json_header

PROTOCOL = Path(__file__).resolve().parents[3] / "src" / "bolide" / "protocol"
IO_MODULES = {"socket", "asyncio", "selectors", "ssl", "http", "urllib", "threading.Timer"}


@pytest.mark.parametrize("path", sorted(PROTOCOL.rglob("*.py")), ids=lambda p: p.name)
def test_protocol_modules_import_no_io(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in IO_MODULES, f"{path.name} imports {name}"


def test_stdlib_json_fallback_gives_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    line = (b'{"code":0,"extFields":{"MSG_REGION":"DefaultRegion","msgId":"\\u0001\xc3\xa9"},"flag":1,'
            b'"language":"JAVA","opaque":17,"remark":"r","serializeTypeCurrentRPC":"JSON","version":409}')
    fast = decode_json_header(line)
    monkeypatch.setattr(fastjson, "orjson", None)
    monkeypatch.setattr(serialize_json, "orjson", None)
    slow = decode_json_header(line)
    assert slow == fast and encode_json_header(slow) == line
    table = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":5}}}'
    assert TopicStatsTable.decode(table).encode() == table.replace(b'{"maxOffset":5}', (
        b'{"lastUpdateTimestamp":0,"maxOffset":5,"minOffset":0}'))
