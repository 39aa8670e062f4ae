"""B-WF2Q+ (blksim.schedulers.bfq.wf2q) on small cases traced by hand from
block/bfq-wf2q.c (Linux 6.6): timestamps, virtual time, eligibility, class priority,
the idle tree and the IDLE-class starvation guard."""

from __future__ import annotations

from blksim.block.request import ioprio_value
from blksim.schedulers.bfq.queue import BfqQueue, ioprio_to_weight
from blksim.schedulers.bfq.wf2q import Wf2q, bfq_delta

U = 1 << 22          # one sector of service at weight 1, in virtual time


class StubBfqd:
    """What the engine reads of the elevator: the clock and the list callbacks."""

    def __init__(self):
        self.jiffies = 0
        self.hz = 250
        self.active = []

    def on_active(self, q):
        self.active.append(q)

    def on_inactive(self, q):
        self.active.remove(q)

    def on_idle_list(self, q):
        pass

    def on_leave_idle_list(self, q):
        pass

    def on_forgotten(self, q):
        pass

    def weights_tree_add(self, q):
        pass

    def weights_tree_remove(self, q):
        pass


def queue(pid, level=4, cls=2, budget=100):
    q = BfqQueue(pid, True, ioprio_value(cls, level), 0, 0, 16384)
    q.budget = budget
    return q


def serve_and_requeue(w, q, sectors):
    """The in-service queue receives ``sectors`` and expires still busy (what
    bfq_bfqq_expire does through bfq_requeue_bfqq and __bfq_bfqd_reset_in_service)."""
    w.served(q, sectors, 0)
    w.activate_requeue(q, False, True)
    w.reset_in_service()
    q.service = 0


def test_weights_from_ioprio_levels():
    assert [ioprio_to_weight(level) for level in range(8)] == [80, 70, 60, 50, 40, 30, 20, 10]
    assert queue(1, level=0).weight == 80 and queue(1, level=7).weight == 10


def test_hand_traced_selection_of_three_queues():
    """A and B weigh 40, C 80; budgets of 100 sectors, all activated at V = 0.
    Traced: F_A = F_B = 100/40 = 2.5, F_C = 1.25 (in units of 2^22). C first (smallest
    finish); served, V = 100/160 = 0.625, C requeued with S = 1.25, F = 2.5 after A and
    B. A (eligible, F 2.5, first filed), V = 1.25; B, V = 1.875; C (S 1.25 <= V),
    V = 2.5; C again (S = 2.5 <= V, F = 3.75 smallest); then A (F 5, filed before B
    and C)."""
    bfqd = StubBfqd()
    w = Wf2q(bfqd)
    a, b, c = queue(1), queue(2), queue(3, level=0)
    for q in (a, b, c):
        w.activate_requeue(q, False, False)
    st = w.tree_of(a)
    assert st.wsum == 160
    assert (a.start, a.finish) == (0, 100 * U // 40)
    assert c.finish == 100 * U // 80
    assert w.sd.next_in_service is c
    order = []
    for _ in range(6):
        q = w.get_next_queue()
        order.append(q)
        serve_and_requeue(w, q, 100)
    assert order == [c, a, b, c, c, a]
    # after the sixth budget V = 6 * 100/160
    assert st.vtime == 6 * bfq_delta(100, 160)


def test_vtime_jumps_to_the_smallest_start_when_nothing_is_eligible():
    """One queue, served and requeued: its start moves to its old finish, ahead of V;
    with nothing eligible and nothing in service V jumps to that start
    (bfq_calc_vtime_jump)."""
    bfqd = StubBfqd()       # kept: the engine holds only a proxy of it
    w = Wf2q(bfqd)
    a = queue(1, budget=100)
    w.activate_requeue(a, False, False)
    assert w.get_next_queue() is a
    w.served(a, 100, 0)                    # V = 100/40 * U = F_A: still the finish
    st = w.tree_of(a)
    assert st.vtime == 100 * U // 40
    a.budget = 200
    w.activate_requeue(a, False, True)     # S = 2.5 U, F = 2.5 U + 200/40 U
    w.reset_in_service()
    assert a.start == 100 * U // 40 and a.finish == a.start + 200 * U // 40
    assert w.get_next_queue() is a


def test_classes_are_served_in_strict_priority():
    bfqd = StubBfqd()       # kept: the engine holds only a proxy of it
    w = Wf2q(bfqd)
    be = queue(1, cls=2, level=0)          # heavier, but best effort
    rt = queue(2, cls=1, level=7)
    idle = queue(3, cls=3)
    for q in (be, idle, rt):
        w.activate_requeue(q, False, False)
    got = []
    for _ in range(4):
        q = w.get_next_queue()
        got.append(q)
        serve_and_requeue(w, q, 100)
    assert got == [rt] * 4


def test_idle_class_is_looked_at_first_after_hz_over_5():
    """bfq_lookup_next_entity: once BFQ_CL_IDLE_TIMEOUT (HZ/5 = 50 jiffies at HZ 250)
    has passed since the IDLE class was last looked at first, the lookup looks at the
    IDLE tree first, and restarts the wait. Traced: the lookups made when BE queue
    ``be`` is put in service at jiffies 10 and 20 pick ``be`` again; the one at 51
    (made by bfq_get_next_queue for the next-in-service slot) picks the idle queue.
    If ``be`` then empties, the idle queue is served; if it is requeued instead, the
    requeue's lookup (within HZ/5 of 51) is strict again and ``be`` stays next."""
    for be_empties in (True, False):
        bfqd = StubBfqd()
        w = Wf2q(bfqd)
        be = queue(1)
        idle = queue(2, cls=3)
        w.activate_requeue(be, False, False)
        w.activate_requeue(idle, False, False)
        for jiffies in (10, 20):
            bfqd.jiffies = jiffies
            assert w.get_next_queue() is be
            assert w.sd.next_in_service is idle      # only entity left in the trees
            serve_and_requeue(w, be, 100)
            assert w.sd.next_in_service is be        # strict priority
        bfqd.jiffies = 51
        assert w.get_next_queue() is be
        assert w.sd.class_idle_last_service == 51
        w.served(be, 100, 51)
        if be_empties:
            w.deactivate(be, True, True)
            w.reset_in_service()
            assert w.get_next_queue() is idle
        else:
            w.activate_requeue(be, False, True)
            w.reset_in_service()
            assert w.get_next_queue() is be


def test_idle_tree_keeps_the_finish_of_a_queue_that_empties_early():
    """A queue that empties with its finish ahead of V goes to the idle tree and, back
    before V passes it, starts at its old finish (no gain from emptying)."""
    bfqd = StubBfqd()       # kept: the engine holds only a proxy of it
    w = Wf2q(bfqd)
    a, b = queue(1), queue(2)
    w.activate_requeue(a, False, False)
    w.activate_requeue(b, False, False)
    q = w.get_next_queue()
    assert q is a
    w.served(a, 50, 0)                      # V = 50/80
    w.deactivate(a, True, True)            # expired empty: F = 50/40, kept idle
    w.reset_in_service()
    st = w.tree_of(a)
    assert a.tree == "idle" and a.finish == 50 * U // 40 and a.finish > st.vtime
    a.service = 0
    w.activate_requeue(a, False, False)    # back at once: S = max(V, F_old)
    assert a.start == 50 * U // 40 and a.tree == "active"
    assert st.wsum == 80
