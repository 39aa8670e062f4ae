"""PostgreSQL as an OLTP engine: the checkpoint's writes spread over
checkpoint_completion_target (hand-computed), full-page writes after a checkpoint,
synchronous_commit = off, and its parameters' errors."""

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from blksim.api import run as api_run
from blksim.sim.config import ConfigError, resolve

pytestmark = pytest.mark.filterwarnings("ignore:.*steady-state:UserWarning",
                                       "ignore:.*warming up:UserWarning")

FIXED = {"service": "fixed", "service_time": "1ms"}


def pg(**keys):
    app = {"type": "oltp", "engine": "postgresql", "data_device": "/dev/sda",
           "log_device": "/dev/sdb", "data_size": "8m", "shared_buffers": "32m",
           "access": "uniform", "sessions": 4, "think_time": "20ms",
           "think_distribution": "fixed", "cpu_distribution": "fixed", "warmup": "1s"}
    app.update(keys)
    return {k: v for k, v in app.items() if v is not None}


def figures(app, duration, log_service="1ms"):
    cfg = {"run": {"duration": duration, "seed": 3}, "host": {"memory": "1g"},
           "device": FIXED,
           "devices": {"sdb": {"service": "fixed", "service_time": log_service}},
           "app": [app]}
    return api_run(cfg, per_request=False).figures["apps"]["oltp"]


@pytest.mark.parametrize("target", [0.3, 0.6])
def test_a_checkpoints_writes_spread_over_the_completion_target(target):
    # checkpoint_timeout = 30 s: the first checkpoint starts at 30 s (no WAL distance is
    # reached: 100 segments). It must write the N buffers dirty at its start; after the
    # k-th it is on schedule while target * k / N >= elapsed / 30 s, and naps 100 ms at a
    # time. The N-th write is thus made at the first nap's end after
    # (N - 1) / N * target * 30 s: the write phase is that, plus at most one nap and the
    # page's copy into the page cache (a buffered write).
    f = figures(pg(checkpoint_timeout="30s", checkpoint_segments=100,
                   checkpoint_completion_target=target), "52s")
    p = f["postgresql"]
    assert p["checkpoints_timed"] == 1 and p["checkpoints_req"] == 0
    n, write_s, sync_s = (p["last_checkpoint"][k] for k in ("pages", "write_s", "sync_s"))
    assert n > 500                                   # most of the 1024 pages are dirty
    due = (n - 1) / n * target * 30.0
    assert due <= write_s <= due + 0.1 + 0.01
    # the sync phase: fsync of the data file, its dirty pages on a 1 ms device (merged
    # where adjacent, so at most one request per page)
    assert 0 < sync_s <= n * 0.001 * 1.05
    assert p["buffers_checkpoint"] == n
    assert f["checkpoints"] == {"requested": 1, "completed": 1}


def _wal_mb_per_s(fpw, t0, t1):
    """WAL MB/s from t0 to t1 of the same run (same seed: the same history up to t1)."""
    f = figures(pg(checkpoint_timeout="30s", checkpoint_segments=100, full_page_writes=fpw,
                   warmup=t0), t1)
    return f["postgresql"]["wal_generated_mb_per_s"], f


def test_full_page_writes_raise_the_wal_after_a_checkpoint():
    # 1024 pages: by 20 s nearly every page has been changed since the start (the last
    # redo point), so few changes log an image; the checkpoint at 30 s moves the redo
    # point and every page's next change logs its 8 kB image again
    before, _ = _wal_mb_per_s("on", 20.0, "28s")
    after, f = _wal_mb_per_s("on", 30.0, "38s")
    assert after > 2 * before
    assert f["postgresql"]["full_page_images"] > 1024      # before and after the checkpoint
    off_before, _ = _wal_mb_per_s("off", 20.0, "28s")
    off_after, g = _wal_mb_per_s("off", 30.0, "38s")
    assert g["postgresql"]["full_page_images"] == 0
    assert off_after == pytest.approx(off_before, rel=0.1)
    assert off_after < after / 2


def _commit(sync):
    # all 128 pages are in shared_buffers after the warmup (uniform access, 2 reads per
    # transaction): a transaction is its CPU time (1 ms) and its commit
    return figures(pg(data_size="1m", reads=2, writes=2, sessions=1, cpu_time="1ms",
                      think_time="5ms", synchronous_commit=sync, warmup="12s"), "22s",
                   log_service="5ms")


def test_synchronous_commit_off_removes_the_commits_wait():
    on, off = _commit("on"), _commit("off")
    assert on["buffer_pool"]["hit_ratio"] == 1.0 and off["buffer_pool"]["hit_ratio"] == 1.0
    # on: the WAL's write() into the page cache, then fdatasync: a 5 ms request at least
    assert on["waits"]["log file sync"]["avg_ms"] >= 5.0
    assert on["response_ms"]["mean"] >= 6.0
    # off: the commit does not wait; the response is the CPU time, and the WAL writer
    # still writes the WAL every wal_writer_delay (200 ms)
    assert off["waits"]["log file sync"]["time_s"] == 0.0
    assert off["response_ms"]["mean"] == pytest.approx(1.0, rel=1e-6)
    assert off["redo"]["writes_per_s"] == pytest.approx(5.0, abs=0.2)


def test_a_small_pool_makes_backends_and_the_background_writer_write():
    f = figures(pg(data_size="64m", shared_buffers="2m", reads=10, writes=5, sessions=8,
                   access="zipf", think_time="5ms"), "12s")
    p = f["postgresql"]
    assert p["buffers_clean"] > 0 and p["buffers_backend"] > 0
    assert f["buffer_pool"]["hit_ratio"] < 1.0


def test_wal_distance_starts_a_checkpoint_before_the_timeout():
    f = figures(pg(checkpoint_segments=1, redo_per_change="8k", think_time="2ms"), "20s")
    p = f["postgresql"]
    assert p["checkpoints_timed"] == 0 and p["checkpoints_req"] >= 2


@pytest.mark.parametrize("keys, message", [
    ({"engine": "postgres"}, r"engine expected one of oracle, innodb, postgresql, found "
                             r"'postgres'"),
    ({"wal_sync_method": "O_DIRECT"}, r"wal_sync_method expected one of fdatasync, fsync, "
                                      r"open_datasync, open_sync, found 'O_DIRECT'"),
    ({"synchronous_commit": "maybe"}, r"synchronous_commit expected on or off"),
    ({"fsync": 2}, r"fsync expected on or off, found 2"),
    ({"checkpoint_completion_target": 1.5},
     r"checkpoint_completion_target expected a number from 0 to 1, found 1.5"),
    ({"checkpoint_timeout": "10s"}, r"checkpoint_timeout expected 30 s to 86400 s"),
    ({"max_wal_size": "1g"}, r"max_wal_size is a parameter of 9.5 and later"),
    ({"server_version": "16", "checkpoint_segments": 3},
     r"checkpoint_segments was removed in 9.5"),
    ({"server_version": "9.6"}, r"server_version expected one of 8.4, 16, found '9.6'"),
    ({"bgwriter_lru_maxpages": 5000}, r"bgwriter_lru_maxpages = 5000 is out of range"),
    ({"db_cache_size": "1g"}, r"db_cache_size is an Oracle parameter; this database's "
                              r"engine is postgresql"),
    ({"innodb_doublewrite": 0}, r"innodb_doublewrite is an InnoDB parameter"),
    ({"shared_buffers": "64k"}, r"shared_buffers expected a multiple of 1 bytes, at least "
                                r"131072"),
    ({"commit_delay": -1}, r"commit_delay = -1 is out of range"),
])
def test_postgresql_errors_name_the_key(keys, message):
    app = {"type": "oltp", "engine": "postgresql", "data_device": "/dev/sda", **keys}
    with pytest.raises(ConfigError, match=message) as info:
        resolve({"app": [app]}, "x.toml")
    assert "\n" not in str(info.value) and "x.toml" in str(info.value)


def test_oracle_and_innodb_refuse_postgresql_keys():
    for engine in ("oracle", "innodb"):
        app = {"type": "oltp", "engine": engine, "data_device": "/dev/sda",
               "shared_buffers": "1g"}
        with pytest.raises(ConfigError, match=r"shared_buffers is a PostgreSQL parameter; "
                                              f"this database's engine is {engine}"):
            resolve({"app": [app]}, "x.toml")


def test_the_example_runs_and_completes_a_checkpoint():
    from pathlib import Path

    from blksim._compat import tomllib
    path = Path(__file__).resolve().parents[1] / "examples" / "postgres-oltp.toml"
    cfg = tomllib.loads(path.read_text())
    f = api_run(cfg, per_request=False).figures["apps"]["pg"]
    assert f["open_loop"]["held"]
    p = f["postgresql"]
    assert p["checkpoints_timed"] >= 1 and f["checkpoints"]["completed"] >= 1
    # 8.4's default target 0.5 of checkpoint_timeout = 30 s, to within a nap
    assert 14.9 < p["checkpoint_write_s_mean"] < 15.2


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(sessions=st.integers(1, 24), pool=st.sampled_from(["256k", "1m", "8m"]),
       writes=st.integers(0, 10), method=st.sampled_from(["fdatasync", "fsync",
                                                          "open_datasync", "open_sync"]),
       sync=st.sampled_from(["on", "off"]), fpw=st.sampled_from(["on", "off"]),
       maxpages=st.sampled_from([0, 5, 100]), rate=st.sampled_from([0, 200]),
       version=st.sampled_from(["8.4", "16"]), seed=st.integers(0, 2 ** 16))
# a background writer's page still in flight at the end was counted as written
@example(sessions=20, pool="256k", writes=4, method="open_datasync", sync="on", fpw="on",
         maxpages=5, rate=0, version="8.4", seed=1901)
def test_every_change_is_written_once_by_one_of_the_three_writers(
        sessions, pool, writes, method, sync, fpw, maxpages, rate, version, seed):
    # the ledger of every engine (changes = written + unfinished), and PostgreSQL's own:
    # every page written was written by the checkpointer, the background writer or a
    # backend, exactly one of them (counted from the start: no warmup)
    app = pg(data_size="16m", shared_buffers=pool, sessions=sessions, reads=10,
             writes=writes, access="zipf", wal_sync_method=method, synchronous_commit=sync,
             full_page_writes=fpw, bgwriter_lru_maxpages=maxpages, redo_per_change="16k",
             server_version=version, warmup="0s",
             rate=rate or None, think_time=None if rate else "5ms",
             **({"checkpoint_segments": 1} if version == "8.4" else
                {"max_wal_size": "32MB"}))
    cfg = {"run": {"duration": "6s", "seed": seed}, "host": {"memory": "1g"},
           "device": FIXED, "devices": {"sdb": FIXED}, "app": [app]}
    f = api_run(cfg, per_request=False).figures["apps"]["oltp"]
    bp, p = f["buffer_pool"], f["postgresql"]
    assert bp["changes"] == bp["pages_written"] + bp["unfinished"]
    assert bp["pages_written"] == p["buffers_checkpoint"] + p["buffers_clean"] + \
        p["buffers_backend"]
    if fpw == "off" or writes == 0:
        assert p["full_page_images"] == 0
    else:
        # each page's first change since the start or a redo point: at least one image
        # per page changed, never more than one per change
        assert 0 < p["full_page_images"] <= bp["changes"] + p["checkpoints_req"] * 2048
    if writes == 0:
        assert bp["changes"] == 0 and p["buffers_checkpoint"] == 0


def _log_figures(log_service="5ms", think_time="5ms", **keys):
    return figures(pg(data_size="1m", reads=2, writes=2, cpu_time="1ms",
                      think_time=think_time, warmup="12s", **keys), "22s",
                   log_service=log_service)


def test_fsync_off_and_open_datasync_change_what_a_commit_waits_for():
    on = _log_figures(sessions=1)
    off = _log_figures(sessions=1, fsync="off")
    dsync = _log_figures(sessions=1, wal_sync_method="open_datasync")
    # fdatasync: write() into the page cache, then the flush's 5 ms request
    assert on["waits"]["log file sync"]["avg_ms"] >= 5.0
    # fsync = off: only the write() of whole 8 kB WAL pages into the page cache (no page
    # read first), no device request waited for
    assert off["waits"]["log file sync"]["avg_ms"] < 0.1
    # open_datasync in 8.4: O_DIRECT | O_DSYNC, the write is the device's 5 ms request
    assert dsync["waits"]["log file sync"]["avg_ms"] >= 5.0


def test_commit_delay_packs_more_commits_into_a_wal_flush():
    # 20 backends, 2 or 3 of them in a transaction on average (1 ms of CPU and a 1 ms WAL
    # flush in each 23 ms), so more than commit_siblings = 1: the flushing backend waits
    # 4 ms first, and the commits arriving meanwhile join its flush
    fast = {"log_service": "1ms", "think_time": "20ms"}
    plain = _log_figures(sessions=20, **fast)
    delayed = _log_figures(sessions=20, commit_delay=4000, commit_siblings=1, **fast)
    # with the default commit_siblings = 5, seldom more than 5 are open: rarely a delay
    rare = _log_figures(sessions=20, commit_delay=4000, **fast)
    assert rare["redo"]["commits_per_write"] < delayed["redo"]["commits_per_write"]
    assert delayed["redo"]["commits_per_write"] > 2 * plain["redo"]["commits_per_write"]
    assert delayed["waits"]["log file sync"]["avg_ms"] >= 4.0
    lonely = _log_figures(sessions=1, commit_delay=4000, **fast)
    solo = _log_figures(sessions=1, **fast)
    # one backend: no sibling in a transaction, no delay
    assert lonely["response_ms"]["mean"] == pytest.approx(solo["response_ms"]["mean"],
                                                          rel=1e-9)
