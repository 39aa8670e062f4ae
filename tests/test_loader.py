"""The bulk loader: phases that add up to the total, a load that scales with ``scale``,
savepoints that write every changed page, and its errors in the configuration."""


import pytest

from blksim.api import run as api_run
from blksim.cli import main
from blksim.sim.config import ConfigError, resolve
from tests.simhelpers import runs_again_to_the_same_figures


def load(devices=None, **keys):
    app = {"type": "loader", "tables": [["40m", 2], ["8m", 6]], "loaders": 3,
           "export_device": "/dev/sda", "data_device": ["/dev/sdb", "/dev/sdc"],
           "log_device": "/dev/sda", "data_cache": "16m"}
    app.update(keys)
    cfg = {"host": {"memory": "512m"}, "device": {"drive": "cheetah15k4"},
           "devices": devices or {"sdb": {"drive": "cheetah15k4"},
                                  "sdc": {"drive": "cheetah15k4"}},
           "app": [app]}
    return api_run(cfg, per_request=False).figures


def test_the_total_is_the_sum_of_the_phases_and_scale_doubles_it():
    half, whole = load(scale=0.5)["apps"]["loader"], load()["apps"]["loader"]
    for f in (half, whole):
        assert f["finished"]
        assert [p["name"] for p in f["phases"]] == ["load", "index", "statistics"]
        assert f["total_s"] == pytest.approx(sum(p["seconds"] for p in f["phases"]), abs=1e-6)
        # phases follow one another
        for a, b in zip(f["phases"], f["phases"][1:]):
            assert a["end_s"] == b["start_s"]
    assert whole["data_mb"] == pytest.approx(2 * half["data_mb"], rel=0.01)
    assert whole["total_s"] == pytest.approx(2 * half["total_s"], rel=0.15)


def test_savepoints_write_every_changed_page_and_the_log_every_byte():
    res = load()
    f = res["apps"]["loader"]
    assert f["pages_written"] == f["pages_changed"]
    table_pages = sum([40 * 2 ** 20 // 8192] * 2 + [8 * 2 ** 20 // 8192] * 6)
    index = sum([-(-(40 * 2 ** 20 // 8192) // 10)] * 2 + [-(-(8 * 2 ** 20 // 8192) // 10)] * 6)
    assert f["pages_changed"] == table_pages + index
    assert f["log_mb"] == pytest.approx(f["data_mb"], rel=1e-6)      # redo_ratio 1
    assert f["cache_full_savepoints"] >= 2                          # 40m tables, 16m cache
    # the savepoint writers' write calls carried exactly those pages
    written = sum(p["calls"]["write"]["bytes"] for p in res["processes"]
                  if p["name"].startswith("loader.sp"))
    assert written == f["pages_written"] * 8192


def test_export_files_holding_many_tables_take_a_savepoint_after_each():
    res = load(tables=[["40m", 1], ["10m", 2]], tables_in_files=30, export_ratio=0.25,
               order="largest_first", data_volumes=3, data_cache="256m", index_ratio=0,
               stats_sample=0)
    f = res["apps"]["loader"]
    assert f["savepoints"] == 30 and f["cache_full_savepoints"] == 0
    assert f["pages_written"] == f["pages_changed"] == 60 * 2 ** 20 // 8192
    # the loaders read export files a quarter of the data's size
    read = sum(p["calls"]["read"]["bytes"] for p in res["processes"]
               if p["name"].startswith("loader.") and p["calls"])
    assert read == 15 * 2 ** 20


def test_without_index_and_statistics_the_load_is_one_phase():
    f = load(index_ratio=0, stats_sample=0)["apps"]["loader"]
    assert [p["name"] for p in f["phases"]] == ["load"]


def test_more_writer_threads_never_lengthen_the_savepoints():
    # A lone writer's direct writes are WRITE_SYNC (fs/direct-io.c, 2.6.18): each
    # unplugs the queue at once, so one writer per single drive keeps it as busy as
    # four do (it used to wait for the unplug timer after every write, which made four
    # writers look faster).
    one = load(savepoint_writers=1, index_ratio=0, stats_sample=0)["apps"]["loader"]
    four = load(savepoint_writers=4, index_ratio=0, stats_sample=0)["apps"]["loader"]
    assert four["savepoint_s"] <= one["savepoint_s"]


def test_more_writer_threads_shorten_the_savepoints_on_striped_volumes():
    # on volumes that serve several writes at once (RAID 0 of four drives): one writer
    # keeps one member busy at a time, four keep all four (on one plain drive the
    # drive is the bottleneck either way)
    raid = {"raid": {"controller": "sas5ir", "level": "raid0", "members": 4,
                     "drive": "cheetah15k4"}}
    devices = {"sdb": raid, "sdc": raid}
    one = load(devices, savepoint_writers=1, index_ratio=0, stats_sample=0)["apps"]["loader"]
    four = load(devices, savepoint_writers=4, index_ratio=0, stats_sample=0)["apps"]["loader"]
    assert four["savepoint_s"] < 0.8 * one["savepoint_s"]


def test_the_resolved_configuration_runs_again_to_the_same_figures(tmp_path, capsys):
    cfg = tmp_path / "load.toml"
    cfg.write_text("""\
[device]
drive = "cheetah15k4"
[devices.sdb]
drive = "cheetah15k4"
[[app]]
type = "loader"
tables = [["16m", 3]]
scale = 0.5
loaders = 2
export_device = "/dev/sda"
data_device = "/dev/sdb"
""")
    out = tmp_path / "first"
    assert main(["run", str(cfg), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.index("bulk load of 3 tables") < printed.index("IOPS")
    first = runs_again_to_the_same_figures(out, tmp_path / "again")


@pytest.mark.parametrize("app, message", [
    ({"type": "loader", "data_device": "/dev/sda", "export_device": "/dev/sda"},
     r"tables expected \[\[size, count\], ...\], found None"),
    ({"type": "loader", "tables": [["1g", 0]], "data_device": "/dev/sda",
      "export_device": "/dev/sda"},
     r"tables #1 expected \[size, count\], count from 1 to 10000, found \[.1g., 0\]"),
    ({"type": "loader", "tables": [["1g", 1]], "export_device": "/dev/sda"},
     r"data_device is required"),
    ({"type": "loader", "tables": [["1g", 1]], "data_device": "/dev/sda"},
     r"export_device None is not a disk"),
    ({"type": "loader", "tables": [["1g", 1]], "data_device": "/dev/sda",
      "export_device": "/dev/sda", "scale": 0}, r"scale expected a number in \(0, 1000\]"),
    ({"type": "loader", "tables": [["1t", 40]], "data_device": "/dev/sda",
      "export_device": "/dev/sda"}, r"t0000.dat needs|t\d+.dat needs"),
])
def test_loader_errors_name_the_key(app, message):
    with pytest.raises(ConfigError, match=message):
        resolve({"app": [app]}, "x.toml")
