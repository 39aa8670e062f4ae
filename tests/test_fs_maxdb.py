"""experiments/fs-maxdb.toml: it loads, every variant's configuration builds (XFS only
where blksim has XFS), and it runs at a tiny scale with its three timed phases."""

from pathlib import Path

import pytest

from blksim.api import run as api_run
from blksim.experiments.sweep.definition import load_experiment
from blksim.hostio.fs import FILESYSTEMS
from blksim.sim.config import resolve

FILE = Path(__file__).resolve().parent.parent / "experiments" / "fs-maxdb.toml"
HAS_XFS = "xfs" in FILESYSTEMS


def experiment(tmp_path):
    """The experiment, without its XFS variant where blksim has no XFS yet."""
    text = FILE.read_text(encoding="utf-8")
    if not HAS_XFS:
        start = text.index('[[experiment.variant]]\nname = "xfs"')
        end = text.index("\n\n", start)
        text = text[:start] + text[end + 2:]
    path = tmp_path / "fs-maxdb.toml"
    path.write_text(text, encoding="utf-8")
    return load_experiment(path)


def test_the_file_names_three_filesystems_as_the_description_does():
    text = FILE.read_text(encoding="utf-8")
    for name in ("ext3-yast2", "ext3-largefile-writeback", "xfs"):
        assert f'name = "{name}"' in text
    assert "-j -O dir_index,sparse_super,filetype -T largefile" in text
    assert '"filesystems./dev/sdd1.type" = "xfs"' in text


def test_every_variant_builds_and_places_two_writers_a_volume(tmp_path):
    exp = experiment(tmp_path)
    tasks = exp.tasks(seeds=1, scale=0.001)
    names = {t.variant for t in tasks}
    assert names == {"ext3-yast2", "ext3-largefile-writeback"} | ({"xfs"} if HAS_XFS
                                                                     else set())
    for task in tasks:
        cfg = resolve(task.raw, str(FILE))
        data = [f for f in cfg.files if "/data" in f.path]
        assert len(data) == 6
        assert {f.device for f in data} == {"sdd1", "sde1", "sdf1"}
        assert all(f.written == {"writers": 2, "write_size": 1 << 20} for f in data)
        kinds = {d: fs.layer.kind for d, fs in cfg.filesystems.items()}
        assert set(kinds) == {"sda1", "sdc1", "sdd1", "sde1", "sdf1"}
        mode = "writeback" if task.variant == "ext3-largefile-writeback" else "ordered"
        if task.variant != "xfs":
            assert all(fs.layer.data_mode == mode for fs in cfg.filesystems.values())
        # cfq on every device: the experiment's scheduler on sda, the file's on the rest
        assert task.scheduler == "cfq"
        assert all(task.raw["devices"][d]["queue"]["scheduler"] == "cfq"
                   for d in ("sdb", "sdc", "sdd", "sde", "sdf"))


def test_xfs_variant(tmp_path):
    if not HAS_XFS:
        pytest.skip("XFS is not in hostio.fs.FILESYSTEMS on this branch (i34-xfs adds it)")
    exp = experiment(tmp_path)
    task = next(t for t in exp.tasks(seeds=1, scale=0.001) if t.variant == "xfs")
    cfg = resolve(task.raw, str(FILE))
    assert {fs.layer.kind for fs in cfg.filesystems.values()} == {"xfs"}


@pytest.mark.parametrize("variant", ["ext3-yast2", "ext3-largefile-writeback"])
def test_it_runs_at_a_tiny_scale_with_its_three_timed_phases(tmp_path, variant):
    exp = experiment(tmp_path)
    task = next(t for t in exp.tasks(seeds=1, scale=0.0005) if t.variant == variant)
    f = api_run(task.raw, per_request=False).figures["apps"]["r3load"]
    assert f["finished"]
    phases = [p["name"] for p in f["phases"]]
    assert phases == ["create", "load", "index", "statistics"]
    assert f["total_s"] == pytest.approx(sum(p["seconds"] for p in f["phases"]), abs=1e-6)
    assert all(p["seconds"] > 0 for p in f["phases"])
    assert f["create"] == "zeros"
    # six data volumes and the log written whole by the creation
    cfg = resolve(task.raw, str(FILE))
    volumes = [x for x in cfg.files if x.path.startswith("/db/")]
    assert f["create_written_mb"] == pytest.approx(
        sum(v.sectors * 512 for v in volumes) / 1e6)
    assert f["pages_written"] == f["pages_changed"]
    # the creation writes every volume at once through the one 2 Gb link the six LUNs
    # share: it runs at the link's 200 MB/s (the members and caches behind it are faster)
    create = f["phases"][0]
    assert 180 < f["create_written_mb"] / create["seconds"] <= 200
