"""Which page of a database a transaction touches: uniform, Zipf-skewed, or a hot set.

Skewed choices are made over *ranks* (rank 0 the most popular) and a rank is scattered to
a page by a fixed permutation, so that popular pages lie all over the data files as hot
rows of real tables do, rather than side by side at their start.
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


class PageChooser:
    """Draws page numbers 0..pages-1: ``uniform``, ``zipf`` (``theta``) or ``hotset``
    (``hot_access`` per cent of accesses go to ``hot_data`` per cent of the pages)."""

    def __init__(self, pages: int, access: str, theta: float = 0.99,
                 hot_access: float = 80.0, hot_data: float = 20.0) -> None:
        self.pages = pages
        self.access = access
        self.scatter = Scatter(pages)
        if access == "zipf":
            self._zipf = ZipfRanks(pages, theta)
        self.hot_pages = max(1, min(pages, round(pages * hot_data / 100.0)))
        self.hot_share = hot_access / 100.0

    def draw(self, rng) -> int:
        """One page, drawn with ``rng`` (a `random.Random`)."""
        if self.access == "uniform":
            return rng.randrange(self.pages)
        if self.access == "zipf":
            return self.scatter(self._zipf.draw(rng.random()))
        if rng.random() < self.hot_share or self.hot_pages == self.pages:
            rank = rng.randrange(self.hot_pages)
        else:
            rank = self.hot_pages + rng.randrange(self.pages - self.hot_pages)
        return self.scatter(rank)
