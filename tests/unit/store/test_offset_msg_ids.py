"""A put's broker-side ids (PutMessageResult.offset_msg_ids): the compiled batch form gives
the ids create_offset_msg_id gives one by one."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.common.msgid import create_offset_msg_id, decode_offset_msg_id
from bolide.store import results
from bolide.store.results import PutMessageResult, PutStatus


def one_by_one(host: bytes, offset: int, sizes: list[int]) -> list[str]:
    ids = []
    for size in sizes:
        ids.append(create_offset_msg_id(host, offset))
        offset += size
    return ids


def test_the_compiled_ids_are_built() -> None:
    if os.environ.get("BOLIDE_PURE_PYTHON") == "1":
        assert results._compiled_ids is None
    else:
        assert results._compiled_ids is not None, "bolide.store._append is not built"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([bytes.fromhex("7F0000010000B073"), bytes(range(20)), b"\xff" * 8]),
       st.integers(0, 2**62), st.lists(st.integers(1, 4 << 20), max_size=70))
def test_batch_ids_are_the_one_by_one_ids(host: bytes, offset: int, sizes: list[int]) -> None:
    result = PutMessageResult(PutStatus.PUT_OK, wrote_offset=offset, store_host=host,
                              record_sizes=sizes)
    assert result.offset_msg_ids == one_by_one(host, offset, sizes)
    if results._compiled_ids is not None:
        assert results._compiled_ids(host, offset, sizes) == one_by_one(host, offset, sizes)


def test_ids_decode_back_to_their_offsets() -> None:
    host = bytes.fromhex("7F0000010000B073")  # 127.0.0.1:45171
    result = PutMessageResult(PutStatus.PUT_OK, wrote_offset=1 << 33, store_host=host,
                              record_sizes=[230, 1000, 5])
    assert [decode_offset_msg_id(i) for i in result.offset_msg_ids] == [
        ("127.0.0.1:45171", (1 << 33) + at) for at in (0, 230, 1230)]


@pytest.mark.skipif(results._compiled_ids is None, reason="the compiled ids (not built)")
def test_an_offset_past_int64_is_refused() -> None:
    assert results._compiled_ids is not None
    with pytest.raises(OverflowError):
        results._compiled_ids(bytes(8), 2**63 - 10, [100, 100])
