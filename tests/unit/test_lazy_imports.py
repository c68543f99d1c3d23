"""What a module costs to import where Spark only looks a data source up or builds it, and the
client package's names loaded on first use. Each import runs in a fresh interpreter."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest


def modules_after(statement: str) -> set[str]:
    """The modules loaded by a fresh interpreter after ``statement``."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


HEAVY = {"bolide.client.admin", "bolide.client.producer", "bolide.remoting", "bolide.spark.cluster",
         "bolide.spark.record_columns", "bolide.spark.store_reader", "bolide.spark.sink_sender",
         "numpy"}


@pytest.mark.parametrize("statement", [
    "import pyspark_bolide",
    "import pyspark_bolide_store",
    "import bolide.spark.sink",
    "from bolide.spark.store_source import RocketMQStoreDataSource as S; S(options={}).schema()",
    "from bolide.spark.source import RocketMQDataSource as S; S(options={}).schema()",
])
def test_looking_a_data_source_up_loads_no_client_nor_decoder(statement: str) -> None:
    pytest.importorskip("pyspark")
    assert modules_after(statement) & HEAVY == set()


def test_a_client_submodule_loads_only_what_it_needs() -> None:
    loaded = modules_after("import bolide.client.config")
    assert "bolide.client.config" in loaded
    assert not loaded & {"bolide.client.admin", "bolide.client.producer", "bolide.remoting"}


def test_every_client_name_is_there_on_first_use() -> None:
    import bolide.client as client

    for name in client.__all__:
        where = importlib.import_module(client._WHERE[name])
        assert getattr(client, name) is getattr(where, name), name
    assert set(client.__all__) <= set(dir(client))
    assert modules_after("from bolide.client import Producer, Message\nProducer, Message") >= {
        "bolide.client.producer", "bolide.common.message"}
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        _ = client.Nope  # type: ignore[attr-defined]
