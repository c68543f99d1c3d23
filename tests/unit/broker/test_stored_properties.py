"""The send header's properties as the broker stores them (``stored_properties``): WAIT,
CLUSTER, MSG_REGION and TRACE_ON pairs dropped (and DELAY for a dead letter), the broker's own
set; the compiled twin gives the Python function's bytes on any text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.broker.processors.send import (
    _properties_without,
    broker_properties,
    stored_properties,
    stored_properties_pure,
)

ADDED = "MSG_REGION\x01DefaultRegion\x02TRACE_ON\x01true\x02CLUSTER\x01C\x02"


@pytest.mark.parametrize(("text", "dead", "stored"), [
    (None, False, ADDED),
    ("", False, ADDED),
    ("TAGS\x01a\x02WAIT\x01true\x02", False, "TAGS\x01a\x02" + ADDED),
    ("WAIT\x01false\x02KEYS\x01k", False, "KEYS\x01k\x02" + ADDED),  # last pair unterminated
    ("CLUSTER\x01other\x02A\x01b\x02", False, "A\x01b\x02" + ADDED),
    ("MSG_REGION\x01r\x02TRACE_ON\x01false\x02A\x01b", False, "A\x01b\x02" + ADDED),  # the broker's own
    ("NOWAIT\x01x\x02XCLUSTER\x01y\x02", False, "NOWAIT\x01x\x02XCLUSTER\x01y\x02" + ADDED),
    ("DELAY\x013\x02A\x01b\x02", False, "DELAY\x013\x02A\x01b\x02" + ADDED),
    ("DELAY\x013\x02A\x01b\x02", True, "A\x01b\x02" + ADDED),
    ("A\x01\u00e9\x02WAIT\x01true", False, "A\x01\u00e9\x02" + ADDED),  # not ASCII
    ("\x02\x02WAIT\x01true\x02", False, "\x02\x02" + ADDED),
])
def test_stored_properties(text: str | None, dead: bool, stored: str) -> None:
    assert stored_properties(text, broker_properties("C"), dead=dead) == stored.encode()
    assert stored_properties_pure(text, broker_properties("C"), dead=dead) == stored.encode()


def test_trace_off_is_stored() -> None:
    assert broker_properties("C", trace_on=False) == ADDED.replace("TRACE_ON\x01true", "TRACE_ON\x01false")


pieces = st.sampled_from(["WAIT\x01", "CLUSTER\x01", "DELAY\x01", "true", "x", "\x01", "\x02",
                          "NOWAIT\x01", "é", "TAGS\x01a", "MSG_REGION\x01", "TRACE_ON\x01"])


@pytest.mark.skipif(_properties_without is None, reason="bolide.protocol._codec is not built")
@settings(max_examples=500, deadline=None)
@given(st.lists(pieces, max_size=12).map("".join), st.booleans(),
       st.sampled_from(["DefaultCluster", "c", "é"]))
def test_compiled_stored_properties_match_python(text: str, dead: bool, cluster: str) -> None:
    added = broker_properties(cluster)
    assert stored_properties(text, added, dead=dead) == stored_properties_pure(text, added, dead=dead)
