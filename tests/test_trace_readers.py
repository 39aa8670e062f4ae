"""Trace readers: blkparse text, MSR / SPC / Alibaba / Tencent CSV, fio iologs."""

import bz2
import gzip
import lzma
import re
from pathlib import Path

import pytest

import blksim.traces.records as records_mod
from blksim.traces.blkparse_text import read_blkparse, write_blkparse
from blksim.traces.csv_formats import (read_alibaba, read_msr, read_spc, read_tencent, write_alibaba,
                                write_msr, write_spc)
from blksim.traces.disksim_ascii import TraceRecord as OldRecord
from blksim.traces.fio_iolog import read_fio_iolog, write_fio_iolog
from blksim.traces.records import TraceError, TraceRecord, byte_extent


def write(path, text):
    path = Path(path)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def R(time, devno, sector, nr, write, pid=None, name=None, sync=None):
    return TraceRecord(time, devno, sector, nr, write, pid, name, sync)


# --- the record type ----------------------------------------------------------------

def test_record_defaults_and_reexport():
    rec = TraceRecord(1.0, 0, 8, 8, True, None)
    assert rec.name is None and rec.sync is None and len(rec) == 8
    assert OldRecord is TraceRecord
    assert TraceRecord(1.0, "8,0", 8, 8, False, 7, "dd", True).name == "dd"


@pytest.mark.parametrize("offset, size, want", [
    (0, 512, (0, 1)), (0, 4096, (0, 8)), (512, 4096, (1, 8)), (100, 412, (0, 1)),
    (100, 413, (0, 2)), (511, 2, (0, 2)), (1024, 1, (2, 1))])
def test_byte_extent_rounds_start_down_end_up(offset, size, want):
    assert byte_extent(offset, size) == want


# --- blkparse ------------------------------------------------------------------------

BLKPARSE = """\
  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]
  8,0    3        2     0.000001000   697  G   W 223490 + 8 [kjournald]
  8,0    3        3     0.000002000   697  P   N [kjournald]
  8,0    3        4     0.000003000   697  I   W 223490 + 8 [kjournald]
  8,0    3        5     0.000004000   697  Q   W 223498 + 8 [kjournald]
  8,0    3        6     0.000004500   697  M   W 223498 + 8 [kjournald]
  8,0    3        7     0.000005000   697  U   N [kjournald] 1
  8,0    3        8     0.000006000   697  D   W 223490 + 16 [kjournald]
  8,16   1        1     0.000007000  1234  Q  RA 1000 + 16 [my proc]
  8,16   1        2     0.000008000  1234  D  RA 1000 + 16 (    1000) [my proc]
  8,0    0        9     0.000009000  4321  Q FWS 0 + 0 [sync]
  8,0    0       10     0.000010000  4321  Q  RS 64 + 8 [postgres]
  8,0    0       11     0.000011000  4321  Q  WS 72 + 8 [postgres]
  8,0    0        0     0.000012000     0  m   N cfq4321 alloced
  8,0    3       12     0.000200000     0  C   W 223490 + 16 [0]
CPU0 (8,0):
 Reads Queued:           1,        8KiB\t Writes Queued:           0,        0KiB
Total (8,0):
 Reads Queued:           1,        8KiB
Throughput (R/W): 0KiB/s / 0KiB/s
Events (8,0): 14 entries
"""


def test_blkparse_queued_events(tmp_path):
    stream = read_blkparse(write(tmp_path / "t.txt", BLKPARSE))
    assert list(stream) == [
        R(0.0, "8,0", 223490, 8, True, 697, "kjournald", False),
        R(0.000004, "8,0", 223498, 8, True, 697, "kjournald", False),
        R(0.000007, "8,16", 1000, 16, False, 1234, "my proc", False),
        R(0.00001, "8,0", 64, 8, False, 4321, "postgres", True),
        R(0.000011, "8,0", 72, 8, True, 4321, "postgres", True),
    ]
    assert stream.ignored == 1 and stream.skipped == 0      # the flush


def test_blkparse_issued_events_carry_merged_size(tmp_path):
    got = list(read_blkparse(write(tmp_path / "t.txt", BLKPARSE), events="D"))
    assert got == [R(0.000006, "8,0", 223490, 16, True, 697, "kjournald", False),
                   R(0.000008, "8,16", 1000, 16, False, 1234, "my proc", False)]


def test_blkparse_events_option_checked(tmp_path):
    with pytest.raises(ValueError, match="events: expected Q .* or D"):
        read_blkparse(write(tmp_path / "t.txt", BLKPARSE), events="C")


def test_blkparse_summary_ends_the_trace_even_with_garbage_after(tmp_path):
    text = BLKPARSE + "this is not a trace line at all\n"
    assert len(list(read_blkparse(write(tmp_path / "t.txt", text)))) == 5


@pytest.mark.parametrize("line, field, found", [
    ("  8-0  0  1  0.1  5  Q  W 8 + 8 [x]", "device", "8-0"),
    ("  8,0  x  1  0.1  5  Q  W 8 + 8 [x]", "cpu", "x"),
    ("  8,0  0  1  0,1  5  Q  W 8 + 8 [x]", "time", "0,1"),
    ("  8,0  0  1  0.1  -5  Q  W 8 + 8 [x]", "pid", "-5"),
    ("  8,0  0  1  0.1  5  Q  W x + 8 [x]", "sector", "x"),
    ("  8,0  0  1  0.1  5  Q  W 8 + y [x]", "size", "y"),
    ("  8,0  0  1  0.1  5  Q  W 8 + 8 x", "name", "x"),
    ("  8,0  0  1  0.0000001  5  Q  W 8 + 8 [x]", "time", "0.0000001"),
    ("hello", "device", "hello"),
    ("  8,0  0  1  0.1  5  Q", "line", "8,0  0  1  0.1  5  Q"),
])
def test_blkparse_errors_name_file_line_field(tmp_path, line, field, found):
    text = "  8,0 0 1 0.000001 5 Q W 0 + 8 [x]\n" + line + "\n"
    path = write(tmp_path / "bad.txt", text)
    with pytest.raises(TraceError) as info:
        list(read_blkparse(path))
    msg = str(info.value)
    assert msg.startswith(f"{path}:2: {field} expected "), msg
    assert msg.endswith(f", found {found!r}"), msg


def test_blkparse_skip_bad_lines_counts(tmp_path):
    text = "  8,0 0 1 0.1 5 Q W 0 + 8 [x]\ngarbage\n  8,0 0 2 0.2 5 Q W 8 + y [x]\n" \
           "  8,0 0 3 0.3 5 Q W 16 + 8 [x]\n"
    stream = read_blkparse(write(tmp_path / "t.txt", text), skip_bad_lines=True)
    assert [r.sector for r in stream] == [0, 16]
    assert stream.skipped == 2
    assert re.match(r".*t\.txt:2: device expected", stream.first_skipped)
    assert records_mod.skipped_summary(stream).startswith("skipped 2 malformed lines")


def test_blkparse_fast_path_on_many_lines_agrees(tmp_path, monkeypatch):
    lines = [f"  8,0 {i % 4} {i} {i / 1000:.9f} {100 + i % 3} {'QGIDC'[i % 5]} "
             f"{'WS' if i % 2 else 'R'} {i * 8} + 8 [p{i % 3}]\n" for i in range(5000)]
    path = write(tmp_path / "t.txt", "".join(lines))
    fast = list(read_blkparse(path))
    monkeypatch.setattr("blksim.traces.blkparse_text._fast", lambda *a: None)
    slow = list(read_blkparse(path))
    assert fast == slow and len(fast) == 1000


def test_blkparse_write_read_round_trip(tmp_path):
    recs = [R(0.0, "8,16", 100, 8, True, 42, "dd", True),
            R(1.000000001, "8,16", 108, 8, False, 42, "dd", False),
            R(2.5, "8,0", 0, 1, False, 7, "cat", True)]
    path = tmp_path / "out.txt"
    assert write_blkparse(path, recs) == 3
    assert list(read_blkparse(path)) == recs


# --- CSV formats -------------------------------------------------------------------

def test_msr(tmp_path):
    text = ("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n"
            "128166372003061629,hm,1,Read,3154152448,4096,2695\r\n"
            "128166372016382155,hm,1,Write,3154152960,4097,2000\r\n")
    got = list(read_msr(write(tmp_path / "hm_1.csv", text)))
    assert got == [R(0.0, "hm_1", 6160454, 8, False),
                   R(pytest.approx(1.3320526), "hm_1", 6160455, 9, True)]


def test_spc_block_size(tmp_path):
    path = write(tmp_path / "f.spc", "0,100,8192,W,0.551706\n1,3,100,r,0.554041,extra\n")
    assert list(read_spc(path)) == [R(0.551706, 0, 100, 16, True), R(0.554041, 1, 3, 1, False)]
    assert [r.sector for r in read_spc(path, block_size=4096)] == [800, 24]
    with pytest.raises(ValueError, match="block_size"):
        read_spc(path, block_size=0)


def test_alibaba_and_tencent(tmp_path):
    ali = write(tmp_path / "a.csv", "419,W,8792731648,16384,1577808144360767\n"
                                    "419,R,512,100,1577808144360800\n")
    assert list(read_alibaba(ali)) == [R(0.0, 419, 17173304, 32, True),
                                       R(pytest.approx(33e-6), 419, 1, 1, False)]
    ten = write(tmp_path / "t.csv", "1538323200,12324,8,1,1063\n1538323201,0,0,0,1063\n"
                                    "1538323202,16,16,0,7\n")
    stream = read_tencent(ten)
    assert list(stream) == [R(0.0, 1063, 12324, 8, True), R(2.0, 7, 16, 16, False)]
    assert stream.ignored == 1


@pytest.mark.parametrize("reader, good, bad, field, found", [
    (read_msr, "1,hm,0,Read,0,512,1", "2,hm,0,Reed,0,512,1", "Type", "Reed"),
    (read_msr, "1,hm,0,Read,0,512,1", "2,hm,0,Read,-1,512,1", "Offset", "-1"),
    (read_msr, "1,hm,0,Read,0,512,1", "2,hm,0,Read,0,512", "line", "2,hm,0,Read,0,512"),
    (read_msr, "5,hm,0,Read,0,512,1", "2,hm,0,Read,0,512,1", "Timestamp", "2"),
    (read_spc, "0,1,512,r,0.5", "0,1,512,x,0.6", "Opcode", "x"),
    (read_spc, "0,1,512,r,0.5", "0,1,512,r,nan", "Timestamp", "nan"),
    (read_alibaba, "1,R,0,512,10", "1,R,0,5x,11", "length", "5x"),
    (read_tencent, "10,0,8,0,1", "11,0,8,2,1", "IOType", "2"),
])
def test_csv_errors_name_file_line_field(tmp_path, reader, good, bad, field, found):
    path = write(tmp_path / "bad.csv", good + "\n" + bad + "\n" + good.replace("1,", "1,", 1))
    with pytest.raises(TraceError) as info:
        list(reader(path))
    msg = str(info.value)
    assert msg.startswith(f"{path}:2: {field} expected "), msg
    assert msg.endswith(f", found {found!r}"), msg


def test_csv_skip_bad_lines(tmp_path):
    path = write(tmp_path / "a.csv", "1,R,0,512,10\n1,Q,0,512,11\n\n1,W,512,512,12\n")
    stream = read_alibaba(path, skip_bad_lines=True)
    assert [r.write for r in stream] == [False, True]
    assert stream.skipped == 1


def test_csv_fast_and_slow_paths_agree(tmp_path, monkeypatch):
    lines = "".join(f"{128166372003061629 + i * 1000},src,{i % 3},{'Read' if i % 4 else 'Write'},"
                    f"{i * 4096 + (i % 7)},{4096 + i % 5},{i}\n" for i in range(6000))
    path = write(tmp_path / "m.csv", lines)
    fast = list(read_msr(path))
    monkeypatch.setattr("blksim.traces.csv_formats._fast", lambda *a: None)
    assert list(read_msr(path)) == fast and len(fast) == 6000


@pytest.mark.parametrize("writer, reader", [(write_msr, read_msr), (write_spc, read_spc),
                                            (write_alibaba, read_alibaba)])
def test_csv_round_trips(tmp_path, writer, reader):
    recs = [R(0.0, 3, 100, 8, True), R(0.25, 3, 0, 1, False), R(1.5, 3, 2 ** 33, 256, True)]
    path = tmp_path / "out.csv.gz"
    assert writer(path, recs) == 3
    back = list(reader(path))
    assert [(r.sector, r.nr_sectors, r.write) for r in back] == \
        [(r.sector, r.nr_sectors, r.write) for r in recs]
    assert [r.time for r in back] == pytest.approx([r.time for r in recs], abs=1e-6)


# --- fio iologs --------------------------------------------------------------------

def test_fio_v2(tmp_path):
    text = ("fio version 2 iolog\n/dev/sdb add\n/dev/sdb open\n/dev/sdb write 0 4096\n"
            "/dev/sdb wait 1500 0\n/dev/sdb read 1000 100\n/dev/sdb sync 0 0\n"
            "/dev/sdb trim 0 4096\n/dev/sdb close\n")
    stream = read_fio_iolog(write(tmp_path / "v2.log", text))
    assert list(stream) == [R(0.0, "/dev/sdb", 0, 8, True), R(0.0015, "/dev/sdb", 1, 2, False)]
    assert stream.ignored == 2


def test_fio_v3_times_and_out_of_order(tmp_path):
    text = ("fio version 3 iolog\n0 /dev/sdb add\n0 /dev/sdb open\n113 /dev/sdb write 0 4096\n"
            "2045 /dev/sdb read 1048576 65536\n2000 /dev/sdc read 0 512\n")
    path = write(tmp_path / "v3.log", text)
    assert list(read_fio_iolog(path)) == [
        R(0.000113, "/dev/sdb", 0, 8, True), R(0.002045, "/dev/sdb", 2048, 128, False),
        R(0.002045, "/dev/sdc", 0, 1, False)]
    assert next(iter(read_fio_iolog(path, time_unit="ms"))).time == pytest.approx(0.113)


@pytest.mark.parametrize("text, lineno, field, found", [
    ("fio version 4 iolog\n", 1, "header", "fio version 4 iolog"),
    ("fio version 2 iolog\n/dev/sdb frob 0 1\n", 2, "action", "frob"),
    ("fio version 2 iolog\n/dev/sdb read x 1\n", 2, "offset", "x"),
    ("fio version 3 iolog\nx /dev/sdb read 0 1\n", 2, "timestamp", "x"),
    ("fio version 3 iolog\n1 /dev/sdb read 0\n", 2, "line", "1 /dev/sdb read 0"),
])
def test_fio_errors(tmp_path, text, lineno, field, found):
    path = write(tmp_path / "bad.log", text)
    with pytest.raises(TraceError) as info:
        list(read_fio_iolog(path))
    msg = str(info.value)
    assert msg.startswith(f"{path}:{lineno}: {field} expected "), msg
    assert msg.endswith(f", found {found!r}"), msg


def test_fio_write_v3_round_trip(tmp_path):
    recs = [R(0.000113, "/dev/sdb", 0, 8, True), R(0.5, "/dev/sdb", 2048, 128, False),
            R(0.75, "other disk", 8, 8, False)]
    path = tmp_path / "out.log"
    assert write_fio_iolog(path, recs) == 3
    text = path.read_text().splitlines()
    assert text[:4] == ["fio version 3 iolog", "113 /dev/sdb add", "113 /dev/sdb open",
                        "113 /dev/sdb write 0 4096"]
    assert text[-1] == "750000 other_disk close"
    back = list(read_fio_iolog(path))
    assert [(r.time, r.sector, r.nr_sectors, r.write) for r in back] == \
        [(r.time, r.sector, r.nr_sectors, r.write) for r in recs]


# --- compression -----------------------------------------------------------------------

@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_compressed_by_content_not_name(tmp_path, compress):
    path = write(tmp_path / "trace.dat", compress(BLKPARSE.encode()))
    assert len(list(read_blkparse(path))) == 5


def test_corrupt_compressed_stream_is_trace_error(tmp_path):
    data = gzip.compress(("1,R,0,512,10\n" * 20000).encode())[:-200]
    path = write(tmp_path / "a.csv", data)
    with pytest.raises(TraceError, match=r"a\.csv:\d+: file expected gzip data"):
        list(read_alibaba(path))


# --- fast paths (additions) ------------------------------------------------------------

def _blkparse_lines(count, seed):
    import random
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(count):
        t += rng.choice((0.0, 1e-6, 3e-6))
        act = rng.choice("QQQGIDCMF")
        rwbs = rng.choice(("W", "WS", "R", "RA", "RS", "N", "FWS", "D"))
        out.append(f"  8,{rng.randint(0, 2)} {i % 4} {i} {t:.9f} {rng.choice((7, 4321))} {act} "
                   f"{rwbs} {rng.randrange(10 ** 9)} + {rng.choice((0, 8, 16, 256))} "
                   f"[{rng.choice(('postgres', 'kworker/0:1', 'é', 'x]y'))}]\n")
    return out


@pytest.mark.parametrize("events", ["Q", "D"])
@pytest.mark.parametrize("extra", ["", "  8,0 0 1 9.000000000 5 P N [p]\n",
                                   "  8,0 0 1 9.000000000 5 Q W 1 + 8 [a name]\n"])
def test_blkparse_token_regex_and_line_paths_agree(tmp_path, monkeypatch, events, extra):
    # the split() path, the regular-expression path and the line-by-line path give the
    # same records and the same ignored count (an extra line sends a chunk down another path)
    lines = _blkparse_lines(6000, 5)
    path = write(tmp_path / "t.txt", "".join(lines) + extra)

    def run():
        stream = read_blkparse(path, events=events)
        return list(stream), stream.ignored

    both = run()
    monkeypatch.setattr("blksim.traces.blkparse_text._fast_tokens", lambda *a: None)
    regex = run()
    monkeypatch.setattr("blksim.traces.blkparse_text._fast", lambda *a: None)
    assert both == regex == run()
    assert len(both[0]) > 200 and both[1] > 0


def test_blkparse_tail_spacing_is_lenient(tmp_path):
    text = ("  8,0 0 1 0.1 5 Q W 8  +  8  [x]\n  8,0 0 2 0.2 5 Q WS 16 + 8 [y] \n"
            "  8,0 0 3 0.3 5 D W 16 + 8 (  12)  [y]\n")
    assert list(read_blkparse(write(tmp_path / "t.txt", text))) == [
        R(0.1, "8,0", 8, 8, True, 5, "x", False), R(0.2, "8,0", 16, 8, True, 5, "y", True)]


def test_blkparse_ignored_counted_once_when_a_chunk_falls_back(tmp_path):
    # a flush, then a name that is not UTF-8: the fast paths give up on the chunk
    data = (b"  8,0 0 1 0.1 5 Q FWS 0 + 0 [x]\n"
            b"  8,0 0 2 0.2 5 Q W 8 + 8 [\xff]\n")
    stream = read_blkparse(write(tmp_path / "t.txt", data))
    assert [r.name for r in stream] == ["\ufffd"] and stream.ignored == 1


@pytest.mark.parametrize("fmt", ["msr", "spc", "alibaba", "tencent"])
def test_csv_fast_and_slow_paths_agree_unaligned_and_repeated(tmp_path, monkeypatch, fmt):
    # unaligned offsets, zero sizes (ignored), sizes and devices repeating across chunks
    import random
    rng = random.Random(11)
    rows = []
    for i in range(8000):
        off = rng.choice((0, 512, 4096 * i, 100, 1023, 511))
        size = rng.choice((0, 1, 512, 4096, 4097, 100))
        if fmt == "msr":
            rows.append(f"{10 ** 17 + i},h{i % 2},{i % 3},{rng.choice(('Read', 'Write'))},"
                        f"{off},{size},{i}")
        elif fmt == "spc":
            rows.append(f"{i % 3},{off},{size},{rng.choice('rRwW')},{i / 1000:.6f}")
        elif fmt == "alibaba":
            rows.append(f"{i % 5},{rng.choice('RW')},{off},{size},{10 ** 15 + i}")
        else:
            rows.append(f"{1538323200 + i // 700},{off},{size // 100},{rng.choice('01')},{i % 4}")
    path = write(tmp_path / "t.csv", "\n".join(rows) + "\n")

    def run(**kw):
        stream = {"msr": read_msr, "spc": read_spc, "alibaba": read_alibaba,
                  "tencent": read_tencent}[fmt](path, **kw)
        return list(stream), stream.ignored

    fast = run()
    spc4k = run(block_size=4096) if fmt == "spc" else None
    monkeypatch.setattr("blksim.traces.csv_formats._fast", lambda *a: None)
    assert run() == fast and fast[1] > 0 and len(fast[0]) > 5000
    if fmt == "spc":
        assert run(block_size=4096) == spc4k
