"""A small TOML writer for blksim's own configuration shapes.

``tomllib`` only reads; the resolved configuration written next to results needs
the other direction (and `blksim drive import` writes presets with `toml_value`).
Supports tables, arrays of tables, and values that are strings, booleans,
integers, floats, (nested) lists of those and inline tables.
"""

from __future__ import annotations

import math


def _key(k: str) -> str:
    if k and all(c.isalnum() or c in "-_" for c in k):
        return k
    return _string(k)


def _string(s: str) -> str:
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{out}"'


def toml_value(v) -> str:
    """A TOML value: string, boolean, integer, float (nan and infinities included),
    (nested) array, or a dict as an inline table."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML: {v!r}")


def _is_table(v) -> bool:
    return isinstance(v, dict)


def _is_table_array(v) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, dict) for x in v)


def _emit(lines: list[str], table: dict, prefix: str) -> None:
    for k, v in table.items():
        if v is None or _is_table(v) or _is_table_array(v):
            continue
        lines.append(f"{_key(k)} = {toml_value(v)}")
    for k, v in table.items():
        name = f"{prefix}.{_key(k)}" if prefix else _key(k)
        if _is_table(v):
            lines.append("")
            lines.append(f"[{name}]")
            _emit(lines, v, name)
        elif _is_table_array(v):
            for item in v:
                lines.append("")
                lines.append(f"[[{name}]]")
                _emit(lines, item, name)


def dumps(data: dict) -> str:
    """Serialise a dict to TOML text (keys in insertion order; None values are left out)."""
    lines: list[str] = []
    _emit(lines, data, "")
    text = "\n".join(lines).lstrip("\n")
    return text + "\n"
