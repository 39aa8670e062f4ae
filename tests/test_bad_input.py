"""Bad input of every kind ends in one line naming the file and what is wrong, never a
traceback (issue 13's audit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blksim.cli import main

JOB = '[run]\nduration = "1s"\n[[job]]\nname = "r"\nrw = "randread"\n'


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("blksim: error: "), err
    return err


def test_a_configuration_that_is_not_utf8_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_bytes(b'[run]\nname = "caf\xe9"\n')
    assert main(["run", str(cfg), "-q"]) == 2
    assert _error(capsys) == (f"blksim: error: {cfg}: not UTF-8 text: byte 0xe9 at line 2, "
                              f"column 12\n")


def test_a_drive_file_that_is_not_utf8_is_one_line(tmp_path, capsys):
    drive = tmp_path / "d.toml"
    drive.write_bytes(b'name = "\xff"\n')
    cfg = tmp_path / "c.toml"
    cfg.write_text(JOB + f'[device]\ndrive = "{drive}"\n')
    assert main(["run", str(cfg), "-q"]) == 2
    assert f"{drive}: not UTF-8 text: byte 0xff at line 1, column 9" in _error(capsys)
    assert main(["drive", "show", str(drive)]) == 2
    assert _error(capsys).endswith(f"{drive}: not UTF-8 text: byte 0xff at line 1, column 9\n")


def test_a_byte_order_mark_and_crlf_line_ends_are_read(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_bytes(b"\xef\xbb\xbf" + JOB.replace("\n", "\r\n").encode())
    assert main(["run", str(cfg), "-q"]) == 0
    assert "c: scheduler deadline" in capsys.readouterr().out


def test_toml_syntax_errors_name_the_file(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[run]\nseed = \n")
    assert main(["run", str(cfg), "-q"]) == 2
    assert _error(capsys).startswith(f"blksim: error: {cfg}: not valid TOML: ")


def test_a_traced_pid_beyond_32_bits_is_one_line(tmp_path, capsys):
    trace = tmp_path / "t.txt"
    pid = 1 << 63
    trace.write_text(f"  8,0    0        1     0.000000000 {pid}  Q   R 100 + 8 [cat]\n"
                     f"  8,0    0        2     0.001000000 {pid}  C   R 100 + 8 [0]\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[[trace]]\npath = "{trace}"\n')
    assert main(["run", str(cfg), "-q"]) == 2
    assert _error(capsys).endswith(f"{trace}:1: pid expected a process id below 2^32, "
                                   f"found '{pid}'\n")
    trace.write_text(trace.read_text().replace(str(pid), str((1 << 32) - 1)))
    assert main(["run", str(cfg), "-q"]) == 0


def test_plot_heads_checks_the_figure_format_before_simulating(tmp_path, capsys, monkeypatch):
    import blksim.experiments.heads as heads
    monkeypatch.setattr(heads, "record_heads", lambda *a, **k: pytest.fail("simulated"))
    out = tmp_path / "x.bogus"
    config = Path(__file__).resolve().parents[1] / "examples" / "teaching-queue.toml"
    assert main(["plot", "heads", str(config), "--out", str(out)]) == 2
    assert _error(capsys).startswith(f"blksim: error: --out {out}: cannot draw a .bogus "
                                     f"file; use one of ")


def test_ramp_time_that_leaves_nothing_to_measure_is_refused(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nduration = "2s"\nramp_time = "2s"\n[[job]]\nname = "r"\n'
                   'rw = "randread"\n')
    assert main(["run", str(cfg), "-q"]) == 2
    assert _error(capsys).endswith("[run] ramp_time = '2s' leaves nothing to measure: it must "
                                   "be shorter than duration = '2s'\n")


@pytest.mark.parametrize("line, field", [
    ("0.0\t0\t18446744073709551616\t16\t1", "sector 18446744073709551616 does not fit "
                                            "blktrace's 64-bit field"),
    ("0.0\t0\t0\t16777216\t1", "size (bytes) 8589934592 does not fit blktrace's 32-bit field"),
])
def test_convert_to_blktrace_refuses_fields_it_cannot_hold(tmp_path, capsys, line, field):
    src, dest = tmp_path / "in.trace", tmp_path / "out.blktrace"
    src.write_text(line + "\n")
    assert main(["trace", "convert", str(src), str(dest), "--to", "blktrace"]) == 2
    assert _error(capsys) == f"blksim: error: {dest}: record 1: {field} (0 to " \
                             f"{(1 << (64 if 'sector' in field else 32)) - 1})\n"
    assert list(tmp_path.iterdir()) == [src]


def test_a_run_owns_its_output_folder(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(JOB)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["run", str(cfg), "-q", "--out", str(out), "--per-request", "--seed", "1"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.resolved.toml", "notes.txt",
                                                      "requests.csv", "results.json"]
    assert main(["run", str(cfg), "-q", "--out", str(out), "--seed", "2"]) == 0
    # seed 1's records do not stay beside seed 2's figures; the user's own file does
    assert sorted(p.name for p in out.iterdir()) == ["config.resolved.toml", "notes.txt",
                                                      "results.json"]
    assert "seed = 2" in (out / "config.resolved.toml").read_text()


def test_errors_name_the_key_and_the_target(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(JOB + 'bs = "1t"\n')
    assert main(["run", str(cfg), "-q"]) == 2
    assert "job 'r': bs: expected a block size no larger than the device" in _error(capsys)
    folder = tmp_path / "adir"
    folder.mkdir()
    assert main(["drive", "import", "cheetah9LP", "--out", str(folder)]) == 2
    assert _error(capsys) == f"blksim: error: Is a directory: {folder}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "c.toml"]


@pytest.mark.parametrize("content, window", [("", ""), ("500.0 0 100 8 1\n", "end = \"0.1s\"\n")])
def test_a_trace_with_nothing_to_replay_is_an_error(tmp_path, capsys, content, window):
    trace = tmp_path / "t.trace"
    trace.write_text(content)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[[trace]]\npath = "{trace}"\nformat = "disksim"\n{window}')
    assert main(["run", str(cfg), "-q"]) == 2
    err = _error(capsys)
    assert err.endswith(f"({trace}): no request to replay"
                        + (" in the chosen device and time window\n" if window else "\n"))


def test_a_closed_replay_without_recorded_completions_says_so(tmp_path, capsys):
    trace = tmp_path / "t.trace"
    trace.write_text("0.0 0 100 8 1\n10.0 0 900 8 1\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[[trace]]\npath = "{trace}"\nformat = "disksim"\nmode = "closed"\n')
    assert main(["run", str(cfg), "-q"]) == 0
    assert "(the trace records no completions: each process's think time is the recorded " \
           "gap between its issues" in capsys.readouterr().out
    cfg.write_text(f'[[trace]]\npath = "{trace}"\nformat = "disksim"\n')      # open loop
    assert main(["run", str(cfg), "-q"]) == 0
    assert "records no completions" not in capsys.readouterr().out


# A second, good line keeps every chunk on the reader's slow path honest: the bad line
# must be named whichever path reads it.
PYTHON_NUMBERS = {
    "msr": ("128166372003061629,hm,1,Read,{},4096,100\n"
            "128166372003061630,hm,1,Read,8192,4096,100\n", "Offset"),
    "spc": ("0,{},4096,R,0.0\n0,16,4096,R,0.1\n", "LBA"),
    "alibaba": ("1,R,{},4096,1577808000000000\n1,R,8192,4096,1577808000000001\n", "offset"),
    "tencent": ("1538323200,{},8,0,1\n1538323201,16,8,0,1\n", "Offset"),
    "disksim": ("0.0 0 {} 8 1\n1.0 0 16 8 1\n", "blkno"),
    "fio": ("fio version 3 iolog\n0 /dev/sda add\n0 /dev/sda read {} 4096\n"
            "1 /dev/sda read 8192 4096\n", "offset"),
    "blkparse": ("  8,0    1        1     0.000000000  100  Q   R {} + 8 [app]\n"
                 "  8,0    1        2     0.000000001  100  Q   R 16 + 8 [app]\n", "sector"),
}


@pytest.mark.parametrize("fmt", sorted(PYTHON_NUMBERS))
@pytest.mark.parametrize("number", ["1_000", "+8", "\u0661\u0662"])
def test_integers_are_plain_digits_in_every_format(tmp_path, capsys, fmt, number):
    template, field = PYTHON_NUMBERS[fmt]
    trace = tmp_path / "t.trace"
    trace.write_text(template.format(number), encoding="utf-8")
    assert main(["trace", "stats", str(trace), "--format", fmt]) == 2
    assert f"{trace}:" in (err := _error(capsys)) and f" {field} expected " in err
    trace.write_text(template.format("1000"))
    assert main(["trace", "stats", str(trace), "--format", fmt]) == 0


@pytest.mark.parametrize("fmt, line, field", [
    ("spc", "0,16,4096,R,1_0.5\n", "Timestamp"),
    ("disksim", "1_0.5 0 16 8 1\n", "arrival_time"),
    ("fio", "fio version 3 iolog\n1_0.5 /dev/sda read 0 4096\n", "timestamp"),
])
def test_times_are_not_python_literals(tmp_path, capsys, fmt, line, field):
    trace = tmp_path / "t.trace"
    trace.write_text(line)
    assert main(["trace", "stats", str(trace), "--format", fmt]) == 2
    assert f" {field} expected " in _error(capsys)


def test_disksim_flags_are_hexadecimal_as_disksim_reads_them(tmp_path, capsys):
    trace = tmp_path / "t.trace"
    # sscanf("%x"): "abc" is 0xabc (bit 0 clear: a write), "0x1" and "f" are reads
    trace.write_text("0.0 0 16 8 abc\n1.0 0 32 8 0x1\n2.0 0 48 8 f\n")
    assert main(["trace", "stats", str(trace), "--format", "disksim"]) == 0
    assert "reads 66.7 %, writes 33.3 %" in capsys.readouterr().out
    trace.write_text("0.0 0 16 8 +1\n")
    assert main(["trace", "stats", str(trace), "--format", "disksim"]) == 2
    assert " flags expected a non-negative hexadecimal integer" in _error(capsys)


def test_a_fio_v2_wait_needs_its_four_fields_as_fio_does(tmp_path, capsys):
    trace = tmp_path / "t.log"
    trace.write_text("fio version 2 iolog\n/dev/sda add\n/dev/sda wait 1000\n"
                     "/dev/sda read 0 4096\n")
    assert main(["trace", "stats", str(trace)]) == 2
    assert _error(capsys).endswith(f"{trace}:3: line expected 4 fields for wait: filename "
                                   f"wait usec length, found '/dev/sda wait 1000'\n")
    trace.write_text(trace.read_text().replace("wait 1000", "wait 1000 0"))
    assert main(["trace", "stats", str(trace)]) == 0


BLKPARSE = "  {dev}  {cpu}  {seq}  0.000000000  {pid}  Q   R 16 + 8 [app]\n"


@pytest.mark.parametrize("field, values", [
    ("device", {"dev": "4096,0"}), ("device", {"dev": "8,1048576"}),
    ("cpu", {"cpu": str(1 << 32)}), ("sequence", {"seq": "9" * 29}),
    ("pid", {"pid": str(1 << 32)}),
    # beyond int()'s 4,300-digit limit: named, not a traceback
    ("cpu", {"cpu": "9" * 5000}), ("device", {"dev": "8" * 5000 + ",0"}),
])
def test_blkparse_numbers_fit_the_kernels_fields(tmp_path, capsys, field, values):
    fields = {"dev": "8,0", "cpu": "1", "seq": "1", "pid": "100", **values}
    trace = tmp_path / "t.txt"
    trace.write_text(BLKPARSE.format(**fields) * 2)
    assert main(["trace", "stats", str(trace)]) == 2     # detected as blkparse all the same
    assert _error(capsys).startswith(f"blksim: error: {trace}:1: {field} expected ")
    fields = {"dev": "4095,1048575", "cpu": str((1 << 32) - 1), "seq": "1",
              "pid": str((1 << 32) - 1)}
    trace.write_text(BLKPARSE.format(**fields) * 2)
    assert main(["trace", "stats", str(trace)]) == 0


def test_an_output_folder_that_is_a_dangling_link_is_named(tmp_path, capsys):
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone")
    cfg = tmp_path / "c.toml"
    cfg.write_text(JOB)
    for option in ("--out", "--blktrace"):
        assert main(["run", str(cfg), "-q", option, str(link)]) == 2
        assert _error(capsys) == (f"blksim: error: {link} is a symbolic link to "
                                  f"{tmp_path / 'gone'}, which does not exist\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "out"]


def test_an_output_file_is_written_through_a_symbolic_link(tmp_path, capsys):
    trace = tmp_path / "t.trace"
    trace.write_text("0.0 0 16 8 1\n")
    link = tmp_path / "out.fio"
    link.symlink_to(tmp_path / "real.fio")
    assert main(["trace", "convert", str(trace), str(link), "--to", "fio"]) == 0
    assert link.is_symlink() and (tmp_path / "real.fio").read_text().startswith("fio version 3")
    missing = tmp_path / "no" / "such" / "x.fio"
    capsys.readouterr()
    assert main(["trace", "convert", str(trace), str(missing), "--to", "fio"]) == 2
    assert _error(capsys) == (f"blksim: error: cannot write {missing}: no folder "
                              f"{missing.parent}\n")


def test_an_integer_beyond_pythons_digit_limit_in_toml_is_named(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(JOB + "[queue]\nnr_requests = " + "9" * 5000 + "\n")
    assert main(["run", str(cfg), "-q"]) == 2
    err = _error(capsys)
    # CPython's tomllib refuses the integer; PyPy's tomli reads it and it is out of range
    assert err.startswith(f"blksim: error: {cfg}: not valid TOML: ") or err.startswith(
        f"blksim: error: {cfg}: [queue]: nr_requests = a number of about 5,000 digits is "
        f"out of range"), err
    cfg.write_text(JOB)
    assert main(["run", str(cfg), "-q", "--set", "queue/nr_requests=" + "9" * 5000]) == 2
    assert "nr_requests" in _error(capsys)


@pytest.mark.parametrize("where", ["file", "set"])
def test_an_integer_too_long_to_print_is_one_line_on_every_interpreter(tmp_path, capsys, where):
    """CPython's TOML reader refuses an integer of over 4300 digits; PyPy's read it, and
    the message naming it then failed inside repr with a traceback (hypothesis found it
    with ``--set run/hz=999...``)."""
    huge = "9" * 5000
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[run]\nhz = {huge}\n" if where == "file" else "[run]\nduration = 1\n")
    argv = ["run", str(cfg), "-q"] + (["--set", f"run/hz={huge}"] if where == "set" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("blksim: error: ") and "\n" not in err
    assert "hz" in err or "integer" in err or "digits" in err
