"""Every trace reader, on any bytes: records or a clean TraceError, never a traceback.

Inputs are small (a few KiB) and every reader is a single forward pass over
the file, so no example can hang; hypothesis runs without deadlines.
"""

import gzip
import math
import os
import tempfile

from hypothesis import given, settings, strategies as st

from blksim.traces.detect import detect_format, open_trace
from blksim.traces.records import TraceError

READERS = ["blkparse", "msr", "spc", "alibaba", "tencent", "fio", "disksim", "disksim-validate"]

TOKENS = ["0", "1", "7", "12.5", "-3", "1e3", "nan", "inf", "0x1f", "+4", "1_0", " ", "",
          "R", "W", "r", "w", "Read", "Write", "WS", "RA", "FWS", "N", "Q", "D", "C", "M", "+",
          "[x]", "[a b]", "(  12)", "8,0", "8,16", "hm", "0.000001000", "\u00e9", "\x00", "\r",
          "fio version 2 iolog", "fio version 3 iolog", "/dev/sdb", "read", "write", "wait",
          "add", "open", "close", "trim", "CPU0 (8,0):", "Total (8,0):", "9" * 400]
SEPARATORS = st.sampled_from([" ", ",", "  ", "\t"])
LINES = st.builds(lambda toks, sep: sep.join(toks),
                  st.lists(st.sampled_from(TOKENS), max_size=11), SEPARATORS)
PLAUSIBLE = st.one_of(
    st.builds("  8,{} {} {} {}.{:09d} {} {} {} {} + {} [p]".format, st.integers(0, 2),
              st.integers(0, 3), st.integers(0, 99), st.integers(0, 5),
              st.integers(0, 999999999), st.integers(0, 5), st.sampled_from("QDGCM"),
              st.sampled_from(["W", "R", "WS", "RA", "N", "FWS"]), st.integers(0, 10 ** 6),
              st.integers(0, 64)),
    st.builds("{},h,{},{},{},{},{}".format, st.integers(0, 10 ** 6), st.integers(0, 2),
              st.sampled_from(["Read", "Write", "read"]), st.integers(0, 10 ** 7),
              st.integers(0, 9000), st.integers(0, 9)),
    st.builds("{},{},{},{},{}".format, st.integers(0, 3), st.integers(0, 10 ** 6),
              st.integers(0, 9000), st.sampled_from("rRwWx01"), st.integers(0, 100)),
)
CONTENT = st.one_of(
    st.binary(max_size=2000),
    st.text(max_size=500),
    st.lists(st.one_of(LINES, PLAUSIBLE), max_size=25).map("\n".join),
    st.lists(st.one_of(LINES, PLAUSIBLE), max_size=25).map(
        lambda ls: "fio version 3 iolog\n" + "\n".join(ls)),
    st.lists(PLAUSIBLE, max_size=25).map(lambda ls: "\n".join(sorted(ls))),
)


def _file(data: bytes, gz: bool) -> str:
    fd, path = tempfile.mkstemp(suffix=".trace")
    with os.fdopen(fd, "wb") as f:
        f.write(gzip.compress(data) if gz else data)
    return path


def _check(path, fmt):
    try:
        stream = open_trace(path, fmt, skip_bad_lines=False)
        records = list(stream)
    except TraceError as exc:
        assert str(exc).startswith(f"{path}:") or "time_unit" in str(exc), str(exc)
        return None
    for rec in records:
        assert rec.time >= 0 and math.isfinite(rec.time)
        assert rec.sector >= 0 and rec.nr_sectors >= 1
        assert isinstance(rec.write, bool)
    assert all(b.time >= a.time for a, b in zip(records, records[1:]))
    return records


def _skipping(path, fmt):
    try:
        stream = open_trace(path, fmt, skip_bad_lines=True)
        list(stream)
    except TraceError as exc:
        # only what skipping cannot cover: a missing fio header, a corrupt stream
        assert "header expected" in str(exc) or "file expected" in str(exc), str(exc)


@settings(max_examples=400, deadline=None)
@given(content=CONTENT, fmt=st.sampled_from(READERS), gz=st.booleans())
def test_any_input_gives_records_or_a_clean_error(content, fmt, gz):
    data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
    path = _file(data, gz)
    try:
        _check(path, fmt)
        _skipping(path, fmt)
    finally:
        os.unlink(path)


@settings(max_examples=200, deadline=None)
@given(content=CONTENT)
def test_detection_never_crashes(content):
    data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
    path = _file(data, False)
    try:
        try:
            fmt = detect_format(path)
        except TraceError as exc:
            assert str(exc).startswith(f"{path}: format ")
            return
        assert fmt in READERS
        _check(path, fmt)
    finally:
        os.unlink(path)


def _outcome(path, fmt):
    try:
        stream = open_trace(path, fmt)
        return list(stream), stream.ignored
    except TraceError as exc:
        return str(exc)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.one_of(PLAUSIBLE, LINES), max_size=30),
       fmt=st.sampled_from(["blkparse", "msr", "spc", "alibaba", "tencent"]),
       ordered=st.booleans())
def test_fast_and_line_by_line_paths_agree(lines, fmt, ordered):
    from unittest import mock
    if ordered:
        lines = sorted(lines)
    path = _file("\n".join(lines).encode("utf-8", "surrogatepass"), False)
    module = "blksim.traces.blkparse_text" if fmt == "blkparse" else "blksim.traces.csv_formats"
    try:
        both = _outcome(path, fmt)
        with mock.patch(module + "._fast", lambda *a: None):
            slow = _outcome(path, fmt)
        assert both == slow
    finally:
        os.unlink(path)
