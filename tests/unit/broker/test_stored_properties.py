"""The send header's properties as the broker stores them (``stored_properties``): WAIT and
CLUSTER pairs dropped (and DELAY for a dead letter), CLUSTER set; the compiled twin gives the
Python function's bytes on any text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.broker.processors.send import _properties_without, stored_properties, stored_properties_pure


@pytest.mark.parametrize(("text", "dead", "stored"), [
    (None, False, "CLUSTER\x01C\x02"),
    ("", False, "CLUSTER\x01C\x02"),
    ("TAGS\x01a\x02WAIT\x01true\x02", False, "TAGS\x01a\x02CLUSTER\x01C\x02"),
    ("WAIT\x01false\x02KEYS\x01k", False, "KEYS\x01k\x02CLUSTER\x01C\x02"),  # last pair unterminated
    ("CLUSTER\x01other\x02A\x01b\x02", False, "A\x01b\x02CLUSTER\x01C\x02"),
    ("NOWAIT\x01x\x02XCLUSTER\x01y\x02", False, "NOWAIT\x01x\x02XCLUSTER\x01y\x02CLUSTER\x01C\x02"),
    ("DELAY\x013\x02A\x01b\x02", False, "DELAY\x013\x02A\x01b\x02CLUSTER\x01C\x02"),
    ("DELAY\x013\x02A\x01b\x02", True, "A\x01b\x02CLUSTER\x01C\x02"),
    ("A\x01\u00e9\x02WAIT\x01true", False, "A\x01\u00e9\x02CLUSTER\x01C\x02"),  # not ASCII
    ("\x02\x02WAIT\x01true\x02", False, "\x02\x02CLUSTER\x01C\x02"),
])
def test_stored_properties(text: str | None, dead: bool, stored: str) -> None:
    assert stored_properties(text, "C", dead=dead) == stored.encode()
    assert stored_properties_pure(text, "C", dead=dead) == stored.encode()


pieces = st.sampled_from(["WAIT\x01", "CLUSTER\x01", "DELAY\x01", "true", "x", "\x01", "\x02",
                          "NOWAIT\x01", "é", "TAGS\x01a"])


@pytest.mark.skipif(_properties_without is None, reason="bolide.protocol._codec is not built")
@settings(max_examples=500, deadline=None)
@given(st.lists(pieces, max_size=12).map("".join), st.booleans(),
       st.sampled_from(["DefaultCluster", "c", "é"]))
def test_compiled_stored_properties_match_python(text: str, dead: bool, cluster: str) -> None:
    assert stored_properties(text, cluster, dead=dead) == stored_properties_pure(text, cluster, dead=dead)
