"""Atomic output (traces.records.PendingFile, atomic_output, write_lines): every writer of
blksim (traces, results, presets, plots) goes through these, so a file appears whole
or not at all, with the permissions a plainly created file gets."""

import gzip
import os
import stat

import pytest

from blksim.disk_models.disksim.tomlout import write_atomically
from blksim.traces.records import PendingFile, atomic_output, write_lines


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_pending_file_appears_only_on_commit(tmp_path):
    target = tmp_path / "out.txt"
    pending = PendingFile(target, binary=False)
    pending.file.write("hello\n")
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir()][0].endswith(".tmp")
    pending.commit()
    assert target.read_text() == "hello\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_pending_file_discard_leaves_nothing_and_keeps_an_older_file(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    pending = PendingFile(target)
    pending.file.write(b"new, half written")
    pending.discard()
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_files_get_the_umask_mode_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_output(tmp_path / "a.bin") as stream:
            stream.write(b"x")
        write_atomically(tmp_path / "preset.toml", "name = \"x\"\n")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "a.bin") == 0o644
    assert _mode(tmp_path / "preset.toml") == 0o644


def test_atomic_output_failure_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_output(tmp_path / "t.csv") as stream:
            stream.write(b"partial")
            raise RuntimeError("writer failed")
    assert list(tmp_path.iterdir()) == []


def test_write_lines_counts_batches_and_compresses_by_name(tmp_path):
    lines = [f"{i}\n" for i in range(20_000)]     # more than one 8192-line batch
    assert write_lines(tmp_path / "n.txt", iter(lines)) == 20_000
    assert (tmp_path / "n.txt").read_text() == "".join(lines)
    assert write_lines(tmp_path / "n.txt.gz", lines[:3]) == 3
    assert gzip.decompress((tmp_path / "n.txt.gz").read_bytes()) == b"0\n1\n2\n"
