"""Checks of single configuration values, shared by the configuration's readers
(`blksim.sim.config` for runs, `blksim.sim.storage_config` for devices, partitions and
volumes): every error names where the value is, what was expected and what was found."""

from __future__ import annotations

from blksim.common.units import parse_time


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message says where and why."""


def check_keys(table, valid: dict | tuple, where: str) -> None:
    """``table`` must be a table whose keys are all in ``valid`` (unknown ones list the valid)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table, found {type(table).__name__}")
    names = list(valid)
    for key in table:
        if key not in valid:
            raise ConfigError(f"{where}: unknown key {key!r}; valid keys: {', '.join(names)}")


def int_value(table: dict, key: str, where: str, default, lo: int, hi: int):
    """``table[key]`` (or ``default``) as a whole number in [lo, hi]."""
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: {key} must be a whole number, found {value!r}")
    if not lo <= value <= hi:
        raise ConfigError(f"{where}: {key} = {int_text(value)} is out of range [{lo}, {hi}]")
    return value


def int_text(value: int) -> str:
    """``value`` for a message; one too long for str() (PyPy's TOML reader takes integers
    of any length, str() refuses more than 4,300 digits) as its sign and size."""
    if value.bit_length() <= 1000:
        return str(value)
    return f"{'-' if value < 0 else ''}a number of about {value.bit_length() * 0.30103:,.0f} digits"


def time_value(table: dict, key: str, where: str, default):
    """``table[key]`` (or ``default``) as a time in seconds, not negative (\"3ms\", 0.5)."""
    value = table.get(key, default)
    if value is None:
        return None
    try:
        seconds = parse_time(value, key, "s")
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if seconds < 0:
        raise ConfigError(f"{where}: {key} must not be negative, found {value!r}")
    return seconds


def seconds_text(value: float) -> str:
    """A time for a resolved configuration, in plain decimals that `parse_time` reads
    back (``repr`` may give an exponent: 5e-05)."""
    text = repr(float(value))
    if "e" in text or "E" in text:
        from decimal import Decimal
        text = format(Decimal(text), "f")        # the same shortest digits, positional
    return text + "s"


def sectors_value(table: dict, key: str, where: str, default=None,
                  positive: bool = False) -> int:
    """``table[key]`` (or ``default``), bytes in fio's units, as 512-byte sectors: a
    multiple of 512 (and more than 0 with ``positive``)."""
    from blksim.common.units import parse_size
    given = table.get(key, default)
    try:
        value = parse_size(given, key)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if value % 512 or (positive and value <= 0):
        raise ConfigError(f"{where}: {key} expected a {'positive ' if positive else ''}"
                          f"multiple of 512 bytes, found {given!r}")
    return value // 512
