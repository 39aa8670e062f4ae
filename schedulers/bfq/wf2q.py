"""B-WF2Q+, BFQ's scheduling engine: service trees, timestamps and virtual time, as
block/bfq-wf2q.c of Linux 5.4 to 6.6 has them, over the hierarchy of groups
(``CONFIG_BFQ_GROUP_IOSCHED``).

Every busy queue is an *entity* with a weight, a budget (in sectors) and two virtual
timestamps: its start ``S`` and its finish ``F = S + budget * 2**22 / weight``
(``bfq_calc_finish``, with ``bfq_delta`` mapping service to virtual time). The
entities of each I/O priority class (RT, BE, IDLE) sit in that class's service tree,
which keeps a virtual time ``V``: each sector dispatched advances it by
``2**22 / wsum`` (``bfq_bfqq_served``), ``wsum`` being the sum of the weights of the
entities the tree holds. An entity is *eligible* when ``S <= V``; the next entity to
serve is the eligible one with the smallest ``F`` (``bfq_first_active_entity``),
and if none is eligible while no entity is in service, ``V`` first jumps to the
smallest start (``bfq_calc_vtime_jump``). Classes are served in strict priority,
except that the IDLE class is looked at first once it has waited
``BFQ_CL_IDLE_TIMEOUT`` = HZ/5 (``bfq_lookup_next_entity``).

An entity that empties is moved to its tree's *idle tree* if its finish is still
ahead of ``V`` (``__bfq_deactivate_entity``): coming back before ``V`` passes its
finish it starts at ``max(V, F_old)`` (``__bfq_activate_entity``), so a queue cannot
gain by emptying and refilling. Idle entities are forgotten once ``V`` passes their
finish (``bfq_forget_idle``).

The kernel keeps the active tree as an rbtree ordered by finish and augmented with
each subtree's smallest start; here it is a list ordered by finish (equal finishes
in insertion order, as the rbtree insert puts an equal key to the right), searched
from the left for the first eligible entity: the same entity the augmented descent
finds.

**Groups** (`blksim.schedulers.bfq.groups`). An entity is a queue or a group; a group
entity has its own `SchedData` (``my_sched_data``) holding its children, and sits in
its parent's (``sched_data``; the root group has no entity, its scheduling data is
``Wf2q.sd``). Every rule above runs per level: a queue's activation activates, requeues
or repositions each ancestor while the level's next-in-service changes
(``bfq_activate_requeue_entity``), a deactivation goes up while a level empties
(``bfq_deactivate_entity``), the service a queue receives is charged to every entity
on its path and advances each level's ``V`` (``bfq_bfqq_served``), and the queue to
serve is found by descending from the root, taking each level's next-in-service
(``bfq_get_next_queue``). A group's budget is its next-in-service child's
(``bfq_update_parent_budget``), and it stays in its active tree while set in service
unless it has a single active child (``bfq_no_longer_next_in_service``). Groups are
of class BE (``BFQ_DEFAULT_GRP_CLASS``). Without groups every entity's parent is the
root and each loop runs once.
"""

from __future__ import annotations

import weakref

from bisect import bisect_right

#: ``WFQ_SERVICE_SHIFT``: service is scaled by 2**22 before division by a weight.
WFQ_SERVICE_SHIFT = 22
#: The three I/O priority classes, in the order their trees are looked at.
CLASS_RT, CLASS_BE, CLASS_IDLE = 1, 2, 3
BFQ_IOPRIO_CLASSES = 3


def bfq_delta(service: int, weight: int) -> int:
    """``bfq_delta``: ``service`` sectors as virtual time for weight ``weight``."""
    return (service << WFQ_SERVICE_SHIFT) // weight


class ServiceTree:
    """``struct bfq_service_tree``: the active entities of one class ordered by finish
    (``active``, with their finishes in ``finishes``), the idle entities (``idle``),
    the class's virtual time ``vtime`` and the weight sum ``wsum``."""

    __slots__ = ("active", "finishes", "idle", "vtime", "wsum")

    def __init__(self) -> None:
        self.active: list = []
        self.finishes: list[int] = []
        self.idle: list = []
        self.vtime = 0
        self.wsum = 0

    # --- the active tree ---------------------------------------------------------
    def active_insert(self, entity) -> None:
        """``bfq_active_insert``: file ``entity`` by finish, after equal finishes."""
        i = bisect_right(self.finishes, entity.finish)
        self.finishes.insert(i, entity.finish)
        self.active.insert(i, entity)
        entity.tree = ACTIVE

    def active_extract(self, entity) -> None:
        """``bfq_active_extract``."""
        i = self.active.index(entity)
        del self.active[i]
        del self.finishes[i]
        entity.tree = None

    def min_start(self) -> int:
        """The smallest start among the active entities (the augmented root's
        ``min_start``)."""
        return min(e.start for e in self.active)

    def first_active(self, vtime: int):
        """``bfq_first_active_entity``: the eligible entity (``start <= vtime``) with
        the smallest finish, or None."""
        for entity in self.active:
            if entity.start <= vtime:
                return entity
        return None

    # --- the idle tree -------------------------------------------------------------
    def idle_insert(self, entity) -> None:
        """``bfq_idle_insert``."""
        self.idle.append(entity)
        entity.tree = IDLE

    def idle_extract(self, entity) -> None:
        """``bfq_idle_extract``."""
        self.idle.remove(entity)
        entity.tree = None

    def first_idle(self):
        """The idle entity with the smallest finish (``st->first_idle``), or None."""
        return min(self.idle, key=_finish) if self.idle else None

    def last_idle(self):
        """The idle entity with the largest finish (``st->last_idle``), or None."""
        return max(self.idle, key=_finish) if self.idle else None


def _finish(entity) -> int:
    return entity.finish


#: Values of ``entity.tree``: which tree of its class holds it (None: none).
ACTIVE, IDLE = "active", "idle"


class SchedData:
    """``struct bfq_sched_data`` of a group: one `ServiceTree` per class
    (``trees[class - 1]``), the entity in service and the one that would be chosen
    next, when the IDLE class was last looked at first (in jiffies), and ``owner``:
    the group's entity (None for the root group's)."""

    __slots__ = ("trees", "in_service", "next_in_service", "class_idle_last_service",
                 "owner")

    def __init__(self, jiffies: int = 0, owner=None) -> None:
        self.trees = [ServiceTree() for _ in range(BFQ_IOPRIO_CLASSES)]
        self.in_service = None
        self.next_in_service = None
        self.class_idle_last_service = jiffies
        self.owner = owner


class Wf2q:
    """The scheduling engine of one BFQ instance (block/bfq-wf2q.c). ``sd`` is the root
    group's scheduling data. ``bfqd`` is the elevator: its ``jiffies``, ``hz`` and the
    hooks the engine calls back when a queue enters or leaves a tree (``on_active``,
    ``on_inactive``: the kernel's ``active_list``/``idle_list`` and queue references).
    An entity whose ``sched_data`` is None is a queue of the root group
    (``bfq_init_entity``)."""

    __slots__ = ("sd", "bfqd")

    def __init__(self, bfqd, jiffies: int = 0) -> None:
        # a proxy: the elevator holds this engine, a reference back would be a cycle
        self.bfqd = weakref.proxy(bfqd)
        self.sd = SchedData(jiffies)

    @staticmethod
    def tree_of(entity) -> ServiceTree:
        """``bfq_entity_service_tree``: the service tree of ``entity``'s class in the
        scheduling data it belongs to."""
        return entity.sched_data.trees[entity.ioprio_class - 1]

    # --- timestamps -----------------------------------------------------------------
    @staticmethod
    def calc_finish(entity, service: int) -> None:
        """``bfq_calc_finish``: ``F = S + service / weight`` in virtual time."""
        entity.finish = entity.start + bfq_delta(service, entity.weight)

    def update_weight_prio(self, st: ServiceTree, entity, update_class_too: bool):
        """``__bfq_entity_update_weight_prio``: apply a pending weight or class change
        (``prio_changed``); the weight becomes ``orig_weight * wr_coeff``. Returns the
        service tree the entity now belongs to."""
        new_st = st
        if entity.prio_changed:
            st.wsum -= entity.weight
            if entity.new_weight != entity.orig_weight:
                entity.orig_weight = min(max(entity.new_weight, 1), 1000)
            if update_class_too:
                entity.ioprio_class = entity.new_ioprio_class
            if entity.ioprio_class == entity.new_ioprio_class:
                entity.prio_changed = False
            new_st = self.tree_of(entity)
            prev_weight = entity.weight
            new_weight = entity.orig_weight * entity.wr_coeff
            # the queue weights tree counts queues only (5.4-6.6)
            is_queue = entity.my_sched_data is None
            if prev_weight != new_weight and is_queue:
                self.bfqd.weights_tree_remove(entity)
            entity.weight = new_weight
            if prev_weight != new_weight and is_queue and entity.wr_coeff == 1:
                self.bfqd.weights_tree_add(entity)
            new_st.wsum += entity.weight
            if new_st is not st:
                entity.start = new_st.vtime
        return new_st

    def served(self, bfqq, served: int, jiffies: int) -> None:
        """``bfq_bfqq_served``: queue ``bfqq`` received ``served`` sectors of service,
        charged to it and every ancestor group, each level's ``V`` advancing (a
        group also adds them to its run total, ``service_total``)."""
        if not bfqq.service_from_backlogged:
            bfqq.first_io_time = jiffies
        if bfqq.wr_coeff > 1:
            bfqq.service_from_wr += served
        bfqq.service_from_backlogged += served
        entity = bfqq
        while entity is not None:
            st = entity.sched_data.trees[entity.ioprio_class - 1]
            entity.service += served
            st.vtime += bfq_delta(served, st.wsum)
            self.forget_idle(st)
            entity = entity.parent
            if entity is not None:
                entity.service_total += served

    def charge_time(self, entity, time_ms: int, max_budget: int, timeout_ms: int,
                    jiffies: int) -> None:
        """``bfq_bfqq_charge_time``: charge a slow queue the service it would have had at
        the peak rate for the time it held the device (time fairness)."""
        bounded_ms = min(time_ms, timeout_ms)
        for_time = max_budget * bounded_ms // timeout_ms
        total = max(for_time, entity.service)
        if total > entity.budget:
            entity.budget = total
        self.served(entity, max(0, total - entity.service), jiffies)

    # --- idle tree ------------------------------------------------------------------
    def forget_entity(self, st: ServiceTree, entity, is_in_service: bool) -> None:
        """``bfq_forget_entity``: the entity leaves its class (weight sum)."""
        entity.on_st_or_in_serv = False
        st.wsum -= entity.weight
        if not is_in_service and entity.my_sched_data is None:
            self.bfqd.on_forgotten(entity)

    def put_idle_entity(self, st: ServiceTree, entity) -> None:
        """``bfq_put_idle_entity``."""
        st.idle_extract(entity)
        if entity.my_sched_data is None:
            self.bfqd.on_leave_idle_list(entity)
        self.forget_entity(st, entity, entity is entity.sched_data.in_service)

    def forget_idle(self, st: ServiceTree) -> None:
        """``bfq_forget_idle``: with nothing active, ``V`` may jump to the last idle
        finish; the first idle entity is dropped once ``V`` has reached its finish."""
        last = st.last_idle()
        if not st.active and last is not None and not last.finish > st.vtime:
            st.vtime = last.finish
        first = st.first_idle()
        if first is not None and not first.finish > st.vtime:
            self.put_idle_entity(st, first)

    # --- the trees, with the lists and counts that follow them ----------------------
    def _active_insert(self, st: ServiceTree, entity) -> None:
        """``bfq_active_insert``: a queue joins ``active_list``; a non-root group counts
        its active children (``active_entities``)."""
        st.active_insert(entity)
        if entity.my_sched_data is None:
            self.bfqd.on_active(entity)
        owner = entity.sched_data.owner
        if owner is not None:
            owner.active_entities += 1

    def _active_extract(self, st: ServiceTree, entity) -> None:
        """``bfq_active_extract``."""
        st.active_extract(entity)
        if entity.my_sched_data is None:
            self.bfqd.on_inactive(entity)
        owner = entity.sched_data.owner
        if owner is not None:
            owner.active_entities -= 1

    def _idle_insert(self, st: ServiceTree, entity) -> None:
        """``bfq_idle_insert``."""
        st.idle_insert(entity)
        if entity.my_sched_data is None:
            self.bfqd.on_idle_list(entity)

    def _idle_extract(self, st: ServiceTree, entity) -> None:
        """``bfq_idle_extract``."""
        st.idle_extract(entity)
        if entity.my_sched_data is None:
            self.bfqd.on_leave_idle_list(entity)

    # --- activation, requeue, deactivation -------------------------------------------
    def _update_fin_time_enqueue(self, entity, st: ServiceTree, backshifted: bool) -> None:
        """``bfq_update_fin_time_enqueue``: compute the finish and file the entity; a
        back-shifted queue is pushed up so that its finish is not below ``V`` (a
        raised one by ``1/wr_coeff`` of that)."""
        st = self.update_weight_prio(st, entity, True)
        self.calc_finish(entity, entity.budget)
        if backshifted and st.vtime > entity.finish:
            delta = (st.vtime - entity.finish) // entity.wr_coeff
            entity.start += delta
            entity.finish += delta
        self._active_insert(st, entity)

    def _activate(self, entity, non_blocking_wait_rq: bool) -> None:
        """``__bfq_activate_entity``: a true activation (the entity was not active).
        A group entity's activation is counted by `on_group_activated` (5.4-6.1's
        ``num_groups_with_pending_reqs``)."""
        st = self.tree_of(entity)
        backshifted = False
        if non_blocking_wait_rq and st.vtime > entity.finish:
            backshifted = True
            min_vstart = entity.finish
        else:
            min_vstart = st.vtime
        if entity.tree == IDLE:
            self._idle_extract(st, entity)
            entity.start = min_vstart if min_vstart > entity.finish else entity.finish
        else:
            entity.start = min_vstart
            st.wsum += entity.weight
            entity.on_st_or_in_serv = True
        if entity.my_sched_data is not None:
            self.bfqd.on_group_activated(entity)
        self._update_fin_time_enqueue(entity, st, backshifted)

    def _requeue(self, entity) -> None:
        """``__bfq_requeue_entity``: an entity in service is requeued (its start moves
        to the finish its service earned): a queue that expired, or a group whose
        budget changed; or an active entity is repositioned after its budget changed."""
        st = self.tree_of(entity)
        if entity is entity.sched_data.in_service:
            self.calc_finish(entity, entity.service)
            entity.start = entity.finish
            if entity.tree == ACTIVE:
                self._active_extract(st, entity)
        else:
            self._active_extract(st, entity)
        self._update_fin_time_enqueue(entity, st, False)

    def activate_requeue(self, entity, non_blocking_wait_rq: bool, expiration: bool,
                         requeue: bool = False) -> None:
        """``bfq_activate_requeue_entity``: activate or requeue ``entity`` and go up
        while the level's next-in-service changes in a way that concerns the parent
        (all the way with ``requeue``: an expiring queue's ancestors all stop being
        served). An entity not yet attached is a root group's queue."""
        if entity.sched_data is None:
            entity.sched_data = self.sd
        while entity is not None:
            sd = entity.sched_data
            if entity is sd.in_service or entity.tree == ACTIVE:
                self._requeue(entity)
            else:
                self._activate(entity, non_blocking_wait_rq)
            if not self.update_next_in_service(sd, entity, expiration) and not requeue:
                break
            entity = entity.parent

    def _deactivate_one(self, entity, ins_into_idle_tree: bool) -> bool:
        """``__bfq_deactivate_entity``: take the entity off its trees, into the idle
        tree if allowed and its finish is ahead of ``V``. False if it was not on any."""
        if not entity.on_st_or_in_serv:
            return False
        sd = entity.sched_data
        st = self.tree_of(entity)
        is_in_service = entity is sd.in_service
        self.calc_finish(entity, entity.service)
        if is_in_service:
            sd.in_service = None
        else:
            entity.service = 0
        if entity.tree == ACTIVE:
            self._active_extract(st, entity)
        elif not is_in_service and entity.tree == IDLE:
            self._idle_extract(st, entity)
        if not ins_into_idle_tree or not entity.finish > st.vtime:
            self.forget_entity(st, entity, is_in_service)
        else:
            self._idle_insert(st, entity)
        return True

    def deactivate(self, entity, ins_into_idle_tree: bool, expiration: bool) -> None:
        """``bfq_deactivate_entity``: deactivate ``entity`` and every ancestor left with
        nothing to serve (into their idle trees); then requeue or reposition the
        ancestors above, as far as their level's next-in-service changes (all of them
        on an expiration)."""
        parent = None
        while entity is not None:
            parent = entity.parent
            sd = entity.sched_data
            if not self._deactivate_one(entity, ins_into_idle_tree):
                return
            if sd.next_in_service is entity:
                self.update_next_in_service(sd, None, expiration)
            if sd.next_in_service is not None or sd.in_service is not None:
                break
            ins_into_idle_tree = True
            entity = parent
        else:
            return
        entity = parent
        while entity is not None:
            self._requeue(entity)
            if (not self.update_next_in_service(entity.sched_data, entity, expiration)
                    and not expiration):
                break
            entity = entity.parent

    # --- choosing ------------------------------------------------------------------
    def update_next_in_service(self, sd: SchedData, new_entity, expiration: bool) -> bool:
        """``bfq_update_next_in_service``: a newly activated entity replaces the
        next-in-service one without a lookup when it is of the same class, eligible,
        and finishes earlier; otherwise look the next one up. The group owning
        ``sd`` takes the new next entity's budget (``bfq_update_parent_budget``).
        Returns whether the parent's schedule may change: the level had no
        next-in-service, or the group's budget was lowered."""
        nxt = sd.next_in_service
        change_without_lookup = False
        if new_entity is not None and new_entity is not nxt:
            change_without_lookup = True
            if nxt is not None:
                st = self.tree_of(new_entity)
                change_without_lookup = (
                    new_entity.ioprio_class == nxt.ioprio_class
                    and not new_entity.start > st.vtime
                    and nxt.finish > new_entity.finish)
            if change_without_lookup:
                nxt = new_entity
        if not change_without_lookup:
            nxt = self.lookup_next(sd, expiration)
        parent_sched_may_change = False
        if nxt is not None:
            # the budget is updated first, always ("block, bfq: always update the
            # budget of an entity when needed", 4.19)
            lowered = self._update_parent_budget(sd, nxt)
            parent_sched_may_change = sd.next_in_service is None or lowered
        sd.next_in_service = nxt
        return parent_sched_may_change

    @staticmethod
    def _update_parent_budget(sd: SchedData, nxt) -> bool:
        """``bfq_update_parent_budget``: the group owning ``sd`` takes its next entity's
        budget; True if that lowered it (the root group has no entity)."""
        group = sd.owner
        if group is None:
            return False
        lowered = group.budget > nxt.budget
        group.budget = nxt.budget
        return lowered

    def _lookup_in_tree(self, st: ServiceTree, in_service: bool):
        """``__bfq_lookup_next_entity``: jump ``V`` to the smallest start when no
        entity is eligible (unless one is in service), then the first eligible."""
        if not st.active:
            return None
        new_vtime = st.vtime
        ms = st.min_start()
        if ms > new_vtime:
            new_vtime = ms
        if not in_service and new_vtime > st.vtime:
            st.vtime = new_vtime
            self.forget_idle(st)
        return st.first_active(new_vtime)

    def lookup_next(self, sd: SchedData | None = None, expiration: bool = False):
        """``bfq_lookup_next_entity`` in ``sd`` (default: the root group's): classes in
        strict priority, but the IDLE class first when it has not been looked at
        first for ``BFQ_CL_IDLE_TIMEOUT``."""
        if sd is None:
            sd = self.sd
        trees = sd.trees
        jiffies = self.bfqd.jiffies
        first_class = 0
        if sd.class_idle_last_service + self.bfqd.hz // 5 < jiffies:
            if trees[CLASS_IDLE - 1].active:
                first_class = CLASS_IDLE - 1
            sd.class_idle_last_service = jiffies
        in_service = sd.in_service is not None and not expiration
        for idx in range(first_class, BFQ_IOPRIO_CLASSES):
            entity = self._lookup_in_tree(trees[idx], in_service)
            if entity is not None:
                return entity
        return None

    def next_may_preempt(self) -> bool:
        """``next_queue_may_preempt`` (the root group's level)."""
        return self.sd.next_in_service is not self.sd.in_service

    def get_next_queue(self):
        """``bfq_get_next_queue``: from the root down, put each level's next-in-service
        entity in service (it leaves the active tree if it is a queue or a group with
        one active child), down to a queue; then update the next-in-service entities
        from that queue up, while they change. Service counters are reset at
        expiration (`blksim.schedulers.bfq.service`, ``bfq_bfqq_expire``: "block, bfq:
        readd missing reset of parent-entity service", 4.19)."""
        sd = self.sd
        entity = sd.next_in_service
        if entity is None:
            sd.in_service = None
            return None
        while sd is not None:
            entity = sd.next_in_service
            sd.in_service = entity
            group_sd = entity.my_sched_data
            if ((group_sd is None or entity.active_entities == 1)
                    and entity.tree == ACTIVE):
                self._active_extract(self.tree_of(entity), entity)
            sd = group_sd
        bfqq = entity
        while entity is not None:
            if not self.update_next_in_service(entity.sched_data, None, False):
                break
            entity = entity.parent
        return bfqq

    def reset_in_service(self, bfqq=None) -> None:
        """The end of ``__bfq_bfqd_reset_in_service``: no entity is in service on the
        path from ``bfqq`` (the queue that was) to the root."""
        if bfqq is None or bfqq.sched_data is None:
            self.sd.in_service = None
            return
        entity = bfqq
        while entity is not None:
            entity.sched_data.in_service = None
            entity = entity.parent
