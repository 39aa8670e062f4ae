"""B-WF2Q+, BFQ's scheduling engine: service trees, timestamps and virtual time, as
block/bfq-wf2q.c of Linux 5.4 to 6.6 has them, for one root group.

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
finds. Groups (cgroups) are the seam left open: an entity's ``parent`` is always the
root, whose scheduling data is `SchedData`.
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
    """``struct bfq_sched_data`` of the root group: one `ServiceTree` per class
    (``trees[class - 1]``), the entity in service and the one that would be chosen
    next, and when the IDLE class was last looked at first (in jiffies)."""

    __slots__ = ("trees", "in_service", "next_in_service", "class_idle_last_service")

    def __init__(self, jiffies: int = 0) -> None:
        self.trees = [ServiceTree() for _ in range(BFQ_IOPRIO_CLASSES)]
        self.in_service = None
        self.next_in_service = None
        self.class_idle_last_service = jiffies


class Wf2q:
    """The scheduling engine of one BFQ instance (the root group's part of
    block/bfq-wf2q.c). ``bfqd`` is the elevator: its ``jiffies``, ``hz`` and the hooks
    the engine calls back when a queue enters or leaves a tree (``on_active``,
    ``on_inactive``: the kernel's ``active_list``/``idle_list`` and queue references)."""

    __slots__ = ("sd", "bfqd")

    def __init__(self, bfqd, jiffies: int = 0) -> None:
        # a proxy: the elevator holds this engine, a reference back would be a cycle
        self.bfqd = weakref.proxy(bfqd)
        self.sd = SchedData(jiffies)

    def tree_of(self, entity) -> ServiceTree:
        """``bfq_entity_service_tree``: the service tree of ``entity``'s class."""
        return self.sd.trees[entity.ioprio_class - 1]

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
            if prev_weight != new_weight:
                self.bfqd.weights_tree_remove(entity)
            entity.weight = new_weight
            if prev_weight != new_weight and entity.wr_coeff == 1:
                self.bfqd.weights_tree_add(entity)
            new_st.wsum += entity.weight
            if new_st is not st:
                entity.start = new_st.vtime
        return new_st

    def served(self, entity, served: int, jiffies: int) -> None:
        """``bfq_bfqq_served``: ``entity`` received ``served`` sectors of service."""
        if not entity.service_from_backlogged:
            entity.first_io_time = jiffies
        if entity.wr_coeff > 1:
            entity.service_from_wr += served
        entity.service_from_backlogged += served
        st = self.tree_of(entity)
        entity.service += served
        st.vtime += bfq_delta(served, st.wsum)
        self.forget_idle(st)

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
        if not is_in_service:
            self.bfqd.on_forgotten(entity)

    def put_idle_entity(self, st: ServiceTree, entity) -> None:
        """``bfq_put_idle_entity``."""
        st.idle_extract(entity)
        self.bfqd.on_leave_idle_list(entity)
        self.forget_entity(st, entity, entity is self.sd.in_service)

    def forget_idle(self, st: ServiceTree) -> None:
        """``bfq_forget_idle``: with nothing active, ``V`` may jump to the last idle
        finish; the first idle entity is dropped once ``V`` has reached its finish."""
        last = st.last_idle()
        if not st.active and last is not None and not last.finish > st.vtime:
            st.vtime = last.finish
        first = st.first_idle()
        if first is not None and not first.finish > st.vtime:
            self.put_idle_entity(st, first)

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
        st.active_insert(entity)
        self.bfqd.on_active(entity)

    def _activate(self, entity, non_blocking_wait_rq: bool) -> None:
        """``__bfq_activate_entity``: a true activation (the entity was not active)."""
        st = self.tree_of(entity)
        backshifted = False
        if non_blocking_wait_rq and st.vtime > entity.finish:
            backshifted = True
            min_vstart = entity.finish
        else:
            min_vstart = st.vtime
        if entity.tree == IDLE:
            st.idle_extract(entity)
            self.bfqd.on_leave_idle_list(entity)
            entity.start = min_vstart if min_vstart > entity.finish else entity.finish
        else:
            entity.start = min_vstart
            st.wsum += entity.weight
            entity.on_st_or_in_serv = True
        self._update_fin_time_enqueue(entity, st, backshifted)

    def _requeue(self, entity) -> None:
        """``__bfq_requeue_entity``: the in-service entity is requeued after expiring
        (its start moves to the finish its service earned), or an active entity is
        repositioned after its budget changed."""
        st = self.tree_of(entity)
        if entity is self.sd.in_service:
            self.calc_finish(entity, entity.service)
            entity.start = entity.finish
            if entity.tree == ACTIVE:
                st.active_extract(entity)
                self.bfqd.on_inactive(entity)
        else:
            st.active_extract(entity)
            self.bfqd.on_inactive(entity)
        self._update_fin_time_enqueue(entity, st, False)

    def activate_requeue(self, entity, non_blocking_wait_rq: bool, expiration: bool) -> None:
        """``bfq_activate_requeue_entity`` for the root group's one level."""
        if entity is self.sd.in_service or entity.tree == ACTIVE:
            self._requeue(entity)
        else:
            self._activate(entity, non_blocking_wait_rq)
        self.update_next_in_service(entity, expiration)

    def deactivate(self, entity, ins_into_idle_tree: bool, expiration: bool) -> None:
        """``bfq_deactivate_entity`` (``__bfq_deactivate_entity`` for one level)."""
        if not entity.on_st_or_in_serv:
            return
        sd = self.sd
        st = self.tree_of(entity)
        is_in_service = entity is sd.in_service
        self.calc_finish(entity, entity.service)
        if is_in_service:
            sd.in_service = None
        else:
            entity.service = 0
        if entity.tree == ACTIVE:
            st.active_extract(entity)
            self.bfqd.on_inactive(entity)
        elif not is_in_service and entity.tree == IDLE:
            st.idle_extract(entity)
            self.bfqd.on_leave_idle_list(entity)
        if not ins_into_idle_tree or not entity.finish > st.vtime:
            self.forget_entity(st, entity, is_in_service)
        else:
            st.idle_insert(entity)
            self.bfqd.on_idle_list(entity)
        if sd.next_in_service is entity:
            self.update_next_in_service(None, expiration)

    # --- choosing ------------------------------------------------------------------
    def update_next_in_service(self, new_entity, expiration: bool) -> None:
        """``bfq_update_next_in_service``: a newly activated entity replaces the
        next-in-service one without a lookup when it is of the same class, eligible,
        and finishes earlier; otherwise look the next one up."""
        sd = self.sd
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
            nxt = self.lookup_next(expiration)
        sd.next_in_service = nxt

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

    def lookup_next(self, expiration: bool):
        """``bfq_lookup_next_entity``: classes in strict priority, but the IDLE class
        first when it has not been looked at first for ``BFQ_CL_IDLE_TIMEOUT``."""
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
        """``next_queue_may_preempt``."""
        return self.sd.next_in_service is not self.sd.in_service

    def get_next_queue(self):
        """``bfq_get_next_queue``: put the next-in-service entity in service (it leaves
        the active tree) and look up its successor."""
        sd = self.sd
        entity = sd.next_in_service
        sd.in_service = entity
        if entity is None:
            return None
        st = self.tree_of(entity)
        if entity.tree == ACTIVE:
            st.active_extract(entity)
            self.bfqd.on_inactive(entity)
        self.update_next_in_service(None, False)
        return entity

    def reset_in_service(self) -> None:
        """The end of ``__bfq_bfqd_reset_in_service``: no entity is in service."""
        self.sd.in_service = None
