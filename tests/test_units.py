"""traces.units: fio-style sizes and times."""

import math

import pytest
from hypothesis import given, strategies as st

from blksim.common.units import parse_size, parse_time


@pytest.mark.parametrize("value, expected", [
    (0, 0), (4096, 4096), ("512", 512), ("4k", 4096), ("4K", 4096), ("64K", 65536),
    ("4KiB", 4096), ("4kb", 4096), ("1m", 1 << 20), ("1M", 1 << 20), ("1MiB", 1 << 20),
    ("1g", 1 << 30), ("2t", 2 << 40), ("1.5k", 1536), ("0.5m", 1 << 19), (" 8k ", 8192),
    ("512b", 512), ("0x1000", 4096),
])
def test_parse_size_accepts_fio_sizes(value, expected):
    assert parse_size(value, "bs") == expected


@pytest.mark.parametrize("value", [
    "50%", "-1", -1, "4q", "", "k", "1.1", "4 k b", True, None, 4096.0, [4096], "1e3", "0x",
])
def test_parse_size_rejects_with_key_and_value(value):
    with pytest.raises(ValueError) as info:
        parse_size(value, "bssplit")
    message = str(info.value)
    assert message.startswith("bssplit: expected ")
    assert repr(value) in message


@given(st.integers(0, 1 << 40), st.sampled_from([("", 1), ("k", 1 << 10), ("M", 1 << 20),
                                                  ("gib", 1 << 30)]))
def test_parse_size_integer_times_suffix(number, suffix):
    text, mult = suffix
    assert parse_size(f"{number}{text}", "size") == number * mult


@pytest.mark.parametrize("value, unit, expected", [
    ("2ms", "us", 0.002), ("10us", "s", 1e-5), ("10usec", "s", 1e-5), ("1.5s", "us", 1.5),
    ("500ns", "s", 5e-7), ("3m", "s", 180.0), ("2min", "s", 120.0), ("1h", "s", 3600.0),
    ("1d", "s", 86400.0), ("7msec", "s", 0.007), ("4sec", "us", 4.0),
    (3, "us", 3e-6), (2.5, "s", 2.5), ("7", "us", 7e-6), ("7", "ms", 7e-3), (0, "s", 0.0),
])
def test_parse_time_units_and_default_unit(value, unit, expected):
    assert parse_time(value, "thinktime", unit) == pytest.approx(expected, rel=1e-15, abs=0)


@pytest.mark.parametrize("value", [
    "x", "-1", -1, -0.5, math.nan, math.inf, 10 ** 400, "9" * 400, "3 parsecs", "", True, None,
    "1e3", "2 m s",
])
def test_parse_time_rejects_with_key_and_value(value):
    with pytest.raises(ValueError) as info:
        parse_time(value, "runtime", "s")
    message = str(info.value)
    assert message.startswith("runtime: expected a time")
    assert repr(value)[:40] in message


def test_parse_time_rejects_unknown_default_unit():
    with pytest.raises(ValueError, match="default_unit"):
        parse_time(1, "runtime", "fortnight")


@given(st.integers(0, 10 ** 9))
def test_parse_time_microseconds_exact(us):
    # Dividing by 1e6 is correctly rounded, so "N us" is the float nearest N/1e6.
    assert parse_time(f"{us}us", "thinktime", "s") == us / 1e6
    assert parse_time(us, "thinktime", "us") == us / 1e6
