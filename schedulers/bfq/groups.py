"""BFQ's groups (``CONFIG_BFQ_GROUP_IOSCHED``, block/bfq-cgroup.c of Linux 5.4 to 6.6):
a group per (cgroup, device), its place in B-WF2Q+'s hierarchy, which group a process's
queues are in, and the count of groups with pending requests that BFQ's idling reads.

* **A group** (`BfqGroup`, ``struct bfq_group``) is made when a cgroup's first request
  reaches the device (the blkg's ``bfq_pd_init``), its ancestors first
  (``bfq_find_set_group``). Its entity weighs the cgroup's ``io.bfq.weight`` for this
  device (its per-device weight, else its default; 100, ``CGROUP_WEIGHT_DFL``, when
  not set), is of class BE (``BFQ_DEFAULT_GRP_CLASS``) and sits in its parent group's
  scheduling data; the root cgroup's group is the root of the hierarchy and has no
  entity (``bfqg->my_entity`` is NULL). A group has its own async queues per class and
  level (``bfqg->async_bfqq``, ``async_idle_bfqq``); the root group's are the
  elevator's ``async_queues``.
* **A process's queues follow its bios' cgroup** (``bfq_bic_update_cgroup``, called
  from ``bfq_init_rq`` for every request): when the cgroup differs from the one last
  seen for the process (``blkcg_serial_nr``), ``__bfq_bic_change_cgroup`` drops the
  process's async queue if it belongs to another group (its next async request gets
  the new group's) and moves its sync queue to the new group (``bfq_bfqq_move``: the
  queue is expired if in service, deactivated without entering the idle tree, re-homed
  and activated again if busy). A new queue is made in the group of the request's bio
  (``bfq_get_queue``, ``bfq_init_entity``).
* **Groups with pending requests** (``bfqd->num_groups_with_pending_reqs``): with more
  than the threshold of groups having requests not yet completed, the scenario is
  asymmetric and BFQ idles for the in-service queue to keep each group's share
  (``bfq_asymmetric_scenario``). Two ways, per kernel line (``groups_pending`` in
  `blksim.schedulers.bfq.variants`):

  - "entity" (5.4 to 6.1): a non-root group is counted when its entity is truly
    activated (``__bfq_activate_entity``), and uncounted when a queue below it has no
    request left in BFQ or the driver while the group has nothing to serve
    (``bfq_weights_tree_remove``, walking up from the queue's parent while a level
    has neither a next nor an in-service entity); the root group is never counted;
    asymmetric when the count is above 0;
  - "queue" (6.2 on, so 6.6): a group is counted while any of its own queues has
    requests in BFQ or the driver (``bfq_add_bfqq_in_groups_with_pending_reqs``,
    ``bfq_del_bfqq_in_groups_with_pending_reqs``: on becoming busy with nothing in
    flight, on leaving busy with nothing in flight, at the completion that empties an
    idle queue, around a move), the root group too; asymmetric above 1.
"""

from __future__ import annotations

from blksim.schedulers.bfq.wf2q import CLASS_BE, SchedData

#: ``BFQ_DEFAULT_GRP_WEIGHT`` / ``CGROUP_WEIGHT_DFL``: a group's weight when its cgroup
#: does not set io.bfq.weight.
BFQ_DEFAULT_GRP_WEIGHT = 100
#: ``BFQ_MIN_WEIGHT``, ``BFQ_MAX_WEIGHT``.
BFQ_MIN_WEIGHT, BFQ_MAX_WEIGHT = 1, 1000


class BfqGroup:
    """``struct bfq_group`` with its entity folded in (``bfqg->entity``): the entity
    fields B-WF2Q+ reads (``start``, ``finish``, ``budget``, ``service``, ``weight``, ...,
    ``parent``: the parent group's entity or None under the root; ``sched_data``: the
    parent's scheduling data), the group's own scheduling data ``my_sched_data``, its
    count of active children (``active_entities``), its async queues, the
    pending-request bookkeeping and ``nr_allocated``: the requests allocated by the
    queues below it (``entity->allocated``, read by ``bfqq_request_over_limit``).
    ``service_total``: every sector of service charged to the group over the run,
    time charges included (the sum of what ``bfq_bfqq_served`` adds to
    ``entity->service``, which the kernel resets at each expiration; not a kernel
    field: the measure B-WF2Q+ divides, kept for displays and tests)."""

    __slots__ = ("cgroup", "start", "finish", "budget", "service", "weight", "orig_weight",
                 "new_weight", "prio_changed", "ioprio_class", "new_ioprio_class",
                 "wr_coeff", "tree", "on_st_or_in_serv", "parent", "sched_data",
                 "my_sched_data", "active_entities", "in_groups_with_pending_reqs",
                 "num_queues_with_pending_reqs", "async_queues", "last_bfqq_created",
                 "nr_allocated", "service_total")

    def __init__(self, cgroup, weight: int, parent, sched_data, jiffies: int) -> None:
        """``bfq_pd_init`` (with ``bfq_group_set_parent``)."""
        self.cgroup = cgroup
        self.start = self.finish = 0
        self.budget = self.service = 0
        self.weight = self.orig_weight = self.new_weight = weight
        self.prio_changed = False
        self.ioprio_class = self.new_ioprio_class = CLASS_BE
        self.wr_coeff = 1
        self.tree = None
        self.on_st_or_in_serv = False
        self.parent = parent
        self.sched_data = sched_data
        self.my_sched_data = SchedData(jiffies, self)
        self.active_entities = 0
        self.in_groups_with_pending_reqs = False
        self.num_queues_with_pending_reqs = 0
        self.async_queues: dict = {}
        self.last_bfqq_created = None
        self.nr_allocated = 0
        self.service_total = 0

    def __repr__(self) -> str:
        return f"bfqg({self.cgroup.name} w={self.weight})"


class RootGroup:
    """The root cgroup's group: the hierarchy's root, with no entity. ``my_sched_data``
    is the engine's root scheduling data, ``async_queues`` the elevator's."""

    __slots__ = ("my_sched_data", "async_queues", "num_queues_with_pending_reqs",
                 "last_bfqq_created")

    def __init__(self, sd, async_queues: dict) -> None:
        self.my_sched_data = sd
        self.async_queues = async_queues
        self.num_queues_with_pending_reqs = 0
        self.last_bfqq_created = None


class Groups:
    """The groups of one BFQ instance, by cgroup (``groups``; the root group is
    ``root``), and ``num_groups_with_pending_reqs``. ``device``: the disk's name, whose
    io.bfq.weight applies; ``rule``: the kernel line's counting ("entity" or
    "queue", see the module docstring)."""

    __slots__ = ("root", "groups", "device", "rule", "num_groups_with_pending_reqs")

    def __init__(self, root: RootGroup, device: str, rule: str) -> None:
        self.root = root
        self.groups: dict = {}
        self.device = device
        self.rule = rule
        self.num_groups_with_pending_reqs = 0

    @property
    def asymmetric(self) -> bool:
        """The groups' term of ``bfq_asymmetric_scenario``."""
        limit = 0 if self.rule == "entity" else 1
        return self.num_groups_with_pending_reqs > limit

    def group_of(self, cgroup, jiffies: int):
        """``bfq_find_set_group``: the group of ``cgroup`` (None: the root's), made with
        its ancestors on first use."""
        if cgroup is None or cgroup.parent is None:
            return self.root
        group = self.groups.get(cgroup)
        if group is None:
            parent = self.group_of(cgroup.parent, jiffies)
            weight = cgroup.bfq_weight_on(self.device) if cgroup.bfq_weight else None
            group = self.groups[cgroup] = BfqGroup(
                cgroup, weight or BFQ_DEFAULT_GRP_WEIGHT,
                parent if isinstance(parent, BfqGroup) else None,
                parent.my_sched_data, jiffies)
        return group

    @staticmethod
    def group_of_queue(bfqq, root):
        """``bfqq_group``: the group a queue is in."""
        return bfqq.parent if bfqq.parent is not None else root

    # --- groups with pending requests ---------------------------------------------------
    def entity_activated(self, group: BfqGroup) -> None:
        """5.4-6.1 ``__bfq_activate_entity``: a group entity truly activated is counted."""
        if self.rule == "entity" and not group.in_groups_with_pending_reqs:
            group.in_groups_with_pending_reqs = True
            self.num_groups_with_pending_reqs += 1

    def queue_pending(self, bfqq) -> None:
        """6.2+ ``bfq_add_bfqq_in_groups_with_pending_reqs``."""
        if self.rule != "queue" or bfqq.in_groups_with_pending_reqs:
            return
        bfqq.in_groups_with_pending_reqs = True
        group = self.group_of_queue(bfqq, self.root)
        group.num_queues_with_pending_reqs += 1
        if group.num_queues_with_pending_reqs == 1:
            self.num_groups_with_pending_reqs += 1

    def queue_done(self, bfqq) -> None:
        """A queue has no request left in BFQ or the driver: 6.2+
        ``bfq_del_bfqq_in_groups_with_pending_reqs``; 5.4-6.1 the group walk of
        ``bfq_weights_tree_remove``."""
        if self.rule == "queue":
            if not bfqq.in_groups_with_pending_reqs:
                return
            bfqq.in_groups_with_pending_reqs = False
            group = self.group_of_queue(bfqq, self.root)
            group.num_queues_with_pending_reqs -= 1
            if group.num_queues_with_pending_reqs == 0:
                self.num_groups_with_pending_reqs -= 1
            return
        entity = bfqq.parent
        while entity is not None:
            sd = entity.my_sched_data
            if sd.next_in_service is not None or sd.in_service is not None:
                break
            if entity.in_groups_with_pending_reqs:
                entity.in_groups_with_pending_reqs = False
                self.num_groups_with_pending_reqs -= 1
            entity = entity.parent


def count_allocated(bfqq, delta: int) -> None:
    """``bfqq_request_allocated`` (``delta`` 1) and ``bfqq_request_freed`` (-1): a
    request allocated or freed by ``bfqq`` counts on the queue and on every group
    above it (``for_each_entity``; 5.18's "bfq: Limit number of requests consumed by
    each cgroup": the group counts are read from 6.1, `BfqElevator.limit_depth`). The
    groups walked are the queue's current ones, as in the kernel: a request freed
    after its queue moved to another group is uncounted there."""
    entity = bfqq
    while entity is not None:
        entity.nr_allocated += delta
        entity = entity.parent


def parent_weight(bfqq) -> int:
    """The weight ``bfq_bfqq_higher_class_or_weight`` compares for a queue in another
    group than the other queue's: its group entity's (its own under the root)."""
    return bfqq.parent.weight if bfqq.parent is not None else bfqq.weight
