"""A one-line progress display on a terminal: simulated time and requests done."""

from __future__ import annotations

import sys
import time


class Progress:
    """Redraws ``simulated 12.3 s / 60.0 s  requests 123,456`` on stderr.

    Nothing is drawn during the first ``delay`` wall seconds, so short runs stay
    quiet; redraws are at most every 0.2 s.
    """

    def __init__(self, label: str, duration: float | None, stream=None, delay: float = 1.0) -> None:
        self.label = label
        self.duration = duration
        self.stream = stream or sys.stderr
        self.t0 = time.monotonic()
        self.delay = delay
        self.last = 0.0
        self.drawn = False

    @staticmethod
    def wanted(quiet: bool, stream=None) -> bool:
        """True when a bar should be shown: not quiet and the stream is a terminal."""
        stream = stream or sys.stderr
        return not quiet and hasattr(stream, "isatty") and stream.isatty()

    def _line(self, now: float, done: int) -> str:
        total = f" / {self.duration:.1f} s" if self.duration else ""
        pct = ""
        if self.duration:
            frac = min(1.0, now / self.duration)
            filled = int(frac * 20)
            pct = f" [{'#' * filled}{'.' * (20 - filled)}] {frac * 100:3.0f}%"
        return f"\r{self.label}: simulated {now:.1f} s{total}{pct}  requests {done:,}"

    def update(self, now: float, done: int) -> None:
        """Redraw if enough wall time has passed."""
        t = time.monotonic()
        if t - self.t0 < self.delay or t - self.last < 0.2:
            return
        self.last = t
        self.drawn = True
        self.stream.write(self._line(now, done))
        self.stream.flush()

    def finish(self, now: float, done: int) -> None:
        """Draw the final state and end the line, if anything was drawn."""
        if self.drawn:
            self.stream.write(self._line(now, done) + "\n")
            self.stream.flush()
