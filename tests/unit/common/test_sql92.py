"""The SQL92 selector against RocketMQ's semantics (rocketmq-filter): grammar, three-valued
logic, Java's conversions of property strings, and the parse errors."""

from __future__ import annotations

import re

import pytest

from bolide.common.sql92 import MAX_DEPTH, SelectorCache, SelectorError, compile_selector


@pytest.mark.parametrize(("expression", "props", "expected"), [
    ("a > 5", {"a": "10"}, True),
    ("a > 5", {"a": "3"}, False),
    ("a > 5", {}, False),  # NULL: unknown
    ("a > 5", {"a": "ten"}, False),  # cannot be converted: the whole expression fails
    ("a > 5 OR b = 'x'", {"a": "ten", "b": "x"}, False),
    ("b = 'x' OR a > 5", {"a": "ten", "b": "x"}, True),  # decided before the failing part
    ("a = 5", {"a": "5"}, True),
    ("a = 5", {"a": "5.0"}, False),  # read as Java's Integer: not an integer
    ("a = 5.0", {"a": "5"}, True),  # read as a Double
    ("a > 5", {"a": "3000000000"}, False),  # beyond Java's Integer
    ("a > 3000000000", {"a": "4000000000"}, True),  # a Long literal reads a Long
    ("a = 10L", {"a": "10"}, True),
    ("a > b", {"a": "2.5", "b": "1"}, True),  # two properties: compared as doubles
    ("a < 1e3", {"a": "999.5"}, True),
    ("a >= -2", {"a": "-2"}, True),
    ("a = TRUE", {"a": "true"}, True),
    ("a = TRUE", {"a": "yes"}, False),
    ("a = 'it''s'", {"a": "it's"}, True),
    ("a <> 'x'", {"a": "y"}, True),
    ("a <> 'x'", {}, False),
    ("a BETWEEN 1 AND 3", {"a": "2"}, True),
    ("a BETWEEN 1 AND 3", {"a": "4"}, False),
    ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
    ("a IN ('x', 'y')", {"a": "y"}, True),
    ("a NOT IN ('x', 'y')", {"a": "z"}, True),
    ("a NOT IN ('x')", {}, False),
    ("a IS NULL", {}, True),
    ("a IS NOT NULL", {}, False),
    ("a IS NOT NULL", {"a": ""}, True),
    ("NOT (a = 'x')", {}, False),  # NOT unknown is unknown
    ("NOT (a = 'x')", {"a": "y"}, True),
    ("a = 'x' AND b = 'y'", {"a": "x"}, False),
    ("a = 'x' OR b = 'y'", {"a": "x"}, True),
    ("a CONTAINS 'bc'", {"a": "abcd"}, True),
    ("a NOT CONTAINS 'bc'", {}, False),
    ("a NOT CONTAINS 'zz'", {"a": "abcd"}, True),
    ("a STARTSWITH 'ab'", {"a": "abc"}, True),
    ("a ENDSWITH 'cd'", {"a": "abcd"}, True),
    ("a CONTAINS ''", {"a": "abcd"}, False),
    ("TAGS = 'A' and KEYS is not null", {"TAGS": "A", "KEYS": "k"}, True),  # keywords in any case
    ("a", {"a": "true"}, False),  # a bare property is never TRUE (properties are strings)
    ("TRUE", {}, True),
    ("FALSE OR (x = 1)", {"x": "1"}, True),
])
def test_matches(expression: str, props: dict[str, str], expected: bool) -> None:
    assert compile_selector(expression).matches(props) is expected


@pytest.mark.parametrize(("expression", "error"), [
    ("", "empty"),
    ("a > 'x'", "cannot be compared"),
    ("a = NULL", "cannot be compared"),
    ("a > TRUE", "cannot be compared"),
    ("TRUE = 'x'", "cannot be compared with"),
    ("a >", "expected a value"),
    ("a IN (1)", "expected a string literal"),
    ("5 IN ('a')", "Expected a property"),
    ("a BETWEEN 3 AND 1", "Illegal values of between"),
    ("(a = 1", "expected )"),
    ("a = 0.0", "double range"),  # as RocketMQ: below Double.MIN_VALUE
    ("'x'", "will not result in a boolean"),
    ("5", "will not result in a boolean"),
    ("a == 1", "expected a value"),
    ("a LIKE 'x'", "unexpected token"),
    ("a = 1 b", "unexpected token"),
    ("a = 007", "unexpected token"),
    ("a = \"x\"", "unexpected character"),
    ("99999999999999999999 = a", "long range"),
    ("(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1), "deeper"),
    ("a = '" + "x" * 20_000 + "'", "longer"),
])
def test_parse_errors_say_what_is_wrong(expression: str, error: str) -> None:
    with pytest.raises(SelectorError, match=re.escape(error)):
        compile_selector(expression)


def test_the_cache_keeps_the_latest_and_remembers_errors() -> None:
    cache = SelectorCache(size=2)
    first = cache.get("a = 1")
    assert cache.get("a = 1") is first
    cache.get("b = 1")
    cache.get("c = 1")  # "a = 1" was the least recent
    assert cache.get("a = 1") is not first
    for _ in range(2):
        with pytest.raises(SelectorError):
            cache.get("a >")


def test_long_and_or_chains_are_evaluated_and_deep_nesting_is_refused() -> None:
    terms = [f"a={i}" for i in range(1500)]  # far past Python's recursion limit if nested
    assert compile_selector(" OR ".join(terms)).matches({"a": "1499"}) is True
    assert compile_selector(" AND ".join(["a=1"] * 2000)).matches({"a": "1"}) is True
    with pytest.raises(SelectorError, match="deeper"):
        compile_selector(" = ".join(["a"] + ["TRUE"] * (MAX_DEPTH + 1)))
