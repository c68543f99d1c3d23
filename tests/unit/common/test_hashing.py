"""Java ``String.hashCode()`` over UTF-16 code units, and the ConsumeQueue tags code."""

import pytest

from bolide.common.hashing import java_string_hash, tags_code


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TagA", 2598919),  # spec 0.2 test vectors
        ("TagB", 2598920),
        ("polygenelubricants", -2147483648),
        ("", 0),
        ("a", 97),
        ("Aa", 2112),  # the classic collision pair
        ("BB", 2112),
        ("hello", 99162322),
    ],
)
def test_ascii_vectors(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_non_bmp_string_hashes_utf16_surrogates() -> None:
    # "é😀": é = U+00E9 (233); 😀 = U+1F600 -> surrogate pair D83D DE00 (55357, 56832).
    # h = 233; h = 233*31 + 55357 = 62580; h = 62580*31 + 56832 = 1996812
    assert java_string_hash("é😀") == 1996812
    # A code-point based hash (233*31 + 0x1F600 = 135447) would be wrong.
    assert java_string_hash("é😀") != 233 * 31 + 0x1F600


def test_bmp_non_ascii_string() -> None:
    # 中 = U+4E2D (20013), 文 = U+6587 (25991): 20013*31 + 25991 = 646394
    assert java_string_hash("中文") == 646394


def test_non_ascii_overflow_wraps_to_signed_int() -> None:
    text = "Ünïcödé-😀-" * 7
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) % 2**32
    expected = h - 2**32 if h >= 2**31 else h
    assert java_string_hash(text) == expected
    assert -(2**31) <= java_string_hash(text) < 2**31


def test_result_is_always_a_signed_32_bit_int() -> None:
    for text in ("polygenelubricants", "x" * 100, "zzzzzzzz", "TopicTest#order-1"):
        assert -(2**31) <= java_string_hash(text) < 2**31


def test_tags_code() -> None:
    assert tags_code("TagA") == 2598919
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("polygenelubricants") == -2147483648
