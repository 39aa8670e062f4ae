"""Seek-time models: a curve fitted to three data-sheet numbers, a measured table, or
Ruemmler and Wilkes's "HPL" equation as DiskSim 4.0 evaluates it.

All expose `time(distance)` in seconds and the plain-float parameters the drive
inlines on its hot path. Fitting uses numpy, once, at load time (bisection rather
than scipy's root finders, so loading a drive does not import scipy).
"""

from __future__ import annotations

import bisect
import math
import weakref

from blksim.disk_models.base import DeviceError


def _bisect_root(f, lo: float, hi: float, xtol: float) -> float:
    """A root of `f` in [lo, hi], where f(lo) and f(hi) differ in sign, to within `xtol`."""
    f_lo = f(lo)
    if f_lo == 0.0:
        return lo
    while hi - lo > xtol:
        mid = 0.5 * (lo + hi)
        f_mid = f(mid)
        if f_mid == 0.0:
            return mid
        if (f_mid < 0.0) == (f_lo < 0.0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


class _SeekModel:
    """What every seek model shares: `by_distance`, its times tabulated once."""

    __slots__ = ("_by_distance", "__weakref__")

    def time(self, distance: int) -> float:
        raise NotImplementedError

    def by_distance(self, cylinders: int) -> list:
        """Seek time (s) for every distance 0..cylinders-1, worked out on the first call and
        kept (a list index is the cheapest lookup on a drive's per-request path)."""
        table = getattr(self, "_by_distance", None)
        if table is None or len(table) != cylinders:
            table = self._by_distance = [self.time(d) for d in range(cylinders)]
        return table


class SeekCurve(_SeekModel):
    """Seek time t(d) = a + b*sqrt(d) for 1 <= d < boundary, c + e*d beyond; t(0) = 0.

    The two pieces meet with equal value and slope at ``boundary``. Given the
    single-cylinder, average and full-stroke times (ms), ``a, b, c, e`` follow
    from t(1) = single, t(cylinders-1) = full and the joint; the boundary is then
    solved so that the mean of t over all seeks between uniformly random
    cylinder pairs (distance >= 1, weight cylinders - d) equals ``avg``.
    """

    __slots__ = ("a", "b", "c", "e", "boundary", "cylinders")

    def __init__(self, single_ms: float, avg_ms: float, full_ms: float, cylinders: int,
                 origin: str = "<dict>") -> None:
        import numpy as np

        self.cylinders = cylinders
        n = cylinders - 1
        d = np.arange(1, cylinders, dtype=float)
        w = (cylinders - d)
        w /= w.sum()
        # running sums over distances 1..k of w, w*sqrt(d) and w*d (index k; 0 at k = 0):
        # the mean for any boundary is then four lookups, not a pass over every distance
        zero = np.zeros(1)
        cum_w = np.concatenate((zero, np.cumsum(w)))
        cum_ws = np.concatenate((zero, np.cumsum(w * np.sqrt(d))))
        cum_wd = np.concatenate((zero, np.cumsum(w * d)))

        def params(boundary):
            rb = math.sqrt(boundary)
            b = (full_ms - single_ms) / (rb / 2.0 + n / (2.0 * rb) - 1.0)
            a = single_ms - b
            e = b / (2.0 * rb)
            c = a + b * rb / 2.0
            return a, b, c, e

        def mean(boundary):
            a, b, c, e = params(boundary)
            k = min(n, max(0, math.ceil(boundary) - 1))    # distances 1..k are below it
            return float(a * cum_w[k] + b * cum_ws[k]
                         + c * (cum_w[n] - cum_w[k]) + e * (cum_wd[n] - cum_wd[k]))

        lo, hi = 1.0 + 1e-9, float(n)
        m_lo, m_hi = mean(lo), mean(hi)
        if not (min(m_lo, m_hi) <= avg_ms <= max(m_lo, m_hi)):
            raise DeviceError(
                f"{origin}: key 'seek.avg_ms': expected a value between {min(m_lo, m_hi):.3f} and "
                f"{max(m_lo, m_hi):.3f} ms (what a sqrt-then-linear curve through single_cyl_ms and "
                f"full_stroke_ms can average over {cylinders} cylinders), found {avg_ms}")
        boundary = _bisect_root(lambda x: mean(x) - avg_ms, lo, hi, 1e-6)
        a, b, c, e = params(boundary)
        # stored in seconds
        self.a, self.b, self.c, self.e = a / 1e3, b / 1e3, c / 1e3, e / 1e3
        self.boundary = boundary

    def time(self, distance: int) -> float:
        """Seek time in seconds for ``distance`` cylinders (0 -> 0.0)."""
        if distance <= 0:
            return 0.0
        if distance < self.boundary:
            return self.a + self.b * math.sqrt(distance)
        return self.c + self.e * distance

    def mean_random(self) -> float:
        """Mean seek time (s) over uniformly random cylinder pairs with distance >= 1."""
        n = self.cylinders
        tot = wsum = 0.0
        for d in range(1, n):
            w = n - d
            tot += w * self.time(d)
            wsum += w
        return tot / wsum


class SeekTable(_SeekModel):
    """Seek time by linear interpolation in measured (distance, ms) points; t(0) = 0.

    Beyond the last point the last segment is extended (or held flat if there is
    only one point).
    """

    __slots__ = ("dist", "secs")

    def __init__(self, points) -> None:
        self.dist = [0] + [int(d) for d, _ in points]
        self.secs = [0.0] + [ms / 1e3 for _, ms in points]

    def time(self, distance: int) -> float:
        """Seek time in seconds for ``distance`` cylinders."""
        if distance <= 0:
            return 0.0
        dist, secs = self.dist, self.secs
        i = bisect.bisect_left(dist, distance)
        if i == len(dist):
            i -= 1
            if i == 1:
                return secs[1]
        d0, d1 = dist[i - 1], dist[i]
        return secs[i - 1] + (secs[i] - secs[i - 1]) * (distance - d0) / (d1 - d0)


class SeekHPL(_SeekModel):
    """t(d) = sqrt_const + sqrt_mult * sqrt(d) for 1 <= d < boundary, linear_const +
    linear_mult * d from the boundary on; t(0) = 0.

    Ruemmler and Wilkes, "An introduction to disk drive modeling", IEEE Computer 27(3),
    1994, with DiskSim 4.0's six "HPL seek equation values" [V1..V6] = boundary, the two
    square-root terms, the two linear terms, and the single-cylinder time (-1: use the
    equation). DiskSim's "hplplus10" replaces distances 1..10 by the ten measured
    "First ten seek times" (``first_ten_ms``). Read from DiskSim's
    diskmodel/mech_g1_seektime.c (``dm_mech_g1_seek_hpl``, ``..._1st10_plus_hpl``).
    """

    __slots__ = ("boundary", "a", "b", "c", "e", "one", "ten")

    def __init__(self, boundary_cyl, sqrt_const_ms, sqrt_mult_ms, linear_const_ms,
                 linear_mult_ms, single_cyl_ms=None, first_ten_ms=()) -> None:
        self.boundary = boundary_cyl
        self.a, self.b = sqrt_const_ms / 1e3, sqrt_mult_ms / 1e3
        self.c, self.e = linear_const_ms / 1e3, linear_mult_ms / 1e3
        self.one = None if single_cyl_ms is None else single_cyl_ms / 1e3
        self.ten = tuple(t / 1e3 for t in first_ten_ms)

    def time(self, distance: int) -> float:
        """Seek time in seconds for ``distance`` cylinders."""
        if distance <= 0:
            return 0.0
        if self.ten and distance <= 10:
            return self.ten[distance - 1]
        if distance == 1 and self.one is not None:
            return self.one
        if distance < self.boundary:
            return self.a + self.b * math.sqrt(distance)
        return self.c + self.e * distance


#: Seek models of the drives alive now, by (seek description, cylinders)
_live_models: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def make_seek(spec) -> SeekCurve | SeekTable | SeekHPL:
    """The seek model a `DriveSpec` describes.

    A model does not change once built, so drives alive at the same time with the same
    seek description and cylinder count share one: the nine like members of an array fit
    their curve, and tabulate it (`by_distance`), once.
    """
    key = (spec.seek, spec.cylinders)
    model = _live_models.get(key)
    if model is None:
        model = _live_models[key] = _build_seek(spec)
    return model


def _build_seek(spec) -> SeekCurve | SeekTable | SeekHPL:
    s = spec.seek
    if s.form == "curve":
        return SeekCurve(s.single_cyl_ms, s.avg_ms, s.full_stroke_ms, spec.cylinders, spec.origin)
    if s.form == "hpl":
        return SeekHPL(s.boundary_cyl, s.sqrt_const_ms, s.sqrt_mult_ms, s.linear_const_ms,
                       s.linear_mult_ms, s.single_cyl_ms, s.first_ten_ms)
    return SeekTable(s.points)
