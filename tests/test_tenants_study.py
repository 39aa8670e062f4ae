"""The tenants study (experiments/tenants.toml) and its shipped volumes."""

import csv
import os

import pytest

import blksim
from blksim.experiments import tenant_traces
from blksim.experiments.sweep import find, run_experiment, shipped
from blksim.experiments.sweep.definition import load_experiment
from blksim.experiments.sweep.runner import run_task
from blksim.sim.config import load_file, resolve
from blksim.sim.engine import Simulation
from blksim.sim.overrides import apply_overrides
from blksim.common.config_values import ConfigError
from blksim.sim.results import results_dict
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


def _study(tmp_path, state="fresh"):
    """The study's own file, on a fresh drive unless ``state`` says (filling the drive
    first takes seconds and changes nothing checked here but the reader's latency) and
    with the traces where the file says."""
    text = open(find("tenants")).read().replace('start_state = "full"',
                                                f'start_state = "{state}"')
    text = text.replace('path = "data/', f'path = "{DATA}/')
    path = tmp_path / "tenants.toml"
    path.write_text(text)
    return load_experiment(str(path))


VARIANTS = ["none", "io.max", "bfq io.bfq.weight", "iocost io.weight", "io.latency"]


def test_the_tenants_study_runs_every_controller_at_a_small_scale(tmp_path):
    assert "tenants" in shipped()
    exp = _study(tmp_path)
    assert [v[0] for v in exp.variants] == VARIANTS
    paths = run_experiment(exp, tmp_path / "out", jobs=1, scale=0.01)
    assert paths["ran"] == len(VARIANTS)
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

    def fig(variant, column):
        return float(rows[variant][f"column.{column}"])
    # io.max holds the backup to 100 MB/s over the measured window (plus at most two
    # slices' allowance: docs/cgroups.md); without it the backup goes faster
    capped = fig("io.max", "backup read MB/s")
    assert capped <= 100 * (1 + 2 * 0.1 / end) and capped < fig("none", "backup read MB/s")
    # the backup's one-second bursts (Tencent's timestamps) queue ahead of the reader
    # without control; bfq serves the reader's sync queue first (the others wait: their
    # tail grows), iocost holds the backup to its weighted budget
    none_p99 = float(rows["none"]["figure"])
    assert none_p99 > 10                                      # ms
    assert float(rows["bfq io.bfq.weight"]["figure"]) < none_p99 / 10
    assert fig("bfq io.bfq.weight", "bulk write Q2C p99 (ms)") > \
        10 * fig("none", "bulk write Q2C p99 (ms)")
    assert float(rows["iocost io.weight"]["figure"]) < none_p99 / 2
    assert fig("iocost io.weight", "backup read Q2C p99 (ms)") < \
        fig("none", "backup read Q2C p99 (ms)")


def test_io_latency_cuts_the_others_depth_when_the_reader_misses(tmp_path):
    """blk-iolatency's first-order effect: the reader misses its target for more than a
    tenth of its I/Os, so the peers' depth is halved from nr_requests (1023 on this NVMe
    drive), no sooner than 500 ms after the start (docs/cgroups.md, io.latency)."""
    exp = _study(tmp_path, "full")      # reads of written data: the reader misses
    task = next(t for t in exp.tasks(scale=0.04) if t.variant == "io.latency")
    groups = run_task(task.raw, task.source)["figures"]["cgroups"]
    reader = groups["reader"]["io_latency"]["sda"]
    assert reader["target_us"] == 58 and reader["missed_run"] > 0
    bulk = groups["bulk"]["io_latency"]["sda"]
    assert bulk["depth"] == 511 and bulk["depth_series"][0] == [0.0, None]
    assert 0.5 <= bulk["depth_series"][1][0] < 0.8


@pytest.mark.parametrize("controller", [pytest.param("bfq", marks=pytest.mark.slow),
                                        "iocost"])      # bfq's: about 25 s
def test_weights_order_the_backlogged_groups_shares(controller):
    """The example's bulk writer and backup keep the drive busy: bfq's and iocost's weights
    (200 and 100) give the writer more than the backup (bfq: in sectors, B-WF2Q+; iocost:
    in the model's cost), where without control the backup's large reads take most."""
    base = os.path.join(os.path.dirname(blksim.__file__), "examples", "tenants.toml")
    sets = {"bfq": ["queue/scheduler=bfq", "cgroups/reader/io.bfq.weight=1000",
                    "cgroups/bulk/io.bfq.weight=200", "cgroups/backup/io.bfq.weight=100"],
            "iocost": ["cgroups/io.cost.qos=\"sda enable=1 ctrl=user rpct=95 rlat=5000 "
                       "wpct=95 wlat=5000 min=1 max=10000\"",
                       "cgroups/io.cost.model=\"sda ctrl=user model=linear rbps=7000000000 "
                       "rseqiops=1000000 rrandiops=1000000 wbps=5000000000 "
                       "wseqiops=1000000 wrandiops=1000000\"",
                       "cgroups/reader/io.weight=1000", "cgroups/bulk/io.weight=200",
                       "cgroups/backup/io.weight=100"]}[controller]
    stat = {}
    for name, extra in (("none", []), (controller, sets)):
        raw = apply_overrides(load_file(base), extra + ["run/duration=\"100ms\""])
        raw["device"]["start_state"] = "fresh"
        res = results_dict(Simulation(resolve(raw, base)).run(), {})
        stat[name] = {g: res["cgroups"][g]["io_stat"]["sda"] for g in ("bulk", "backup")}
    assert stat["none"]["backup"]["rbytes"] > stat["none"]["bulk"]["wbytes"]
    assert stat[controller]["bulk"]["wbytes"] > stat[controller]["backup"]["rbytes"]


def test_set_writes_the_roots_iocost_files_and_refuses_other_root_keys():
    raw = {"cgroups": {"bulk": {}}}
    out = apply_overrides(raw, ['cgroups/io.cost.qos="sda enable=1"',
                                'cgroups/bulk/io.weight=200'])
    assert out["cgroups"] == {"io.cost.qos": "sda enable=1", "bulk": {"io.weight": 200}}
    assert raw == {"cgroups": {"bulk": {}}}
    with pytest.raises(ConfigError, match="cgroups/GROUP/FILE"):
        apply_overrides(raw, ["cgroups/io.max=1"])
