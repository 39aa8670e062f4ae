"""traces.blktrace: the binary format, read (streamed, per-CPU files merged) and written."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from blksim.traces import blktrace as bt
from blksim.traces.blktrace import (BlktraceError, BlktraceFile, action_value, encode_device,
                             iter_events, parse_device, read_blktrace, write_blktrace)

SDA = encode_device(8, 0)
SDB = encode_device(8, 16)


def rec(t, sector, n, write=False, pid=1, name=None, sync=None, latency=None, devno="8,0",
        cpu=0):
    return bt.BlktraceRecord(time=t, devno=devno, sector=sector, nr_sectors=n, write=write,
                             pid=pid, name=name, sync=sync, latency=latency, cpu=cpu)


def q(f, t_ns, sector, nbytes, pid=1, write=False, sync=False):
    f.event(t_ns, action_value(bt.TA_QUEUE, write, sync), sector, nbytes, pid)


def c(f, t_ns, sector, nbytes, pid=0, write=False):
    f.event(t_ns, action_value(bt.TA_COMPLETE, write, fs=True), sector, nbytes, pid)


# --- the format ----------------------------------------------------------------------

def test_constants_follow_blktrace_api_h():
    assert bt.RECORD_SIZE == 48
    assert bt.MAGIC_VERSION == 0x65617407
    # BLK_TA_QUEUE = __BLK_TA_QUEUE | BLK_TC_ACT(BLK_TC_QUEUE), plus the direction.
    assert action_value(bt.TA_QUEUE, False) == (1 << 4 | 1) << 16 | 1
    assert action_value(bt.TA_ISSUE, True, sync=True) == (1 << 6 | 1 << 1 | 1 << 3) << 16 | 7
    assert action_value(bt.TA_COMPLETE, False) == (1 << 7 | 1) << 16 | 8
    assert action_value(bt.TA_INSERT, False) >> 16 & bt.TC_QUEUE
    assert encode_device(8, 16) == 8 << 20 | 16
    assert bt.decode_device(encode_device(253, 1)) == (253, 1)
    assert parse_device("8,16") == SDB and parse_device(" 8:16 ") == SDB
    assert bt.device_text(SDB) == "8,16"
    with pytest.raises(ValueError, match="MAJOR,MINOR"):
        parse_device("sdb")


def test_record_layout_is_native_little_endian(tmp_path):
    f = BlktraceFile(tmp_path / "x.blktrace.0", SDB, cpu=3)
    q(f, 1234, 77, 4096, pid=42, write=True)
    f.close()
    data = (tmp_path / "x.blktrace.0").read_bytes()
    assert len(data) == 48
    fields = struct.unpack("<IIQQIIIIIHH", data)
    assert fields == (0x65617407, 1, 1234, 77, 4096, action_value(bt.TA_QUEUE, True), 42, SDB,
                      3, 0, 0)
    assert bt.sniff(data) and not bt.sniff(b"0.5 0 0 8 1\n")


def test_write_is_atomic(tmp_path):
    f = BlktraceFile(tmp_path / "x.blktrace.0")
    q(f, 1, 0, 512)
    assert not (tmp_path / "x.blktrace.0").exists()
    f.discard()
    assert list(tmp_path.iterdir()) == []


# --- reading -------------------------------------------------------------------------

def test_reads_q_events_with_names_sync_and_relative_times(tmp_path):
    f = BlktraceFile(tmp_path / "t.blktrace.0", SDA)
    f.notify_process(0, 7, "postgres: writer process")   # cut to 15 bytes, as comm is
    q(f, 5_000_000, 100, 4096, pid=7, write=True, sync=True)
    f.event(5_000_100, action_value(bt.TA_GETRQ, True), 100, 4096, 7)
    q(f, 6_000_000, 200, 1000, pid=8)                      # bytes round up to sectors
    q(f, 6_500_000, 300, 0, pid=8)                         # a flush: no data, skipped
    f.event(7_000_000, action_value(bt.TA_QUEUE, True) | bt.TC_DISCARD << 16, 9, 4096, 8)
    f.close()
    got = list(read_blktrace(tmp_path / "t.blktrace.0"))
    assert got == [rec(0.0, 100, 8, True, 7, "postgres: write", True),
                   rec(0.001, 200, 2, False, 8, None, False)]


def test_per_cpu_files_are_merged_in_time_order(tmp_path):
    a = BlktraceFile(tmp_path / "sdb.blktrace.0", SDB, cpu=0)
    b = BlktraceFile(tmp_path / "sdb.blktrace.1", SDB, cpu=1)
    for i in range(5):
        q(a, 1000 * (2 * i), 10 * i, 512, pid=1)
        q(b, 1000 * (2 * i + 1), 1000 + i, 512, pid=2)
    a.close()
    b.close()
    for path in (tmp_path / "sdb", tmp_path / "sdb.blktrace.1", tmp_path):
        got = list(read_blktrace(path))
        assert [round(r.time * 1e9) for r in got] == [1000 * i for i in range(10)]
        assert [r.pid for r in got] == [1, 2] * 5
        assert [r.cpu for r in got] == [0, 1] * 5       # each event's recorded CPU


def test_big_endian_files_are_read(tmp_path):
    be = struct.Struct(">IIQQIIIIIHH")
    data = (be.pack(0x65617407, 1, 10, 8, 4096, action_value(bt.TA_QUEUE, True), 5, SDA, 0, 0,
                    0)
            + be.pack(0x65617407, 2, 20, 16, 512, action_value(bt.TA_QUEUE, False), 5, SDA, 0,
                      0, 0))
    path = tmp_path / "be.bin"
    path.write_bytes(data)
    assert list(read_blktrace(path)) == [rec(0.0, 8, 8, True, 5, sync=False),
                                         rec(1e-8, 16, 1, False, 5, sync=False)]


def test_device_selection_and_d_events(tmp_path):
    f = BlktraceFile(tmp_path / "d.bin", SDA)
    q(f, 0, 8, 4096)
    f.device = SDB
    q(f, 10, 16, 4096)
    f.event(20, action_value(bt.TA_ISSUE, False, fs=True), 16, 8192, 0)
    f.close()
    assert [r.sector for r in read_blktrace(tmp_path / "d.bin", device=SDB)] == [16]
    d = list(read_blktrace(tmp_path / "d.bin", events="D"))
    assert [(r.sector, r.nr_sectors, r.devno) for r in d] == [(16, 16, "8,16")]
    assert [r.sector for r in read_blktrace(tmp_path / "d.bin", device="8,0")] == [8]
    with pytest.raises(ValueError, match="events"):
        list(read_blktrace(tmp_path / "d.bin", events="C"))


def test_latency_is_matched_from_completions_of_merged_requests(tmp_path):
    f = BlktraceFile(tmp_path / "l.bin", SDA)
    q(f, 0, 100, 4096)                     # 100..107
    q(f, 1_000_000, 108, 4096)             # back-merged: 108..115
    q(f, 2_000_000, 500, 4096, write=True)
    f.event(3_000_000, action_value(bt.TA_ISSUE, False, fs=True), 100, 8192, 0)
    c(f, 5_000_000, 100, 8192)             # one request, both bios
    c(f, 9_000_000, 500, 4096, write=True)
    f.close()
    got = list(read_blktrace(tmp_path / "l.bin", latency=True))
    assert [r.latency for r in got] == [0.005, 0.004, 0.007]
    d = list(read_blktrace(tmp_path / "l.bin", events="D", latency=True))
    assert [(r.sector, r.latency) for r in d] == [(100, 0.002)]
    # Unmatched requests are given up, never held for ever.
    f = BlktraceFile(tmp_path / "u.bin", SDA)
    q(f, 0, 100, 4096)
    f.close()
    assert [r.latency for r in read_blktrace(tmp_path / "u.bin", latency=True)] == [None]


def test_unmatched_requests_are_released_after_max_pending(tmp_path, monkeypatch):
    monkeypatch.setattr(bt, "MAX_PENDING", 10)
    f = BlktraceFile(tmp_path / "m.bin", SDA)
    for i in range(100):
        q(f, i, i * 8, 4096)
    f.close()
    held = []
    gen = read_blktrace(tmp_path / "m.bin", latency=True)
    first = next(gen)
    assert first.sector == 0 and first.latency is None
    held.extend(gen)
    assert len(held) == 99


def test_write_blktrace_round_trip_with_completions(tmp_path):
    records = [rec(0.0, 0, 8, False, 3, "app", False, 0.010),
               rec(0.002, 64, 16, True, 4, "db", True, 0.001),
               rec(0.020, 8, 8, False, 3, "app", False, None)]
    assert write_blktrace(tmp_path / "w.blktrace.0", records) == 3
    back = list(read_blktrace(tmp_path / "w", latency=True))
    assert back == records
    events = [bt.ACTION_LETTERS.get(e.action & 0xFF, "N") if not (e.action >> 16) & bt.TC_NOTIFY
              else "N" for e in iter_events(tmp_path / "w.blktrace.0")]
    assert events == ["N", "Q", "N", "Q", "C", "C", "Q"]


# --- errors --------------------------------------------------------------------------

def _two_records(tmp_path):
    f = BlktraceFile(tmp_path / "e.bin", SDA)
    q(f, 0, 0, 512)
    q(f, 1, 8, 512)
    f.close()
    return (tmp_path / "e.bin").read_bytes()


def test_truncated_record_is_named(tmp_path):
    data = _two_records(tmp_path)
    (tmp_path / "e.bin").write_bytes(data[:70])
    with pytest.raises(BlktraceError, match=r"e\.bin: record 1 \(byte 48\): record expected 48 "
                                            r"bytes, found 22 .*truncated"):
        list(read_blktrace(tmp_path / "e.bin"))


def test_bad_magic_and_version_are_named(tmp_path):
    data = bytearray(_two_records(tmp_path))
    data[48:52] = b"XXXX"
    (tmp_path / "e.bin").write_bytes(bytes(data))
    with pytest.raises(BlktraceError, match=r"record 1 \(byte 48\): magic expected 0x65617407, "
                                            r"found 0x58585858"):
        list(read_blktrace(tmp_path / "e.bin"))
    data[48:52] = struct.pack("<I", 0x65617406)
    (tmp_path / "e.bin").write_bytes(bytes(data))
    with pytest.raises(BlktraceError, match=r"record 1 .*version expected 0x07, found 0x06"):
        list(read_blktrace(tmp_path / "e.bin"))
    (tmp_path / "text.bin").write_bytes(b"0.5 0 100 8 1\n" * 10)
    with pytest.raises(BlktraceError, match="record 0 .*not a blktrace file"):
        list(read_blktrace(tmp_path / "text.bin"))


def test_pdu_past_the_end_is_named(tmp_path):
    data = bytearray(_two_records(tmp_path))
    data[48 + 46:48 + 48] = struct.pack("<H", 100)
    (tmp_path / "e.bin").write_bytes(bytes(data))
    with pytest.raises(BlktraceError, match=r"record 1 .*pdu_len 100 runs past the end"):
        list(read_blktrace(tmp_path / "e.bin"))


def test_missing_trace_is_named(tmp_path):
    with pytest.raises(BlktraceError, match="no such file"):
        list(read_blktrace(tmp_path / "nothing"))
    with pytest.raises(BlktraceError, match="no NAME.blktrace.N"):
        list(read_blktrace(tmp_path))


# --- fuzzing -------------------------------------------------------------------------

_record_bytes = st.builds(
    lambda t, sector, nbytes, code, cats, pid, pdu: struct.pack(
        "<IIQQIIIIIHH", 0x65617407, 1, t, sector, nbytes, cats << 16 | code, pid, SDA, 0, 0,
        len(pdu)) + pdu,
    st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1),
    st.integers(0, 20), st.integers(0, 0xFFFF), st.integers(0, 2**32 - 1),
    st.binary(max_size=40))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(_record_bytes, max_size=8), junk=st.binary(max_size=60),
       cut=st.integers(0, 1000), latency=st.booleans(), events=st.sampled_from(["Q", "D"]))
def test_fuzz_reader_never_fails_unexpectedly(tmp_path, chunks, junk, cut, latency, events):
    data = b"".join(chunks)
    data = data[:cut] + junk if cut < len(data) else data + junk[:cut % 7]
    path = tmp_path / "fuzz.bin"
    path.write_bytes(data)
    try:
        out = list(read_blktrace(path, events=events, latency=latency))
    except BlktraceError as exc:
        assert str(exc).startswith(str(path))
        return
    for r in out:
        assert r.time >= 0 and r.nr_sectors >= 1
        assert r.latency is None or r.latency >= 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 2**40), st.integers(1, 2048),
                          st.booleans(), st.integers(1, 2**22), st.booleans(),
                          st.one_of(st.none(), st.integers(0, 10**6))), max_size=30,
                unique_by=lambda x: x[1]))
def test_fuzz_write_read_round_trip(tmp_path, items):
    items.sort(key=lambda x: x[0])
    base = items[0][0] if items else 0
    records = [rec((t - base) / 1e9, s, n, w, pid, None, sy, None if lat is None else lat / 1e9)
               for t, s, n, w, pid, sy, lat in items]
    path = tmp_path / "rt.blktrace.0"
    write_blktrace(path, records)
    back = list(read_blktrace(path, latency=True))
    assert [(r.sector, r.nr_sectors, r.write, r.pid, r.sync) for r in back] == \
        [(r.sector, r.nr_sectors, r.write, r.pid, r.sync) for r in records]
    assert [round(r.time * 1e9) for r in back] == [round(r.time * 1e9) for r in records]
    assert [None if r.latency is None else round(r.latency * 1e9) for r in back] == \
        [None if r.latency is None else round(r.latency * 1e9) for r in records]


def test_registered_with_trace_detection(tmp_path):
    from blksim.traces import detect
    f = BlktraceFile(tmp_path / "sdc.blktrace.0", SDA)
    q(f, 0, 8, 4096)
    f.close()
    for path in (tmp_path / "sdc.blktrace.0", tmp_path / "sdc", tmp_path):
        assert detect.detect_format(path) == "blktrace"
    got = list(detect.open_trace(tmp_path / "sdc", events="Q", latency=True))
    assert [(r.sector, r.devno) for r in got] == [(8, "8,0")]
    assert detect.write_trace(tmp_path / "w.bin", got, "blktrace") == 1
    assert list(read_blktrace(tmp_path / "w.bin")) == [r._replace(latency=None) for r in got]
