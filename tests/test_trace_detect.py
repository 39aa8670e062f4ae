"""traces.detect: format detection, open_trace, the registries; real traces."""

import bz2
import gzip
import lzma
from pathlib import Path

import pytest

from blksim.disk_models.disksim.validation_set import shipped_folder

from blksim.traces import detect
from blksim.traces.detect import (detect_format, formats, open_trace, register_format, write_trace,
                           writers)
from blksim.traces.records import TraceError, TraceRecord

DATA = Path(__file__).with_name("data")   # real traces, xz-compressed (tests/data/README.md)

SAMPLES = {
    "blkparse": "  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]\n"
                "  8,0    3        2     0.000001000   697  G   W 223490 + 8 [kjournald]\n",
    "msr": "128166372003061629,hm,1,Read,3154152448,4096,2695\n"
           "128166372016382155,hm,1,Write,3154152448,4096,2000\n",
    "spc": "0,20941264,8192,W,0.551706\n1,20939840,8192,r,0.554041\n",
    "alibaba": "419,W,8792731648,16384,1577808144360767\n419,R,512,100,1577808144360800\n",
    "tencent": "Timestamp,Offset,Size,IOType,VolumeID\n1538323200,12324,8,1,1063\n",
    "fio": "fio version 2 iolog\n/dev/sdb add\n/dev/sdb write 0 4096\n",
    "disksim": "0.5 3 100 8 1\n1.25 0 0 16 0\n",
    "disksim-validate": "R Miss 100 8 1500.5 100\nW Hit 108 8 900 0\n",
}


def write(path, data):
    path = Path(path)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_format_detected(tmp_path, name):
    path = write(tmp_path / "trace", SAMPLES[name])
    assert detect_format(path) == name
    recs = list(open_trace(path))
    assert recs and all(isinstance(r, TraceRecord) for r in recs)


@pytest.mark.parametrize("compress, suffix", [(gzip.compress, ".gz"), (bz2.compress, ".bz2"),
                                              (lzma.compress, ".xz"), (gzip.compress, "")])
def test_compressed_files_detected_and_read(tmp_path, compress, suffix):
    path = write(tmp_path / ("trace" + suffix), compress(SAMPLES["msr"].encode()))
    assert detect_format(path) == "msr"
    assert len(list(open_trace(path))) == 2


def test_disksim_validate_times_follow_the_closed_loop(tmp_path):
    path = write(tmp_path / "v", SAMPLES["disksim-validate"])
    a, b = open_trace(path)
    assert (a.time, a.sector, a.write) == (0.0, 100, False)
    assert b.time == pytest.approx(0.0016005) and b.write


def test_nothing_matches_names_the_formats_tried(tmp_path):
    path = write(tmp_path / "x", "hello world\n")
    with pytest.raises(TraceError) as info:
        detect_format(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: format expected one of blkparse, msr")
    assert "'hello world'" in msg and "--format" in msg


def test_empty_file(tmp_path):
    with pytest.raises(TraceError, match="empty file"):
        detect_format(write(tmp_path / "x", ""))


def test_ambiguity_names_the_candidates(tmp_path, monkeypatch):
    monkeypatch.setattr(detect, "FORMATS", dict(detect.FORMATS))
    register_format("lookalike", lambda path, skip_bad_lines=False: iter(()),
                    lambda head: head.startswith(b"0,"))
    path = write(tmp_path / "x", SAMPLES["spc"])
    with pytest.raises(TraceError, match=r"format is ambiguous: the file reads as spc and "
                                         r"lookalike; choose one with --format"):
        detect_format(path)
    assert list(open_trace(path, "spc"))


def test_register_format_with_path_sniffer(tmp_path, monkeypatch):
    monkeypatch.setattr(detect, "FORMATS", dict(detect.FORMATS))
    capture = tmp_path / "capture"
    capture.mkdir()

    def reader(path, skip_bad_lines=False):
        return iter([TraceRecord(0.0, "8,0", 0, 8, False, None)])

    register_format("dirfmt", reader, None, sniff_path=lambda p: Path(p).is_dir())
    assert detect_format(capture) == "dirfmt"
    assert list(open_trace(capture))[0].devno == "8,0"


def test_unknown_format_and_options(tmp_path):
    path = write(tmp_path / "x", SAMPLES["msr"])
    with pytest.raises(TraceError, match="format: expected one of blkparse, "):
        open_trace(path, "nope")
    with pytest.raises(TraceError, match="events: not an option of trace format msr"):
        open_trace(path, "msr", events="D")
    assert len(list(open_trace(path, "msr", events=None, skip_bad_lines=False))) == 2
    with pytest.raises(TraceError, match="block_size: expected a positive integer"):
        open_trace(write(tmp_path / "s", SAMPLES["spc"]), "spc", block_size=-1)


def test_registries_list_the_builtins():
    assert {"blkparse", "msr", "spc", "alibaba", "tencent", "fio", "disksim",
            "disksim-validate"} <= set(formats())
    assert {"disksim", "fio", "blkparse", "msr", "spc", "alibaba"} <= set(writers())
    assert "skip_bad_lines" in formats()["disksim"].options
    assert formats()["blkparse"].options == ("events", "skip_bad_lines", "latency")


@pytest.mark.parametrize("to", ["disksim", "fio", "blkparse", "msr", "spc", "alibaba"])
def test_write_trace_every_writer_round_trips(tmp_path, to):
    recs = [TraceRecord(0.0, 0, 8, 8, True, None), TraceRecord(0.001, 0, 64, 16, False, None)]
    path = tmp_path / "out"
    assert write_trace(path, iter(recs), to) == 2
    assert detect_format(path) == to
    back = list(open_trace(path))
    assert [(r.sector, r.nr_sectors, r.write) for r in back] == [(8, 8, True), (64, 16, False)]
    assert back[1].time - back[0].time == pytest.approx(0.001, abs=1e-6)


def test_write_trace_unknown_writer(tmp_path):
    with pytest.raises(TraceError, match="--to: expected one of disksim, "):
        write_trace(tmp_path / "o", [], "tencent")


# --- real traces --------------------------------------------------------------------

def test_real_disksim_ascii_detected():
    path = DATA / "ascii.trace.xz"
    assert detect_format(path) == "disksim"
    assert sum(1 for _ in open_trace(path)) == 100_000


@pytest.mark.parametrize("name, count", [("tpcc-small.trace", 6_999),
                                         ("wsrch-small.trace", 24_783)])
def test_real_mqsim_traces(name, count):
    path = DATA / f"{name}.xz"
    assert detect_format(path) == "disksim"
    recs = list(open_trace(path, time_unit="ns"))
    assert len(recs) == count
    if name.startswith("wsrch"):
        assert 59 < recs[-1].time < 61


def test_real_disksim_validate_traces():
    traces = shipped_folder() / "traces"
    found = [p for p in sorted(traces.iterdir())
             if p.is_file() and detect_format_or_none(p) == "disksim-validate"]
    assert found
    for path in found:
        recs = list(open_trace(path, "disksim-validate"))
        assert recs and all(b.time >= a.time for a, b in zip(recs, recs[1:]))


def detect_format_or_none(path):
    try:
        return detect_format(path)
    except TraceError:
        return None
