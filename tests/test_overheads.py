"""`ControllerOverheads`: every command-overhead case, completion, time scale, DiskSim names."""

import os
import re

import pytest

from blksim.disk_models.overheads import ControllerOverheads

from blksim.disk_models.disksim.validation_set import diskspecs

DISKSPECS = str(diskspecs("cheetah9LP"))

# eight distinct values so a swapped case shows
CASES = {
    # (write, hit, prev_write): ms
    (False, True, False): 0.1, (False, True, True): 0.2,
    (False, False, False): 0.3, (False, False, True): 0.4,
    (True, True, False): 0.5, (True, True, True): 0.6,
    (True, False, False): 0.7, (True, False, True): 0.8,
}


def make(**kw):
    return ControllerOverheads(
        read_hit_after_read_ms=0.1, read_hit_after_write_ms=0.2,
        read_miss_after_read_ms=0.3, read_miss_after_write_ms=0.4,
        write_hit_after_read_ms=0.5, write_hit_after_write_ms=0.6,
        write_miss_after_read_ms=0.7, write_miss_after_write_ms=0.8,
        read_complete_ms=0.05, write_complete_ms=0.07, **kw)


@pytest.mark.parametrize("case,ms", sorted(CASES.items()))
def test_each_command_overhead_case(case, ms):
    o = make()
    assert o.command_overhead(*case) == pytest.approx(ms / 1e3)


def test_completion_overheads():
    o = make()
    assert o.completion_overhead(False) == pytest.approx(0.05e-3)
    assert o.completion_overhead(True) == pytest.approx(0.07e-3)


def test_time_scale_multiplies_overheads_not_the_bus():
    o = make(time_scale=2.0, bus_sector_ms=0.1)
    assert o.command_overhead(True, False, True) == pytest.approx(1.6e-3)
    assert o.completion_overhead(True) == pytest.approx(0.14e-3)
    assert o.bus_time(10) == pytest.approx(1e-3)


def test_per_request_overhead_adds_to_every_command():
    o = make(per_request_ms=1.0)
    assert o.command_overhead(False, True, False) == pytest.approx(1.1e-3)


def test_simple_form():
    o = ControllerOverheads.simple(0.2, 0.02, 0.0016)
    for case in CASES:
        assert o.command_overhead(*case) == pytest.approx(0.2e-3)
    assert o.completion_overhead(False) == pytest.approx(0.02e-3)


def test_disconnect_and_reconnect():
    o = ControllerOverheads(disconnect_read_after_read_ms=0.1, disconnect_read_after_write_ms=0.2,
                            disconnect_write_ms=0.3, reselect_first_ms=0.4,
                            reselect_other_ms=0.5, data_prep_ms=0.06)
    assert o.disconnect_overhead(False, False) == pytest.approx(0.1e-3)
    assert o.disconnect_overhead(False, True) == pytest.approx(0.2e-3)
    assert o.disconnect_overhead(True, False) == pytest.approx(0.3e-3)
    assert o.reconnect_overhead(True) == pytest.approx(0.46e-3)
    assert o.reconnect_overhead(False, with_data=False) == pytest.approx(0.5e-3)


def test_rejects_negative():
    with pytest.raises(ValueError, match="read_complete_ms"):
        ControllerOverheads(read_complete_ms=-1)


def test_from_disksim_cheetah9lp():
    params = {}
    with open(DISKSPECS) as f:
        for line in f:
            m = re.match(r"\s*([^=]+?)\s*=\s*([-0-9.]+)\s*,?\s*$", line)
            if m:
                params[m.group(1)] = float(m.group(2))
    o = ControllerOverheads.from_disksim(params)
    assert o.command_overhead(False, True, False) == pytest.approx(0.066e-3)   # read hit after read
    assert o.command_overhead(False, False, True) == pytest.approx(0.08673e-3)  # read miss after write
    assert o.command_overhead(True, True, False) == pytest.approx(0.748e-3)
    assert o.command_overhead(True, False, True) == pytest.approx(0.8964e-3)
    assert o.bus_sector == pytest.approx(0.105e-3)
    assert o.describe()["Read miss over. after read"] == pytest.approx(0.28362)
