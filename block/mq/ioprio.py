"""io.prio.class (blk-ioprio) of Linux 5.14-6.6: block/blk-ioprio.c.

A group's ``io.prio.class`` names a policy that changes the I/O priority class of its
bios before the schedulers see them (mq-deadline's levels, bfq's classes). The policy
is a number and a name (``enum prio_policy``, ``policy_name``):

=====  ==================  ===========================================================
value  name                what it does to a bio's priority ``p`` (``class << 13 | level``)
=====  ==================  ===========================================================
0      no-change           nothing (the default)
1      none-to-rt          5.14-6.4: ``max(p, RT << 13)`` (the max rule below);
       / promote-to-rt     6.5 on ("promote-to-rt", with "none-to-rt" kept as value 4,
                           an alias): a class other than RT becomes RT level 4
2      restrict-to-be      ``max(p, BE << 13)``: NONE and RT become BE (level 0 from
                           NONE, a BE or IDLE bio keeps its own)
3      idle                ``max(p, IDLE << 13)``: everything becomes IDLE
=====  ==================  ===========================================================

The max rule (``blkcg_ioprio_track`` 5.14-5.19, ``blkcg_set_ioprio`` 6.0 on): a larger
packed value is a lower priority except for class NONE (0), so the max keeps the lower
of the bio's priority and the policy's class, and gives a bio of class NONE the policy's
class at level 0.

Where and on what (`LINES`)
---------------------------
* 5.14-5.19 (blksim's 5.15 line): an rq_qos policy (``RQ_QOS_IOPRIO``, added for every
  queue by ``blkcg_init_queue`` -> ``blk_ioprio_init``) whose ``track`` hook changes the
  bio just after its request was allocated (``rq_qos_track``), before the request takes
  the bio's priority (``blk_mq_bio_to_request`` -> ``blk_rq_bio_prep``): a bio merged
  into a request is not changed, and merging looks at the unchanged class. A bio
  carries class NONE (0) unless its task set a priority (ioprio_set(2): fio's ``prio``,
  ``prioclass``), so ``none-to-rt`` makes such a bio RT level 0 and ``restrict-to-be``
  BE level 0.
* 6.0 on (6.1, 6.6 lines): a direct call from ``blk_mq_submit_bio`` (``bio_set_ioprio``,
  "blk-ioprio: Convert from rqos policy to direct call", 6.0) before any merge
  ("block: Initialize bio priority earlier"), after a bio of class NONE got its task's
  effective priority (``get_current_ioprio``: BE at level ``(nice + 20) / 5`` for a task
  that set none, "block: Always initialize bio IO priority on submit"). So on 6.1
  ``none-to-rt`` changes nothing for such a task (BE is above RT in the max), the bug
  that 6.5's ``promote-to-rt`` fixed ("blk-ioprio: Introduce promote-to-rt policy").

blksim's bios carry the effective priority (class BE and the nice level for a process
that set none), which is the 6.x kernels' bio; on the 5.15 line the policy takes the
bio of a process that set no priority (``explicit_pids`` says which did) as class NONE.
5.4 and 5.10 have no blk-ioprio: the configuration refuses io.prio.class there.

Simplifications: a 5.15 direct-I/O bio of a task with no I/O context carried
``IOPRIO_DEFAULT`` rather than NONE in some 5.x releases; blksim takes NONE for every
bio of a task that set no priority.
"""

from __future__ import annotations

from blksim.block.elevator import kernel_version
from blksim.block.mq.rq_qos import RQ_QOS_IOPRIO, RqQosPolicy
from blksim.block.request import (IOPRIO_CLASS_NONE, IOPRIO_CLASS_RT, IOPRIO_CLASS_SHIFT,
                                  ioprio_class, ioprio_value)

NO_CHANGE = "no-change"

#: Per line: the policy names the file accepts (name -> ``enum prio_policy`` value),
#: where the class is set ("track": rq_qos_track; "submit": blk_mq_submit_bio), and
#: whether promote-to-rt's rule replaces the max rule for value 1 and 4.
LINES = {
    "5.15": {"names": {"no-change": 0, "none-to-rt": 1, "restrict-to-be": 2, "idle": 3},
             "where": "track", "promote": False},
    "6.1": {"names": {"no-change": 0, "none-to-rt": 1, "restrict-to-be": 2, "idle": 3},
            "where": "submit", "promote": False},
    "6.6": {"names": {"no-change": 0, "promote-to-rt": 1, "restrict-to-be": 2, "idle": 3,
                      "none-to-rt": 4},
            "where": "submit", "promote": True},
}
#: The first kernel with blk-ioprio ("block: Introduce the ioprio rq-qos policy").
FIRST = "5.14"


def line_for_kernel(kernel: str) -> dict | None:
    """The `LINES` entry for ``kernel``, or None before 5.14 (no io.prio.class)."""
    wanted = kernel_version(kernel)
    if wanted < kernel_version(FIRST):
        return None
    fits = [v for v in LINES if kernel_version(v) <= wanted] or ["5.15"]
    return LINES[max(fits, key=kernel_version)]


def apply_policy(ioprio: int, value: int, promote: bool) -> int:
    """The priority a bio of priority ``ioprio`` gets under policy ``value``
    (``blkcg_ioprio_track`` 5.14-5.19, ``blkcg_set_ioprio`` 6.0 on)."""
    if value == 0:
        return ioprio
    if promote and value in (1, 4):
        # promote-to-rt (6.5 on): RT level 4 for any class but RT
        if ioprio_class(ioprio) != IOPRIO_CLASS_RT:
            return ioprio_value(IOPRIO_CLASS_RT, 4)
        return ioprio
    return max(ioprio, value << IOPRIO_CLASS_SHIFT)


class IoPrio:
    """blk-ioprio for one disk on the run's line: ``set_ioprio(bio)`` for the 6.x direct
    call, or `IoPrioTrack` on the queue's rq_qos chain (5.15). A bio's group's policy is
    its `blksim.block.cgroup.Cgroup`'s ``io_prio_class``. ``explicit_pids``: the
    processes that set an I/O priority (5.15's NONE rule)."""

    __slots__ = ("line", "explicit_pids", "changed")

    def __init__(self, kernel: str) -> None:
        line = line_for_kernel(kernel)
        if line is None:
            raise ValueError(f"io.prio.class needs Linux {FIRST} (blk-ioprio); kernel "
                             f"{kernel} has none")
        self.line = line
        self.explicit_pids: set = set()
        self.changed = 0                # bios whose priority the policy changed

    @property
    def at_track(self) -> bool:
        """Whether the class is set at ``rq_qos_track`` (5.14-5.19)."""
        return self.line["where"] == "track"

    def set_ioprio(self, bio) -> None:
        """Change ``bio``'s priority as its group's policy says."""
        group = bio.cgroup
        if group is None:
            return
        value = self.line["names"].get(group.io_prio_class, 0)
        if value == 0:
            return
        base = bio.ioprio
        if self.at_track and bio.pid not in self.explicit_pids:
            base = IOPRIO_CLASS_NONE            # the 5.x bio of a task that set none
        new = apply_policy(base, value, self.line["promote"])
        if new != base and new != bio.ioprio:
            self.changed += 1
            bio.ioprio = new


class IoPrioTrack(RqQosPolicy):
    """blk-ioprio as the rq_qos policy of 5.14-5.19 (``blkcg_ioprio_track``): the bio's
    and its new request's priority set at ``rq_qos_track``."""

    rq_qos_id = RQ_QOS_IOPRIO
    __slots__ = ("ioprio",)

    def __init__(self, ioprio: IoPrio) -> None:
        self.ioprio = ioprio

    def track(self, rq, bio) -> None:
        """``blkcg_ioprio_track``; the request then takes the bio's priority
        (``blk_rq_bio_prep``)."""
        self.ioprio.set_ioprio(bio)
        rq.ioprio = bio.ioprio
