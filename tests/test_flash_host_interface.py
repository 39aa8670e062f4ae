"""NVMe submission queues, their arbitration and command fetch; the PCIe and SATA links."""

from __future__ import annotations

import pytest

from blksim.disk_models.flash.host_interface import (NvmeInterface, SataInterface,
                                                     pcie_bytes_per_s)
from tests.flash_helpers import Rq, collect, drive, run_closed, tiny

US = 1e-6


def _names(order):
    return [rq.tag for rq in order]


def _fill(hi, queues):
    """Queue commands named e.g. 'a1' in SQ 0 ... while the engine is busy."""
    hi.fetch_free = 1.0                      # busy: everything waits for the arbiter
    for sq, names in enumerate(queues):
        for name in names:
            hi.submit(Rq(0, tag=name), sq, 0.0)


def test_round_robin_with_burst_two_across_two_sqs():
    hi = NvmeInterface(2, fetch_s=1 * US, gen=4, lanes=4, burst=2)
    _fill(hi, [["a1", "a2", "a3", "a4", "a5"], ["b1", "b2", "b3"]])
    assert hi.arbitration_due() == 1.0
    fetched = hi.arbitrate(0.5)
    # SQ0 two, SQ1 two, SQ0 two, SQ1 one, SQ0 one
    assert _names(rq for rq, _ in fetched) == ["a1", "a2", "b1", "b2", "a3", "a4", "b3", "a5"]
    assert [t for _, t in fetched] == pytest.approx([1.0 + k * US for k in range(1, 9)])
    assert hi.arbitration_due() is None


def test_round_robin_burst_one_alternates_and_remembers_its_place():
    hi = NvmeInterface(3, fetch_s=0.0, gen=4, lanes=4, burst=1)
    _fill(hi, [["a1", "a2"], [], ["c1", "c2", "c3"]])
    assert _names(rq for rq, _ in hi.arbitrate(1.0)) == ["a1", "c1", "a2", "c2", "c3"]
    _fill(hi, [["a3"], ["b1"], ["c4"]])
    # the last turn ended after SQ2 had it: the next round starts at SQ0
    assert _names(rq for rq, _ in hi.arbitrate(1.0)) == ["a3", "b1", "c4"]


def test_weighted_round_robin_urgent_first_then_weighted_classes():
    hi = NvmeInterface(4, fetch_s=0.0, gen=4, lanes=4, arbitration="wrr", burst=1,
                       classes=("urgent", "high", "medium", "low"), weights=(3, 2, 1))
    _fill(hi, [["u1", "u2"], ["h1", "h2", "h3", "h4"], ["m1", "m2", "m3"], ["l1", "l2"]])
    order = _names(rq for rq, _ in hi.arbitrate(1.0))
    # urgent strictly first; then turns of 3 high, 2 medium, 1 low
    assert order == ["u1", "u2", "h1", "h2", "h3", "m1", "m2", "l1", "h4", "m3", "l2"]


def test_a_command_is_fetched_at_once_when_the_engine_is_free():
    hi = NvmeInterface(1, fetch_s=2 * US, gen=4, lanes=4)
    assert hi.submit(Rq(0), 0, 5.0) == pytest.approx(5.0 + 2 * US)
    assert hi.submit(Rq(0), 0, 5.0) is None          # engine busy: waits for the arbiter
    assert hi.arbitration_due() == pytest.approx(5.0 + 2 * US)


def test_pcie_rates_follow_generation_lanes_and_tlp_overhead():
    assert pcie_bytes_per_s(3, 4) == pytest.approx(4 * 8e9 * 128 / 130 / 8 * 256 / 282)
    assert pcie_bytes_per_s(4, 4) == pytest.approx(2 * pcie_bytes_per_s(3, 4))
    assert pcie_bytes_per_s(2, 1) == pytest.approx(5e9 * 0.8 / 8 * 256 / 282)


def test_sata_link_carries_one_fis_at_a_time():
    hi = SataInterface()
    t_cmd = hi.submit(Rq(0), 0, 0.0)
    assert t_cmd == pytest.approx((20 + 28) / 600e6)
    # two reads' data ready at the same time: the second waits for the first's FISes
    e1 = hi.to_host(1e-3, 4096, 0.0)
    e2 = hi.to_host(1e-3, 4096, 0.0)
    one = (28 + 28 + 4096 + 28 + 8 + 28) / 600e6
    assert e1 == pytest.approx(1e-3 + one)
    assert e2 == pytest.approx(1e-3 + 2 * one)


def test_sata_drive_has_one_queue_of_32_and_is_capped_by_600_mb_s():
    spec = tiny(interface="sata", channel_mts=2000)     # flash faster than the link
    assert (spec.hw_queues, spec.queue_depth) == (1, 32)
    dev = drive(spec, "full")
    # 128 KiB sequential reads at depth 32: the link, not the flash, is the limit
    n = spec.capacity_sectors // 256

    def make(i, th):
        return Rq(0, (i % n) * 256, 256, hctx=None)
    done, end = run_closed(dev, make, 32, 400)
    mb_s = len(done) * 131072 / end / 1e6
    per = (28 + 131072 + 16 * 28 + 36 + 20 + 28) / 600e6
    assert mb_s == pytest.approx(131072 / per / 1e6, rel=0.03)
    assert mb_s < 600


def test_nvme_queue_pairs_follow_the_hardware_queue_of_each_request():
    spec = tiny(io_queues=2, command_fetch="1us")
    dev = drive(spec, "full")
    assert dev.nr_hw_queues == 2 and dev.queue_depth == 1023
    for i in range(3):
        dev.submit(Rq(0, 8 * i, 8, hctx=i % 2, tag=i), 0.0)
    assert [len(q) for q in dev.hi.sqs] == [1, 1]    # the first fetched at once
    done = collect(dev)
    assert sorted(r.tag for r in done) == [0, 1, 2]
