"""Commands, configurations and drive files fed junk and numbers at the edges: each ends
within a time bound, with exit status 0 and sane figures or one line naming what is
wrong (exit status 2), and leaves no file behind (issue 13). The long form of each test
(more examples) is marked slow."""

from __future__ import annotations

import contextlib
import copy
import json
import math
import signal
import tempfile
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings, strategies as st

from blksim.disk_models.base import DeviceError
from blksim.disk_models.drive import make_drive
from blksim.disk_models.spec import DriveSpec
from blksim.cli import main
from blksim.block.request import Bio, Request

EDGE_INTS = [0, 1, -1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, 10**28, -(2**63)]
EDGE_FLOATS = [0.0, -0.0, 1e-300, 1e300, math.inf, -math.inf, math.nan, 0.5, -2.5]
EDGE_TEXT = ["", " ", "1_000", "0x10", "1e309", "nan", "-inf", "\ufeff1", "１２", "9" * 29,
             "1t", "-4k", "4k", "1s", "0s", "-1s", "10ms", "abc", "\x00", "x" * 300, "9" * 5000]
EDGE = st.sampled_from([*EDGE_INTS, *EDGE_FLOATS, *EDGE_TEXT, True, [], {}])

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
LONG = settings(max_examples=400, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


class TookTooLong(Exception):
    pass


@contextlib.contextmanager
def time_bound(seconds: float):
    """Fail (instead of hanging) when the body runs longer than ``seconds``."""
    def expire(signum, frame):
        raise TookTooLong(f"took more than {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv, capsys, seconds=20.0) -> tuple[int, str, str]:
    with time_bound(seconds):
        code = main(argv)
    out, err = capsys.readouterr()
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err
    if code == 2:
        assert err.startswith("blksim: error: ") and err.count("\n") == 1, err
    return code, out, err


# --- traces through stats and convert --------------------------------------------------

FIELD = st.one_of(st.sampled_from([str(v) for v in EDGE_INTS + EDGE_FLOATS] + EDGE_TEXT),
                  st.integers(0, 10**6).map(str))
TRACE_LINE = st.lists(FIELD, min_size=1, max_size=7).map(" ".join)
TRACE = st.lists(TRACE_LINE, max_size=8).map(lambda lines: "\n".join(lines) + "\n")
FORMATS = ["disksim", "msr", "spc", "fio", "blkparse", None]
WRITERS = ["disksim", "fio", "blkparse", "msr", "spc", "alibaba", "blktrace"]


def _fresh(tmp_path) -> Path:
    """A folder of this example's own (hypothesis reuses the test's tmp_path)."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


def numbers(node, path: str = ""):
    """Every number in ``node`` (results.json's figures; booleans are not numbers), with
    its dotted path."""
    if isinstance(node, bool):
        return
    if isinstance(node, (int, float)):
        yield path, node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from numbers(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from numbers(v, f"{path}.{i}")


def run_cli_config(tmp_path, capsys, cfg: dict, name: str = "c.toml", beside=None,
               seconds: float = 30.0):
    """Write ``cfg`` (and ``beside``: more files, name -> table) as TOML in a folder of
    its own and run ``blksim run FILE -q --out DIR`` within ``seconds``; None when a
    table cannot be written as TOML. Otherwise (exit status, results.json's figures or
    None, stdout, stderr, the file), having checked what the run leaves: exactly
    results.json and config.resolved.toml after exit 0; after exit 2 (one line, see
    `run_cli`) nothing, not even the output folder."""
    folder = _fresh(tmp_path)
    written = {name: cfg, **(beside or {})}
    try:
        for file, table in written.items():
            (folder / file).write_text(tomli_w.dumps(table))
    except (TypeError, ValueError):
        return None                                  # not expressible in TOML
    path, out = folder / name, folder / "out"
    code, stdout, err = run_cli(["run", str(path), "-q", "--out", str(out)], capsys,
                                seconds=seconds)
    left = sorted(p.name for p in folder.iterdir())
    assert left == sorted([*written, *(["out"] if code == 0 else [])]), left
    if code == 2:
        return code, None, stdout, err, path
    assert "simulated" in stdout
    assert sorted(p.name for p in out.iterdir()) == ["config.resolved.toml", "results.json"]
    return code, json.loads((out / "results.json").read_text()), stdout, err, path


def _trace_commands(tmp_path, capsys, text, fmt, to):
    tmp_path = _fresh(tmp_path)
    src = tmp_path / "in.trace"
    src.write_text(text, encoding="utf-8", errors="surrogateescape")
    fmt_args = ["--format", fmt] if fmt else []
    run_cli(["trace", "stats", str(src), *fmt_args], capsys)
    dest = tmp_path / "out.trace"
    code, _, _ = run_cli(["trace", "convert", str(src), str(dest), "--to", to, *fmt_args],
                         capsys)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == (["in.trace", "out.trace"] if code == 0 else ["in.trace"])
    dest.unlink(missing_ok=True)


@FAST
@given(text=TRACE, fmt=st.sampled_from(FORMATS), to=st.sampled_from(WRITERS))
def test_trace_stats_and_convert_on_junk(tmp_path, capsys, text, fmt, to):
    _trace_commands(tmp_path, capsys, text, fmt, to)


@pytest.mark.slow
@LONG
@given(text=TRACE, fmt=st.sampled_from(FORMATS), to=st.sampled_from(WRITERS))
def test_trace_stats_and_convert_on_junk_long(tmp_path, capsys, text, fmt, to):
    _trace_commands(tmp_path, capsys, text, fmt, to)


# --- configurations ---------------------------------------------------------------------

RUN_KEYS = ["seed", "duration", "ramp_time", "hz", "kernel", "client_timeout"]
QUEUE_KEYS = ["nr_requests", "max_sectors_kb", "nomerges", "scheduler"]
JOB_KEYS = ["rw", "bs", "iodepth", "size", "offset", "thinktime", "number_ios", "rate_iops",
            "prio", "nice"]


@st.composite
def configurations(draw):
    cfg = {"run": {"duration": "0.3s"}, "queue": {},
           "job": [{"name": "j", "rw": "randread", "number_ios": 50}]}
    for table, keys in (("run", RUN_KEYS), ("queue", QUEUE_KEYS)):
        for key in draw(st.lists(st.sampled_from(keys), max_size=2, unique=True)):
            cfg[table][key] = draw(EDGE)
    for key in draw(st.lists(st.sampled_from(JOB_KEYS), max_size=2, unique=True)):
        cfg["job"][0][key] = draw(EDGE)
    return cfg


def _run_config(tmp_path, capsys, cfg):
    tmp_path = _fresh(tmp_path)
    path = tmp_path / "c.toml"
    try:
        path.write_text(tomli_w.dumps(cfg))
    except (TypeError, ValueError):
        return                                   # not expressible in TOML
    _run_into(tmp_path / "out", ["run", str(path), "-q"], capsys)


def _run_into(out: Path, argv: list, capsys) -> None:
    """Run ``argv`` with ``--out out``: a run that succeeds leaves its whole set of
    files, one that fails leaves none."""
    code, stdout, _ = run_cli([*argv, "--out", str(out)], capsys, seconds=30)
    if code == 0:
        assert "simulated" in stdout
        assert sorted(p.name for p in out.iterdir()) == ["config.resolved.toml",
                                                          "results.json"]
    else:
        assert not out.exists() or not any(out.iterdir())


@FAST
@given(cfg=configurations())
def test_configurations_at_the_edges(tmp_path, capsys, cfg):
    _run_config(tmp_path, capsys, cfg)


@pytest.mark.slow
@LONG
@given(cfg=configurations())
def test_configurations_at_the_edges_long(tmp_path, capsys, cfg):
    _run_config(tmp_path, capsys, cfg)


# --- drive descriptions -----------------------------------------------------------------

GOOD = {
    "name": "t", "rpm": 7200, "heads": 2, "cylinders": 10,
    "zones": [{"first_cyl": 0, "last_cyl": 4, "sectors_per_track": 50},
              {"first_cyl": 5, "last_cyl": 9, "sectors_per_track": 40}],
    "track_skew_sectors": 3, "cylinder_skew_sectors": 5, "head_switch_ms": 0.3,
    "write_settle_ms": 0.1, "command_overhead_ms": 0.2, "completion_overhead_ms": 0.1,
    "seek": {"form": "curve", "single_cyl_ms": 0.5, "avg_ms": 1.8, "full_stroke_ms": 4.0},
    "bus_mb_per_s": 320, "queue_depth": 1,
}
PATHS = [("rpm",), ("heads",), ("cylinders",), ("track_skew_sectors",),
         ("cylinder_skew_sectors",), ("head_switch_ms",), ("write_settle_ms",),
         ("command_overhead_ms",), ("completion_overhead_ms",), ("bus_mb_per_s",),
         ("queue_depth",), ("seek", "single_cyl_ms"), ("seek", "avg_ms"),
         ("seek", "full_stroke_ms"), ("zones", 0, "sectors_per_track"),
         ("zones", 1, "first_cyl"), ("zones", 0, "last_cyl")]


def _drive(changes):
    d = copy.deepcopy(GOOD)
    for path, value in changes:
        node = d
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value
    try:
        spec = DriveSpec.from_dict(d, origin="drive.toml")
        drive = make_drive(spec, seed=1)
    except DeviceError as exc:
        assert str(exc).startswith(("drive.toml: ", "t: ")) and "\n" not in str(exc), exc
        return
    with time_bound(10):
        t = 0.0
        for i in range(20):
            rq = Request(i, Bio(i, (i * 7919) % (spec.capacity - 8), 8, i % 3 == 0, True, 1), t)
            drive.submit(rq, t)
            done = drive.next_event_time()
            assert done is not None and math.isfinite(done) and done > t
            assert drive.pop_completed(done) == [rq]
            t = done


@FAST
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), EDGE), max_size=3))
def test_drive_descriptions_at_the_edges(changes):
    _drive(changes)


def test_the_unchanged_drive_runs():
    """The fuzzed drive is valid as written (else every example would end in an error)."""
    spec = DriveSpec.from_dict(GOOD, origin="drive.toml")
    assert make_drive(spec).capacity == spec.capacity > 0


@pytest.mark.slow
@LONG
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), EDGE), max_size=3))
def test_drive_descriptions_at_the_edges_long(changes):
    _drive(changes)


# --- drive import: DiskSim parameter files with one value or line made junk --------------

def _disksim_disks() -> Path:
    from blksim.disk_models.disksim.validation_set import diskspecs
    return diskspecs("cheetah9LP").parent


def _import_junk(tmp_path, capsys, line_index, value, mode, suffix):
    tmp_path = _fresh(tmp_path)
    disks = _disksim_disks()
    for part in (".diskspecs", ".model", ".seek"):
        (tmp_path / f"cheetah9LP{part}").write_bytes((disks / f"cheetah9LP{part}").read_bytes())
    target = tmp_path / f"cheetah9LP{suffix}"
    lines = target.read_text().splitlines()
    i = line_index % len(lines)
    if mode == "value":            # the value after "=" (or the whole line of a .seek file)
        head, sep, _ = lines[i].partition("=")
        lines[i] = f"{head}= {value}," if sep else f"{value} {value}"
    elif mode == "insert":
        lines.insert(i, str(value))
    else:
        del lines[i:]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    out = tmp_path / "out.toml"
    code, _, _ = run_cli(["drive", "import", str(tmp_path / "cheetah9LP.diskspecs"),
                          "--out", str(out)], capsys)
    assert out.exists() == (code == 0)
    if code == 0:                  # what it wrote reads back
        shown = main(["drive", "show", str(out)])
        _, err = capsys.readouterr()
        assert shown == 0, err


DISKSIM_VALUE = st.sampled_from([str(v) for v in EDGE_INTS + EDGE_FLOATS] + EDGE_TEXT)


@FAST
@given(line=st.integers(0, 10**4), value=DISKSIM_VALUE,
       mode=st.sampled_from(["value", "insert", "cut"]),
       suffix=st.sampled_from([".diskspecs", ".model", ".seek"]))
def test_drive_import_of_junk(tmp_path, capsys, line, value, mode, suffix):
    _import_junk(tmp_path, capsys, line, value, mode, suffix)


@pytest.mark.slow
@LONG
@given(line=st.integers(0, 10**4), value=DISKSIM_VALUE,
       mode=st.sampled_from(["value", "insert", "cut"]),
       suffix=st.sampled_from([".diskspecs", ".model", ".seek"]))
def test_drive_import_of_junk_long(tmp_path, capsys, line, value, mode, suffix):
    _import_junk(tmp_path, capsys, line, value, mode, suffix)


# --- fio job files, --set, validate traces and binary blktrace captures ------------------

FIO_KEYS = ["rw", "bs", "iodepth", "size", "offset", "runtime", "rate_iops", "numjobs",
            "thinktime", "ioengine", "direct", "prio", "filename", "startdelay", "junk"]
FIO_VALUE = st.sampled_from([str(v) for v in EDGE_INTS + EDGE_FLOATS] + EDGE_TEXT)


@st.composite
def fio_files(draw):
    lines = ["[global]", "rw=randread", "runtime=0.2s", "number_ios=50", "[j]"]
    for key in draw(st.lists(st.sampled_from(FIO_KEYS), max_size=3, unique=True)):
        lines.append(f"{key}={draw(FIO_VALUE)}")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(FIO_VALUE))
    return "\n".join(lines) + "\n"


def _run_fio(tmp_path, capsys, text):
    tmp_path = _fresh(tmp_path)
    job = tmp_path / "j.fio"
    job.write_text(text, encoding="utf-8", errors="surrogateescape")
    _run_into(tmp_path / "out", ["run", str(job), "-q", "--duration", "0.3s"], capsys)


@FAST
@given(text=fio_files())
def test_fio_job_files_at_the_edges(tmp_path, capsys, text):
    _run_fio(tmp_path, capsys, text)


@pytest.mark.slow
@LONG
@given(text=fio_files())
def test_fio_job_files_at_the_edges_long(tmp_path, capsys, text):
    _run_fio(tmp_path, capsys, text)


SET_PATHS = ["queue/nr_requests", "queue/iosched/fifo_batch", "queue/iosched/read_expire",
             "queue/iosched/slice_idle", "queue/scheduler", "device/queue_depth",
             "run/seed", "run/hz", "run/kernel", "queue/nomerges", "queue/iosched/bogus",
             "nowhere", "run/duration"]


@FAST
@given(sets=st.lists(st.tuples(st.sampled_from(SET_PATHS), FIO_VALUE), min_size=1, max_size=3),
       scheduler=st.sampled_from(["deadline", "cfq", "anticipatory", "noop"]))
def test_set_overrides_at_the_edges(tmp_path, capsys, sets, scheduler):
    tmp_path = _fresh(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nduration = "0.3s"\n[queue]\nscheduler = "' + scheduler + '"\n'
                   '[[job]]\nname = "j"\nrw = "randread"\nnumber_ios = 50\n')
    argv = ["run", str(cfg), "-q"]
    for path, value in sets:
        argv += ["--set", f"{path}={value}"]
    code, stdout, _ = run_cli(argv, capsys, seconds=30)
    assert code == 2 or "simulated" in stdout


@FAST
@given(text=TRACE)
def test_validate_on_junk_traces(tmp_path, capsys, text):
    tmp_path = _fresh(tmp_path)
    trace = tmp_path / "v.trace"
    trace.write_text(text, encoding="utf-8", errors="surrogateescape")
    run_cli(["validate", "cheetah9LP", str(trace)], capsys)


@FAST
@given(data=st.binary(max_size=400), keep=st.integers(0, 48))
def test_binary_blktrace_junk(tmp_path, capsys, data, keep):
    # a real event's first bytes, then junk: the reader's framing is exercised too
    from blksim.traces.blktrace import BlktraceFile, TA_QUEUE, action_value, encode_device
    tmp_path = _fresh(tmp_path)
    good = tmp_path / "g.blktrace.0"
    f = BlktraceFile(good, encode_device(8, 0))
    f.event(0, action_value(TA_QUEUE, False), 100, 4096, 7)
    f.close()
    path = tmp_path / "sda.blktrace.0"
    path.write_bytes(good.read_bytes()[:keep] + data)
    good.unlink()
    run_cli(["trace", "stats", str(path), "--format", "blktrace"], capsys)
    dest = tmp_path / "o.fio"
    code, _, _ = run_cli(["trace", "convert", str(path), str(dest), "--to", "fio",
                          "--format", "blktrace"], capsys)
    assert dest.exists() == (code == 0)
