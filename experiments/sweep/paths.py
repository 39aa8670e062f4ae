"""Dotted paths into a configuration's tables (``run.duration``, ``app.0.sessions``: a
number picks an entry of an array of tables), as an experiment's variants, open choices
and headline figures name values."""

from __future__ import annotations

import copy
import json

from blksim.common.config_values import ConfigError


def set_text(value) -> str:
    """A value as a --set override writes it (text quoted, true/false)."""
    return json.dumps(value) if isinstance(value, str) else str(value).lower() \
        if isinstance(value, bool) else str(value)


def set_path(raw: dict, path: str, value, where: str) -> None:
    """Put ``value`` at dotted ``path`` of ``raw`` (tables made as needed; a number
    indexes an array)."""
    parts = path.split(".")
    node = raw
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"{where}: {path}: {part!r} is not an entry of the array "
                                  f"(it has {len(node)})")
            if last:
                node[int(part)] = value
                return
            node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = copy.deepcopy(value)
                return
            node = node.setdefault(part, {})
        else:
            raise ConfigError(f"{where}: {path}: {'.'.join(parts[:k])} is not a table")


def get_path(data, path: str, absent=None):
    """The value at dotted ``path`` of ``data`` (``absent`` if there is none: pass a
    sentinel to tell a missing path from a figure that is null, as a figure from an
    empty window is)."""
    node = data
    for part in path.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return absent
    return node
