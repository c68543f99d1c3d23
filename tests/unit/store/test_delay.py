"""messageDelayLevel parsing."""

import pytest

from bolide.errors import ConfigError
from bolide.store.config import DEFAULT_DELAY_LEVELS
from bolide.store.delay import parse_delay_levels


def test_default_levels() -> None:
    levels = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    assert len(levels) == 18
    assert min(levels) == 1 and max(levels) == 18
    assert levels[1] == 1000
    assert levels[2] == 5000
    assert levels[4] == 30_000
    assert levels[5] == 60_000
    assert levels[16] == 1_800_000
    assert levels[18] == 7_200_000


def test_units_and_spacing() -> None:
    assert parse_delay_levels("  2s\t3m  1h 1d ") == {1: 2000, 2: 180_000, 3: 3_600_000, 4: 86_400_000}
    assert parse_delay_levels("") == {}


@pytest.mark.parametrize("text", ["1x", "s", "10", "1.5s", "-1s", "1S", "²s", "1s 2"])
def test_bad_items_raise_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="messageDelayLevel"):
        parse_delay_levels(text)
