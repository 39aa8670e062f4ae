"""``[[app]]`` tables fed junk and numbers at the edges (issue 29): each run ends within a
time bound with exit status 0 and sane application figures (finite, not negative, from
a window that is not empty), or with one line naming the file and what is wrong (exit
status 2), and leaves nothing behind. The long form (more examples) is marked slow."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from tests.test_fuzz_commands import EDGE, FAST, LONG, numbers, run_cli_config

# values that reach the models' own rules (sizes, counts, weights, times) beside the
# generic junk of EDGE
APP_VALUES = st.sampled_from([
    "1t", "64g", "2g", "100m", "1m", "4k", "6k", 1e308, 1e-300, 10 ** 8, 100000, 10000, 0, 3,
    "10s", "0.2s", "1e308s", math.nan, math.inf, [["4k", math.nan]], [["4k", 1e308],
                                                                        ["8k", 1e308]],
    [["8k", 10 ** 8]], [["1m", 3], ["8k", 0]], [["100m", 1]], [10, 1], [100, 100],
    [{"name": "a", "weight": math.nan}], [{"name": "a", "weight": 1e308, "writes": 0},
                                          {"name": "b", "weight": 1e308}]])
VALUE = st.one_of(EDGE, APP_VALUES)

MODELS = {
    "oltp": ({"type": "oltp", "data_device": "/dev/sda", "data_size": "64m",
              "db_cache_size": "16m", "sessions": 4, "log_file_size": "4m"},
             ["sessions", "think_time", "cpu_time", "cpus", "reads", "writes",
              "redo_per_change", "data_size", "db_cache_size", "warmup", "duration",
              "db_block_size", "log_file_size", "log_groups", "hit_ratio", "zipf_theta",
              "hot_set", "mix", "user_calls", "db_writer_processes", "access"]),
    "innodb": ({"type": "oltp", "engine": "innodb", "data_device": "/dev/sda",
                "data_size": "64m", "innodb_buffer_pool_size": "16m", "sessions": 4,
                "innodb_log_file_size": "4m"},
               ["innodb_page_size", "innodb_buffer_pool_size", "innodb_page_cleaners",
                "innodb_flush_log_at_trx_commit", "innodb_flush_log_at_timeout",
                "innodb_log_file_size", "innodb_log_files_in_group", "innodb_io_capacity",
                "innodb_io_capacity_max", "innodb_max_dirty_pages_pct", "redo_per_change",
                "warmup", "mix"]),
    "fileserver": ({"type": "fileserver", "device": "/dev/sda", "files": 20,
                    "think_time": "10ms"},
                   ["files", "file_sizes", "read_size", "think_time", "timeout",
                    "clients_start", "clients_step", "clients_end", "step_time", "direct"]),
    "loader": ({"type": "loader", "tables": [["4m", 2]], "data_device": "/dev/sda",
                "export_device": "/dev/sda", "data_cache": "8m", "loaders": 2,
                "log_size": "8m"},
               ["tables", "scale", "tables_in_files", "export_ratio", "data_volumes",
                "loaders", "page_size", "read_size", "cpu_per_mb", "redo_ratio",
                "log_buffer", "log_io_size", "log_size", "data_cache", "savepoint_writers",
                "savepoint_io_size", "index_ratio", "stats_sample", "direct"]),
}
HOST_VALUES = st.sampled_from(["64m", "1g", "16g", "1m"])


@st.composite
def app_configurations(draw):
    model = draw(st.sampled_from(sorted(MODELS)))
    base, keys = MODELS[model]
    app = dict(base)
    for key in draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)):
        app[key] = draw(VALUE)
    cfg = {"run": {"duration": draw(st.sampled_from(["0.3s", "0.3s", "0.05s", "1e-9s"]))},
           "host": {"memory": draw(HOST_VALUES)}, "device": {"drive": "cheetah15k4"},
           "app": [app]}
    return cfg


def _run_app(tmp_path, capsys, cfg):
    ran = run_cli_config(tmp_path, capsys, cfg, seconds=40)
    if ran is None:
        return
    code, results, stdout, err, path = ran
    if code == 2:
        assert str(path) in err, err              # the file is named
        if "[[app]] #1: " in err:                 # and the app's key that is wrong
            from blksim.apps import models
            said = err.split("[[app]] #1: ", 1)[1]
            model = models()[cfg["app"][0]["type"]]
            keys = (set(model.table_keys) | set(getattr(model, "MIX_KEYS", ()))) - {"type", "name"}
            assert any(k in said for k in keys), err
        return
    apps = results["apps"]
    for name, figures in apps.items():
        assert figures.get("measured", True), (name, figures)
        for where, value in numbers(figures):
            assert math.isfinite(value) and value >= 0, (name, where, value)
        if figures["type"] == "oltp":
            t0, t1 = figures["window_s"]
            assert t1 > t0
        elif figures["type"] == "fileserver":
            assert figures["steps"] and all(s["end_s"] > s["start_s"]
                                            for s in figures["steps"])


@FAST
@given(cfg=app_configurations())
def test_app_tables_at_the_edges(tmp_path, capsys, cfg):
    _run_app(tmp_path, capsys, cfg)


@pytest.mark.slow
@LONG
@given(cfg=app_configurations())
def test_app_tables_at_the_edges_long(tmp_path, capsys, cfg):
    _run_app(tmp_path, capsys, cfg)


def test_the_unchanged_tables_run(tmp_path, capsys):
    """Each model's table is valid as written (else every example would end in an
    error)."""
    for base, _ in MODELS.values():
        cfg = {"run": {"duration": "0.3s"}, "host": {"memory": "1g"},
               "device": {"drive": "cheetah15k4"}, "app": [dict(base)]}
        code, _, _, err, _ = run_cli_config(tmp_path, capsys, cfg, seconds=40)
        assert code == 0, err
