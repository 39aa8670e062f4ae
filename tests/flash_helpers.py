"""Helpers of the flash drive's tests: a tiny preset, fake requests, and loops that
drive a `FlashDrive` as the block layer would (submit while it accepts, collect at
its next event)."""

from __future__ import annotations

import copy
import random

from blksim.disk_models.flash.spec import build_spec
from blksim.disk_models.types.flash import make_flash_drive

#: A tiny drive with round numbers: 2 channels x 1 chip x 2 dies x 2 planes, 32 blocks of
#: 8 flash pages of 16 KiB (4 mapping units each), 20 MiB of its 32 MiB for the host;
#: tR 50 us, tPROG 500 us, tBERS 3 ms; a 100 MT/s channel (4 KiB in 40.96 us); firmware
#: 0; NVMe gen 3 x4. The FTL's CWDP allocation puts logical unit n on plane
#: (0, 4, 2, 6, 1, 5, 3, 7)[n % 8]: dies 0, 2, 1, 3, ... (dies 0 and 1 on channel 0).
TINY = {
    "name": "tiny", "description": "a test drive",
    "interface": "nvme", "pcie_gen": 3, "pcie_lanes": 4, "max_io_queues": 4,
    "max_queue_entries": 1024, "capacity": 20 * 1024 * 1024, "write_buffer": "256k",
    "plp": False, "fw_read_us": 0, "fw_write_us": 0, "command_fetch_us": 0,
    "geometry": {"channels": 2, "chips_per_channel": 1, "dies_per_chip": 2,
                 "planes_per_die": 2, "blocks_per_plane": 32, "pages_per_block": 8,
                 "page_bytes": 16384},
    "nand": {"cell": "tlc", "read_us": 50, "program_us": 500, "erase_us": 3000,
             "slc_read_us": 25, "slc_program_us": 150, "channel_mts": 100,
             "suspend_us": 20, "resume_us": 20},
}


def tiny(**tuning):
    """The tiny preset's spec with ``tuning`` ([device] keys) over it; a key ending in
    ``__nand`` or ``__top`` edits the preset itself."""
    preset = copy.deepcopy(TINY)
    for key in [k for k in tuning if k.endswith("__nand")]:
        preset["nand"][key[:-6]] = tuning.pop(key)
    for key in [k for k in tuning if k.endswith("__top")]:
        preset[key[:-5]] = tuning.pop(key)
    return build_spec(preset, tuning, "test.toml: [device]", "tiny.toml")


def drive(spec, state="fresh", queue_depth=None, seed=0):
    """A `FlashDrive` of ``spec`` whose FTL starts in ``state``."""
    import dataclasses
    from blksim.disk_models.types.flash import make_ftl
    ftl = make_ftl(dataclasses.replace(spec, start_state=state), seed)
    return make_flash_drive(spec, queue_depth=queue_depth, ftl=ftl)


class Hctx:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class Rq:
    """A request as the block layer hands it (op: 0 read, 1 write, 2 flush, 3 discard)."""

    __slots__ = ("sector", "nr_sectors", "write", "op", "fua", "hctx", "t_submit", "t_done",
                 "tag")

    def __init__(self, op, sector=0, nr_sectors=8, fua=False, hctx=0, tag=None):
        self.op = op
        self.write = op in (1, 3)
        self.sector = sector
        self.nr_sectors = 0 if op == 2 else nr_sectors
        self.fua = fua
        self.hctx = Hctx(hctx) if hctx is not None else None
        self.t_submit = None
        self.t_done = None
        self.tag = tag


def collect(dev, until=None):
    """Run the drive's events (no submissions) until idle or ``until``; the requests
    completed, their t_done set."""
    out = []
    while True:
        t = dev.next_event_time()
        if t is None or (until is not None and t > until):
            return out
        for rq in dev.pop_completed(t):
            rq.t_done = t
            out.append(rq)


def run_open(dev, arrivals):
    """Submit ``arrivals`` [(time, rq)] at their times (waiting while the drive is full);
    returns every request completed, in completion order."""
    arrivals = sorted(arrivals, key=lambda a: a[0])
    done = []
    waiting = []
    i = 0
    now = 0.0
    while i < len(arrivals) or waiting or dev.outstanding():
        t_dev = dev.next_event_time()
        t_arr = arrivals[i][0] if i < len(arrivals) else None
        if t_arr is not None and (t_dev is None or t_arr <= t_dev):
            now = t_arr
            waiting.append(arrivals[i][1])
            i += 1
        elif t_dev is not None:
            now = t_dev
            for rq in dev.pop_completed(now):
                rq.t_done = now
                done.append(rq)
        else:
            raise AssertionError("requests waiting and the drive has no event")
        while waiting and dev.can_accept():
            rq = waiting.pop(0)
            rq.t_submit = now
            dev.submit(rq, now)
    return done


def run_closed(dev, make_rq, depth, count, threads=1):
    """``threads`` x ``depth`` requests always outstanding until ``count`` completed;
    ``make_rq(i, thread)`` gives request i. Returns (completed requests, end time)."""
    now = 0.0
    issued = 0
    done = []
    for th in range(threads):
        for _ in range(depth):
            if issued < count:
                rq = make_rq(issued, th)
                rq.tag = th
                rq.t_submit = now
                issued += 1
                dev.submit(rq, now)
    while len(done) < count:
        now = dev.next_event_time()
        assert now is not None, "outstanding requests and no event"
        for rq in dev.pop_completed(now):
            rq.t_done = now
            done.append(rq)
            if issued < count:
                new = make_rq(issued, rq.tag)
                new.tag = rq.tag
                new.t_submit = now
                issued += 1
                dev.submit(new, now)
    return done, now


def random_reads(spec, seed=1, size_sectors=8, hctx=0):
    """make_rq for random aligned reads of ``size_sectors`` over the drive."""
    rng = random.Random(seed)
    n = spec.capacity_sectors // size_sectors

    def make(i, th):
        return Rq(0, rng.randrange(n) * size_sectors, size_sectors, hctx=th % spec.hw_queues
                  if hctx is None else hctx)
    return make


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]

