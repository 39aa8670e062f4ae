"""The rq_qos chain (block/mq/rq_qos.py) in the multi-queue queue: a throwaway policy
on the chain records every hook, hand-traced against where Linux 5.4-6.6 calls them
(block/blk-mq.c, blk-merge.c, bio.c, blk-rq-qos.c); two policies run newest first
(``rq_qos_add`` inserts at the head); a policy that makes a bio sleep hands it on to
the next policy when it lets it go; a hook no policy has is not called at all."""

from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from blksim.block.mq.rq_qos import (RQ_QOS_COST, RQ_QOS_LATENCY, RQ_QOS_WBT, RqQos,
                                    RqQosPolicy)
from blksim.block.mq.wbt import Wbt
from tests.test_mq_queue import bio, make


class Recorder(RqQosPolicy):
    """Logs ``(name, hook, what)`` into a shared list; ``hold`` bios sleep in throttle
    until the next ``done``, ``timed_hold`` ones until its timer at ``wake_at``."""

    def __init__(self, name, log, rq_qos_id=-1, hold=(), timed_hold=(), wake_at=None):
        self.name = name
        self.log = log
        self.rq_qos_id = rq_qos_id
        self.hold = set(hold)
        self.timed_hold = set(timed_hold)
        self.held = []
        self.timed = []
        self.wake_at = wake_at
        self.uses_timers = wake_at is not None

    def _note(self, hook, what):
        self.log.append((self.name, hook, what))

    def throttle(self, b, now):
        self._note("throttle", b.id)
        if b.id in self.hold:
            self.held.append(b)
            return False
        if b.id in self.timed_hold:
            self.timed.append(b)
            self.wakeup_at = self.wake_at
            self.timers_changed = True
            return False
        return True

    def track(self, rq, b):
        self._note("track", b.id)

    def merge(self, rq, b, now):
        self._note("merge", b.id)

    def issue(self, rq, now):
        self._note("issue", rq.bios[0].id)

    def requeue(self, rq, now):
        self._note("requeue", rq.bios[0].id)

    def done(self, rq, now):
        self._note("done", tuple(b.id for b in rq.bios))
        held, self.held = self.held, []
        return held

    def done_bio(self, b, now):
        self._note("done_bio", b.id)

    def cleanup(self, b, now):
        self._note("cleanup", b.id)
        return []

    def timer_fired(self, now):
        self._note("timer", now)
        self.wakeup_at = None
        timed, self.timed = self.timed, []
        return timed


def hooks(log, name="t"):
    return [(hook, what) for who, hook, what in log if who == name]


def test_one_read_goes_through_throttle_track_issue_done_bio_done():
    # blk_mq_submit_bio: rq_qos_throttle before the request, rq_qos_track after
    # block_getrq; blk_mq_start_request: rq_qos_issue after block_rq_issue; at the
    # completion blk_update_request ends the bio (bio_endio: rq_qos_done_bio) before
    # __blk_mq_end_request frees the request (blk_mq_free_request: rq_qos_done)
    env, q, dev, ev = make("none")
    log = []
    q.rq_qos.add(Recorder("t", log))
    q.subscribe("block_getrq", lambda _q, *a: log.append(("tp", "getrq", None)))
    q.subscribe("block_rq_issue", lambda _q, *a: log.append(("tp", "issue", None)))
    q.subscribe("block_rq_complete", lambda _q, *a: log.append(("tp", "complete", None)))
    done = []
    b = bio(100, done=done)
    assert q.submit_bio(b, 0.0)
    env.run()
    assert done == [b]
    assert [(who, hook) for who, hook, _ in log] == [
        ("t", "throttle"), ("tp", "getrq"), ("t", "track"), ("tp", "issue"), ("t", "issue"),
        ("tp", "complete"), ("t", "done_bio"), ("t", "done")]
    assert all(what == b.id for who, hook, what in log if who == "t" and hook != "done")
    assert ("t", "done", (b.id,)) in log


def test_a_merged_bio_is_seen_by_merge_not_throttle_and_ends_with_its_request():
    # bio_attempt_back_merge: rq_qos_merge; a merged bio never reaches rq_qos_throttle
    env, q, dev, ev = make("mq-deadline")
    log = []
    q.rq_qos.add(Recorder("t", log))
    first, second = bio(100), bio(108)
    q.submit_bio(first, 0.0)
    assert q.submit_bio(second, 0.0) and q.bio_merges == 1
    env.run()
    assert hooks(log) == [("throttle", first.id), ("track", first.id),
                          ("merge", second.id), ("issue", first.id),
                          ("done_bio", first.id), ("done_bio", second.id),
                          ("done", (first.id, second.id))]


def test_a_request_the_driver_gives_back_is_requeued_then_issued_again():
    # blk_mq_dispatch_rq_list, BLK_STS_RESOURCE -> __blk_mq_requeue_request: rq_qos_requeue
    # (blksim's device refuses before blk_mq_start_request, so no issue comes first)
    env, q, dev, ev = make("mq-deadline")
    log = []
    q.rq_qos.add(Recorder("t", log))
    b1, b2 = bio(100), bio(5000)
    q.submit_bio(b1, 0.0)
    env.run(until=0.0005)                    # b1 at the device
    dev.refuse = 1
    q.submit_bio(b2, 0.0005)
    env.run()
    # b2 refused, back on the dispatch list; b1's completion restarts the hctx
    assert q.requeues == 1
    assert [h for h in hooks(log) if h[1] == b2.id or h[1] == (b2.id,)] == [
        ("throttle", b2.id), ("track", b2.id), ("requeue", b2.id), ("issue", b2.id),
        ("done_bio", b2.id), ("done", (b2.id,))]
    assert hooks(log).index(("requeue", b2.id)) < hooks(log).index(("done", (b1.id,))) \
        < hooks(log).index(("issue", b2.id))


def test_policies_run_newest_first_as_rq_qos_add_inserts_at_the_head():
    env, q, dev, ev = make("none")
    log = []
    older, newer = Recorder("older", log), Recorder("newer", log)
    q.rq_qos.add(older)
    q.rq_qos.add(newer)
    # wbt came first (at the queue's registration): it is last
    assert q.rq_qos.policies == [newer, older, q.wbt]
    b = bio(100)
    q.submit_bio(b, 0.0)
    env.run()
    assert [(who, hook) for who, hook, _ in log] == [
        ("newer", "throttle"), ("older", "throttle"), ("newer", "track"), ("older", "track"),
        ("newer", "issue"), ("older", "issue"), ("newer", "done_bio"), ("older", "done_bio"),
        ("newer", "done"), ("older", "done")]


def test_a_bio_let_go_goes_through_the_later_policies_only_after_the_handler():
    # rq_qos_throttle's loop: a task woken in one policy's rq_qos_wait goes on to the
    # next policy, not back to the first
    env, q, dev, ev = make("none", queue_depth=4)
    log = []
    older = Recorder("older", log)
    b1, b2 = bio(100), bio(5000)
    newer = Recorder("newer", log, hold={b2.id})
    q.rq_qos.add(older)
    q.rq_qos.add(newer)
    got = []
    assert q.submit_bio(b1, 0.0)
    assert not q.submit_bio(b2, 0.0)          # asleep in "newer"
    q.when_request(b2, got.append)
    assert q.pending() == 2 and hooks(log, "older") == [("throttle", b1.id),
                                                        ("track", b1.id), ("issue", b1.id)]
    env.run()
    # b1's completion (done) let b2 go; b2 then met "older" only, and got a request
    assert got == [b2]
    assert [(who, hook, what) for who, hook, what in log if what == b2.id] == [
        ("newer", "throttle", b2.id), ("older", "throttle", b2.id), ("newer", "track", b2.id),
        ("older", "track", b2.id), ("newer", "issue", b2.id), ("older", "issue", b2.id),
        ("newer", "done_bio", b2.id), ("older", "done_bio", b2.id)]
    i_done = log.index(("newer", "done", (b1.id,)))
    assert log.index(("older", "throttle", b2.id)) > log.index(("older", "done", (b1.id,))) \
        > i_done
    assert q.idle()


def test_a_bio_let_go_that_sleeps_in_a_later_policy_waits_for_that_one():
    env, q, dev, ev = make("none")
    log = []
    b1, b2 = bio(100), bio(5000)
    older = Recorder("older", log, timed_hold={b2.id}, wake_at=0.05)
    newer = Recorder("newer", log, hold={b2.id})
    q.rq_qos.add(older)
    q.rq_qos.add(newer)
    got = []
    q.submit_bio(b1, 0.0)
    assert not q.submit_bio(b2, 0.0)
    q.when_request(b2, lambda b: got.append((b, env.now)))
    env.run()
    # let go by newer at b1's completion (1 ms), asleep again in older until its timer
    assert got == [(b2, 0.05)]
    assert ("older", "timer", 0.05) in log
    assert q.idle() and q.waited == 1


def test_a_hook_no_policy_has_is_not_called():
    chain = RqQos()
    assert all(getattr(chain, h) is None for h in ("throttle", "track", "merge", "issue",
                                                     "requeue", "done", "done_bio", "cleanup"))
    env, q, dev, ev = make("none")
    wbt = q.wbt
    # wbt has no merge and no done_bio (wbt_rqos_ops): the chain has none to call; its
    # hooks are wbt's own bound methods (no loop for one policy)
    assert q.rq_qos.merge is None and q.rq_qos.done_bio is None
    assert q.rq_qos.throttle == wbt.throttle and q.rq_qos.done == wbt.done
    q.rq_qos.remove(wbt)
    assert q.wbt is None and q.rq_qos.throttle is None and q.rq_qos.done is None
    done = []
    q.submit_bio(bio(100, write=True, done=done), 0.0)
    env.run()
    assert len(done) == 1 and q.idle()


def test_cleanup_fans_out_in_order_and_returns_what_the_policies_let_go():
    # rq_qos_cleanup (blk_mq_get_new_requests when the allocation fails: a REQ_NOWAIT bio);
    # blksim's submitters sleep for a tag instead, so only the chain is exercised here
    log = []
    chain = RqQos()
    chain.add(Recorder("a", log))
    chain.add(Recorder("b", log))
    b = bio(100)
    assert chain.cleanup(b, 0.0) == []
    assert log == [("b", "cleanup", b.id), ("a", "cleanup", b.id)]


def test_wbt_cleanup_returns_the_slot_a_throttled_write_took():
    w = Wbt(32, True)
    chain = RqQos()
    chain.add(w)
    b = bio(100, write=True)
    b.sync = False                         # page-cache writeback
    assert chain.throttle(b, 0.0) and w.inflight == 1
    chain.cleanup(b, 0.0)
    assert w.inflight == 0


def test_one_policy_per_id_and_lookup_by_id():
    chain = RqQos()
    chain.add(Recorder("lat", [], rq_qos_id=RQ_QOS_LATENCY))
    chain.add(Recorder("cost", [], rq_qos_id=RQ_QOS_COST))
    assert chain.get(RQ_QOS_COST).name == "cost" and chain.get(RQ_QOS_WBT) is None
    assert [p.name for p in chain.policies] == ["cost", "lat"]
    with pytest.raises(ValueError, match="already has a latency policy"):
        chain.add(Recorder("lat2", [], rq_qos_id=RQ_QOS_LATENCY))
    with pytest.raises(TypeError):
        chain.add(object())


def test_a_policy_cannot_be_added_while_a_bio_sleeps_in_the_chain():
    env, q, dev, ev = make("none")
    b = bio(100)
    q.rq_qos.add(Recorder("t", [], hold={b.id}))
    assert not q.submit_bio(b, 0.0)
    with pytest.raises(RuntimeError, match="sleep"):
        q.rq_qos.add(Recorder("u", []))


def test_bfq_turns_wbt_off_through_the_chain_and_back_on_when_it_leaves():
    # bfq_init_queue: wbt_disable_default; bfq_exit_queue: wbt_enable_default
    env, q, dev, ev = make("bfq")
    assert not q.wbt.enabled
    from blksim.schedulers import MQ_SCHEDULERS
    dl = MQ_SCHEDULERS["mq-deadline"]
    q.switch_elevator(lambda info: dl.create(info, {}), "mq-deadline")
    assert q.elevator_name == "mq-deadline" and q.wbt.enabled
    bfq = MQ_SCHEDULERS["bfq"]
    q.switch_elevator(lambda info: bfq.create(info, {}), "bfq")
    assert not q.wbt.enabled
    q.switch_elevator(None, "none")
    assert q.wbt.enabled


@settings(max_examples=25, deadline=None)
@given(n_policies=st.integers(1, 3),
       scheduler=st.sampled_from(["none", "mq-deadline", "kyber", "bfq"]),
       kernel=st.sampled_from(["5.4", "6.6"]),
       bios=st.lists(st.tuples(st.integers(0, 40), st.booleans(), st.integers(0, 3)),
                     min_size=1, max_size=30))
def test_every_policy_sees_every_bio_once_in_the_same_order(n_policies, scheduler, kernel,
                                                           bios):
    env, q, dev, ev = make(scheduler, kernel=kernel, queue_depth=2)
    log = []
    for k in range(n_policies):
        q.rq_qos.add(Recorder(f"p{k}", log))
    ended = []
    for sector, write, pid in bios:
        # 8-sector bios on an 8-sector grid: neighbours merge
        b = bio(8 * sector, write=write, pid=pid, done=ended)
        b.sync = not write              # the writes are writeback: wbt throttles them
        if not q.submit_bio(b, 0.0):
            q.when_request(b, lambda _b: None)
    env.run()
    assert len(ended) == len(bios) and q.idle()
    per = [hooks(log, f"p{k}") for k in range(n_policies)]
    assert all(p == per[0] for p in per)          # the same calls, the same order
    calls = per[0]
    ids = {b.id for b in ended}
    entered = [w for h, w in calls if h in ("throttle", "merge")]
    assert sorted(entered) == sorted(ids)         # each bio throttled or merged, once
    assert sorted(w for h, w in calls if h == "done_bio") == sorted(ids)
    tracked = [w for h, w in calls if h == "track"]
    assert len(tracked) == len(set(tracked)) == sum(1 for h, _ in calls if h == "done")
    # the newest policy is called first for every hook
    firsts = [who for who, _h, _w in log[::n_policies]]
    assert set(firsts) == {f"p{n_policies - 1}"}


def test_the_timer_watch_is_the_one_timed_policy_or_stands_for_several():
    chain = RqQos()
    assert chain.timer_watch is None
    a = Recorder("a", [], wake_at=1.0)
    chain.add(a)
    assert chain.timer_watch is a
    b = Recorder("b", [], wake_at=2.0)
    chain.add(b)
    watch = chain.timer_watch
    assert not watch.timers_changed
    a.timers_changed = True
    assert watch.timers_changed


class _Clock:
    """A clock that keeps its queued events in a list (time, callback)."""

    def __init__(self):
        self.now = 0.0
        self.events = []

    def call_at(self, when, fn):
        self.events.append((when, fn))

    def run_next(self):
        self.events.sort(key=lambda e: e[0])
        when, fn = self.events.pop(0)
        self.now = when
        fn(SimpleNamespace(when=when))


class _Periodic(RqQosPolicy):
    """A period timer at 4.0 and, once, a wait timer at 1.0 before it."""

    uses_timers = True

    def __init__(self):
        self.wakeup_at = 4.0
        self.timers_changed = True
        self.fired = []

    def timer_fired(self, now):
        self.fired.append(now)
        self.wakeup_at = 4.0 if now < 4.0 else None
        self.timers_changed = True
        return []


def test_a_timer_that_comes_back_to_a_queued_time_reuses_its_event():
    # period at 4.0 armed; a wait timer at 1.0 supersedes it; after 1.0 fires the
    # policy wants 4.0 again: the event already queued at 4.0 serves (the old chain
    # queued a second one, which then fired as a no-op), and fires the policy once
    chain = RqQos()
    p = _Periodic()
    chain.add(p)
    clock = _Clock()
    chain.check_timers(clock, release=lambda b: None)
    assert [w for w, _ in clock.events] == [4.0]
    p.wakeup_at, p.timers_changed = 1.0, True
    chain.check_timers(clock, release=lambda b: None)
    assert sorted(w for w, _ in clock.events) == [1.0, 4.0]
    clock.run_next()                      # 1.0: fired; back to 4.0, already queued
    assert p.fired == [1.0]
    assert [w for w, _ in clock.events] == [4.0]
    clock.run_next()
    assert p.fired == [1.0, 4.0] and clock.events == []
