"""The ``WAIT`` message property (waitStoreMsgOK) read from v1 and v2 send headers."""

from __future__ import annotations

import pytest

from bolide.broker.processors.send import waits_for_store


@pytest.mark.parametrize(("fields", "waits"), [
    ({}, True),
    ({"properties": "WAIT\x01true\x02"}, True),
    ({"properties": "WAIT\x01false\x02"}, False),
    ({"i": "TAGS\x01a\x02WAIT\x01false"}, False),  # v2 header, last pair without a separator
    ({"i": "TAGS\x01a\x02WAIT\x01falsey\x02"}, True),  # another value
    ({"i": "NOWAIT\x01false\x02"}, True),  # another key ending in WAIT
    ({"i": "X\x01WAIT\x01false\x02WAIT\x01false\x02"}, False),  # found after a false match
])
def test_wait_false_is_recognised_exactly(fields: dict[str, str], waits: bool) -> None:
    assert waits_for_store(fields) is waits
