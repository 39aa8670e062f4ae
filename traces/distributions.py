"""Skewed choices among N places (blocks of a region, pages of a table): Zipf, Pareto,
normal and zoned distributions, as fio's ``random_distribution`` offers them and as the
application models draw pages.

Skewed choices are made over *ranks* (rank 0 the most popular) and scattered to places
by a fixed permutation (`Scatter`), so that popular places lie all over the region as hot
rows of a table do, rather than side by side at its start. (fio scatters its Zipf, Pareto
and normal draws with a hash; a permutation does the same without collisions.)
"""

from __future__ import annotations

import math


class Scatter:
    """A permutation of ``0..n-1``: rank -> page, ``(rank * step + offset) mod n`` with
    ``step`` prime to ``n`` near n times the golden ratio's fraction."""

    def __init__(self, n: int) -> None:
        self.n = n
        step = max(1, int(n * 0.6180339887)) | 1
        while math.gcd(step, n) != 1:
            step += 2
        self.step = step
        self.offset = n // 3

    def __call__(self, rank: int) -> int:
        return (rank * self.step + self.offset) % self.n


def zeta(n: int, theta: float) -> float:
    """The generalised harmonic number sum_{i=1..n} i^-theta: exact for the first 10^5
    terms, the rest by the Euler-Maclaurin formula (error far below 1e-9 relative)."""
    exact = min(n, 100_000)
    total = math.fsum(i ** -theta for i in range(1, exact + 1))
    if n > exact:
        a, b = exact, n

        def integral(x):
            return math.log(x) if theta == 1.0 else x ** (1.0 - theta) / (1.0 - theta)
        total += (integral(b) - integral(a) + (b ** -theta - a ** -theta) / 2.0
                  - theta / 12.0 * (b ** (-theta - 1.0) - a ** (-theta - 1.0)))
    return total


class ZipfRanks:
    """Ranks 0..n-1 with P(rank k) proportional to 1/(k+1)^theta (0 < theta, theta != 1),
    drawn in constant time by the method of Gray et al., "Quickly generating
    billion-record synthetic databases" (SIGMOD 1994), as YCSB draws its keys."""

    def __init__(self, n: int, theta: float) -> None:
        self.n = n
        self.theta = theta
        self.zetan = zeta(n, theta)
        zeta2 = 1.0 + 2.0 ** -theta
        self.alpha = 1.0 / (1.0 - theta)
        self.eta = (1.0 - (2.0 / n) ** (1.0 - theta)) / (1.0 - zeta2 / self.zetan) \
            if n > 2 else 0.0

    def draw(self, u: float) -> int:
        """The rank for a uniform draw ``u`` in [0, 1)."""
        uz = u * self.zetan
        if uz < 1.0:
            return 0
        if uz < 1.0 + 0.5 ** self.theta:
            return 1
        rank = int(self.n * (self.eta * u - self.eta + 1.0) ** self.alpha)
        return min(rank, self.n - 1)



def parse_random_distribution(text) -> tuple:
    """fio's ``random_distribution`` value: ``random``, ``zipf:THETA``, ``pareto:H``,
    ``normal:DEV%`` or ``zoned:ACCESS%/SIZE%:...`` (zones in order, each percentages
    summing to 100). Raises ValueError saying what was expected."""
    if not isinstance(text, str):
        raise ValueError(f"random, zipf:THETA, pareto:H, normal:DEV or zoned:A/S:..., found "
                         f"{text!r}")
    kind, _, arg = text.strip().partition(":")
    if kind == "random" and not arg:
        return ("random",)
    try:
        if kind == "zipf":
            theta = float(arg)
            if not theta > 0 or theta == 1.0:
                raise ValueError
            return ("zipf", theta)
        if kind == "pareto":
            h = float(arg)
            if not 0 < h < 1:
                raise ValueError
            return ("pareto", h)
        if kind == "normal":
            dev = float(arg.rstrip("%"))
            if not 0 < dev <= 100:
                raise ValueError
            return ("normal", dev)
        if kind == "zoned":
            zones = []
            for part in arg.split(":"):
                access, size = part.split("/")
                zones.append((float(access.rstrip("%")), float(size.rstrip("%"))))
            if not zones or any(a < 0 or s <= 0 for a, s in zones) or \
                    not math.isclose(sum(a for a, _ in zones), 100.0) or \
                    not math.isclose(sum(s for _, s in zones), 100.0):
                raise ValueError
            return ("zoned", tuple(zones))
    except ValueError:
        pass
    raise ValueError("random, zipf:THETA (THETA > 0, not 1), pareto:H (0 < H < 1), "
                     "normal:DEV (per cent of the region, 0 < DEV <= 100) or "
                     "zoned:ACCESS/SIZE:... (both summing to 100), found " + repr(text))


def slot_chooser(distribution: tuple, slots: int):
    """A function ``choose(rand)`` -> a slot in ``0..slots-1``, drawing with ``rand`` (a
    ``random.random``-like function) from ``distribution`` (`parse_random_distribution`)."""
    kind = distribution[0]
    if kind == "random" or slots == 1:
        return lambda rand: int(rand() * slots)
    if kind == "zoned":
        cum_access, firsts, sizes, at, acc = [], [], [], 0, 0.0
        for k, (access, size) in enumerate(distribution[1]):
            acc += access
            n = round(slots * size / 100.0) if k < len(distribution[1]) - 1 else slots - at
            n = max(0, min(n, slots - at))
            cum_access.append(acc)
            firsts.append(at)
            sizes.append(n)
            at += n

        def zoned(rand):
            u = rand() * 100.0
            k = 0
            while k < len(cum_access) - 1 and (u >= cum_access[k] or sizes[k] == 0):
                k += 1
            return firsts[k] + int(rand() * max(sizes[k], 1)) if sizes[k] else slots - 1
        return zoned
    scatter = Scatter(slots)
    if kind == "zipf":
        ranks = ZipfRanks(slots, distribution[1])
        return lambda rand: scatter(ranks.draw(rand()))
    if kind == "pareto":
        power = math.log(distribution[1]) / math.log(1.0 - distribution[1])
        last = slots - 1
        return lambda rand: scatter(min(last, int(last * rand() ** power)))
    # normal: the middle of the region, a standard deviation of DEV per cent of it (fio's
    # gauss: a sum of twelve uniform draws)
    middle, dev, last = slots / 2.0, slots * distribution[1] / 100.0, slots - 1

    def normal(rand):
        z = sum(rand() for _ in range(12)) - 6.0
        return scatter(min(last, max(0, int(middle + z * dev))))
    return normal
