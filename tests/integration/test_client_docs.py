"""Every ```python block of docs/client.md runs against an in-process NameServer + Broker."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path

import pytest

from bolide.testing.servers import running_servers

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.S | re.M)


def test_the_guide_has_examples() -> None:
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(tmp_path: Path, index: int) -> None:
    source = BLOCKS[index]

    async def main() -> None:
        async with running_servers(tmp_path / "store") as servers:
            namespace = {"NAMESRV": servers.namesrv_addr, "__name__": "example"}
            # examples call asyncio.run() or block: run them off the servers' loop
            await asyncio.wait_for(asyncio.to_thread(exec, compile(source, f"client.md[{index}]", "exec"),
                                                     namespace), 30)

    asyncio.run(main())
    assert not [t for t in threading.enumerate() if t.name.startswith("bolide-client")]
