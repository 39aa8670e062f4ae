"""What the applications do besides I/O: a bulk loader's CPU per row and per table, and
an OLTP engine's user calls per transaction (TPC-C's profiles or one stored procedure
call) with their CPU (docs/apps.md)."""

import pytest

from blksim.api import run as api_run
from blksim.apps.oltp_config import TPCC_STATEMENT_CALLS
from blksim.sim.config import ConfigError, resolve

FIXED = {"service": "fixed", "service_time": "1ms", "capacity": "4g"}


def load(**keys):
    # export, data and log each on a device of its own with a fixed service time, so
    # that the loader's CPU is on its critical path alone; no log (redo_ratio 0)
    app = {"type": "loader", "tables": [["8m", 2]], "loaders": 1, "export_device": "/dev/sda",
           "data_device": "/dev/sdb", "log_device": "/dev/sdc", "data_cache": "64m",
           "redo_ratio": 0, "stats_sample": 0, "row_size": 100, **keys}
    cfg = {"host": {"memory": "512m"}, "device": FIXED,
           "devices": {"sdb": FIXED, "sdc": FIXED}, "app": [app]}
    return api_run(cfg, per_request=False).figures["apps"]["loader"]


def _phase(f, name):
    return next(p["seconds"] for p in f["phases"] if p["name"] == name)


def test_the_load_time_grows_by_rows_times_the_cost_per_row():
    base = load()
    rows = 2 * 8 * 2 ** 20 // 100
    assert base["rows"] == rows
    for cost in (1e-6, 5e-6):
        f = load(cpu_per_row=cost)
        assert _phase(f, "load") - _phase(base, "load") == pytest.approx(rows * cost,
                                                                         abs=1e-6)
        assert _phase(f, "index") == pytest.approx(_phase(base, "index"), abs=1e-9)
        assert f["cpu_s"] - base["cpu_s"] == pytest.approx(rows * cost, abs=1e-6)


def test_a_cost_per_table_is_paid_once_per_table():
    base, f = load(), load(cpu_per_table="250ms")
    assert _phase(f, "load") - _phase(base, "load") == pytest.approx(2 * 0.25, abs=1e-6)


def test_building_an_index_costs_its_tables_rows():
    base, f = load(), load(index_cpu_per_row=2e-6)
    rows = 2 * 8 * 2 ** 20 // 100
    assert _phase(f, "index") - _phase(base, "index") == pytest.approx(rows * 2e-6, rel=1e-6)
    assert _phase(f, "load") == pytest.approx(_phase(base, "load"), abs=1e-9)


DB = {"host": {"memory": "1g"}, "device": {"drive": "cheetah15k4"},
      "run": {"duration": "4s", "seed": 5}}
MIX = [{"name": "new_order", "weight": 45, "reads": 2, "writes": 1},
       {"name": "payment", "weight": 43, "reads": 2, "writes": 1},
       {"name": "order_status", "weight": 4, "reads": 2, "writes": 0},
       {"name": "delivery", "weight": 4, "reads": 2, "writes": 1},
       {"name": "stock_level", "weight": 4, "reads": 2, "writes": 0}]


def oltp(**keys):
    app = {"type": "oltp", "name": "db", "sessions": 4, "data_device": "/dev/sda",
           "data_size": "64m", "hit_ratio": 0.9, "cpu_time": "2ms",
           "cpu_distribution": "fixed", "mix": MIX, **keys}
    return api_run({**DB, "app": [app]}, per_request=False).figures["apps"]["db"]


def test_statements_make_each_tpcc_transaction_its_profiles_calls():
    f = oltp(client="statements")
    span = f["window_s"][1] - f["window_s"][0]
    calls = sum(t["count"] * TPCC_STATEMENT_CALLS[name]
                for name, t in f["by_transaction"].items())
    assert f["user_calls_per_s"] * span == pytest.approx(calls, rel=1e-6)
    assert f["user_calls_per_transaction"] == pytest.approx(calls / f["transactions"],
                                                            rel=1e-5)
    # the minimum mix's weights give about 0.45*47 + 0.43*8 + 0.04*(4 + 71 + 3) = 27.8
    assert 22 < f["user_calls_per_transaction"] < 34


def test_stored_procedures_make_one_call_per_transaction():
    f = oltp()
    assert f["user_calls_per_transaction"] == 1.0
    g = oltp(client="statements", user_calls=3)        # given: every type makes 3
    assert g["user_calls_per_transaction"] == 3.0


def test_each_user_call_spends_its_cpu_on_the_session():
    base = oltp(client="statements")
    f = oltp(client="statements", cpu_per_call="100us")
    per_txn = f["cpu"]["time_s"] / f["transactions"]
    # fixed CPU: 2 ms of the transaction's own, 0.1 ms per call
    assert per_txn == pytest.approx(2e-3 + 1e-4 * f["user_calls_per_transaction"], rel=1e-6)
    assert base["cpu"]["time_s"] / base["transactions"] == pytest.approx(2e-3, rel=1e-9)
    assert f["tps"] < base["tps"]


@pytest.mark.parametrize("key, value, message", [
    ("client", "odbc", "client expected one of procedures, statements"),
    ("cpu_per_call", "-1ms", "cpu_per_call"),
])
def test_bad_oltp_keys_are_one_line(key, value, message):
    app = {"type": "oltp", "data_device": "/dev/sda", key: value}
    with pytest.raises(ConfigError, match=message):
        resolve({**DB, "app": [app]}, "bad.toml")


@pytest.mark.parametrize("key, value", [("row_size", 0), ("cpu_per_row", "-1us"),
                                        ("cpu_per_table", "x"), ("index_cpu_per_row", -1)])
def test_bad_loader_keys_are_one_line(key, value):
    app = {"type": "loader", "tables": [["8m", 1]], "export_device": "/dev/sda",
           "data_device": "/dev/sda", key: value}
    with pytest.raises(ConfigError, match=key):
        resolve({**DB, "app": [app]}, "bad.toml")
