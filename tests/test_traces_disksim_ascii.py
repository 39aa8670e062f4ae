"""traces.disksim_ascii: streamed DiskSim ASCII traces."""

import gzip
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import blksim.traces.disksim_ascii as disksim_ascii
from blksim.traces.disksim_ascii import TraceError, TraceRecord, read_disksim_ascii, write_disksim_ascii

DATA = Path(__file__).with_name("data")   # real traces, xz-compressed (tests/data/README.md)


def write_text(path, text: str) -> Path:
    path = Path(path)
    path.write_bytes(text.encode("utf-8"))
    return path


def parse_outcome(path):
    """The records, or the TraceError's message without its location."""
    try:
        return list(read_disksim_ascii(path))
    except TraceError as exc:
        return ("error", re.sub(r"^.*?:\d+: ", "", str(exc)))


# --- reading -----------------------------------------------------------------------

def test_reads_fields_and_units(tmp_path):
    path = write_text(tmp_path / "t.trace",
                      "0.5\t3\t100\t8\t1\n1.25 0 0 16 0\n1.25  2  7  1  0x3\n2 1 9 2 A\n")
    assert list(read_disksim_ascii(path)) == [
        (0.0005, 3, 100, 8, False, None, None, None),
        (0.00125, 0, 0, 16, True, None, None, None),
        (0.00125, 2, 7, 1, False, None, None, None),   # flags are hexadecimal, as DiskSim reads them
        (0.002, 1, 9, 2, True, None, None, None),      # 0xA: bit 0 clear -> write
    ]
    rec = next(read_disksim_ascii(path))
    assert isinstance(rec, TraceRecord)
    assert (rec.time, rec.devno, rec.sector, rec.nr_sectors, rec.write, rec.pid) == \
        (0.0005, 3, 100, 8, False, None)


@pytest.mark.parametrize("unit, seconds", [("ms", 1.5e-3), ("us", 1.5e-6), ("ns", 1.5e-9),
                                           ("s", 1.5)])
def test_time_unit(tmp_path, unit, seconds):
    path = write_text(tmp_path / "t.trace", "1.5 0 0 1 1\n")
    assert next(read_disksim_ascii(path, time_unit=unit)).time == seconds


def test_unknown_time_unit(tmp_path):
    path = write_text(tmp_path / "t.trace", "1 0 0 1 1\n")
    with pytest.raises(ValueError, match="time_unit: expected one of s, ms, us, ns"):
        list(read_disksim_ascii(path, time_unit="fortnight"))


def test_blank_lines_skipped_and_line_numbers_kept(tmp_path):
    path = write_text(tmp_path / "t.trace", "\n1 0 0 1 1\n   \n\r\n2 0 8 1 1\nbad\n")
    with pytest.raises(TraceError, match=r"t\.trace:6: line expected 5 fields"):
        list(read_disksim_ascii(path))
    path = write_text(tmp_path / "u.trace", "1 0 0 1 1\n\n2 0 8 1 0\n\n")
    assert [r.sector for r in read_disksim_ascii(path)] == [0, 8]


def test_no_final_newline_and_crlf(tmp_path):
    path = write_text(tmp_path / "t.trace", "1 0 0 1 1\r\n2 0 8 1 0")
    assert [(r.time, r.write) for r in read_disksim_ascii(path)] == [(0.001, False), (0.002, True)]


def test_empty_file(tmp_path):
    assert list(read_disksim_ascii(write_text(tmp_path / "t.trace", ""))) == []


def test_streams_lazily(tmp_path):
    # The error on the last line is not raised before the first record is taken.
    lines = "".join(f"{i} 0 {i} 1 1\n" for i in range(20_000)) + "oops\n"
    records = read_disksim_ascii(write_text(tmp_path / "t.trace", lines))
    assert next(records).sector == 0
    with pytest.raises(TraceError, match=r":20001: line expected"):
        list(records)


GOOD = "1.0 0 0 8 1\n2.0 0 8 8 1\n"


@pytest.mark.parametrize("line, field, found", [
    ("3.0 0 16 8", "line", "3.0 0 16 8"),
    ("3.0 0 16 8 1 9", "line", "3.0 0 16 8 1 9"),
    ("x 0 16 8 1", "arrival_time", "x"),
    ("-3 0 16 8 1", "arrival_time", "-3"),
    ("nan 0 16 8 1", "arrival_time", "nan"),
    ("inf 0 16 8 1", "arrival_time", "inf"),
    ("1.5 0 16 8 1", "arrival_time", "1.5"),
    ("3.0 a 16 8 1", "devno", "a"),
    ("3.0 -1 16 8 1", "devno", "-1"),
    ("3.0 1.0 16 8 1", "devno", "1.0"),
    ("3.0 0 -16 8 1", "blkno", "-16"),
    ("3.0 0 0x10 8 1", "blkno", "0x10"),
    ("3.0 0 16 0 1", "size", "0"),
    ("3.0 0 16 8.5 1", "size", "8.5"),
    ("3.0 0 16 8 g", "flags", "g"),
    ("3.0 0 16 8 -1", "flags", "-1"),
    ("# comment 1 2 3", "arrival_time", "#"),
    ("3.0 0 16 8 \u00e9", "flags", "\\xc3\\xa9"),
])
def test_malformed_line_names_file_line_field(tmp_path, line, field, found):
    path = write_text(tmp_path / "bad.trace", GOOD + line + "\n" + GOOD.replace("1.0", "9")
                      .replace("2.0", "10"))
    with pytest.raises(TraceError) as info:
        list(read_disksim_ascii(path))
    message = str(info.value)
    assert message.startswith(f"{path}:3: {field} expected "), message
    assert message.endswith(f", found {found!r}"), message


def test_error_line_number_beyond_first_chunk(tmp_path):
    lines = [f"{i}.5 1 {i * 8} 8 0\n" for i in range(10_000)]
    lines[7_654] = "7654.5 1 61232 8 Z\n"
    path = write_text(tmp_path / "big.trace", "".join(lines))
    with pytest.raises(TraceError, match=r"big\.trace:7655: flags expected .*found 'Z'$"):
        list(read_disksim_ascii(path))


def test_decreasing_time_names_the_line_at_every_position(tmp_path, monkeypatch):
    # Tiny chunks put chunk boundaries everywhere, so both checks are exercised:
    # inside a chunk and across two.
    monkeypatch.setattr(disksim_ascii, "_CHUNK_BYTES", 40)
    for bad in range(1, 12):
        times = [float(i) for i in range(1, 13)]
        times[bad] = times[bad - 1] - 0.5
        path = write_text(tmp_path / "dec.trace", "".join(f"{t} 0 0 1 1\n" for t in times))
        with pytest.raises(TraceError) as info:
            list(read_disksim_ascii(path))
        assert str(info.value).startswith(f"{path}:{bad + 1}: arrival_time expected a time no "
                                          f"earlier than the previous line's ({times[bad - 1]!r}")


def test_equal_times_allowed(tmp_path):
    path = write_text(tmp_path / "t.trace", "5 0 0 1 1\n5 0 8 1 1\n5 0 16 1 1\n")
    assert len(list(read_disksim_ascii(path))) == 3


# --- writing -----------------------------------------------------------------------

records_strategy = st.lists(
    st.tuples(st.floats(0, 1e5, allow_nan=False), st.integers(0, 1000), st.integers(0, 2 ** 40),
              st.integers(1, 1 << 16), st.booleans()),
    max_size=60,
).map(lambda rows: [TraceRecord(t, d, s, n, w, None)
                    for t, (_, d, s, n, w) in zip(sorted(r[0] for r in rows), rows)])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=records_strategy, unit=st.sampled_from(["ms", "us", "ns", "s"]),
       gz=st.booleans())
def test_round_trip(tmp_path, records, unit, gz):
    path = tmp_path / ("rt.trace.gz" if gz else "rt.trace")
    assert write_disksim_ascii(path, iter(records), time_unit=unit) == len(records)
    back = list(read_disksim_ascii(path, time_unit=unit))
    assert len(back) == len(records)
    for got, want in zip(back, records):
        assert got[1:] == want[1:]
        assert abs(got.time - want.time) <= 0.51e-9 + 1e-15 * want.time   # 1 ns resolution


def test_written_format(tmp_path):
    path = tmp_path / "w.trace"
    write_disksim_ascii(path, [TraceRecord(0.013191135, 30, 0, 5, False, None),
                               TraceRecord(0.0259117, 18, 28601, 12, True, None)])
    assert path.read_text() == "13.191135\t30\t0\t5\t1\n25.911700\t18\t28601\t12\t0\n"


def test_gzip_is_real_gzip(tmp_path):
    path = tmp_path / "w.trace.gz"
    write_disksim_ascii(path, [TraceRecord(1.0, 0, 8, 8, True, None)])
    assert gzip.decompress(path.read_bytes()) == b"1000.000000\t0\t8\t8\t0\n"


@pytest.mark.parametrize("data", [b"not gzip at all\n", gzip.compress(b"1 0 0 1 1\n" * 500)[:-30]])
def test_corrupt_gzip_is_a_trace_error(tmp_path, data):
    path = tmp_path / "bad.trace.gz"
    path.write_bytes(data)
    with pytest.raises(TraceError, match=r"bad\.trace\.gz:\d+: file expected gzip data"):
        list(read_disksim_ascii(path))


def test_write_is_all_or_nothing(tmp_path):
    path = tmp_path / "w.trace"
    path.write_text("old\n")

    def failing():
        for i in range(20_000):
            yield TraceRecord(i, 0, i, 1, False, None)
        raise RuntimeError("generator broke")

    with pytest.raises(RuntimeError, match="generator broke"):
        write_disksim_ascii(path, failing())
    assert path.read_text() == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["w.trace"]


# --- fuzz --------------------------------------------------------------------------

TOKENS = st.sampled_from(["0", "1", "7", "12.5", "-3", "1e3", "nan", "inf", "0x1f", "ff",
                          "1_0", "x", "#", "", "\u00e9", "\u0663", "9" * 5000, "\x00"])
LINES = st.lists(TOKENS, max_size=7).map(" ".join)


def _fuzz_file(data: bytes) -> str:
    fd, path = tempfile.mkstemp(suffix=".trace")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.lists(LINES, max_size=20).map("\n".join)))
def test_any_input_gives_records_or_trace_error(content):
    data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
    path = _fuzz_file(data)
    try:
        records = list(read_disksim_ascii(path))
        for rec in records:
            assert rec.time >= 0 and rec.nr_sectors >= 1 and rec.sector >= 0 and rec.devno >= 0
    except TraceError as exc:
        assert str(exc).startswith(f"{path}:")
    finally:
        os.unlink(path)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(LINES, st.builds("{} {} {} {} {}".format, st.integers(0, 50),
                                           st.integers(0, 3), st.integers(0, 10 ** 6),
                                           st.integers(1, 64), st.sampled_from("01"))),
                max_size=20).map(lambda ls: sorted(ls) if len(ls) % 2 else ls))
def test_fast_and_line_by_line_paths_agree(lines):
    # Blank lines send a chunk down the careful line-by-line path; without them,
    # a well-formed chunk takes the fast path. Both must give the same outcome.
    plain = _fuzz_file("\n".join(lines).encode())
    spaced = _fuzz_file("\n\n".join(lines).encode())
    try:
        assert parse_outcome(plain) == parse_outcome(spaced)
    finally:
        os.unlink(plain)
        os.unlink(spaced)


# --- real traces -------------------------------------------------------------------

def test_real_disksim_ascii_trace():
    count = writes = 0
    devices = set()
    first = last = None
    for rec in read_disksim_ascii(DATA / "ascii.trace.xz"):
        first = first or rec
        last = rec
        count += 1
        writes += rec.write
        devices.add(rec.devno)
    assert count == 100_000 and writes == 20_366
    assert first == (0.013191135, 30, 0, 5, False, None, None, None)
    assert last.time == pytest.approx(1532.949045363)
    # ascii.parv maps 18 trace devices (in hex there, decimal in the trace); 14 appear.
    assert len(devices) == 14
    assert devices <= {0x0e, 0x12, 0x0a, 0x0b, 0x14, 0x00, 0x10, 0x1e, 0x11, 0x05, 0x07, 0x65,
                       0x06, 0x03, 0x04, 0x67, 0x01, 0x02}


@pytest.mark.parametrize("name, count, devices, reads", [
    ("tpcc-small.trace", 6_999, 16, 0.63), ("wsrch-small.trace", 24_783, 6, 0.999)])
def test_real_mqsim_traces_in_nanoseconds(name, count, devices, reads):
    records = list(read_disksim_ascii(DATA / f"{name}.xz", time_unit="ns"))
    assert len(records) == count
    assert len({r.devno for r in records}) == devices
    assert sum(not r.write for r in records) / count == pytest.approx(reads, abs=0.005)
    if name.startswith("wsrch"):
        assert 59 < records[-1].time < 61     # "60 s", README
