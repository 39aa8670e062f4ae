"""A one-line progress bar on a terminal (tqdm): simulated time, share of the run, requests done."""

from __future__ import annotations

import sys
import time


class Progress:
    """Draws ``deadline: simulated 12.3 s / 60.0 s |####      |  21%, requests 123,456``
    on stderr, with tqdm's elapsed and remaining wall time.

    Nothing is drawn during the first ``delay`` wall seconds, so short runs stay
    quiet; redraws are at most every 0.2 s. The engine calls `update` every few
    thousand events, never per request.
    """

    def __init__(self, label: str, duration: float | None, stream=None, delay: float = 1.0) -> None:
        self.label = label
        self.duration = duration
        self.stream = stream or sys.stderr
        self.t0 = time.monotonic()
        self.delay = delay
        self.last = 0.0
        self.bar = None

    @staticmethod
    def wanted(quiet: bool, stream=None) -> bool:
        """True when a bar should be shown: not quiet and the stream is a terminal."""
        stream = stream or sys.stderr
        return not quiet and hasattr(stream, "isatty") and stream.isatty()

    def _open(self):
        from tqdm import tqdm
        if self.duration:
            fmt = ("{desc}: simulated {n:.1f} s / {total:.1f} s |{bar:20}| {percentage:3.0f}%"
                   "{postfix} [{elapsed}<{remaining}]")
        else:
            fmt = "{desc}: simulated {n:.1f} s{postfix} [{elapsed}]"
        return tqdm(desc=self.label, total=self.duration, file=self.stream, bar_format=fmt,
                    mininterval=0.0, leave=True, dynamic_ncols=False)

    def _draw(self, now: float, done: int) -> None:
        if self.bar is None:
            self.bar = self._open()
        self.bar.n = min(now, self.duration) if self.duration else now
        self.bar.set_postfix_str(f"requests {done:,}", refresh=False)
        self.bar.refresh()

    def update(self, now: float, done: int) -> None:
        """Redraw if enough wall time has passed."""
        t = time.monotonic()
        if t - self.t0 < self.delay or t - self.last < 0.2:
            return
        self.last = t
        self._draw(now, done)

    def finish(self, now: float, done: int) -> None:
        """Draw the final state and end the line, if anything was drawn."""
        if self.bar is not None:
            self._draw(now, done)
            self.bar.close()
            self.bar = None
