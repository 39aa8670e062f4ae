"""The drive's controller: firmware time, the DRAM write buffer, FLUSH and FUA.

Firmware: every command costs ``fw_read`` (reads) or ``fw_write`` (writes, flushes,
discards) seconds of controller time before the flash sees it, a fixed delay per
command (blksim's choice: the controller's cores are not modelled as a queue, so the
firmware never limits the rate by itself; see docs/flash.md).

Write buffer (DRAM): a write's mapping units enter the buffer when there is room for
them all (``capacity`` units; a write larger than the whole buffer enters when the
buffer is empty), and the write completes then; otherwise it waits, first come first
served, until programs free room. A unit leaves the buffer when its flash program
ends. A unit written again while still buffered and not yet being programmed is
overwritten in place (no second program). A read of a buffered unit is served from
DRAM. With ``capacity`` 0 there is no buffer: a write completes when its units are
programmed.

Power-loss protection (``plp``): the capacitors let the drive write its buffer out
after power fails, so the buffer counts as non-volatile (e.g. Samsung PM9A3 data
sheet: "Power Loss Protection"):

============  ========================================  =================================
              with PLP                                  without PLP
============  ========================================  =================================
FLUSH         complete after firmware time              complete when every unit buffered
                                                        before it is programmed
FUA write     a normal write                            complete when its units are
                                                        programmed
============  ========================================  =================================

(NVMe Base Specification 2.0, 7.1 "Flush command" and the FUA bit of Write, 3.3.3.2.3;
the kernel sends FLUSH only to a device with a volatile write cache: block/blk-flush.c,
blk_flush_policy.) Units are programmed in the order they entered the buffer within a
plane, so "every unit before it" is a count per plane.
"""

from __future__ import annotations


class Waiter:
    """A request waiting for planes to be programmed up to given counts."""

    __slots__ = ("rq", "targets")

    def __init__(self, rq, targets: dict) -> None:
        self.rq = rq
        self.targets = targets      # plane -> units that must be programmed


class WriteBuffer:
    """The buffer's occupancy and the per-plane program counts FLUSH and FUA wait on.

    ``capacity``: units the buffer holds (0: no buffer); ``used``: units in it;
    ``entered[p]``/``programmed[p]``: units of plane ``p`` queued / programmed so far.
    """

    def __init__(self, capacity: int, planes: int) -> None:
        self.capacity = capacity
        self.used = 0
        self.dirty: dict = {}                  # lpn -> plane, buffered, not yet programming
        self.entered = [0] * planes
        self.programmed = [0] * planes
        self.waiters: list = []                # Waiter
        self.peak = 0

    def has_room(self, units: int) -> bool:
        """Whether a write of ``units`` units may enter now."""
        if self.capacity == 0:
            return True
        return self.used + units <= self.capacity or self.used == 0

    def add(self, units: int) -> None:
        self.used += units
        if self.used > self.peak:
            self.peak = self.used

    def targets_all(self) -> dict:
        """Per plane, the count every unit entered so far reaches (a FLUSH's wait)."""
        return {p: n for p, n in enumerate(self.entered) if n > self.programmed[p]}

    def wait(self, rq, targets: dict) -> bool:
        """Make ``rq`` wait for ``targets``; False when they are already met."""
        targets = {p: n for p, n in targets.items() if n > self.programmed[p]}
        if not targets:
            return False
        self.waiters.append(Waiter(rq, targets))
        return True

    def programmed_units(self, plane: int, units: int) -> None:
        """``units`` of ``plane`` finished programming."""
        self.programmed[plane] += units
        if self.capacity:
            self.used -= units

    def released(self) -> list:
        """The waiting requests whose targets are now met, in the order they waited."""
        if not self.waiters:
            return []
        done = []
        keep = []
        programmed = self.programmed
        for w in self.waiters:
            if all(programmed[p] >= n for p, n in w.targets.items()):
                done.append(w.rq)
            else:
                keep.append(w)
        self.waiters = keep
        return done
