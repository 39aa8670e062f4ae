"""The tenants study (experiments/tenants.toml) and its shipped volumes."""

import csv
import os

import pytest

import blksim
from blksim.experiments import tenant_traces
from blksim.experiments.sweep import find, run_experiment, shipped
from blksim.experiments.sweep.definition import load_experiment
from blksim.traces.detect import open_trace

DATA = os.path.join(os.path.dirname(blksim.__file__), "experiments", "data")


@pytest.mark.parametrize("vol", tenant_traces.VOLUMES, ids=lambda v: v.name)
def test_the_shipped_volumes_are_the_generators_own(tmp_path, vol):
    """Same seed, same bytes: the generator writes the shipped file again exactly."""
    path = tenant_traces.write_volume(vol, str(tmp_path))
    with open(path, "rb") as a, open(os.path.join(DATA, vol.file_name), "rb") as b:
        assert a.read() == b.read()


def test_the_volumes_read_back_with_the_figures_they_were_drawn_with():
    for vol in tenant_traces.VOLUMES:
        recs = list(open_trace(os.path.join(DATA, vol.file_name)))
        assert len(recs) == vol.requests
        assert {r.devno for r in recs} == {vol.volume_id}
        reads = sum(not r.write for r in recs) / len(recs)
        assert abs(reads - vol.read_fraction) < 0.02
        assert max(r.sector + r.nr_sectors for r in recs) * 512 <= vol.volume_bytes


def _bytes_before(name: str, end: float, write: bool) -> int:
    return sum(r.nr_sectors * 512 for r in open_trace(os.path.join(DATA, name))
               if r.time < end and r.write == write)


def test_the_tenants_study_runs_at_a_small_scale(tmp_path):
    assert "tenants" in shipped()
    # the study's own file, on a fresh drive (filling the drive first takes seconds and
    # changes nothing checked here) and with the traces where the file says
    text = open(find("tenants")).read().replace('start_state = "full"',
                                                'start_state = "fresh"')
    text = text.replace('path = "data/', f'path = "{DATA}/')
    path = tmp_path / "tenants.toml"
    path.write_text(text)
    exp = load_experiment(str(path))
    assert [v[0] for v in exp.variants] == ["none", "io.max"]
    paths = run_experiment(exp, tmp_path / "out", jobs=1, scale=0.01)
    assert paths["ran"] == 2
    with open(paths["summary"], newline="") as f:
        rows = {r["variant"]: r for r in csv.DictReader(f)}
    end = 20 * 0.01                  # the traces' windows, scaled
    for row in rows.values():
        # each group's io.stat is its own trace's bytes in the window, whatever the control
        assert int(row["column.reader io.stat rbytes"]) == _bytes_before(
            "reader.alibaba.csv.xz", end, False)
        assert int(row["column.bulk io.stat wbytes"]) == _bytes_before(
            "bulk.alibaba.csv.xz", end, True)
        assert int(row["column.backup io.stat rbytes"]) == _bytes_before(
            "backup.tencent.csv.xz", end, False)
    # io.max holds the backup to 100 MB/s over the measured window (plus at most two
    # slices' allowance: docs/cgroups.md); without it the backup goes faster
    capped = float(rows["io.max"]["column.backup read MB/s"])
    assert capped <= 100 * (1 + 2 * 0.1 / end) and capped < float(
        rows["none"]["column.backup read MB/s"])
