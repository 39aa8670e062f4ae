"""A flash disk's figures over a run: its counters over the measured window, its garbage-
collection intervals, and the latency tail that garbage collection causes.

The drive (`blksim.disk_models.flash.drive.FlashDrive`) keeps its own counters from the
start of the run (after preconditioning) and the last ``GC_INTERVALS_KEPT`` GC intervals
(start, end, die). A `FlashWatch` sits beside one flash disk's queue:

* at ramp_time it takes the counters (`counters`), so that results.json can give write
  amplification, GC runs, GC time, erases and flash operations over the measured window
  (ramp_time to the end of the simulation) beside the drive's whole-run figures;
* it is the queue's ``block_bio_complete`` subscriber: a completed read bio (``op`` 0,
  queued at or after ramp_time) whose device time (``t_dispatch`` to ``t_complete``)
  overlapped a GC interval on any die goes to the "during GC" latency histogram, every
  other measured read to "other". The test is made at completion, where it is exact:
  every GC run that began before the read completed has either ended (it is in the
  drive's interval list, whose ends never decrease, so the scan from the newest stops at
  the first that ended before the read was dispatched) or is still running on its die.
  Only the two streaming histograms grow (buckets, constant memory): no per-request
  data is kept (blksim's choice: the cheap and exact way).

GC intervals include SLC-cache folds: the drive runs a fold as a GC job (move the valid
pages, erase), and it occupies the die the same way (docs/flash.md).
"""

from __future__ import annotations

from array import array

from blksim.common.histogram import StreamingHistogram, latency_ms

#: Counters of the drive read at ramp_time and at the end (name -> (object, attribute)):
#: the FTL's and the back end's public counters.
_FTL_COUNTERS = ("host_pages_written", "gc_pages_written", "erases")
_BACKEND_COUNTERS = ("gc_foreground_runs", "gc_background_runs", "folds", "gc_time",
                     "flash_reads", "flash_programs")
#: Busy time per die and channel (s, booked when an operation starts): counters key ->
#: the key of ``measured.utilisation``.
_BUSY = {"die_busy": "dies", "channel_busy": "channels"}
#: Reads buffered before their latencies are folded into the histograms.
_BATCH = 4096


def is_flash(device) -> bool:
    """Whether ``device`` is a flash drive with the figures a `FlashWatch` reads."""
    return hasattr(device, "gc_intervals") and hasattr(device, "backend")


def counters(drive) -> dict:
    """The drive's cumulative counters now (numbers, for differences)."""
    ftl, backend = drive.ftl, drive.backend
    out = {k: getattr(ftl, k, 0) for k in _FTL_COUNTERS}
    out.update({k: getattr(backend, k) for k in _BACKEND_COUNTERS})
    out["die_busy"] = [d.busy for d in backend.dies]
    out["channel_busy"] = [c.busy for c in backend.channels]
    return out


class FlashWatch:
    """One flash disk's measured-window counters and GC latency tail (module docstring).

    ``drive``: the `FlashDrive`; ``start``: ramp_time (s). Call `start_measuring` at
    ramp_time (at 0 the counters taken now are those of the start); subscribe
    `bio_completed` to the disk's ``block_bio_complete``."""

    __slots__ = ("drive", "start", "at_start", "_backend", "_intervals", "_dies", "_gc",
                 "_other", "gc_hist", "other_hist", "_running_key", "_running_start")

    def __init__(self, drive, start: float = 0.0) -> None:
        self.drive = drive
        self.start = start
        # the counters when measurement began; None until then (a ramp_time the run never
        # reached: the measured window is empty)
        self.at_start = counters(drive) if start <= 0 else None
        self._backend = drive.backend
        self._intervals = drive.backend.gc_intervals     # (start, end, die), ends ascending
        self._dies = drive.backend.dies
        # the earliest start of a GC run still going, kept until a run starts or ends
        self._running_key = None
        self._running_start = None
        self._gc = array("d")        # Q2C (s) of reads that overlapped GC, not yet folded
        self._other = array("d")
        self.gc_hist = StreamingHistogram()
        self.other_hist = StreamingHistogram()

    def start_measuring(self, _event=None) -> None:
        """Take the counters at ramp_time (a clock callback)."""
        self.at_start = counters(self.drive)

    def overlaps_gc(self, t0: float, t1: float) -> bool:
        """Whether [t0, t1] overlaps a GC interval on any die: one that ended after t0 and
        began before t1, or one still running that began before t1."""
        for s, e, _die in reversed(self._intervals):
            if e <= t0:
                break
            if s < t1:
                return True
        first = self._first_running()
        return first is not None and first < t1

    def _first_running(self):
        """The earliest start of a GC run (or fold) still going on any die, None if none.
        The set of running runs changes only when one starts (a run counter grows) or
        ends (the GC time grows), so the dies are scanned again only then."""
        b = self._backend
        key = (b.gc_foreground_runs + b.gc_background_runs + b.folds, b.gc_time)
        if key != self._running_key:
            self._running_key = key
            starts = [d.gc.start for d in self._dies if d.gc is not None]
            self._running_start = min(starts) if starts else None
        return self._running_start

    def bio_completed(self, q, bio, now) -> None:
        """Sort one completed read bio into the GC or the other histogram (the disk's
        ``block_bio_complete`` subscriber; ``q`` and ``now`` unused)."""
        if bio.op != 0 or bio.nr_sectors == 0 or bio.t_queue < self.start:
            return
        q2c = bio.t_complete - bio.t_queue
        into = self._gc if self.overlaps_gc(bio.t_dispatch, bio.t_complete) else self._other
        into.append(q2c)
        if len(into) >= _BATCH:
            self._fold()

    def _fold(self) -> None:
        import numpy as np
        for buf, hist in ((self._gc, self.gc_hist), (self._other, self.other_hist)):
            if buf:
                # a copy: the view would pin the buffer, which is emptied for reuse
                hist.add_many(np.frombuffer(buf, dtype=np.float64).copy())
                del buf[:]

    def gc_tail(self) -> dict:
        """Q2C of the measured reads during GC and of the others: count, mean, p50, p99,
        p99.9 (``p999_ms``) and max in ms (None for an empty group)."""
        self._fold()
        out = {}
        for name, hist in (("during_gc", self.gc_hist), ("other", self.other_hist)):
            s = hist.summary()
            s["p999"] = hist.percentile(99.9) if hist.n else None
            out[name] = {"reads": hist.n,
                         **latency_ms(s, ("mean", "p50", "p99", "p999", "max"), "_ms")}
        return out

    def measured(self, start_s: float, end_s: float) -> dict:
        """The drive's counters over [start_s, end_s] (ramp_time to the end): differences
        of `counters`; GC time also as a share of the dies' time; each die's and channel's
        busy share of the window; ratios None when the window is empty or no host page
        was written in it."""
        now = counters(self.drive)
        before = self.at_start if self.at_start is not None else now
        d = {k: now[k] - before[k] for k in now if k not in _BUSY}
        window = max(0.0, end_s - start_s) if self.at_start is not None else 0.0
        util = {}
        for key, name in _BUSY.items():
            util[name] = [round(min(1.0, (a - b) / window), 4)
                          for a, b in zip(now[key], before[key])] if window > 0 else None
        host = d["host_pages_written"]
        dies = len(self._dies)
        return {
            "start_s": round(start_s, 9), "end_s": round(end_s, 9),
            "host_pages_written": host, "gc_pages_written": d["gc_pages_written"],
            "write_amplification": round((host + d["gc_pages_written"]) / host, 4)
            if host else None,
            "gc_runs": d["gc_foreground_runs"] + d["gc_background_runs"],
            "gc_foreground_runs": d["gc_foreground_runs"],
            "gc_background_runs": d["gc_background_runs"],
            "slc_folds": d["folds"],
            "gc_time_s": round(d["gc_time"], 9),
            "gc_time_pct_of_die_time": round(100.0 * d["gc_time"] / (window * dies), 4)
            if window > 0 and dies else None,
            "erases": d["erases"],
            "flash_reads": d["flash_reads"], "flash_programs": d["flash_programs"],
            "utilisation": util,
        }

    def figures(self, sim_time: float) -> dict:
        """What results.json adds beside the drive's own ``figures`` (docs/results.md):
        ``gc_intervals`` (bounded, whole run), ``measured`` and ``gc_tail``."""
        from blksim.disk_models.flash.backend import GC_INTERVALS_KEPT
        return {"gc_intervals": [[round(s, 9), round(e, 9), die]
                                 for s, e, die in self.drive.gc_intervals()],
                "gc_intervals_kept": GC_INTERVALS_KEPT,
                "measured": self.measured(self.start, sim_time),
                "gc_tail": self.gc_tail()}
