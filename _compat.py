"""What differs between the interpreters blksim supports (CPython 3.9+, PyPy 3.9+),
in one place instead of version checks scattered through the code.

- ``tomllib``: the standard library's TOML reader from Python 3.11; before that
  the ``tomli`` package, which it was taken from (same API, same errors). Both are
  reached through a thin wrapper that also refuses an integer too long for the
  interpreter to print (over ``sys.get_int_max_str_digits()`` digits, 4300 by
  default): CPython's reader refuses one already, while PyPy's reads it, and the first
  message that shows it (``hz = 999...``) then fails inside ``repr``.
- ``ON_PYPY``: true on PyPy, whose garbage collector does not free objects by
  reference counting (tests of CPython's reference counting skip there).
- ``trace_boundary``: on PyPy, a function its JIT compiles on its own rather than
  inlining into its callers' traces (a no-op elsewhere).
"""

import sys

if sys.version_info >= (3, 11):
    import tomllib as _toml_reader
else:  # pragma: no cover - exercised on PyPy 3.9 and CPython < 3.11
    import tomli as _toml_reader

ON_PYPY = sys.implementation.name == "pypy"


def _digit_limit() -> int:
    """The most digits an int may have and still be printed (0: no limit)."""
    get = getattr(sys, "get_int_max_str_digits", None)
    return get() if get is not None else 0


def _check_printable(value, limit: int) -> None:
    """Raise ValueError if ``value`` (parsed TOML) holds an integer of over ``limit``
    digits."""
    if isinstance(value, dict):
        for item in value.values():
            _check_printable(item, limit)
    elif isinstance(value, list):
        for item in value:
            _check_printable(item, limit)
    elif isinstance(value, int) and not isinstance(value, bool) \
            and abs(value) >= 10 ** limit:
        raise ValueError(f"an integer of more than {limit} digits (the longest Python "
                         f"prints)")


class _TomlReader:
    """``tomllib``'s ``load``, ``loads`` and ``TOMLDecodeError``, with integers too long
    to print refused on every interpreter (a ValueError, as CPython's reader raises)."""

    TOMLDecodeError = _toml_reader.TOMLDecodeError

    @staticmethod
    def loads(text: str, **kwargs) -> dict:
        data = _toml_reader.loads(text, **kwargs)
        limit = _digit_limit()
        if limit:
            _check_printable(data, limit)
        return data

    @classmethod
    def load(cls, fh, **kwargs) -> dict:
        return cls.loads(fh.read().decode("utf-8"), **kwargs)


tomllib = _TomlReader()

__all__ = ["tomllib", "ON_PYPY", "trace_boundary", "entry_points_in", "load_toml",
           "TomlFileError"]


def trace_boundary(fn):
    """Mark ``fn`` (a function or method, returned as it is) as a trace boundary for
    PyPy's JIT: its callers' traces call its compiled code instead of inlining it.

    PyPy inlines every call into the trace of the loop being compiled; when a trace
    grows past the JIT's length limit it stops inlining the largest function it finds
    in it and tries again (``trace_limit``, ``pypyjit.PARAMETER_DOCS``). Which function
    that is depends on where each trace started, so on the order in which loops got
    hot: the engine's run loop reaches a device's whole completion path in one event,
    and a run could end with that path inlined into many traces, each of its branches
    a bridge of its own (twice the bridges and compile time, twice the run time).
    Marking the entry of such a path once gives every run the same traces. Outputs do
    not depend on it; on CPython it does nothing."""
    if ON_PYPY:
        import pypyjit
        pypyjit.dont_trace_here(0, False, fn.__code__)
    return fn


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
