"""The targets of ``bolide bench broker``'s report, checked against the figures of the cases."""

from __future__ import annotations

from bolide.cli.bench_broker_report import MEMORY_LIMIT_MIB, target_rows


def test_the_memory_target_is_the_brokers_own_memory() -> None:
    cases = {"send_1k": {"msgs_s": 41_000.0, "anon_mib": 30.0, "peak_rss_mib": 900.0},
             "pull_100b": {"msgs_s": 480_000.0, "anon_mib": 35.0, "peak_rss_mib": 1_000.0}}
    rows = {row["target"]: row for row in target_rows(cases)}
    memory = [row for row in rows.values() if row["case"] == "*"]
    assert [row["figure"] for row in memory] == ["anon_mib"]  # mapped store pages are not held to it
    assert memory[0]["measured"] == 35.0 and memory[0]["met"] is True
    assert rows["single sends >= 40,000 msgs/s at 1 KiB"]["met"] is True
    assert rows["pulls >= 500,000 msgs/s at 100 B"]["met"] is False
    assert rows["batched sends >= 400,000 msgs/s"]["met"] is None  # not measured
    over = target_rows({"send_1k": {"anon_mib": MEMORY_LIMIT_MIB + 1.0}})
    assert [row["met"] for row in over if row["case"] == "*"] == [False]
