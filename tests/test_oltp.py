"""The OLTP database model: Little's law, group commit, every change written once, the
engines' I/O modes, and its errors in the configuration."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.api import run as api_run
from blksim.cli import main
from blksim.cli.tables import _fmt_p
from blksim.sim.config import ConfigError, resolve
from tests.simhelpers import runs_again_to_the_same_figures

BASE = {
    "run": {"duration": "20s"},
    "host": {"memory": "1g"},
    "device": {"drive": "cheetah15k4"},
    "devices": {"sdb": {"drive": "cheetah15k4"}},
}


def oltp(**keys):
    app = {"type": "oltp", "data_device": "/dev/sda", "log_device": "/dev/sdb",
           "data_size": "512m", "db_cache_size": "32m", "warmup": "4s"}
    app.update(keys)
    return {k: v for k, v in app.items() if v is not None}


def results(app, **top):
    return api_run({**BASE, **top, "app": [app]}, per_request=False).figures


def figures(app, **top):
    return results(app, **top)["apps"][app.get("name", "oltp")]


def test_littles_law_holds_for_the_sessions():
    # a closed system: sessions = throughput x (response time + think time)
    for sessions, think in ((8, "50ms"), (30, "10ms")):
        f = figures(oltp(sessions=sessions, think_time=think))
        n = f["tps"] * (f["response_ms"]["mean"] / 1e3 + f["think_s"])
        assert n == pytest.approx(sessions, rel=0.02)
        assert f["transactions"] > 500


def _log_slowed(sessions, service_time):
    cfg = {**BASE, "devices": {"sdb": {"service": "fixed", "service_time": service_time}},
           "app": [oltp(sessions=sessions, think_time="20ms", db_cache_size="1g",
                        data_size="128m", filesystemio_options="setall")]}
    return api_run(cfg, per_request=False).figures["apps"]["oltp"]


def test_group_commit_packs_more_commits_into_a_slower_log():
    fast, slow = _log_slowed(20, "1ms"), _log_slowed(20, "10ms")
    assert slow["redo"]["commits_per_write"] > 1.5 * fast["redo"]["commits_per_write"]
    assert slow["tps"] > fast["tps"] / 10 * 3          # falls far less than tenfold
    assert slow["waits"]["log file sync"]["avg_ms"] > fast["waits"]["log file sync"]["avg_ms"]


def test_one_session_has_one_commit_per_log_write():
    one = _log_slowed(1, "10ms")
    assert one["redo"]["commits_per_write"] == 1.0
    assert one["redo"]["writes"] == one["transactions"] or \
        abs(one["redo"]["writes"] - one["transactions"]) <= 1


MODES = [("oracle", {"filesystemio_options": m}) for m in ("none", "asynch", "directio",
                                                            "setall")] + \
    [("innodb", {"innodb_flush_method": m, "innodb_flush_log_at_trx_commit": c})
     for m in ("fsync", "O_DSYNC", "O_DIRECT", "O_DIRECT_NO_FSYNC") for c in (0, 1, 2)]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(mode=st.sampled_from(MODES), sessions=st.integers(1, 24),
       pool_mb=st.sampled_from([1, 2, 8]), log_mb=st.sampled_from([1, 2, 8]),
       writes=st.integers(0, 10), writers=st.integers(1, 4),
       access=st.sampled_from(["uniform", "zipf", "hotset"]), seed=st.integers(0, 2 ** 16))
def test_every_change_is_written_once_or_reported_unfinished(mode, sessions, pool_mb,
                                                             log_mb, writes, writers, access,
                                                             seed):
    engine, io = mode
    app = {"type": "oltp", "engine": engine, "data_device": "/dev/sda",
           "log_device": "/dev/sdb", "data_size": "64m", "sessions": sessions,
           "reads": 10, "writes": writes, "access": access, "redo_per_change": "2k", **io}
    if engine == "oracle":
        app.update(db_cache_size=f"{pool_mb}m", log_file_size=f"{log_mb}m", log_groups=2,
                   db_writer_processes=writers)
    else:
        app.update(innodb_buffer_pool_size=f"{pool_mb}m", innodb_log_file_size=f"{log_mb}m",
                   innodb_page_cleaners=writers, innodb_page_size="8k")
    cfg = {**BASE, "run": {"duration": "3s", "seed": seed}, "app": [app]}
    f = api_run(cfg, per_request=False).figures["apps"]["oltp"]
    bp = f["buffer_pool"]
    assert bp["changes"] == bp["pages_written"] + bp["unfinished"]
    assert bp["unfinished"] <= (bp["pages"] or bp["changes"]) * 2
    if writes == 0:
        assert bp["changes"] == 0 and f["redo"]["writes"] == 0


def test_a_small_log_makes_checkpoints_and_stalls():
    f = figures(oltp(sessions=20, writes=8, redo_per_change="4k", log_file_size="1m",
                           log_groups=2, data_size="64m"))
    assert f["redo"]["log_switches"] > 3
    assert f["checkpoints"]["completed"] >= 1
    assert f["physical_writes_per_s"] > 0
    assert f["redo"]["stall_s"] > 0


def test_direct_io_reads_bypass_the_page_cache():
    # buffered (none), the database's block reads go through the page cache; with
    # directio they do not, and neither do the redo writes
    short = {"run": {"duration": "8s"}}
    buffered = results(oltp(sessions=10, filesystemio_options="none"), **short)
    direct = results(oltp(sessions=10, filesystemio_options="directio"), **short)
    looked = ("hits", "waits", "misses")
    assert sum(buffered["page_cache"][k] for k in looked) > 1000
    assert sum(direct["page_cache"][k] for k in looked) == 0
    assert direct["apps"]["oltp"]["physical_reads_per_s"] > 50


def test_innodb_commit_modes_order_the_commit_wait():
    waits = {}
    for c in (0, 1, 2):
        f = figures(oltp(engine="innodb", db_cache_size=None, sessions=8,
                               innodb_flush_log_at_trx_commit=c))
        waits[c] = f["waits"]["log file sync"]["time_s"]
        if c == 0:
            assert f["redo"]["writes_per_s"] == pytest.approx(1.0, abs=0.15)
    assert waits[0] == 0 < waits[2] < waits[1]


def test_innodb_writes_each_page_twice_through_the_doublewrite_buffer():
    ratio = {}
    for dw in (1, 0):
        res = results(oltp(engine="innodb", db_cache_size=None, warmup=None, sessions=10,
                           writes=5, innodb_buffer_pool_size="16m",
                           innodb_flush_method="O_DIRECT", innodb_doublewrite=dw))
        f = res["apps"]["oltp"]
        cleaned = sum(p["calls"]["write"]["bytes"] for p in res["processes"]
                      if ".page_cleaner" in p["name"])
        assert f["buffer_pool"]["pages_written"] > 500
        ratio[dw] = cleaned / (f["buffer_pool"]["pages_written"] * 16384)
    # (a batch in flight when the run ends has some of its writes done already)
    assert 2.0 <= ratio[1] < 2.2
    assert 1.0 <= ratio[0] < 1.1


def test_a_transaction_mix_reports_each_type():
    f = api_run({**BASE, "app": [oltp(sessions=10, mix=[
        {"name": "new_order", "weight": 45, "reads": 20, "writes": 10},
        {"name": "payment", "weight": 43, "reads": 4, "writes": 3},
        {"name": "stock_level", "weight": 12, "reads": 40, "writes": 0}], user_calls=3)]},
        per_request=False).apps["oltp"]              # RunResult.apps: the figures' "apps"
    assert f["user_calls_per_s"] == pytest.approx(3 * f["tps"])
    by = f["by_transaction"]
    assert set(by) == {"new_order", "payment", "stock_level"}
    assert sum(t["count"] for t in by.values()) == f["transactions"]
    assert by["payment"]["response_ms"]["mean"] < by["new_order"]["response_ms"]["mean"] \
        < by["stock_level"]["response_ms"]["mean"]
    assert by["new_order"]["count"] > 3 * by["stock_level"]["count"]


def test_the_resolved_configuration_runs_again_to_the_same_figures(tmp_path):
    cfg = tmp_path / "db.toml"
    cfg.write_text("""\
[run]
duration = "6s"
[device]
drive = "cheetah15k4"
[[app]]
type = "oltp"
engine = "innodb"
sessions = 6
data_device = "/dev/sda"
data_size = "256m"
innodb_buffer_pool_size = "16m"
warmup = "1s"
[[app.mix]]
name = "a"
reads = 4
[[app.mix]]
name = "b"
weight = 2
reads = 12
writes = 6
""")
    out = tmp_path / "first"
    assert main(["run", str(cfg), "-q", "--out", str(out)]) == 0
    first = runs_again_to_the_same_figures(out, tmp_path / "again")
    assert first["apps"]["oltp"]["transactions"] > 0


def test_run_and_compare_print_the_database_figures_first(tmp_path, capsys):
    cfg = tmp_path / "db.toml"
    cfg.write_text("""\
[run]
duration = "4s"
[device]
drive = "cheetah15k4"
[[app]]
type = "oltp"
sessions = 4
data_device = "/dev/sda"
data_size = "128m"
""")
    assert main(["run", str(cfg), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert out.index("transactions/s") < out.index("IOPS")
    assert "log file sync" in out and "db file sequential read" in out
    # response-time percentiles print to the three digits their histogram gives them, as
    # the latency table's do (not 1360.0)
    (figures,) = json.loads((tmp_path / "r" / "results.json").read_text())["apps"].values()
    for tname, t in figures["by_transaction"].items():
        row = next(line for line in out.splitlines() if line.split()[:1] == [tname])
        assert "".join(_fmt_p(t["response_ms"][p]) for p in ("p50", "p95", "p99")) in row
    assert main(["compare", str(cfg), "-q", "--schedulers", "noop,deadline"]) == 0
    out = capsys.readouterr().out
    assert out.index("transactions/s") < out.index("read IOPS")


@pytest.mark.parametrize("app, message", [
    ({"type": "oltp"}, r"data_device is required"),
    ({"type": "oltp", "data_device": "/dev/sda", "innodb_page_size": "16k"},
     r"innodb_page_size is an InnoDB parameter; this database's engine is oracle"),
    ({"type": "oltp", "engine": "innodb", "data_device": "/dev/sda", "db_block_size": 8192},
     r"db_block_size is an Oracle parameter"),
    ({"type": "oltp", "data_device": "/dev/sda", "filesystemio_options": "fast"},
     r"filesystemio_options expected none, asynch, directio or setall, found 'fast'"),
    ({"type": "oltp", "engine": "innodb", "data_device": "/dev/sda",
      "innodb_flush_method": "O_SYNC"}, r"innodb_flush_method expected one of fsync"),
    ({"type": "oltp", "data_device": "/dev/sda", "reads": 2, "writes": 3},
     r"writes = 3 is out of range \[0, 2\]"),
    ({"type": "oltp", "data_device": "/dev/sda", "hit_ratio": 0.9, "db_cache_size": "1g"},
     r"give db_cache_size or hit_ratio, not both"),
    ({"type": "oltp", "data_device": "/dev/sda", "zipf_theta": 1.0},
     r"zipf_theta expected a number between 0 and 1"),
    ({"type": "oltp", "data_device": "/dev/sda", "data_size": "1t"},
     r"data01.dbf needs .* bytes; sda has"),
    ({"type": "oltp", "data_device": "/dev/sda", "mix": [{"name": "x", "reeds": 3}]},
     r"mix #1: unknown key 'reeds'"),
])
def test_oltp_errors_name_the_key(app, message):
    with pytest.raises(ConfigError, match=message):
        resolve({"app": [app]}, "x.toml")


def test_the_examples_run(tmp_path):
    from pathlib import Path

    from blksim._compat import tomllib
    examples = Path(__file__).resolve().parents[1] / "examples"
    db = tomllib.loads((examples / "oltp-raid10.toml").read_text())
    db["run"]["duration"] = "32s"
    db["app"][0]["warmup"] = "2s"
    f = api_run(db, per_request=False).figures["apps"]["orcl"]
    assert set(f["by_transaction"]) == {"new_order", "payment", "order_status", "delivery",
                                        "stock_level"}
    assert f["tps"] > 50 and f["redo"]["log_switches"] >= 1
    load = tomllib.loads((examples / "bulk-load.toml").read_text())
    load["app"][0]["scale"] = 0.01
    f = api_run(load, per_request=False).figures["apps"]["load"]
    assert f["finished"] and len(f["phases"]) == 3
