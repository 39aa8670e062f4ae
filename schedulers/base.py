"""What a scheduler module imports, built-in or plug-in: the elevator hook table and
its helpers, which live with the block layer that calls them
(`blksim.block.elevator`). Plug-ins written against ``blksim.schedulers.base`` keep
working; new code may import from either."""

from blksim.block.elevator import (Elevator, Tunable, jiffies_to_seconds, kernel_version,
                                   msecs_to_jiffies, resolve_tunables)

__all__ = ["Elevator", "Tunable", "jiffies_to_seconds", "kernel_version", "msecs_to_jiffies",
           "resolve_tunables"]
