"""The RAID controller's cache flush timer (LSI MegaRAID's cache flush interval): under a
load that never lets the controller idle and never fills its cache to the high-water
mark, dirty data is written back on the timer, and stays dirty without it."""

import pytest

from blksim.common.config_values import ConfigError
from blksim.disk_models.base import DeviceError
from blksim.disk_models.raid import RaidController
from blksim.disk_models.raid_layout import RaidLayout
from blksim.disk_models.synthetic import ServiceLawDevice


def raid_config(table, where, base_dir):
    """The raid type's parser, reached through the registry (importing the type's
    module first would register it ahead of the built-ins' own order)."""
    from blksim.disk_models import registry
    registry.device_types()
    from blksim.disk_models.types.raid import raid_config as parse
    return parse(table, where, base_dir)

STRIP = 128                  # 64 KiB
MEMBER = 1 << 24             # sectors


class _Rq:
    __slots__ = ("sector", "nr_sectors", "write")

    def __init__(self, sector, nr_sectors, write):
        self.sector = sector
        self.nr_sectors = nr_sectors
        self.write = write


def _controller(flush_interval):
    members = [ServiceLawDevice("fixed", 0.010, capacity=MEMBER, queue_depth=4)
               for _ in range(2)]
    ctrl = RaidController("c", RaidLayout("raid0", 2, MEMBER, STRIP), members, queue_depth=8,
                          cache_sectors=8 * 1024, write_policy="write-back",
                          flush_interval=flush_interval, destage_idle=0.05)
    log = []
    ctrl.probe = lambda kind, now, value: log.append((kind, now, value))
    return ctrl, log


def _steady_reads_and_one_write(ctrl, until):
    """A 4 KiB write at t=0, then one read always outstanding (each a cache miss, 10 ms
    at a member) until ``until``: the controller never idles, and 1 of its 1024 lines
    is dirty, far below the high-water mark."""
    ctrl.submit(_Rq(0, 8, True), 0.0)
    sector = [1 << 20]

    def read(now):
        ctrl.submit(_Rq(sector[0], 8, False), now)
        sector[0] += 4096                    # a new stripe row: always a miss
    read(0.0)
    while True:
        due = ctrl.next_event_time()
        if due is None or due > until:
            return
        for rq in ctrl.pop_completed(due):
            if not rq.write and due < until:
                read(due)


def test_dirty_data_is_written_on_the_timer_below_the_high_water_mark():
    ctrl, log = _controller(flush_interval=1.0)
    _steady_reads_and_one_write(ctrl, until=2.5)
    dirty_at = 4096 / 1e9                        # the data crossed the host link (1 GB/s)
    ticks = [(t, v) for kind, t, v in log if kind == "flush_tick"]
    assert ticks[0] == (pytest.approx(dirty_at + 1.0), 1)   # 1 s after it became dirty
    starts = [t for kind, t, _ in log if kind == "destage_start"]
    assert starts == [ticks[0][0]]               # the timer's destage, and no other
    ends = [(t, v) for kind, t, v in log if kind == "destage_end"]
    # one member write of 10 ms, 8 sectors, behind at most the read that member serves
    assert len(ends) == 1 and ends[0][1] == 8
    assert starts[0] + 0.010 <= ends[0][0] <= starts[0] + 0.020
    assert not ctrl._dirty
    # the next tick found nothing dirty and the timer stopped
    assert ticks[1:] == [(pytest.approx(dirty_at + 2.0), 0)]


def test_without_the_timer_the_line_stays_dirty_while_the_load_lasts():
    ctrl, log = _controller(flush_interval=0.0)
    _steady_reads_and_one_write(ctrl, until=2.5)
    assert [kind for kind, _, _ in log if kind != "dirty"] == []
    assert len(ctrl._dirty) == 1


def test_the_preset_gives_the_timer_and_a_table_can_turn_it_off():
    r = raid_config({"controller": "perc5i", "level": "raid0", "members": 2}, "t.toml", ".")
    assert r.flush_interval == 4.0
    assert r.table()["flush_interval"] == "4.0s"
    off = raid_config({"controller": "perc5i", "level": "raid0", "members": 2,
                       "flush_interval": 0}, "t.toml", ".")
    assert off.flush_interval == 0.0 and off.table()["flush_interval"] == "0.0s"
    plain = raid_config({"level": "raid0", "members": 2}, "t.toml", ".")
    assert plain.flush_interval == 0.0 and "flush_interval" not in plain.table()


@pytest.mark.parametrize("value, message", [
    (-1, "t.toml: flush_interval: expected a time.*not negative.*found -1"),
    ("300s", "flush_interval expected 0 \\(no timer\\) or whole seconds from 1s to 255s, "
             "found '300s'"),
    # a period below the firmware's whole second (a fuzzed 1e-300 ran without end)
    (1e-300, "flush_interval expected 0 \\(no timer\\) or whole seconds"),
    ("1500ms", "flush_interval expected 0 \\(no timer\\) or whole seconds"),
    ("soon", "t.toml: .*flush_interval"),
])
def test_a_bad_flush_interval_names_the_key(value, message):
    with pytest.raises(ConfigError, match=message):
        raid_config({"level": "raid0", "members": 2, "flush_interval": value}, "t.toml", ".")


def test_the_controller_refuses_a_negative_interval():
    with pytest.raises(DeviceError, match="flush_interval"):
        _controller(-1.0)
