"""The flash geometry: global numbering, totals, validation and over-provisioning."""

from __future__ import annotations

import pytest

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash.geometry import FlashGeometry, logical_pages

GEO = FlashGeometry(channels=2, chips_per_channel=3, dies_per_chip=2, planes_per_die=2,
                    blocks_per_plane=5, pages_per_block=4, page_bytes=4096)


def test_totals_multiply_out():
    assert (GEO.chips, GEO.dies, GEO.planes, GEO.blocks, GEO.pages) == (6, 12, 24, 120, 480)
    assert GEO.physical_bytes == 480 * 4096
    assert GEO.pages_per_plane == 20
    assert GEO.sectors_per_page == 8


def test_numbering_hand_traced():
    # page 3 of block 57: block 57 is in plane 57 // 5 = 11, die 11 // 2 = 5,
    # chip 5 // 2 = 2, channel 2 // 3 = 0
    ppn = 57 * 4 + 3
    assert GEO.block_of(ppn) == 57
    assert GEO.plane_of(ppn) == 11
    assert GEO.die_of(ppn) == 5
    assert GEO.chip_of_die(5) == 2
    assert GEO.channel_of_die(5) == 0
    # the last die is on the last channel
    assert GEO.channel_of_die(GEO.dies - 1) == 1
    assert GEO.channel_of_die(6) == 1 and GEO.channel_of_die(5) == 0


def test_numbering_is_consistent_for_every_page():
    for ppn in range(GEO.pages):
        b = GEO.block_of(ppn)
        p = GEO.plane_of(ppn)
        assert p == GEO.plane_of_block(b) == b // GEO.blocks_per_plane
        assert GEO.die_of(ppn) == GEO.die_of_plane(p) == p // GEO.planes_per_die
        assert GEO.first_block_of_plane(p) <= b < GEO.first_block_of_plane(p + 1)


@pytest.mark.parametrize("key,value,expected", [
    ("channels", 0, "channels must be a positive integer"),
    ("dies_per_chip", -1, "dies_per_chip must be a positive integer"),
    ("planes_per_die", 1.5, "planes_per_die must be a positive integer"),
    ("page_bytes", 1000, "page_bytes must be a multiple of 512"),
    ("blocks_per_plane", 2, "blocks_per_plane must be at least 4"),
])
def test_validation_names_the_key_on_one_line(key, value, expected):
    kwargs = {**GEO.describe()}
    for derived in ("dies", "planes", "blocks", "physical_bytes"):
        kwargs.pop(derived)
    kwargs[key] = value
    with pytest.raises(DeviceError) as e:
        FlashGeometry(**kwargs).validate("ssd.toml: [device]")
    msg = str(e.value)
    assert msg.startswith("ssd.toml: [device]: ") and expected in msg and "\n" not in msg


def test_logical_pages_is_physical_times_one_minus_op():
    assert logical_pages(GEO, 0.25, "x") == 360
    assert logical_pages(GEO, 0.5, "x") == 240
    assert logical_pages(GEO, 0.07, "x") == int(480 * 0.93)


@pytest.mark.parametrize("op", [0, 0.0, -0.1, 0.51, 1.0, True, "0.1"])
def test_over_provisioning_out_of_range_is_refused(op):
    with pytest.raises(DeviceError) as e:
        logical_pages(GEO, op, "ssd.toml: [device]")
    assert "over_provisioning" in str(e.value) and "\n" not in str(e.value)


def test_cwdp_order_is_channel_first_then_chip_die_plane():
    order = GEO.cwdp_planes()
    assert sorted(order) == list(range(GEO.planes))      # a permutation
    dies = [GEO.die_of_plane(p) for p in order]
    channels = [GEO.channel_of_die(d) for d in dies]
    # consecutive logical pages alternate channels (2 channels)
    assert channels[:6] == [0, 1, 0, 1, 0, 1]
    # the first 6 pages cover every chip (2 channels x 3 chips) before a second die
    assert sorted(GEO.chip_of_die(d) for d in dies[:6]) == list(range(6))
    assert len({d for d in dies[:12]}) == 12              # then every die once
    # plane 1 of a die only after plane 0 of every die
    assert all(p % 2 == 0 for p in order[:12]) and all(p % 2 == 1 for p in order[12:])
    # hand-traced: page 7 -> channel 1, chip 3 // 2 = 1 on it (global chip 4), die 1, plane 0
    assert order[7] == ((1 * 3 + (7 // 2) % 3) * 2 + (7 // 6) % 2) * 2 + 0
