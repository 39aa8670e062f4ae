"""What differs between the interpreters blksim supports (CPython 3.9+, PyPy 3.9+),
in one place instead of version checks scattered through the code.

- ``tomllib``: the standard library's TOML reader from Python 3.11; before that
  the ``tomli`` package, which it was taken from (same API, same errors).
- ``ON_PYPY``: true on PyPy, whose garbage collector does not free objects by
  reference counting (tests of CPython's reference counting skip there).
"""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on PyPy 3.9 and CPython < 3.11
    import tomli as tomllib

ON_PYPY = sys.implementation.name == "pypy"

__all__ = ["tomllib", "ON_PYPY", "entry_points_in", "load_toml", "TomlFileError"]


def entry_points_in(group: str) -> list:
    """The installed entry points of ``group`` (``importlib.metadata``; its ``group=``
    selection is Python 3.10's, so 3.9 filters the mapping it returns)."""
    from importlib import metadata
    found = metadata.entry_points()
    if hasattr(found, "select"):
        return list(found.select(group=group))
    return list(found.get(group, ()))


class TomlFileError(ValueError):
    """A TOML file that cannot be read: not UTF-8, or not valid TOML (the message names
    the file, and the line of a bad byte)."""


def load_toml(path) -> dict:
    """The TOML file ``path`` as a dict. A UTF-8 byte-order mark (as some editors write)
    is skipped; a byte that is not UTF-8 is a TomlFileError naming its line and column.
    OSError (a missing file, a directory) passes through."""
    with open(path, "rb") as fh:
        data = fh.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TomlFileError(f"{path}: not UTF-8 text: byte 0x{data[exc.start]:02x} at line "
                            f"{line}, column {column}") from None
    try:
        return tomllib.loads(text)
    except ValueError as exc:   # TOMLDecodeError, or an integer beyond int()'s digit limit
        raise TomlFileError(f"{path}: not valid TOML: {exc}") from None
