"""What differs between the interpreters blksim supports (CPython 3.9+, PyPy 3.9+),
in one place instead of version checks scattered through the code.

- ``tomllib``: the standard library's TOML reader from Python 3.11; before that
  the ``tomli`` package, which it was taken from (same API, same errors).
- ``ON_PYPY``: true on PyPy, whose garbage collector does not free objects by
  reference counting (tests of CPython's reference counting skip there).
"""

import platform
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on PyPy 3.9 and CPython < 3.11
    import tomli as tomllib

ON_PYPY = platform.python_implementation() == "PyPy"

__all__ = ["tomllib", "ON_PYPY", "entry_points_in"]


def entry_points_in(group: str) -> list:
    """The installed entry points of ``group`` (``importlib.metadata``; its ``group=``
    selection is Python 3.10's, so 3.9 filters the mapping it returns)."""
    from importlib import metadata
    found = metadata.entry_points()
    if hasattr(found, "select"):
        return list(found.select(group=group))
    return list(found.get(group, ()))
