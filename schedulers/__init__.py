"""I/O schedulers (elevators) and their registry, keyed by the kernel's names.

``SCHEDULERS`` keeps the order in which a 2.6.18 kernel registers its built-in
elevators (link order: noop, anticipatory, deadline, cfq), which is the order
``queue/scheduler`` lists them in; the textbook algorithms for teaching follow. To add a
scheduler to blksim, import its class here and insert it in that order. A scheduler
defined outside blksim is a plugin (`blksim.schedulers.registry`, docs/plugins.md): named
as ``module:Class`` or installed under the entry-point group ``blksim.schedulers``.
"""

from __future__ import annotations

from blksim.schedulers import registry
from blksim.schedulers.anticipatory import AnticipatoryElevator
from blksim.block.elevator import Elevator, Tunable
from blksim.schedulers.cfq import CfqElevator
from blksim.schedulers.deadline import DeadlineElevator
from blksim.schedulers.noop import NoopElevator
from blksim.schedulers.textbook import (ClookElevator, CscanElevator, FcfsElevator, LookElevator,
                                 ScanElevator, SptfElevator, SstfElevator)

SCHEDULERS: dict[str, type[Elevator]] = {
    "noop": NoopElevator,
    "anticipatory": AnticipatoryElevator,
    "deadline": DeadlineElevator,
    "cfq": CfqElevator,
    # the textbook algorithms, for teaching (not in any kernel)
    "fcfs": FcfsElevator,
    "sstf": SstfElevator,
    "scan": ScanElevator,
    "cscan": CscanElevator,
    "look": LookElevator,
    "clook": ClookElevator,
    "sptf": SptfElevator,
}


def get_scheduler(name: str) -> type[Elevator]:
    """The elevator class `name` names (as written to ``queue/scheduler``): a built-in,
    ``module:Class``, or an installed plugin (`blksim.schedulers.registry`).

    Raises ValueError naming the valid schedulers, or a `PluginError` (a ValueError)
    naming a plugin that cannot be used and why.
    """
    try:
        return SCHEDULERS[name]
    except (KeyError, TypeError):
        pass
    if isinstance(name, str) and ":" in name:
        return registry.load_class(name)
    cls = registry.load_plugin(name) if isinstance(name, str) else None
    if cls is None:
        plugins = sorted(set(registry.installed_plugins()) - set(SCHEDULERS))
        valid = ", ".join(sorted(SCHEDULERS) + plugins)
        raise ValueError(f"unknown scheduler {name!r}; valid: {valid}, or module:Class "
                         f"for a scheduler of your own") from None
    return cls


def scheduler_tunables(name: str) -> tuple[Tunable, ...]:
    """The ``queue/iosched/`` tunables the scheduler `name` declares."""
    return get_scheduler(name).tunables


__all__ = ["SCHEDULERS", "get_scheduler", "scheduler_tunables", "Elevator", "Tunable",
           "NoopElevator", "AnticipatoryElevator", "DeadlineElevator", "CfqElevator",
           "FcfsElevator", "SstfElevator", "ScanElevator", "CscanElevator", "LookElevator",
           "ClookElevator", "SptfElevator"]
