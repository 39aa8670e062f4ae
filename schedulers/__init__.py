"""I/O schedulers (elevators) and their registry, keyed by the kernel's names.

Two kinds: the 2.6 kernels' elevators (`blksim.block.elevator.Elevator`, in
``SCHEDULERS``) and the multi-queue kernels' schedulers
(`blksim.block.mq.elevator.MqElevator`, in ``MQ_SCHEDULERS``, listed as
``queue/scheduler`` lists them on 5.4-6.6: none, mq-deadline, kyber, bfq). A run's kernel
decides which kind its disks take (`get_scheduler`).

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
from blksim.schedulers.bfq import BfqElevator
from blksim.schedulers.kyber import KyberElevator
from blksim.schedulers.mq_deadline import MqDeadlineElevator
from blksim.block.mq.elevator import MqElevator, is_multiqueue
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


#: The teaching algorithms among ``SCHEDULERS`` (no kernel has them).
TEXTBOOK_NAMES = frozenset(("fcfs", "sstf", "scan", "cscan", "look", "clook", "sptf"))


class NoneScheduler:
    """``none``: a multi-queue queue without an elevator (the block layer's own software
    queues and direct issue: `blksim.block.mq.queue`). It has no tunables."""

    name = "none"
    tunables: tuple = ()


#: The multi-queue kernels' schedulers, in the order ``queue/scheduler`` lists them.
MQ_SCHEDULERS: dict = {
    "none": NoneScheduler,
    "mq-deadline": MqDeadlineElevator,
    "kyber": KyberElevator,
    "bfq": BfqElevator,
}


def get_scheduler(name: str, kernel: str = "2.6.18"):
    """The scheduler class `name` names (as written to ``queue/scheduler``) on kernel
    ``kernel``: a built-in of that kernel's kind, ``module:Class``, or an installed plugin
    (`blksim.schedulers.registry`); `NoneScheduler` for ``none``.

    Raises ValueError naming the valid schedulers (a name of the other kind says which
    kernels have it), or a `PluginError` (a ValueError) naming a plugin that cannot be
    used and why.
    """
    multi = is_multiqueue(kernel)
    table, other = (MQ_SCHEDULERS, SCHEDULERS) if multi else (SCHEDULERS, MQ_SCHEDULERS)
    try:
        return table[name]
    except (KeyError, TypeError):
        pass
    if isinstance(name, str) and name in other:
        if multi:
            what = ("a textbook algorithm, which blksim runs on the 2.6 queue"
                    if name in TEXTBOOK_NAMES else
                    "a 2.6 elevator, removed with the legacy block layer in Linux 5.0")
            raise ValueError(f"scheduler {name!r} is {what}; kernel {kernel} has: "
                             f"{', '.join(MQ_SCHEDULERS)}")
        raise ValueError(f"scheduler {name!r} is a multi-queue scheduler (Linux 5.0 on); "
                         f"kernel {kernel} has: {', '.join(SCHEDULERS)} (set [run] kernel "
                         f"to 5.4, 5.10, 5.15, 6.1 or 6.6 for {name})")
    cls = _plugin(name, table)
    if cls is not None and multi != issubclass(cls, MqElevator):
        kind = "a multi-queue scheduler (MqElevator)" if multi else "a 2.6 elevator (Elevator)"
        raise ValueError(f"scheduler {name!r} ({cls.__module__}:{cls.__qualname__}) is not "
                         f"{kind}, which kernel {kernel} needs")
    return cls


def check_name(name: str):
    """The class of scheduler ``name`` on whichever kind of kernel has it, for names
    checked before the run's kernel is known; ValueError for a name no kernel has."""
    if isinstance(name, str) and name in MQ_SCHEDULERS:
        return MQ_SCHEDULERS[name]
    if isinstance(name, str) and name in SCHEDULERS:
        return SCHEDULERS[name]
    try:
        return _plugin(name, {**SCHEDULERS, **MQ_SCHEDULERS})
    except registry.PluginError:
        raise
    except ValueError:
        plugins = sorted(set(registry.installed_plugins()) - set(SCHEDULERS)
                         - set(MQ_SCHEDULERS))
        raise ValueError(f"unknown scheduler {name!r}; valid: {', '.join(sorted(SCHEDULERS))} "
                         f"(2.6 kernels); {', '.join(MQ_SCHEDULERS)} (5.4 to 6.6)"
                         f"{''.join(', ' + p for p in plugins)}, or module:Class for a "
                         f"scheduler of your own") from None


def _plugin(name, table):
    """A plugin's class (``module:Class`` or an entry point), or ValueError."""
    if isinstance(name, str) and ":" in name:
        return registry.load_class(name)
    cls = registry.load_plugin(name) if isinstance(name, str) else None
    if cls is None:
        plugins = sorted(set(registry.installed_plugins()) - set(table))
        valid = ", ".join(sorted(table) + plugins)
        raise ValueError(f"unknown scheduler {name!r}; valid: {valid}, or module:Class "
                         f"for a scheduler of your own") from None
    return cls


def scheduler_tunables(name: str, kernel: str = "2.6.18") -> tuple[Tunable, ...]:
    """The ``queue/iosched/`` tunables the scheduler `name` has on kernel ``kernel``."""
    cls = get_scheduler(name, kernel)
    if issubclass(cls, MqElevator):
        return cls.tunables_for(kernel)
    return cls.tunables


__all__ = ["SCHEDULERS", "MQ_SCHEDULERS", "NoneScheduler", "get_scheduler", "check_name",
           "scheduler_tunables", "Elevator", "Tunable",
           "NoopElevator", "AnticipatoryElevator", "DeadlineElevator", "CfqElevator",
           "FcfsElevator", "SstfElevator", "ScanElevator", "CscanElevator", "LookElevator",
           "ClookElevator", "SptfElevator"]
