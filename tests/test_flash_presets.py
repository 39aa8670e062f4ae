"""The flash presets: every value present and sourced, the geometry holding the
capacity, and the model against each data sheet's figures under the data sheet's
conditions (within 15 %; where the model is out of reach without tuning, the test is
an expected failure that states the measured figure and why).

Each drive runs in a smaller build (fewer blocks per plane: the same channels, dies,
planes, times and over-provisioning, so the same parallelism) to keep the tests fast.
"""

from __future__ import annotations

import random
import re

import pytest

from blksim.disk_models.flash.spec import build_spec
from blksim.disk_models.flash_presets import (FLASH_PRESET_DIR, list_flash_presets,
                                              load_flash_preset)
from tests.flash_helpers import Rq, drive, run_closed

PRESETS = ["optanep4800x375g", "samsung870evo1tb", "samsung980pro1tb", "samsungpm9a3_7t68"]
SMALL = {"samsung980pro1tb": 128, "samsungpm9a3_7t68": 64, "samsung870evo1tb": 128,
         "optanep4800x375g": 64}


def spec_of(name, **tuning):
    return build_spec(load_flash_preset(name), {"blocks_per_plane": SMALL[name], **tuning},
                      "[device]", name)


def test_the_four_presets_are_listed():
    assert list_flash_presets() == PRESETS


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_value_has_a_source(name):
    text = (FLASH_PRESET_DIR / f"{name}.toml").read_text()
    preset = load_flash_preset(name)
    assert preset["source"] and preset["description"] and preset["datasheet"]
    # every assignment outside [datasheet] carries a comment, or its table's header does
    table_commented = False
    for line in text.splitlines():
        if line.startswith("["):
            table_commented = "#" in line
            continue
        if re.match(r"^[a-z_]+ = ", line) and not line.startswith(("name", "description",
                                                                            "source")):
            assert "#" in line or table_commented, f"{name}: no source for {line!r}"
    spec = build_spec(preset, {}, "[device]", name)
    assert spec.flash_geometry.physical_bytes >= spec.capacity_sectors * 512
    assert 0 <= spec.over_provisioning < 0.5


# ---------------------------------------------------------------- data sheets
def _rand(spec, op, seed=1):
    rng = random.Random(seed)
    n = spec.capacity_sectors // 8
    return lambda i, th: Rq(op, rng.randrange(n) * 8, 8, hctx=th % spec.hw_queues)


def _seq(spec, op, sectors):
    n = spec.capacity_sectors // sectors
    return lambda i, th: Rq(op, (i % n) * sectors, sectors, hctx=th % spec.hw_queues)


def _rate(spec, state, make, depth, threads, count):
    done, end = run_closed(drive(spec, state), make, depth, count, threads)
    return len(done) / end


def random_read(name, depth, threads=1):
    spec = spec_of(name)
    return _rate(spec, "full", _rand(spec, 0), depth, threads, max(3000, 12 * depth * threads))


def random_write(name, depth, threads=1):
    """Within the SLC cache (a fresh drive) where the drive has one."""
    spec = spec_of(name)
    return _rate(spec, "fresh", _rand(spec, 1), depth, threads, max(3000, 12 * depth * threads))


def seq_mb_s(name, op, state):
    """128 KiB at QD32, one thread, the rate over the second half of the run. Writes:
    less than the SLC cache holds, with an 8 MiB write buffer (the preset's is blksim's
    choice) so that the small build's cache sees the sustained rate, not the buffer's."""
    spec = spec_of(name, **({"write_buffer": "8m"} if op == 1 else {}))
    done, end = run_closed(drive(spec, state), _seq(spec, op, 256), 32, 1500)
    later = done[len(done) // 2:]
    return len(later) * 131072 / (end - done[len(done) // 2 - 1].t_done) / 1e6


def latency_us(name, op):
    return 1e6 / random_read(name, 1) if op == 0 else 1e6 / random_write(name, 1)


NO_FIRMWARE = ("the model has no controller limit: firmware time is 0 (not published) and "
               "the flash and link alone allow more")
CASES = [
    # (preset, data-sheet key, how to measure, expected-failure reason or None)
    ("samsung980pro1tb", "random_read_qd1_iops", lambda: random_read("samsung980pro1tb", 1),
     None),
    ("samsung980pro1tb", "random_read_qd32_iops",
     lambda: random_read("samsung980pro1tb", 32, 16),
     "measured ~637,000: 32 dies x one 4 KiB read per (45 us + 2.9 us) = 668,000 is the "
     "preset geometry's bound (its die count is blksim's choice)"),
    ("samsung980pro1tb", "random_write_qd32_iops",
     lambda: random_write("samsung980pro1tb", 32, 16),
     "measured ~1,750,000 (the PCIe link's 4 KiB rate): " + NO_FIRMWARE),
    ("samsung980pro1tb", "seq_read_mb_s", lambda: seq_mb_s("samsung980pro1tb", 0, "full"),
     None),
    ("samsung980pro1tb", "seq_write_mb_s", lambda: seq_mb_s("samsung980pro1tb", 1, "fresh"),
     "measured ~6,050 (+21 %): 32 dies x 2 planes x 16 KiB per SLC program (150 us, "
     "blksim's choice: tPROG / 3) + transfer; " + NO_FIRMWARE),
    ("samsungpm9a3_7t68", "random_read_iops", lambda: random_read("samsungpm9a3_7t68", 32, 8),
     "measured ~1,660,000: 128 dies allow it; " + NO_FIRMWARE),
    ("samsungpm9a3_7t68", "seq_read_mb_s", lambda: seq_mb_s("samsungpm9a3_7t68", 0, "full"),
     None),
    ("samsungpm9a3_7t68", "seq_write_mb_s", lambda: seq_mb_s("samsungpm9a3_7t68", 1, "fresh"),
     "measured ~7,150 (the PCIe link): a fresh drive with power-loss protection takes writes "
     "at link speed; " + NO_FIRMWARE),
    ("samsung870evo1tb", "random_read_qd1_iops", lambda: random_read("samsung870evo1tb", 1),
     "measured ~18,200: tR 45 us + transfers; the drive's 77 us include controller and ECC "
     "time the model does not have (firmware time 0, not published)"),
    ("samsung870evo1tb", "random_write_qd1_iops", lambda: random_write("samsung870evo1tb", 1),
     "measured ~140,000: a buffered write costs only its SATA transfer; " + NO_FIRMWARE),
    ("samsung870evo1tb", "random_read_qd32_iops", lambda: random_read("samsung870evo1tb", 32),
     "measured ~119,000 (+22 %): the SATA link's 4 KiB rate with NCQ; " + NO_FIRMWARE),
    ("samsung870evo1tb", "random_write_qd32_iops", lambda: random_write("samsung870evo1tb", 32),
     "measured ~141,000: the SATA link's 4 KiB rate; " + NO_FIRMWARE),
    ("samsung870evo1tb", "seq_read_mb_s", lambda: seq_mb_s("samsung870evo1tb", 0, "full"),
     None),
    ("samsung870evo1tb", "seq_write_mb_s", lambda: seq_mb_s("samsung870evo1tb", 1, "fresh"),
     None),
    ("optanep4800x375g", "random_read_qd16_iops", lambda: random_read("optanep4800x375g", 16),
     "measured ~841,000 (the PCIe 3.0 x4 link's 4 KiB rate): the media times are blksim's "
     "choice and " + NO_FIRMWARE),
    ("optanep4800x375g", "random_write_qd16_iops", lambda: random_write("optanep4800x375g", 16),
     "measured ~856,000 (the link): " + NO_FIRMWARE),
    ("optanep4800x375g", "seq_read_mb_s", lambda: seq_mb_s("optanep4800x375g", 0, "full"),
     "measured ~3,570 (the PCIe 3.0 x4 link): " + NO_FIRMWARE),
    ("optanep4800x375g", "seq_write_mb_s", lambda: seq_mb_s("optanep4800x375g", 1, "full"),
     "measured ~3,570 (the link): " + NO_FIRMWARE),
]


@pytest.mark.parametrize("name, key, measure, xfail", CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_datasheet_figures_within_15_percent(name, key, measure, xfail):
    expected = load_flash_preset(name)["datasheet"][key]
    got = measure()
    if xfail:
        if abs(got / expected - 1) <= 0.15:
            pytest.fail(f"{name} {key}: now within 15 % ({got:,.0f} vs {expected:,}): "
                        f"drop the expected failure")
        pytest.xfail(f"{name} {key}: {xfail}")
    assert got == pytest.approx(expected, rel=0.15), f"{name} {key}: {got:,.0f}"


def test_optane_latency_below_the_data_sheet_bound():
    ds = load_flash_preset("optanep4800x375g")["datasheet"]
    assert latency_us("optanep4800x375g", 0) < ds["latency_read_us_max"]


@pytest.mark.xfail(strict=True, reason="measured ~11.3 us: the media write time (5 us) is "
                   "blksim's choice and the drive has no buffer: the write waits for it")
def test_optane_write_latency_below_the_data_sheet_bound():
    ds = load_flash_preset("optanep4800x375g")["datasheet"]
    assert latency_us("optanep4800x375g", 1) < ds["latency_write_us_max"]


@pytest.mark.slow
def test_pm9a3_steady_random_write_within_15_percent():
    """The data sheet's random write is steady state: a 'steady' start (full, then
    overwritten at random, set up directly), 8 threads x QD32, the rate over the second
    half of 400,000 writes (the first absorb the background collector's catching up).
    A larger build (256 blocks per plane): the FTL's reserve of a few blocks per plane
    must be small beside the over-provisioning for the write amplification to be the
    drive's."""
    spec = build_spec(load_flash_preset("samsungpm9a3_7t68"), {"blocks_per_plane": 256},
                      "[device]", "samsungpm9a3_7t68")
    done, end = run_closed(drive(spec, "steady"), _rand(spec, 1), 32, 400000, 8)
    k = len(done) // 2
    rate = (len(done) - k) / (end - done[k - 1].t_done)
    expected = spec.datasheet["random_write_iops"]
    assert rate == pytest.approx(expected, rel=0.15), f"{rate:,.0f}"
