"""A small TOML writer for blksim's own configuration shapes.

``tomllib`` only reads; the resolved configuration written next to results needs
the other direction. Supports tables, arrays of tables, and values that are
strings, booleans, integers, floats and (nested) lists of those.
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


def _value(v) -> str:
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
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML: {v!r}")


def _is_table(v) -> bool:
    return isinstance(v, dict)


def _is_table_array(v) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, dict) for x in v)


def _emit(lines: list[str], table: dict, prefix: str) -> None:
    for k, v in table.items():
        if v is None or _is_table(v) or _is_table_array(v):
            continue
        lines.append(f"{_key(k)} = {_value(v)}")
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
