"""RAID configurations with keys at the edges (issue 29): `blksim run` ends within a time
bound with exit status 0 and sane figures, or with one line naming the file, the key and
the value (exit status 2), and leaves no file behind. The long form is marked slow."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from blksim.disk_models.types.raid import RAID_KEYS
from tests.test_fuzz_commands import EDGE, FAST, LONG, run_cli, run_cli_config

BASE = {"level": "raid5", "members": 3, "service": "fixed", "service_time": "1ms",
        "capacity": "64m", "stripe_size": "16k", "cache": "1m",
        "write_policy": "write-back", "member_queue_depth": 2}
# values that mean something to one key or another, beside the generic edges
RAID_VALUES = ["perc5i", "sas5ir", "/dev/null", "/", ".", "nosuch.toml", "raid0", "raid1",
               "raid5", "raid10", "raid6", "write-back", "write-through", "none",
               "read-ahead", "adaptive", "fixed", "exponential", "cheetah15k4",
               "512", "2k", "4k", "6k", "64k", "1m", "1t", 512, 4096, 6144, 2, 3, 4, 8, 256,
               0.1, 0.75, 0.9, 1.0, "1us", "50ms"]
VALUE = st.one_of(EDGE, st.sampled_from(RAID_VALUES))
KEYS = sorted(RAID_KEYS)


@st.composite
def raid_tables(draw):
    raid = dict(BASE)
    changed = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
    for key in changed:
        if draw(st.integers(0, 5)) == 0:
            raid.pop(key, None)
        else:
            raid[key] = draw(VALUE)
    if raid.get("drive") is not None and "drive" in changed:
        for key in ("service", "service_time", "capacity"):   # drive or service, not both
            if key not in changed:
                raid.pop(key, None)
    return raid, changed


def _run_raid(tmp_path, capsys, table, controller=None):
    raid, changed = table
    beside = None
    if controller is not None:               # a controller file of the user's own
        beside = {"ctrl.toml": controller}
        raid = {**raid, "controller": "ctrl.toml"}
    cfg = {"run": {"duration": "0.3s", "seed": 1}, "device": {"raid": raid},
           "job": [{"name": "j", "rw": "randrw", "bs": "16k", "iodepth": 4,
                    "number_ios": 60}]}
    ran = run_cli_config(tmp_path, capsys, cfg, beside=beside)
    if ran is None:
        return
    code, figures, stdout, err, path = ran
    if code == 0:
        total = figures["totals"]
        done = sum(total[d]["ios"] for d in ("read", "write"))
        for direction in ("read", "write"):
            mbs = total[direction]["mb_per_s"]
            if done:
                assert math.isfinite(mbs) and mbs >= 0
            else:                       # nothing completed: no rate (docs/results.md)
                assert mbs is None
        assert 0 <= done <= 60          # (an overhead of seconds completes none in 0.3 s)
        return
    file = "ctrl.toml" if controller is not None and not any(
        key in err for key in raid if key != "controller") else "c.toml"
    assert file in err, err                      # the file, and the key at fault
    assert any(key in err for key in changed), (changed, err)


@FAST
@given(table=raid_tables())
def test_raid_configurations_at_the_edges(tmp_path, capsys, table):
    _run_raid(tmp_path, capsys, table)


@pytest.mark.slow
@LONG
@given(table=raid_tables())
def test_raid_configurations_at_the_edges_long(tmp_path, capsys, table):
    _run_raid(tmp_path, capsys, table)


@pytest.mark.parametrize("key, value", [("cache", "512"), ("controller", "/dev/null"),
                                        ("stripe_size", "2k")])
def test_the_audits_nonsense_is_refused(tmp_path, capsys, key, value):
    """A cache of 512 bytes was no cache; /dev/null an empty preset; a 2 KiB stripe with
    a write-back cache a ZeroDivisionError."""
    _run_raid(tmp_path, capsys, ({**BASE, key: value}, [key]))
    _, _, err = run_cli(["run", str(next(tmp_path.glob("*/c.toml"))), "-q"], capsys)
    assert err.startswith("blksim: error: ") and repr(value) in err, err


PERC5I = {"name": "mine", "levels": ["raid0", "raid1", "raid5", "raid10"],
          "stripe_sizes_kb": [8, 16, 32, 64, 128], "stripe_size": "64k", "cache": "256m",
          "write_policy": "write-back", "read_policy": "adaptive", "queue_depth": 128,
          "overhead": "50us", "host_mb_per_s": 1000, "high_water": 0.75, "low_water": 0.5,
          "destage_idle": "50ms"}
CONTROLLER_KEYS = sorted(PERC5I)


@st.composite
def controller_files(draw):
    ctrl = dict(PERC5I)
    changed = draw(st.lists(st.sampled_from(CONTROLLER_KEYS), min_size=1, max_size=2,
                            unique=True))
    for key in changed:
        if draw(st.integers(0, 5)) == 0:
            ctrl.pop(key)
        else:
            ctrl[key] = draw(st.one_of(VALUE, st.lists(VALUE, max_size=3)))
    return ctrl, changed


def _run_controller(tmp_path, capsys, drawn):
    ctrl, changed = drawn
    raid = {k: v for k, v in BASE.items() if k not in PERC5I}
    _run_raid(tmp_path, capsys, (raid, changed), controller=ctrl)


@FAST
@given(drawn=controller_files())
def test_controller_files_at_the_edges(tmp_path, capsys, drawn):
    _run_controller(tmp_path, capsys, drawn)


@pytest.mark.slow
@LONG
@given(drawn=controller_files())
def test_controller_files_at_the_edges_long(tmp_path, capsys, drawn):
    _run_controller(tmp_path, capsys, drawn)
