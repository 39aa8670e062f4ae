"""mq-deadline-early: deadline-early's idea on the multi-queue layer (an example plugin).

Linux's mq-deadline (block/mq-deadline.c, ``__dd_dispatch_request``) looks at deadlines
only when a batch starts, and only at deadlines that have passed. mq-deadline-early acts
``early_ms`` before a deadline: it ends the batch under way as soon as the oldest request
of any level and direction is that close, and treats it as expired.
"""

from blksim.block.elevator import Tunable, msecs_to_jiffies
from blksim.schedulers.mq_deadline import INT_MAX, MqDeadlineElevator


class MqDeadlineEarlyElevator(MqDeadlineElevator):
    """mq-deadline with deadlines ``early_ms`` sooner."""

    name = "mq-deadline-early"
    tunables = MqDeadlineElevator.tunables + (
        Tunable("early_ms", 100, "ms", 0, INT_MAX,
                "act on a deadline this long before it passes", jiffies=True),
    )

    def __init__(self, info, params=None):
        super().__init__(info, params)
        self.early = msecs_to_jiffies(self.params["early_ms"], info.hz) / info.hz

    def dispatch_request(self, hctx, now):
        if self.early:
            horizon = now + self.early
            if any(horizon >= head.fifo_time for head in self.fifo_heads()):
                self.batching = self.params["fifo_batch"]        # end the batch now
            now = horizon
        return super().dispatch_request(hctx, now)
