"""Sizes and times written the way fio writes them.

``parse_size`` turns ``4096``, ``"4k"``, ``"64KiB"``, ``"1m"`` into bytes;
``parse_time`` turns ``"2ms"``, ``"10us"``, ``1.5`` (in a default unit) into
seconds. Like fio with its default ``kb_base=1024``, every size prefix is a
power of two: ``k``, ``kb`` and ``kib`` all mean 1024. Errors are
``ValueError`` naming the key, what was expected and what was found.
"""

from __future__ import annotations

import math
import re

_SIZE_MULT = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
    "p": 1 << 50, "pb": 1 << 50, "pib": 1 << 50,
}

# fio's time suffixes (d, h, m, s, ms/msec, us/usec) plus ns, as (multiply, divide)
# to get seconds: dividing by 1e6 rounds correctly where multiplying by 1e-6 may not.
TIME_UNITS = {
    "ns": (1, 1e9), "nsec": (1, 1e9),
    "us": (1, 1e6), "usec": (1, 1e6),
    "ms": (1, 1e3), "msec": (1, 1e3),
    "s": (1, 1), "sec": (1, 1),
    "m": (60, 1), "min": (60, 1),
    "h": (3600, 1), "hr": (3600, 1), "hour": (3600, 1),
    "d": (86400, 1), "day": (86400, 1),
}

_NUMBER_UNIT = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*\Z")

SIZE_EXPECTED = "a size in bytes: an integer or a string such as '512', '4k', '64KiB', '1m', '1g'"
TIME_EXPECTED = "a time: a number ({unit}) or a string such as '500ns', '10us', '2ms', '1.5s', '3m', '1h'"


def parse_size(value, key: str) -> int:
    """Return ``value`` (an int of bytes or an fio-style size string) in bytes.

    Fractions are allowed when they come out whole (``"1.5k"`` is 1536).
    Raises ``ValueError`` naming ``key`` for anything else, including
    negative numbers, percentages and non-whole byte counts.
    """
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected {SIZE_EXPECTED}, found {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{key}: expected {SIZE_EXPECTED} (not negative), found {value!r}")
        return value
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 100:   # no size is this long (and int() refuses 4,300 digits)
            raise ValueError(f"{key}: expected {SIZE_EXPECTED}, found a value of "
                             f"{len(text)} characters")
        if text[:2].lower() == "0x":
            try:
                return int(text, 16)
            except ValueError:
                pass
        match = _NUMBER_UNIT.match(value)
        if match is not None:
            number, suffix = match.groups()
            mult = _SIZE_MULT.get(suffix.lower())
            if mult is not None:
                if "." not in number:
                    return int(number) * mult
                whole, _, frac = number.partition(".")
                # Exact arithmetic: "1.5k" must not go through a float.
                numerator = int(whole or "0") * 10 ** len(frac) + int(frac or "0")
                total, rest = divmod(numerator * mult, 10 ** len(frac))
                if rest == 0:
                    return total
                raise ValueError(f"{key}: expected a whole number of bytes, found {value!r}")
    raise ValueError(f"{key}: expected {SIZE_EXPECTED}, found {value!r}")


def parse_time(value, key: str, default_unit: str) -> float:
    """Return ``value`` in seconds.

    ``value`` is a number, taken in ``default_unit`` (one of ``TIME_UNITS``,
    e.g. ``"us"`` for fio's thinktime, ``"s"`` for runtime), or a string with
    an optional unit suffix. Raises ``ValueError`` naming ``key`` for negative,
    non-finite or unparsable values.
    """
    scale = TIME_UNITS.get(default_unit)
    if scale is None:
        raise ValueError(f"default_unit must be one of {sorted(TIME_UNITS)}, found {default_unit!r}")
    expected = TIME_EXPECTED.format(unit=f"default unit {default_unit}")
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected {expected}, found {value!r}")
    if isinstance(value, (int, float)):
        seconds = _seconds(value, scale)
        if seconds is None or value < 0:
            raise ValueError(f"{key}: expected {expected} (finite, not negative), found {value!r}")
        return seconds
    if isinstance(value, str):
        match = _NUMBER_UNIT.match(value)
        if match is not None:
            number, suffix = match.groups()
            unit_scale = TIME_UNITS.get(suffix.lower()) if suffix else scale
            if unit_scale is not None:
                seconds = _seconds(float(number), unit_scale)
                if seconds is not None:
                    return seconds
    raise ValueError(f"{key}: expected {expected}, found {value!r}")


def _seconds(number, scale) -> float | None:
    """``number`` times a TIME_UNITS scale, or None when it is not finite."""
    try:
        seconds = float(number) * scale[0] / scale[1]
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None
