"""A resource booked by intervals: a flash channel, a PCIe link direction, a SATA link.

A transfer is booked when its data is known to be ready, which may be in the future
(a read's data leaves the die after tR). Booking in the order requests arrive rather
than the order their data becomes ready would make an early transfer wait behind a
later one, so the timeline keeps its busy intervals and puts each transfer in the first
gap, at or after its ready time, long enough to hold it (first fit). Intervals never
overlap: the resource carries one transfer at a time. Intervals that ended before the
current time are dropped, and touching intervals are merged, so the lists stay short.
"""

from __future__ import annotations


class Timeline:
    """Busy intervals of one resource; ``busy`` is the total booked time (seconds)."""

    __slots__ = ("starts", "ends", "busy")

    def __init__(self) -> None:
        self.starts: list = []
        self.ends: list = []
        self.busy = 0.0

    def book(self, ready: float, duration: float, now: float) -> float:
        """Book ``duration`` seconds in the first gap at or after ``ready`` (>= ``now``);
        returns the end of the booked interval."""
        starts = self.starts
        ends = self.ends
        while ends and ends[0] <= now:          # finished: forget
            del starts[0]
            del ends[0]
        self.busy += duration
        n = len(ends)
        if not n or ready >= ends[-1]:          # after everything booked: the common case
            if n and ends[-1] == ready:
                ends[-1] = ready + duration
            else:
                starts.append(ready)
                ends.append(ready + duration)
            return ready + duration
        # the first interval still busy at ready (a bisection written out: PyPy runs
        # it as a loop of this function's trace, cheaper than a call to bisect_right)
        i = 0
        hi = n - 1                              # ends[n - 1] > ready: the answer is below
        while i < hi:
            mid = (i + hi) >> 1
            if ready < ends[mid]:
                hi = mid
            else:
                i = mid + 1
        t = ready
        while i < n:
            if t + duration <= starts[i]:
                break
            e = ends[i]
            if e > t:
                t = e
            i += 1
        end = t + duration
        # insert [t, end) before interval i, merging with the neighbours it touches
        if i > 0 and ends[i - 1] == t:
            if i < n and starts[i] == end:
                ends[i - 1] = ends[i]
                del starts[i]
                del ends[i]
            else:
                ends[i - 1] = end
        elif i < n and starts[i] == end:
            starts[i] = t
        else:
            starts.insert(i, t)
            ends.insert(i, end)
        return end

    def free_at(self) -> float:
        """When the last booked interval ends (0 when none)."""
        return self.ends[-1] if self.ends else 0.0
