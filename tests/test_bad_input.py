"""Bad input of every kind ends in one line naming the file and what is wrong, never a
traceback (issue 13's audit)."""

from __future__ import annotations

from blksim.sim.cli import main

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
