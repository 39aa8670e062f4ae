"""deadline-early: deadline that acts on a deadline one window before it passes.

Linux's deadline elevator (block/deadline-iosched.c, deadline_dispatch_requests(),
2.6.18) looks at deadlines only between batches, and only at deadlines that have
already passed. A read whose deadline falls in the middle of a batch of writes
therefore waits for the batch to end, up to ``fifo_batch`` requests past its
deadline.

The idea tried here: at every dispatch, treat a request as expired ``early_ms``
before its deadline (about the time one batch takes on the drive). When the oldest
request of either direction is that close to expiring, the current batch ends and
the next batch starts at that oldest request, so deadlines are met rather than
overshot, at the price of shorter batches (more seeking) under load.

Everything else is deadline's own behaviour: this class subclasses blksim's
`DeadlineElevator` and changes only when a deadline counts as passed.
"""

from blksim.schedulers.base import Tunable, msecs_to_jiffies
from blksim.schedulers.deadline import INT_MAX, DeadlineElevator


class DeadlineEarlyElevator(DeadlineElevator):
    """Deadline with deadlines acted on ``early_ms`` ahead of time."""

    name = "deadline-early"
    tunables = DeadlineElevator.tunables + (
        Tunable("early_ms", 100, "ms", 0, INT_MAX,
                "act on a deadline this long before it passes (about one batch's "
                "service time); 0 behaves as deadline", jiffies=True),
    )

    def __init__(self, dispatch_queue, params=None, hz: int = 250,
                 variant: str = "2.6.18") -> None:
        super().__init__(dispatch_queue, params, hz=hz, variant=variant)
        # Kept in jiffies by the kernel's convention, as read_expire is.
        self.early = msecs_to_jiffies(self.params["early_ms"], hz) / hz

    def dispatch(self, now: float, force: bool = False) -> int:
        """Deadline's dispatch, as if the clock were ``early_ms`` ahead; a batch ends
        as soon as the oldest request of either direction is that close to its deadline."""
        if self.early:
            horizon = now + self.early
            for write in (False, True):
                head = self.fifo_head(write)
                if head is not None and horizon > head.fifo_time:
                    self.batching = self.params["fifo_batch"]   # end the batch now
                    break
            now = horizon
        return super().dispatch(now, force)
