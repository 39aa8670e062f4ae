"""The application models checked against the host and the run (issue 29): an empty
measured window, a ramp step that would never run, caches larger than the host's memory,
weights that are not finite, a transaction's redo larger than a log file, and counts
checked before anything proportional to them is built. Each rule gives one line naming
the file, the key and the value."""

import json
import math
import time

import pytest

from blksim.cli import main
from blksim.sim.config import ConfigError, resolve

BASE = {"device": {"drive": "cheetah15k4"}, "host": {"memory": "1g"}}
OLTP = {"type": "oltp", "data_device": "/dev/sda", "data_size": "64m", "db_cache_size": "16m"}
FS = {"type": "fileserver", "device": "/dev/sda", "files": 10}
LOADER = {"type": "loader", "tables": [["8m", 2]], "data_device": "/dev/sda",
          "export_device": "/dev/sda", "data_cache": "16m"}


def innodb(**keys) -> dict:
    app = {k: v for k, v in OLTP.items() if k != "db_cache_size"}
    return {**app, "engine": "innodb", "innodb_buffer_pool_size": "16m", **keys}


def error(app, **top) -> str:
    with pytest.raises(ConfigError) as exc:
        resolve({**BASE, **top, "app": [app]}, "x.toml")
    message = str(exc.value)
    assert message.startswith("x.toml: [[app]] #1") and "\n" not in message
    return message


# --- the measured window -----------------------------------------------------------------

def test_a_warmup_at_or_after_the_runs_end_is_an_error(tmp_path, capsys):
    # the audit's case: examples/oltp-raid10.toml (warmup 10 s) run for 3 s printed
    # "0.0 transactions/s ... from 10 s to 3 s" and 2.9e14 redo writes/s
    out = tmp_path / "o"
    assert main(["run", "examples/oltp-raid10.toml", "-q", "--duration", "3s",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warmup = '10s' leaves nothing to measure: the run " \
        "ends at 3 s ([run] duration)" in err
    assert not out.exists() or not any(out.iterdir())
    assert "warmup = '5s' leaves nothing to measure" in error(
        {**OLTP, "warmup": "5s"}, run={"duration": "5s"})


def test_a_warmup_beyond_the_sessions_own_duration_is_an_error():
    # without [run] duration the sessions stop at the app's duration (default 60 s)
    assert "the sessions stop at 60 s (duration = '60s')" in error({**OLTP, "warmup": "90s"})
    assert "the sessions stop at 2 s" in error({**OLTP, "warmup": "2s", "duration": "2s"})


def test_the_window_runs_from_warmup_to_the_runs_end():
    from blksim.api import run
    f = run({**BASE, "run": {"duration": "3s"}, "app": [{**OLTP, "warmup": "2s"}]},
            per_request=False).figures["apps"]["oltp"]
    assert f["window_s"] == [2.0, 3.0]
    assert f["transactions"] > 0 and f["tps"] == pytest.approx(f["transactions"] / 1.0)
    assert f["redo"]["writes_per_s"] == pytest.approx(f["redo"]["writes"] / 1.0)


def test_figures_of_a_run_that_ended_before_warmup_say_so_and_hold_no_rate():
    from blksim.apps import oltp
    from blksim.apps.oltp import OltpStats
    app = resolve({**BASE, "app": [{**OLTP, "warmup": "10s"}]}, "x.toml").apps[0]
    stats = OltpStats.__new__(OltpStats)
    stats.app, stats.horizon = app, 60.0
    f = stats.figures(4.0)
    assert f == {"type": "oltp", "engine": "oracle", "sessions": 10, "window_s": [10.0, 4.0],
                 "measured": False}
    assert "nothing measured" in oltp.lines("oltp", f, None)[0]
    heading, rows = oltp.compare_rows("oltp", [f, f])
    assert rows == [] and "nothing measured" in heading


def test_compare_shows_no_figure_for_the_run_that_measured_nothing():
    # beside a run that did measure, the unmeasured one's cells are "-", never 0 or nan
    from blksim.api import run
    from blksim.cli.tables import compare_table
    good = run({**BASE, "run": {"duration": "3s"}, "app": [{**OLTP, "warmup": "2s"}]},
               per_request=False).figures
    empty = json.loads(json.dumps(good))
    empty["apps"]["oltp"] = {"type": "oltp", "engine": "oracle", "sessions": 10,
                             "window_s": [10.0, 3.0], "measured": False}
    empty["scheduler"] = "other"
    text = compare_table([good, empty])
    tps = next(line for line in text.splitlines() if "transactions/s" in line)
    assert tps.split()[-1] == "-" and float(tps.split()[-2]) > 0


def test_a_ramp_step_the_run_never_reaches_is_an_error():
    # four steps of 4 s need a run longer than 12 s; a 3 s run would report zeros for
    # three steps that never ran
    ramp = {**FS, "clients_start": 2, "clients_step": 10, "clients_end": 32,
            "step_time": "4s"}
    message = error(ramp, run={"duration": "3s"})
    assert "the ramp has 4 steps of 4 s, but the run ends at 3 s ([run] duration): only 1 " \
        "would run" in message
    assert "the ramp has 4 steps" in error(ramp, run={"duration": "12s"})
    resolve({**BASE, "run": {"duration": "12.5s"}, "app": [ramp]}, "x.toml")


def test_a_ramp_cut_inside_its_last_step_reports_that_steps_own_window(tmp_path):
    from blksim.api import run
    ramp = {**FS, "clients_start": 1, "clients_step": 1, "clients_end": 2,
            "step_time": "1s", "think_time": "10ms"}
    f = run({**BASE, "run": {"duration": "1.5s"}, "app": [ramp]},
            per_request=False).figures["apps"]["fileserver"]
    assert [(s["clients"], s["start_s"], s["end_s"]) for s in f["steps"]] == \
        [(1, 0.0, 1.0), (2, 1.0, 1.5)]
    assert all(s["ops"] > 0 for s in f["steps"])
    last = f["steps"][1]
    assert last["ops_per_s"] == pytest.approx(last["ops"] / 0.5)


def test_a_clients_end_of_ten_thousand_with_a_short_run_is_refused_at_once():
    # the audit: clients_end = 100000 built and reported every planned client
    t0 = time.perf_counter()
    assert "out of range [1, 10000]" in error({**FS, "clients_end": 100000},
                                              run={"duration": "3s"})
    assert "the ramp has 10000 steps" in error({**FS, "clients_end": 10000},
                                                run={"duration": "3s"})
    assert time.perf_counter() - t0 < 2


def test_clients_step_zero_is_an_error_unless_the_load_is_constant():
    message = error({**FS, "clients_start": 1, "clients_step": 0, "clients_end": 5})
    assert "clients_step = 0 never reaches clients_end = 5 from clients_start = 1" in message
    cfg = resolve({**BASE, "app": [{**FS, "clients_start": 3, "clients_step": 0}]}, "x.toml")
    assert cfg.apps[0].steps == 1


# --- the host's memory -------------------------------------------------------------------

@pytest.mark.parametrize("app, key", [
    ({**OLTP, "db_cache_size": "2g"}, "db_cache_size = '2g'"),
    ({**OLTP, "db_cache_size": None}, "db_cache_size = '256m'"),          # the default
    (innodb(innodb_buffer_pool_size="1100m"), "innodb_buffer_pool_size = '1100m'"),
    ({**LOADER, "data_cache": "64g"}, "data_cache = '64g'"),
])
def test_a_cache_larger_than_the_hosts_memory_is_an_error(app, key):
    app = {k: v for k, v in app.items() if v is not None}
    message = error(app, host={"memory": "128m"} if "256m" in key else BASE["host"])
    assert f"{key} (" in message and "does not fit in the host's memory ([host] memory" \
        in message


def test_the_caches_of_all_applications_share_the_hosts_memory():
    two = [{**OLTP, "name": "a", "db_cache_size": "600m"},
           {**OLTP, "name": "b", "db_cache_size": "600m"}]
    with pytest.raises(ConfigError, match=r"\[\[app\]\] #2: db_cache_size = '600m' .* "
                                          r"\(629145600 bytes are taken by the caches"):
        resolve({**BASE, "app": two}, "x.toml")
    # a hit_ratio database keeps no pool of a given size
    hits = {k: v for k, v in OLTP.items() if k != "db_cache_size"}
    resolve({**BASE, "app": [{**hits, "hit_ratio": 0.9},
                             {**OLTP, "name": "b", "db_cache_size": "1g"}]}, "x.toml")


# --- weights, redo, counts ---------------------------------------------------------------

@pytest.mark.parametrize("weight", [math.nan, math.inf, -1.0, 0, True, "1"])
def test_weights_must_be_finite_and_positive(weight):
    mix = [{"name": "a", "weight": weight}, {"name": "b", "weight": 1}]
    assert f"mix #1: weight expected a finite number above 0, found {weight!r}" in \
        error({**OLTP, "mix": mix})
    # NaN in the file server's file_sizes weights was a traceback
    assert f"file_sizes #1: weight expected a finite number above 0, found {weight!r}" in \
        error({**FS, "file_sizes": [["4k", weight], ["8k", 1]]})


def test_huge_weights_are_shares_not_an_overflow():
    from blksim.apps import shares
    assert shares([1e308, 1e308]) == [0.5, 0.5]
    assert shares([45, 43, 4, 4, 4]) == pytest.approx([0.45, 0.43, 0.04, 0.04, 0.04])
    cfg = resolve({**BASE, "app": [{**FS, "files": 400, "file_sizes": [["4k", 1e308],
                                                                       ["8k", 1e308]]}]},
                  "x.toml")
    sizes = [f.sectors for f in cfg.files if f.path.startswith("/srv/")]
    assert 150 < sizes.count(8) < 250 and sizes.count(8) + sizes.count(16) == 400


def test_a_transactions_redo_must_fit_in_a_log_file():
    message = error({**OLTP, "redo_per_change": "1m", "log_file_size": "1m",
                     "mix": [{"name": "big", "writes": 3}, {"name": "small", "writes": 1}]})
    assert "redo_per_change = '1m' (1048576 bytes): a 'big' transaction changes 3 pages, " \
        "3145728 bytes of redo at its commit, more than one log file holds " \
        "(log_file_size = 1048576 bytes)" in message
    assert "(innodb_log_file_size = 1048576 bytes)" in error(
        innodb(innodb_log_file_size="1m", redo_per_change="600k"))
    # the largest that fits runs
    resolve({**BASE, "app": [innodb(innodb_log_file_size="1m", redo_per_change="512k")]},
            "x.toml")


def test_a_huge_table_count_is_refused_before_the_tables_are_built():
    # the audit: 10^8 tables took 8 s (here minutes) before an error whose range read
    # "[100000002, 100000000]"
    t0 = time.perf_counter()
    message = error({**LOADER, "tables": [["8k", 10 ** 8]]})
    assert "tables #1 expected [size, count], count from 1 to 10000, found ['8k', " \
        "100000000]" in message
    message = error({**LOADER, "tables": [["8k", 6000], ["8k", 6000]]})
    assert "tables: 12000 tables by entry #2; a load has at most 10000" in message
    assert time.perf_counter() - t0 < 2


def test_results_of_a_good_run_have_no_unmeasured_marker(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nduration = "2s"\n[device]\ndrive = "cheetah15k4"\n[[app]]\n'
                   'type = "oltp"\ndata_device = "/dev/sda"\ndata_size = "64m"\n'
                   'db_cache_size = "16m"\nwarmup = "1s"\n')
    assert main(["run", str(cfg), "-q", "--out", str(tmp_path / "o")]) == 0
    f = json.loads((tmp_path / "o" / "results.json").read_text())["apps"]["oltp"]
    assert "measured" not in f and f["window_s"] == [1.0, 2.0]


def test_a_loads_processes_and_opens_are_counted_before_they_are_built():
    t0 = time.perf_counter()
    message = error({**LOADER, "data_volumes": 4096, "savepoint_writers": 256})
    assert "savepoint_writers = 256 on each of 4096 data volumes (data_volumes x data " \
        "devices) and loaders = 4 make 1048581 processes; a load has at most 10000" in message
    message = error({**LOADER, "data_volumes": 200, "loaders": 1000, "savepoint_writers": 1})
    assert "loaders = 1000 each opening 200 data volumes make 200000 open files" in message
    assert time.perf_counter() - t0 < 2


def test_a_size_of_five_thousand_digits_names_its_key():
    # Python refuses to convert a number of over 4,300 digits: the message named no key
    message = error({**OLTP, "data_size": "9" * 5000})
    assert "data_size: expected a size in bytes" in message and "5000 characters" in message
    message = error({**LOADER, "tables": [["9" * 5000, 1]]})
    assert "tables #1: tables: expected a size in bytes" in message


def test_a_transaction_that_takes_no_time_is_an_error():
    # cpu_time = 0, think_time = 0 and reads = 0 ran forever at time 0 (a hang)
    message = error({**OLTP, "cpu_time": 0, "reads": 0})
    assert "cpu_time + think_time is under 1 us for 'txn' (think_time = 0): a transaction " \
        "must take at least 1 us" in message
    mix = [{"name": "a", "cpu_time": "1ms"}, {"name": "b", "cpu_time": 1e-300}]
    assert "under 1 us for 'b'" in error({**OLTP, "mix": mix})
    resolve({**BASE, "app": [{**OLTP, "cpu_time": 0, "think_time": "1ms"}]}, "x.toml")
