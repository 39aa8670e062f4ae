"""Which page of a database a transaction touches: uniform, Zipf-skewed, or a hot set.

Skewed choices are made over *ranks* (rank 0 the most popular) and a rank is scattered to
a page by a fixed permutation, so that popular pages lie all over the data files as hot
rows of real tables do, rather than side by side at their start.
"""

from __future__ import annotations

from blksim.traces.distributions import Scatter, ZipfRanks


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
