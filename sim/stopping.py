"""Stopping a run on a signal, even where Python drops the exception the signal raised.

The command line turns SIGINT, SIGTERM and SIGHUP into a `Stopped` exception raised
where the program is, so that it unwinds as on Ctrl-C and every output still being
written is discarded. Python runs a signal handler between two bytecodes of whatever
code is running, and that may be a finaliser (a generator closed as it is freed, a
``__del__``): an exception raised there is printed as "Exception ignored" and dropped,
and the run would go on. So the handler also records the request, and the event loop
(`blksim.sim.engine.Simulation.run`) looks at it every few thousand events and raises
it again.
"""

from __future__ import annotations


class Stopped(KeyboardInterrupt):
    """A run stopped by signal ``signum`` (a KeyboardInterrupt, so that it unwinds as
    Ctrl-C does)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_requested: int | None = None


def request_stop(signum: int, _frame=None) -> None:
    """A signal handler: remember the request, and raise `Stopped` here and now."""
    global _requested
    _requested = signum
    raise Stopped(signum)


def raise_if_requested() -> None:
    """Raise `Stopped` again when a stop was requested (its first raise may have been
    dropped inside a finaliser)."""
    if _requested is not None:
        raise Stopped(_requested)


def clear() -> None:
    """Forget a stop request (once the stop has been reported)."""
    global _requested
    _requested = None
