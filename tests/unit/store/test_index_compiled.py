"""The compiled index build (bolide.store._index) writes the same IndexFiles as the Python
path (IndexService.build), record for record, including the records it hands back to it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bolide.common import sysflag
from bolide.common.message import Message
from bolide.store import MessageStore, index_builder
from bolide.store.index_file import COMPILED
from conftest import assert_consistent, small_config

TINY_INDEX = {"max_hash_slot_num": 7, "max_index_num": 40}

message_st = st.fixed_dictionaries({
    "topic": st.sampled_from(["T", "Orders", "a%b"]),
    "keys": st.lists(st.sampled_from(["k1", "k2", "ordér", "a b", "", "x" * 40]), max_size=4),
    "uniq": st.sampled_from([None, "", "ID1", "ÍD"]),
    "tx": st.sampled_from([0, 0, 0, sysflag.TRANSACTION_PREPARED_TYPE,
                           sysflag.TRANSACTION_COMMIT_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE]),
    "born_host": st.sampled_from([None, None, "[::1]:9876"]),
    "body": st.binary(max_size=200),
})


def _index_files(root: Path) -> list[bytes]:
    where = root / "index"
    return [p.read_bytes() for p in sorted(where.iterdir())] if where.is_dir() else []


@pytest.mark.skipif(not COMPILED, reason="the compiled index build")
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=st.lists(message_st, min_size=1, max_size=60))
def test_compiled_and_python_index_builds_write_the_same_files(
        msgs: list[dict[str, object]], tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path_factory.mktemp("log")
    cfg = small_config(base, message_index_enable=False, mapped_file_size_commit_log=4096,
                       **TINY_INDEX)
    with MessageStore(cfg) as store:
        for m in msgs:
            props = {"UNIQ_KEY": m["uniq"]} if m["uniq"] is not None else {}
            msg = Message(str(m["topic"]), m["body"], keys=m["keys"] or None,  # type: ignore[arg-type]
                          properties=props)
            assert store.put_message(msg, 0, sys_flag=int(m["tx"]),  # type: ignore[call-overload]
                                     born_host=m["born_host"]).ok
    built = {}
    for compiled in (True, False):
        root = tmp_path_factory.mktemp("compiled" if compiled else "python")
        shutil.rmtree(root)
        shutil.copytree(base, root)
        monkeypatch.setattr(index_builder, "COMPILED", compiled)
        with MessageStore(cfg.replace(store_path_root_dir=str(root),
                                      message_index_enable=True)) as store:
            assert store.wait_dispatched(timeout=30)
        built[compiled] = _index_files(root)
        assert_consistent(cfg.replace(store_path_root_dir=str(root), message_index_enable=True))
    assert built[True] == built[False]


@pytest.mark.skipif(not COMPILED, reason="the compiled index build")
def test_queries_find_what_the_compiled_build_indexed(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path, **TINY_INDEX)) as store:
        ids = []
        for i in range(300):  # several index files
            r = store.put_message(Message("T", f"m{i}".encode(), keys=[f"k{i}", "all"]), 0)
            ids.append(r.msg_id)
        assert store.wait_dispatched(timeout=30)
        assert len(list((tmp_path / "index").iterdir())) > 5
        for i in (0, 150, 299):
            assert [m.body for m in store.query_message("T", f"k{i}", 4, 0, 1 << 62)] == [
                f"m{i}".encode()]
            assert store.query_message("T", ids[i], 4, 0, 1 << 62)[0].body == f"m{i}".encode()
        assert len(store.query_message("T", "all", 32, 0, 1 << 62)) == 32


@pytest.mark.skipif(not COMPILED, reason="the compiled index build")
def test_a_page_that_cannot_be_allocated_skips_one_message_and_indexes_the_rest_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk when a page is needed: that message's key stays unindexed (its UNIQ_KEY,
    indexed first, is in when the failing page was the key's), the ones before and after are
    indexed exactly once. The page fails until the Python path (which the compiled loop hands
    the record to when its allocation fails) has met the failure once: which path meets it
    first depends on the index thread's timing, the outcome must not. Which of the two keys
    needs the failing page depends on the hash slot of the random UNIQ_KEY."""
    import mmap
    import sys

    from bolide.store.index_file import IndexFile

    real = IndexFile._allocate
    calls = [0]
    failing_page = [-1]

    def allocate_failing_once(self: IndexFile, offset: int) -> None:
        calls[0] += 1
        if calls[0] == 4:  # fault injection: ENOSPC for this page...
            failing_page[0] = offset // mmap.PAGESIZE
        if offset // mmap.PAGESIZE == failing_page[0]:
            if sys._getframe(1).f_code.co_name == "put":  # ...until IndexFile.put met it
                failing_page[0] = -1
            raise OSError(28, "No space left on device")
        real(self, offset)

    monkeypatch.setattr(IndexFile, "_allocate", allocate_failing_once)
    n = 12_000  # 24,000 entries: two allocations of entry pages
    with MessageStore(small_config(tmp_path, mapped_file_size_commit_log=64 << 20,
                                   max_hash_slot_num=1024, max_index_num=100_000)) as store:
        for i in range(n):
            assert store.put_message(Message("T", b"m", keys=[f"k{i}"]), 0).ok
        assert store.wait_dispatched(timeout=60)
        hits = [len(store.query_message("T", f"k{i}", 4, 0, 1 << 62)) for i in range(n)]
        assert store.index is not None
        entries = sum(f.index_count - 1 for f in store.index.files)
    assert calls[0] > 4
    # UNIQ_KEY and key of every message but one, no entry twice
    assert entries in (2 * (n - 1), 2 * (n - 1) + 1), entries
    assert set(hits) <= {0, 1} and hits.count(0) == 1, hits.count(0)
