"""traces.iolog_out: --iolog writes fio iolog v3 that fio can replay."""

import os
import shutil
import subprocess

import pytest

from blksim.cli import main
from tests.simhelpers import make_config
from blksim.sim.engine import Simulation

JOBS = [{"name": "r", "rw": "randread", "number_ios": 50, "thinktime": "1ms"},
        {"name": "w", "rw": "write", "bs": "8k", "number_ios": 40, "iodepth": 4,
         "offset": "1g"}]


def parse_iolog(path):
    """(header, file actions, I/O lines) of an fio iolog v3."""
    lines = open(path).read().splitlines()
    header, rest = lines[0], lines[1:]
    files, ios = [], []
    for line in rest:
        f = line.split()
        if len(f) == 3:
            files.append((int(f[0]), f[1], f[2]))
        else:
            assert len(f) == 5, line
            ios.append((int(f[0]), f[1], f[2], int(f[3]), int(f[4])))
    return header, files, ios


def test_iolog_records_every_bio_at_its_submission(tmp_path):
    seen = []
    cfg = make_config(jobs=JOBS, scheduler="deadline")
    sim = Simulation(cfg, complete_hooks=(seen.append,), iolog=str(tmp_path / "x.iolog"),
                     iolog_filename="/dev/sdb")
    sim.run()
    header, files, ios = parse_iolog(tmp_path / "x.iolog")
    assert header == "fio version 3 iolog"
    assert [(a, n) for _, n, a in files] == [("add", "/dev/sdb"), ("open", "/dev/sdb"),
                                            ("close", "/dev/sdb")]
    assert files[-1][0] == max(t for t, *_ in ios)
    bios = sorted(seen, key=lambda b: b.id)
    assert len(ios) == len(bios) == 90
    assert ios == [(round(b.t_queue * 1e6), "/dev/sdb", "write" if b.write else "read",
                    b.sector * 512, b.nr_sectors * 512) for b in bios]
    assert [t for t, *_ in ios] == sorted(t for t, *_ in ios)


def test_cli_iolog_default_name_and_compare_per_scheduler(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[job]]\nname = "r"\nrw = "randread"\nnumber_ios = 20\n')
    assert main(["run", str(cfg), "-q", "--iolog", str(tmp_path / "run.iolog")]) == 0
    _, files, ios = parse_iolog(tmp_path / "run.iolog")
    assert files[0][1] == "/dev/sdX" and len(ios) == 20
    assert main(["compare", str(cfg), "-q", "--schedulers", "noop,deadline",
                 "--iolog", str(tmp_path / "cmp.iolog")]) == 0
    assert os.path.exists(tmp_path / "cmp.noop.iolog")
    assert os.path.exists(tmp_path / "cmp.deadline.iolog")
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    assert main(["run", str(cfg), "-q", "--iolog", str(tmp_path / "bad.iolog"),
                 "--iolog-filename", "my disk"]) == 2


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_fio_replays_the_iolog(tmp_path):
    cfg = make_config(jobs=JOBS, scheduler="noop")
    Simulation(cfg, iolog=str(tmp_path / "x.iolog")).run()
    target = tmp_path / "target"
    out = subprocess.run(["fio", "--name=replay", f"--read_iolog={tmp_path / 'x.iolog'}",
                          f"--replay_redirect={target}", "--ioengine=null", "--size=64g",
                          "--output-format=terse", "--terse-version=3"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    fields = out.stdout.strip().splitlines()[-1].split(";")
    # terse v3: read total I/O (KiB) is field 6, write total I/O field 47.
    assert int(fields[5]) == 50 * 4 and int(fields[46]) == 40 * 8


def test_the_fio_iolog_reader_reads_it_back(tmp_path):
    from blksim.traces.fio_iolog import read_fio_iolog
    seen = []
    cfg = make_config(jobs=JOBS, scheduler="deadline")
    Simulation(cfg, complete_hooks=(seen.append,), iolog=str(tmp_path / "x.iolog")).run()
    back = list(read_fio_iolog(tmp_path / "x.iolog"))
    bios = sorted(seen, key=lambda b: b.id)
    assert [(round(r.time * 1e6), r.sector, r.nr_sectors, r.write) for r in back] == \
        [(round(b.t_queue * 1e6), b.sector, b.nr_sectors, b.write) for b in bios]
