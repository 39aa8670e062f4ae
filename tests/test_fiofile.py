"""fio job files: sections, [global] inheritance, ignored options with warnings, errors."""

import pytest

from blksim.cli import main
from blksim.traces.fiofile import FioFileError, read_fio_jobfile
from blksim.traces.jobs import parse_jobs

JOBFILE = """\
; comment
[global]
ioengine=libaio   ; as fio runs it
bs=8k
runtime=5
time_based

[reader]
rw=randread
numjobs=2
thinktime=500     # microseconds, as fio

[writer]
rw = write
bs = 64k
iodepth = 4
sync=1
"""


def write(tmp_path, text, name="jobs.fio"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_sections_inherit_global_and_keep_fio_values(tmp_path):
    tables, warnings = read_fio_jobfile(write(tmp_path, JOBFILE))
    assert [t["name"] for t in tables] == ["reader", "writer"]
    reader, writer = tables
    assert reader == {"name": "reader", "ioengine": "libaio", "bs": "8k", "runtime": 5,
                      "rw": "randread", "numjobs": 2, "thinktime": 500}
    assert writer["bs"] == "64k" and writer["iodepth"] == 4 and writer["sync"] == 1
    jobs = parse_jobs(tables, "jobs.fio", 71687372)
    assert jobs[0].thinktime == pytest.approx(0.0005) and jobs[0].runtime == 5
    assert jobs[1].is_sync(True)


def test_ignored_options_are_warnings_with_file_and_line(tmp_path):
    path = write(tmp_path, JOBFILE)
    _, warnings = read_fio_jobfile(path)
    assert len(warnings) == 1           # (the file's ioengine is read, not ignored)
    assert warnings[0].startswith(f"{path}:6: ignored 'time_based'")


@pytest.mark.parametrize("text, message", [
    ("[a]\nrw=randread\nzonemode=zbd\n", ":3: unknown or unsupported fio option 'zonemode'"),
    ("bs=4k\n[a]\n", ":1: option before any [section]"),
    ("[a\nrw=read\n", ":1: expected a section header"),
    ("[global]\nbs=4k\n", "no job sections"),
    ("[a]\nfilename=${DEV}\n", ":2: filename: environment variables"),
    ("[a]\ninclude other.fio\n", ":2: 'include' is not supported"),
])
def test_errors_name_file_and_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(FioFileError) as exc:
        read_fio_jobfile(path)
    assert str(exc.value).startswith(path) and message in str(exc.value)


def test_run_an_fio_file_directly(tmp_path, capsys):
    path = write(tmp_path, JOBFILE)
    assert main(["run", path, "--quiet", "--set", "run/duration=\"1s\""]) == 0
    out, err = capsys.readouterr()
    assert "reader.0" in out and "reader.1" in out and "writer" in out
    assert err.count("blksim: warning: ") == 1


def test_fio_key_in_a_configuration(tmp_path, capsys):
    write(tmp_path, JOBFILE)
    cfg = write(tmp_path, 'fio = "jobs.fio"\n[queue]\nscheduler = "noop"\n[run]\nduration = "1s"\n',
                "c.toml")
    out_dir = tmp_path / "o"
    assert main(["run", cfg, "--quiet", "--out", str(out_dir)]) == 0
    resolved = (out_dir / "config.resolved.toml").read_text()
    assert 'name = "reader"' in resolved and "fio" not in resolved.split("[run]")[0]


def test_bad_option_in_fio_file_is_one_line_exit_2(tmp_path, capsys):
    path = write(tmp_path, "[a]\nrw=randread\nverify=md5\n")
    assert main(["run", path, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("blksim: error: ") and ":3:" in err and err.count("\n") == 1
