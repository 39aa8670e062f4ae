"""The decision and device collectors (sim/explain_decisions.py, sim/explain_device.py):
summaries of known message and issue/complete sequences, the comparison of two
summaries, and runs that give the same completions at the same times whether or not
anyone listens."""

from __future__ import annotations

import itertools
import json

import pytest
import simpy

from blksim.block.legacy_queue import QueueSettings, RequestQueue
from blksim.block.mq.queue import MqQueue, MqSettings
from blksim.block.request import Bio
from blksim.disk_models.raid import RaidController
from blksim.disk_models.raid_layout import RaidLayout
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import MQ_SCHEDULERS, get_scheduler
from blksim.sim.clock import SimpyClock
from blksim.sim.explain_decisions import DecisionLog, decision_differences, lines
from blksim.sim.explain_device import DeviceLog, Series, device_lines


class _Clock:
    now = 0.0


class _Elevator:
    name = "cfq"
    events = {"hold_start": "...", "hold_end": "...", "slice_start": "...",
              "slice_end": "...", "idle_window_off": "..."}


class FakeQueue:
    """Just what the collectors use of a queue: subscribe, a clock, an elevator."""

    def __init__(self, device=None):
        self.clock = _Clock()
        self.elevator = _Elevator()
        self.device = device
        self.subs = {}

    def subscribe(self, tp, fn):
        self.subs.setdefault(tp, []).append(fn)

    def unsubscribe(self, tp, fn):
        self.subs[tp].remove(fn)

    def fire(self, tp, *args):
        for fn in self.subs.get(tp, ()):
            fn(self, *args)


# ---------------------------------------------------------------- DecisionLog
def _cfq_messages(q):
    m = lambda *a: q.fire("block_elv_msg", *a)    # noqa: E731 (event, pid, detail, now)
    m("slice_start", 1, "be/sync", 0.000)
    m("hold_start", 1, "idle_window", 0.010)
    m("hold_end", 1, "hit", 0.012)                 # 2 ms
    m("hold_start", 1, "idle_window", 0.020)
    m("hold_end", 1, "timeout", 0.028)             # 8 ms
    m("slice_end", 1, "idle_timeout", 0.028)       # 28 ms
    m("slice_start", 2, "be/sync", 0.028)
    m("hold_start", 2, "idle_window", 0.040)
    m("hold_end", 2, "timeout", 0.048)             # 8 ms
    m("idle_window_off", 2, "think_time", 0.050)
    m("hold_end", 3, "timeout", 0.051)             # none open: an outcome only
    m("slice_end", 2, "time", 0.128)               # 100 ms
    m("hold_start", 1, "idle_window", 0.130)       # still open at the end


def test_the_summary_of_a_known_message_sequence():
    q = FakeQueue()
    log = DecisionLog(q)
    _cfq_messages(q)
    s = log.summary()
    json.dumps(s)                                   # JSON-ready
    assert s["scheduler"] == "cfq" and s["window_s"] == pytest.approx(0.130)
    hold = s["spans"]["hold"]
    assert hold["count"] == 3 and hold["total_ms"] == pytest.approx(18.0)
    assert hold["mean_ms"] == pytest.approx(6.0)
    assert hold["outcomes"] == {"hit": 1, "timeout": 3}     # the unmatched one too
    assert hold["open"] == 1
    assert hold["by_start"] == {"idle_window": {"count": 3, "total_ms": pytest.approx(18.0),
                                                "mean_ms": pytest.approx(6.0)}}
    slices = s["spans"]["slice"]
    assert slices["count"] == 2 and slices["total_ms"] == pytest.approx(128.0)
    assert slices["outcomes"] == {"idle_timeout": 1, "time": 1}
    assert s["events"]["idle_window_off"] == {"count": 1, "by_detail": {"think_time": 1}}
    assert s["events"]["hold_start"]["count"] == 4
    p1 = s["processes"]["1"]
    assert p1["spans"]["hold"]["count"] == 2
    assert p1["spans"]["hold"]["total_ms"] == pytest.approx(10.0)
    assert s["processes"]["2"]["events"]["idle_window_off"] == {"think_time": 1}
    assert s["meanings"] == _Elevator.events
    text = lines(s)
    assert text[0] == "decisions of cfq over 0.130 s:"
    assert any(t.startswith("  hold: 3 closed, 6.000 ms each, 0.018 s in all") and
               "ended: timeout 3, hit 1" in t and "1 still open" in t for t in text)
    assert "  idle_window_off: 1 (think_time 1)" in text
    assert any(t.startswith("  held for pid 1: 2 x 5.000 ms = 0.010 s (50 % timed out)")
               for t in text)
    log.close()
    assert q.subs["block_elv_msg"] == []


def test_nothing_reported_says_so_and_prints_no_figure():
    q = FakeQueue()
    s = DecisionLog(q).summary()
    assert s["spans"] == {} and s["events"] == {} and s["window_s"] == 0.0
    assert lines(s) == ["decisions of cfq over 0.000 s:", "  none reported"]


# ---------------------------------------------------------------- differences
def _summary(name, hold=None, events=None, spans=None):
    s = {"scheduler": name, "window_s": 10.0, "spans": {}, "events": {}}
    if hold is not None:
        count, mean, timeouts = hold
        s["spans"]["hold"] = {"count": count, "total_ms": count * mean, "mean_ms": mean,
                              "by_start": {}, "outcomes": {"timeout": timeouts,
                                                           "hit": count - timeouts}}
    for name_, (count, mean) in (spans or {}).items():
        s["spans"][name_] = {"count": count, "total_ms": count * mean, "mean_ms": mean,
                             "by_start": {}, "outcomes": {}}
    for event, by in (events or {}).items():
        s["events"][event] = {"count": sum(by.values()), "by_detail": by}
    return s


def test_differences_of_two_crafted_summaries_largest_first():
    cfq = _summary("cfq", hold=(1204, 8.0, 855), spans={"slice": (400, 90.0)},
                   events={"fifo_expired": {"sync": 10}})
    deadline = _summary("deadline", spans={"batch": (300, 20.0)},
                        events={"fifo_expired": {"read": 40},
                                "writes_starved": {"2": 5}})
    diffs = decision_differences(cfq, deadline)
    assert diffs[0] == (1.0, "cfq armed 1,204 idle windows (8.0 ms each, 71 % expired "
                             "unused); deadline held nothing back")
    assert diffs[1:3] == [(0.5, "cfq gave 400 slices (90.0 ms each); deadline had no "
                                "slices"),
                          (0.5, "deadline ran 300 batches (20.0 ms each); cfq had no "
                                "batches")]
    assert (pytest.approx(0.3 * 30 / 40), "deadline served 40 requests past their FIFO "
            "deadline; cfq served 10 requests past their FIFO deadline") in diffs
    assert diffs == sorted(diffs, key=lambda d: (-d[0], d[1]))
    # the comparison is symmetric in its magnitudes, and a summary equals itself
    assert sorted(m for m, _ in decision_differences(deadline, cfq)) == \
        sorted(m for m, _ in diffs)
    assert decision_differences(cfq, cfq) == []


# ---------------------------------------------------------------- DeviceLog
def test_tags_in_use_on_a_known_issue_complete_sequence():
    q = FakeQueue()
    dev = DeviceLog(q, max_points=4)
    for tp, t in (("block_rq_issue", 0.0), ("block_rq_issue", 1.0),
                  ("block_rq_complete", 2.0), ("block_rq_complete", 4.0)):
        q.fire(tp, object(), t)
    s = dev.summary(now=4.0)
    # 1 tag over [0,1] and [2,4], 2 over [1,2]: (3 + 2) / 4
    assert s["tags"]["mean"] == pytest.approx(1.25) and s["tags"]["max"] == 2
    assert s["tags"]["histogram"] == {"1": pytest.approx(3.0), "2": pytest.approx(1.0)}
    series = s["tags"]["series"]
    # 4 s in at most 4 intervals: 1 ms doubled until 4 fit, 1.024 s each
    assert series["interval_s"] == pytest.approx(1.024)
    assert series["max"] == [2, 2, 1, 1]
    assert series["mean"][0] == pytest.approx((1.0 + 0.024 * 2) / 1.024)
    assert series["mean"][3] == pytest.approx(1.0)
    assert device_lines(s)[0] == ("device over 4.000 s: tags in use 1.25 on average, "
                                  "2 at most")
    assert "cache" not in s


def test_an_empty_window_gives_no_mean():
    s = DeviceLog(FakeQueue()).summary()
    assert s["tags"]["mean"] is None
    assert device_lines(s) == ["device: nothing issued (an empty window)"]


def test_series_stay_bounded_and_keep_the_area():
    series = Series(0.0, max_points=8)
    t = 0.0
    for k in range(1, 2001):
        series.set(t, k % 5)
        t += 0.0137
    series.advance(t)
    out = series.summary(digits=12)
    assert len(out["mean"]) <= 8
    area = sum(m * out["interval_s"] for m in out["mean"][:-1])
    last_covered = t - (len(out["mean"]) - 1) * out["interval_s"]
    area += out["mean"][-1] * last_covered
    assert area == pytest.approx(sum((k % 5) * 0.0137 for k in range(1, 2001)))


def _controller():
    members = [ServiceLawDevice("fixed", 0.010, capacity=1 << 24, queue_depth=4)
               for _ in range(2)]
    return RaidController("c", RaidLayout("raid0", 2, 1 << 24, 128), members,
                          queue_depth=8, cache_sectors=8 * 1024, write_policy="write-back")


def test_the_cache_on_a_known_probe_sequence():
    ctrl = _controller()                       # 1024 lines, high water at 768
    q = FakeQueue(device=ctrl)
    dev = DeviceLog(q)
    assert ctrl.probe is not None
    ctrl.probe("dirty", 0.0, 512)
    ctrl.probe("dirty", 1.0, 800)              # above the high-water mark
    ctrl.probe("destage_start", 2.0, 400 * 8)
    ctrl.probe("destage_end", 3.0, 400 * 8)
    ctrl.probe("dirty", 3.0, 400)
    ctrl.probe("flush_tick", 3.5, 400)
    c = dev.summary(now=4.0)["cache"]
    assert c["dirty_mean"] == pytest.approx((512 + 2 * 800 + 400) / 4 / 1024)
    assert c["dirty_max"] == pytest.approx(800 / 1024)
    assert c["above_high_water_s"] == pytest.approx(2.0)
    assert (c["destages"], c["destage_bytes"]) == (1, 400 * 8 * 512)
    assert c["destage_busy_s"] == pytest.approx(1.0) and c["flush_ticks"] == 1
    assert max(c["series"]["max"]) == pytest.approx(800 / 1024)
    dev.close()
    assert ctrl.probe is None


# ---------------------------------------------------------------- no change unwatched
_ids = itertools.count()


def _run(queue_of, pids=4, ios=12, watch=False):
    """Closed-loop readers (and one writer): each process submits its next bio 1 ms
    after the last completes. Returns [(pid, sector, completion time)], and the
    collectors' summaries when ``watch``."""
    env = simpy.Environment()
    q = queue_of(env)
    logs = (DecisionLog(q), DeviceLog(q)) if watch else ()
    done = []

    def start(pid, k, now):
        write = pid == pids - 1
        sector = pid * 1_000_000 + (k * 8 if pid % 2 else k * 50_000)

        def complete(b):
            done.append((pid, b.sector, env.now))
            if k + 1 < ios:
                env.process(later(pid, k + 1))
        q.submit_bio(Bio(next(_ids), sector, 8, write, not write, pid,
                         on_complete=complete), now)

    def later(pid, k):
        yield env.timeout(0.001)
        start(pid, k, env.now)
    for pid in range(pids):
        start(pid, 0, 0.0)
    env.run()
    return done, [log.summary() for log in logs]


def _legacy(name):
    def make(env):
        device = ServiceLawDevice("exponential", 0.005, capacity=1 << 30, queue_depth=2,
                                  seed=3)
        cls = get_scheduler(name)
        return RequestQueue(lambda dq: cls.create(dq, {}, hz=250), device, SimpyClock(env),
                            QueueSettings(nr_requests=128))
    return make


def _mq(name):
    def make(env):
        device = ServiceLawDevice("exponential", 0.005, capacity=1 << 30, queue_depth=2,
                                  seed=3)
        cls = MQ_SCHEDULERS[name]
        return MqQueue(lambda info: cls.create(info, {}), device, SimpyClock(env),
                       MqSettings(kernel="6.6"), elevator_name=name)
    return make


@pytest.mark.parametrize("make", [_legacy(n) for n in ("noop", "deadline", "anticipatory",
                                                       "cfq")]
                         + [_mq(n) for n in ("mq-deadline", "kyber", "bfq")],
                         ids=["noop", "deadline", "anticipatory", "cfq", "mq-deadline",
                              "kyber", "bfq"])
def test_listening_changes_no_completion_and_no_time(make):
    quiet, _ = _run(make)
    heard, (decisions, device) = _run(make, watch=True)
    assert heard == quiet
    assert len(quiet) == 4 * 12
    for event in decisions["events"]:
        assert event in decisions["meanings"]           # only declared names are sent
    assert device["tags"]["max"] <= 2               # the device's queue depth
    assert device["tags"]["mean"] > 0
    # every span started is closed, still open, or was restarted while open
    for name, span in decisions["spans"].items():
        starts = decisions["events"].get(name + "_start", {"count": 0})["count"]
        assert span["count"] + span["open"] + span["restarted"] == starts
    said = set(decisions["events"])
    name = decisions["scheduler"]
    if name in ("noop", "kyber"):       # noop decides nothing; kyber's tokens never ran out
        assert said == set()
    else:
        assert said, f"{name} said nothing"
    if name in ("anticipatory", "cfq", "bfq"):
        assert decisions["spans"]["hold"]["count"] > 0


# ---------------------------------------------------------------- a property
from hypothesis import example, given, settings, strategies as st  # noqa: E402

_messages = st.lists(st.tuples(st.sampled_from(["hold_start", "hold_end", "slice_start",
                                                "slice_end", "fifo_expired"]),
                               st.integers(0, 3), st.sampled_from([None, "hit", "timeout"]),
                               st.floats(0.0, 0.05)), max_size=60)


@settings(max_examples=100, deadline=None)
@given(messages=_messages)
def test_spans_account_for_every_start_and_every_second(messages):
    """Over any message sequence: each span kind's starts are closed, open or
    restarted; its closed time is the sum of the (end - start) pairs; the processes'
    closed spans add up to the whole but for pid 0's."""
    q = FakeQueue()
    log = DecisionLog(q)
    now = 0.0
    open_at, expected = {}, {}
    for event, pid, detail, gap in messages:
        now += gap
        q.fire("block_elv_msg", event, pid, detail, now)
        name = event.rsplit("_", 1)[0]
        if event.endswith("_start") and (name, pid) not in open_at:
            open_at[(name, pid)] = now
        elif event.endswith("_end") and (name, pid) in open_at:
            expected[name] = expected.get(name, 0.0) + now - open_at.pop((name, pid))
    s = log.summary()
    json.dumps(s)
    for name, span in s["spans"].items():
        starts = s["events"].get(name + "_start", {"count": 0})["count"]
        assert span["count"] + span["open"] + span["restarted"] == starts
        assert span["total_ms"] == pytest.approx(expected.get(name, 0.0) * 1e3, abs=1e-5)
        per_pid = sum(p["spans"].get(name, {"total_ms": 0.0})["total_ms"]
                      for p in s["processes"].values())
        assert per_pid <= span["total_ms"] + 1e-4        # (each rounded to 1 ns)
    assert lines(s)[0].startswith("decisions of cfq over ")


def _run_varied(make, pids, ios, gap, seed):
    """Like `_run`, with the think time and the sectors varied by ``seed``."""
    import random
    rnd = random.Random(seed)
    env = simpy.Environment()
    q = make(env)
    log = DecisionLog(q)
    seq = {pid: rnd.random() < 0.5 for pid in range(pids)}

    def start(pid, k, now):
        write = pid == 0 and rnd.random() < 0.5
        sector = pid * 1_000_000 + (k * 8 if seq[pid] else rnd.randrange(0, 1 << 24, 8))

        def complete(b):
            if k + 1 < ios:
                env.process(later(pid, k + 1))
        q.submit_bio(Bio(next(_ids), sector, 8, write, not write, pid + 1,
                         on_complete=complete), now)

    def later(pid, k):
        yield env.timeout(rnd.random() * gap)
        start(pid, k, env.now)
    for pid in range(pids):
        start(pid, 0, 0.0)
    env.run()
    return log.summary()


@settings(max_examples=12, deadline=None)
@given(which=st.sampled_from(["anticipatory", "cfq", "bfq"]), pids=st.integers(1, 5),
       gap=st.sampled_from([0.0, 0.002, 0.02]), seed=st.integers(0, 1000))
# bfq merged the idling queue (its pid became -1) before the idling ended
@example(which="bfq", pids=5, gap=0.02, seed=0)
def test_holds_never_overlap_and_every_end_closes_one(which, pids, gap, seed):
    """One hold at a time per queue, each ended by the process it was for: what the
    time attribution of i33-explain relies on (a hold_start while one is open would be
    'restarted', a hold_end of another process or of none an unmatched outcome)."""
    make = _mq(which) if which == "bfq" else _legacy(which)
    s = _run_varied(make, pids, 20, gap, seed)
    hold = s["spans"].get("hold")
    if hold is None:
        return
    assert hold["restarted"] == 0
    assert sum(hold["outcomes"].values()) == hold["count"]
    assert hold["open"] <= 1
