"""The controller: the write buffer, FLUSH and FUA with and without power-loss
protection, DISCARD, firmware time -- hand-computed times on the tiny drive.

The tiny drive (tests/flash_helpers.py): 4 KiB mapping units, 4 to a 16 KiB flash page;
the drive keeps each 4-unit group (units 4g..4g+3) on one plane, group g on plane
(0, 4, 2, 6, 1, 5, 3, 7)[g % 8], i.e. dies 0, 2, 1, 3, 0, 2, 1, 3 (dies 0 and 1 on
channel 0, 2 and 3 on channel 1); 4 KiB crosses a channel in 40.96 us; tPROG 500 us;
PCIe gen 3 x4."""

from __future__ import annotations

import pytest

from blksim.disk_models.flash.host_interface import pcie_bytes_per_s
from tests.flash_helpers import Rq, collect, drive, run_open, tiny

US = 1e-6
X4K = 4096 / 100e6
LINK = 1 / pcie_bytes_per_s(3, 4)          # seconds per byte on the host link
MS = 1e-3


def _four_units(dev, t=0.0, fua=False):
    """Writes of units 0, 4, 8, 12 (groups 0..3: dies 0, 2, 1, 3) at ``t``."""
    rqs = [Rq(1, 32 * i, 8, fua=fua, tag=f"w{i}") for i in range(4)]
    for rq in rqs:
        dev.submit(rq, t)
    return rqs


def test_buffered_writes_complete_when_their_data_is_in_dram():
    dev = drive(tiny(plp=False))
    _four_units(dev)
    done = collect(dev, until=0.5 * MS)
    # the link carries them one after another
    assert [r.t_done for r in done] == pytest.approx([(i + 1) * 4096 * LINK for i in range(4)])
    assert dev.buffer.used == 4 and dev.backend.pending_units() == 4   # no full page yet


def test_flush_without_plp_writes_the_buffer_out():
    dev = drive(tiny(plp=False))
    _four_units(dev)
    collect(dev, until=0.5 * MS)
    flush = Rq(2, tag="flush")
    dev.submit(flush, 1 * MS)
    done = collect(dev)
    assert done == [flush]
    # each die programs its one unit (a partial page): dies 0 and 1 share channel 0, so
    # die 1's transfer follows die 0's; then tPROG
    assert flush.t_done == pytest.approx(1 * MS + 2 * X4K + 500 * US)
    assert dev.buffer.used == 0


def test_flush_with_plp_costs_only_the_firmware_time():
    dev = drive(tiny(plp=True, fw_write="3us"))
    _four_units(dev)
    collect(dev, until=0.5 * MS)
    flush = Rq(2)
    dev.submit(flush, 1 * MS)
    (done,) = collect(dev, until=1.01 * MS)
    assert done is flush and flush.t_done == pytest.approx(1 * MS + 3 * US)
    assert dev.backend.pending_units() == 4          # nothing was written out for it


def test_flush_on_an_empty_buffer_completes_at_once():
    dev = drive(tiny(plp=False))
    flush = Rq(2)
    dev.submit(flush, 2 * MS)
    (done,) = collect(dev)
    assert done.t_done == pytest.approx(2 * MS)


def test_fua_write_without_plp_completes_when_programmed_with_plp_when_buffered():
    dev = drive(tiny(plp=False))
    w = Rq(1, 0, 8, fua=True)
    dev.submit(w, 0.0)
    collect(dev)
    assert w.t_done == pytest.approx(4096 * LINK + X4K + 500 * US)
    dev = drive(tiny(plp=True))
    w = Rq(1, 0, 8, fua=True)
    dev.submit(w, 0.0)
    collect(dev, until=0.1 * MS)
    assert w.t_done == pytest.approx(4096 * LINK)


def test_without_a_buffer_a_write_completes_when_programmed():
    dev = drive(tiny(write_buffer=0))
    w = Rq(1, 0, 8)
    dev.submit(w, 0.0)
    collect(dev)
    assert w.t_done == pytest.approx(4096 * LINK + X4K + 500 * US)


def test_writes_wait_for_room_when_the_buffer_is_full():
    spec = tiny(write_buffer="128k")                 # 32 units: a full page per plane
    dev = drive(spec)
    # 48 writes of one unit each, all on plane 0: units 0-3, 32-35, 64-67, ... (groups
    # 0, 8, 16, ...)
    rqs = [Rq(1, 8 * (32 * (i // 4) + i % 4), 8, tag=i) for i in range(48)]
    done = run_open(dev, [(0.0, rq) for rq in rqs])
    assert len(done) == 48
    assert max(r.t_done for r in rqs[:32]) < 200 * US      # in DRAM at once
    # the 33rd waits until the first page (units 0..3, on the link first) is programmed
    first_program = 4 * 4096 * LINK + 4 * X4K + 500 * US
    assert rqs[32].t_done == pytest.approx(first_program + 4096 * LINK)
    assert dev.buffer.peak == 32


def test_a_buffer_smaller_than_a_page_per_plane_programs_partial_pages():
    dev = drive(tiny(write_buffer="16k"))            # 4 units, 8 planes
    rqs = [Rq(1, 8 * i, 8) for i in range(12)]       # units 0..11: every plane
    done = run_open(dev, [(0.0, rq) for rq in rqs])
    assert len(done) == 12                           # no deadlock
    # unit 0 is programmed alone (drain) as soon as its data is in; then the 5th enters
    assert rqs[4].t_done == pytest.approx(4096 * LINK + X4K + 500 * US + 4096 * LINK)


def test_a_rewrite_of_a_buffered_unit_is_absorbed():
    dev = drive(tiny())
    dev.submit(Rq(1, 0, 8), 0.0)
    dev.submit(Rq(1, 0, 8), 0.0)
    collect(dev, until=0.1 * MS)
    assert dev.buffer.used == 1 and dev.backend.pending_units() == 1


def test_a_read_of_a_buffered_unit_is_served_from_dram():
    dev = drive(tiny())
    dev.submit(Rq(1, 0, 8), 0.0)
    collect(dev, until=0.1 * MS)
    r = Rq(0, 0, 8)
    dev.submit(r, 1 * MS)
    collect(dev, until=2 * MS)
    assert r.t_done == pytest.approx(1 * MS + 4096 * LINK)
    assert dev.backend.flash_reads == 0


def test_discard_trims_the_whole_units_inside_its_range_at_firmware_cost():
    dev = drive(tiny(fw_write="2us"), "full")
    d = Rq(3, 4, 20)                                 # sectors 4..23: only unit 1 (8..15) and 2
    dev.submit(d, 0.0)
    (done,) = collect(dev)
    assert done.t_done == pytest.approx(2 * US)
    mapped = [dev.ftl.lookup(dev._ftl_page(u)) >= 0 for u in range(4)]
    assert mapped == [True, False, False, True]
    r = Rq(0, 8, 8)                                  # a trimmed unit reads as zeros
    dev.submit(r, 1 * MS)
    collect(dev)
    assert r.t_done == pytest.approx(1 * MS + 4096 * LINK)


def test_firmware_time_delays_reads_and_writes_separately():
    dev = drive(tiny(fw_read="5us", fw_write="7us"), "full")
    r, w = Rq(0, 0, 8), Rq(1, 8, 8)
    dev.submit(r, 0.0)
    dev.submit(w, 0.0)
    collect(dev, until=1 * MS)
    assert r.t_done == pytest.approx(5 * US + 50 * US + X4K + 4096 * LINK)
    assert w.t_done == pytest.approx(7 * US + 4096 * LINK)


def test_a_mapping_cache_miss_reads_the_translation_page_first():
    from blksim.disk_models.types.flash import make_flash_drive
    import dataclasses
    from blksim.disk_models.types.flash import make_ftl
    spec = tiny(mapping_cache="4k")                  # one translation page of 1024 entries
    ftl = make_ftl(dataclasses.replace(spec, start_state="full"), 0)
    dev = make_flash_drive(spec, ftl=ftl)
    first, again = Rq(0, 0, 8), Rq(0, 8, 8)
    dev.submit(first, 0.0)
    collect(dev)
    dev.submit(again, 1 * MS)
    collect(dev)
    # unit 0's entry and unit 0 itself are both on die 0: the translation read, then it
    assert first.t_done == pytest.approx(2 * (50 * US + X4K) + 4096 * LINK)
    assert again.t_done == pytest.approx(1 * MS + 50 * US + X4K + 4096 * LINK)   # a hit
    assert dev.figures()["mapping_cache_hit_ratio"] == pytest.approx(0.5)
