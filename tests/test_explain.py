"""The mechanism report's time attribution (sim/explain.py): a hand-computed case per
cause on the 2.6 queue and on blk-mq, the hold rule with a test elevator, the device's
service-start probe, a device-mapper volume, and the outputs (results.json, the terminal,
the why paragraph)."""

import json

import pytest
import simpy

from blksim.block.legacy_queue import QueueSettings, RequestQueue
from blksim.block.mq.queue import MqQueue, MqSettings
from blksim.block.request import Bio
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import MQ_SCHEDULERS, get_scheduler
from blksim.sim.clock import SimpyClock
from blksim.sim.explain import CAUSES, DeviceExplain

Noop = get_scheduler("noop")
_ids = iter(range(10**9))
MS = 1e-3


def legacy(nr_requests=128, queue_depth=1, servers=1, service=0.010, factory=None,
           device=None):
    env = simpy.Environment()
    dev = device or ServiceLawDevice("fixed", service, capacity=1 << 30,
                                     queue_depth=queue_depth, servers=servers)
    q = RequestQueue(factory or (lambda dq: Noop.create(dq, {}, hz=250)), dev,
                     SimpyClock(env), QueueSettings(nr_requests=nr_requests))
    return env, q


def mq(scheduler="mq-deadline", queue_depth=1, service=0.010):
    env = simpy.Environment()
    dev = ServiceLawDevice("fixed", service, capacity=1 << 30, queue_depth=queue_depth)
    cls = MQ_SCHEDULERS[scheduler]
    q = MqQueue(lambda info: cls.create(info, {}), dev, SimpyClock(env),
                MqSettings(kernel="6.6"), elevator_name=scheduler)
    return env, q


def watch(q):
    """A DeviceExplain on ``q`` recording each bio's own seconds: bio id -> {cause: s}."""
    seen = {}

    def per_bio(bio, q2c, secs):
        assert sum(secs) == pytest.approx(q2c, abs=1e-12)
        seen[bio.id] = {c: s for c, s in zip(CAUSES, secs) if abs(s) > 1e-12}
    tracker = DeviceExplain(per_bio=per_bio)
    tracker.install(q)
    return tracker, seen


def submit_at(env, q, t, sector, pid, write=False, sync=True, n=8):
    b = Bio(next(_ids), sector, n, write, sync, pid, on_complete=lambda b: None)

    def go(_ev):
        if not q.submit_bio(b, env.now):
            q.when_request(b, lambda bio: None)
    env.process(_at(env, t, go))
    return b


def _at(env, t, fn):
    yield env.timeout(t)
    fn(None)


def approx(d):
    return {k: pytest.approx(v, abs=1e-9) for k, v in d.items()}


# ---------------------------------------------------------------------- the 2.6 queue

def test_elevator_then_service_on_a_drive_that_takes_one_at_a_time():
    env, q = legacy()
    _, seen = watch(q)
    a = submit_at(env, q, 0.0, 0, pid=1)
    b = submit_at(env, q, 0.0, 100_000, pid=2)
    env.run()
    # a is issued at once (a sync bio on an idle queue); b waits in noop for a's 10 ms
    assert seen[a.id] == approx({"service": 10 * MS})
    assert seen[b.id] == approx({"elevator": 10 * MS, "service": 10 * MS})


def test_slot_while_the_submitter_sleeps_for_a_request():
    env, q = legacy(nr_requests=1)
    _, seen = watch(q)
    a = submit_at(env, q, 0.0, 0, pid=1)
    b = submit_at(env, q, 0.0, 100_000, pid=2)    # no free read request: sleeps
    env.run()
    # b gets a's request when a completes at 10 ms, and is issued at once
    assert seen[a.id] == approx({"service": 10 * MS})
    assert seen[b.id] == approx({"slot": 10 * MS, "service": 10 * MS})


def test_plug_of_an_async_write_until_the_unplug_timer():
    env, q = legacy()
    _, seen = watch(q)
    w = submit_at(env, q, 0.0, 0, pid=1, write=True, sync=False)
    env.run()
    # an async bio plugs the idle queue; the timer fires a jiffy later (HZ 250: 4 ms;
    # 3 ms rounds to 0 jiffies, 2.6.18's blk_queue_make_request takes 1)
    assert seen[w.id] == approx({"plug": 4 * MS, "service": 10 * MS})


def test_a_merged_bio_takes_its_request_times_from_when_it_joined():
    env, q = legacy()
    _, seen = watch(q)
    w1 = submit_at(env, q, 0.0, 0, pid=1, write=True, sync=False)
    w2 = submit_at(env, q, 0.001, 8, pid=2, write=True, sync=False)    # back merge
    env.run()
    assert seen[w1.id] == approx({"plug": 4 * MS, "service": 10 * MS})
    assert seen[w2.id] == approx({"plug": 3 * MS, "service": 10 * MS})


def test_device_queue_then_service_on_a_tagged_device():
    env, q = legacy(queue_depth=2)
    _, seen = watch(q)
    a = submit_at(env, q, 0.0, 0, pid=1)
    b = submit_at(env, q, 0.0, 100_000, pid=2)
    env.run()
    # both issued at 0; the one server takes b when a is done (the probe says 10 ms)
    assert seen[a.id] == approx({"service": 10 * MS})
    assert seen[b.id] == approx({"device_queue": 10 * MS, "service": 10 * MS})


class _NoProbe:
    """A device of the protocol without the service-start probe (a plug-in's)."""

    def __init__(self):
        self._dev = ServiceLawDevice("fixed", 0.010, capacity=1 << 30, queue_depth=2)
        self.queue_depth = 2
        self.capacity = self._dev.capacity

    def __getattr__(self, name):
        if name == "service_probe":
            raise AttributeError(name)
        return getattr(self._dev, name)


def test_a_device_without_the_probe_gives_all_of_d2c_to_device():
    env, q = legacy(device=_NoProbe())
    tracker, seen = watch(q)
    assert not tracker.probed
    a = submit_at(env, q, 0.0, 0, pid=1)
    b = submit_at(env, q, 0.0, 100_000, pid=2)
    env.run()
    assert seen[a.id] == approx({"device": 10 * MS})
    assert seen[b.id] == approx({"device": 20 * MS})


# ---------------------------------------------------------------------- holds

class Holding(Noop):
    """A test elevator: when a request of pid 1 completes, it holds dispatch for pid 1
    for 6 ms (as an idle window would), saying so with hold_start/hold_end; a request
    of pid 1 ends the hold at once ("hit")."""

    name = "holding"
    events = {"hold_start": "dispatch held for a process", "hold_end": "the hold ended"}
    uses_timers = True

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.until = None

    def completed(self, rq, now):
        if rq.pid == 1:
            self.until = now + 0.006
            self.wakeup_at = self.until
            self.timers_changed = True
            if self.msg is not None:
                self.msg("hold_start", 1, "test window")

    def add(self, rq, now):
        super().add(rq, now)
        if self.until is not None and rq.pid == 1:
            self._end("hit")

    def _end(self, why):
        self.until = None
        if self.msg is not None:
            self.msg("hold_end", 1, why)

    def timer_fired(self, now):
        if self.until is not None and now >= self.until:
            self._end("timeout")
            self.kick_queue = True
            self.timers_changed = True

    def dispatch(self, now, force=False):
        if self.until is not None and not force:
            return 0
        return super().dispatch(now, force)


def test_time_held_for_another_process_is_held_and_for_its_own_is_not():
    env, q = legacy(factory=lambda dq: Holding.create(dq, {}, hz=250))
    tracker, seen = watch(q)
    a = submit_at(env, q, 0.0, 0, pid=1)           # served 0..10 ms, then the hold
    b = submit_at(env, q, 0.001, 100_000, pid=2)   # waits: a in service, then held
    env.run()
    assert seen[a.id] == approx({"service": 10 * MS})
    # b: 9 ms behind a in the elevator, 6 ms held for pid 1 (timeout), then served
    assert seen[b.id] == approx({"elevator": 9 * MS, "held": 6 * MS, "service": 10 * MS})
    assert tracker.holds_summary() == {
        "test window": {"count": 1, "seconds": pytest.approx(0.006), "ends": {"timeout": 1}}}


def test_a_hold_for_the_bio_own_process_is_elevator_time():
    env, q = legacy(factory=lambda dq: Holding.create(dq, {}, hz=250))
    _, seen = watch(q)
    submit_at(env, q, 0.0, 0, pid=1)
    b = submit_at(env, q, 0.001, 100_000, pid=1)   # the held-for process's own bio
    env.run()
    # it was queued before the hold began: it is not the hit; the hold waits for a new
    # request of pid 1 and times out; for b all of it is the elevator's
    assert seen[b.id] == approx({"elevator": 15 * MS, "service": 10 * MS})


# ---------------------------------------------------------------------- blk-mq

def test_mq_plug_until_the_task_finishes_its_plug():
    env, q = mq()
    _, seen = watch(q)
    b = Bio(next(_ids), 0, 8, False, True, 7, on_complete=lambda b: None)

    def go():
        q.start_plug(7, 0.0)
        q.submit_bio(b, 0.0)
        yield env.timeout(0.005)
        q.finish_plug(7, env.now)
    env.process(go())
    env.run()
    assert seen[b.id] == approx({"plug": 5 * MS, "service": 10 * MS})


def test_mq_slot_while_asleep_for_a_tag_then_elevator():
    env, q = mq("mq-deadline", queue_depth=1)
    _, seen = watch(q)
    n = q.nr_requests                 # scheduler tags: the n+1th bio sleeps for one
    bios = [submit_at(env, q, 0.0, 100_000 * k, pid=k + 1) for k in range(n + 1)]
    env.run()
    last = seen[bios[-1].id]
    assert last["slot"] == pytest.approx(10 * MS)     # a tag freed when the first ends
    assert sum(last.values()) == pytest.approx(bios[-1].t_complete - bios[-1].t_queue)
    assert all(set(seen[b.id]) <= {"slot", "elevator", "service"} for b in bios)


class _Refusing(ServiceLawDevice):
    """A device that says it has no room (BLK_STS_RESOURCE) the next ``refuse`` times."""

    refuse = 0

    def can_accept(self):
        if self.refuse:
            self.refuse -= 1
            return False
        return super().can_accept()


def test_mq_requeue_from_the_driver_refusal_to_the_issue():
    env = simpy.Environment()
    dev = _Refusing("fixed", 0.010, capacity=1 << 30, queue_depth=2)
    q = MqQueue(None, dev, SimpyClock(env), MqSettings(kernel="6.6"), elevator_name="none")
    _, seen = watch(q)
    a = submit_at(env, q, 0.0, 0, pid=1)

    def refuse_next(_ev):
        dev.refuse = 1
    env.process(_at(env, 0.0005, refuse_next))
    b = submit_at(env, q, 0.001, 100_000, pid=2)
    env.run()
    # b is refused at 1 ms (traced R), and sent again when a's completion frees a tag
    # and restarts the hardware queue at 10 ms; the one server is free by then
    assert seen[a.id] == approx({"service": 10 * MS})
    assert seen[b.id] == approx({"requeue": 9 * MS, "service": 10 * MS})


# ---------------------------------------------------------------------- whole runs

RAW = {"run": {"seed": 3, "duration": 0.5},
       "device": {"drive": "cheetah15k4", "queue_depth": 4},
       "queue": {"scheduler": "cfq", "nr_requests": 8},
       "job": [{"name": "reader", "rw": "randread", "numjobs": 2},
               {"name": "writer", "rw": "write", "bs": "64k", "iodepth": 4,
                "ioengine": "libaio"}]}


def _figures(raw, explain=True):
    from blksim.api import simulate
    from blksim.sim.config import resolve
    return simulate(resolve(raw, "t.toml"), per_request=False, explain=explain).figures


def test_results_json_explain_per_device_process_and_whole():
    fig = _figures(RAW)
    sec = fig["explain"]["sda"]
    names = {p["name"] for p in sec["processes"]}
    assert names == {"reader.0", "reader.1", "writer"}
    for entry in sec["processes"] + [sec["all"]]:
        assert sum(entry["seconds"].values()) == pytest.approx(entry["q2c_total_s"], abs=1e-6)
        assert sum(entry["share_pct"].values()) == pytest.approx(100.0, abs=1e-3)
        assert entry["q2c_mean_ms"] == pytest.approx(entry["q2c_total_s"] / entry["bios"] * 1e3,
                                                      rel=1e-6)
    # the measured bios are the metrics' (ramp_time 0: every completed bio)
    assert sec["all"]["bios"] == fig["block_layer"]["bios_completed"]
    assert sec["service_split"] is True
    json.dumps(fig["explain"])


def test_a_run_that_does_not_ask_has_no_explain_and_no_probe():
    from blksim.sim.config import resolve
    from blksim.sim.engine import Simulation
    sim = Simulation(resolve(RAW, "t.toml"))
    assert sim.explain is None and sim.device.service_probe is None
    assert "explain" not in _figures(RAW, explain=False)


def test_ramp_time_leaves_earlier_bios_out():
    fig = _figures({**RAW, "run": {**RAW["run"], "ramp_time": 0.25}})
    assert fig["explain"]["sda"]["all"]["bios"] == fig["block_layer"]["bios_completed"]


def test_a_striped_volume_explained_by_its_clones_scaled_to_its_q2c():
    raw = {"run": {"seed": 1, "duration": 0.3},
           "device": {"service": "fixed", "service_time": "2ms", "capacity": "1g"},
           "devices": {"sdb": {"service": "fixed", "service_time": "3ms", "capacity": "1g"}},
           "volumes": {"v": {"type": "striped", "devices": ["sda", "sdb"],
                             "stripe_size": "4k"}},
           "job": [{"name": "big", "filename": "/dev/v", "rw": "randread", "bs": "16k"}]}
    fig = _figures(raw)
    ex = fig["explain"]
    vol = [name for name in ex if name.startswith("dm-")]
    assert vol and set(ex) >= {"sda", "sdb"}
    v = ex[vol[0]]["all"]
    assert v["bios"] > 0
    assert sum(v["seconds"].values()) == pytest.approx(v["q2c_total_s"], rel=1e-9)
    # every volume bio is split over both disks: their clones are counted there
    assert ex["sda"]["all"]["bios"] >= v["bios"] and ex["sdb"]["all"]["bios"] >= v["bios"]
    assert v["seconds"]["service"] > 0


class _Decisions:
    def __init__(self, dev):
        self.dev = dev.name

    def summary(self):
        return {"seen_on": self.dev}


def test_extra_collectors_go_under_their_name_in_each_device_section():
    from blksim.sim.config import resolve
    from blksim.sim.engine import Simulation
    from blksim.sim.results import results_dict
    from blksim.sim.config import resolved_dict
    cfg = resolve(RAW, "t.toml")
    sim = Simulation(cfg, explain=True, explain_extra={"decisions": _Decisions})
    out = results_dict(sim.run(), resolved_dict(cfg, {"sda": 4}))
    assert out["explain"]["sda"]["decisions"] == {"seen_on": "sda"}


# ---------------------------------------------------------------------- the words

def test_terminal_table_and_empty_window():
    from blksim.sim.explain_report import explain_lines
    fig = _figures(RAW)
    text = "\n".join(explain_lines(fig["explain"]))
    assert "Where the I/O time went on sda" in text and "writer" in text and "Q2C ms" in text
    empty = {"sda": {"processes": [], "all": {"bios": 0, "q2c_total_s": 0.0,
                                              "q2c_mean_ms": None, "seconds": {},
                                              "share_pct": {}}, "holds": {}}}
    lines = explain_lines(empty)
    assert any("no I/O completed in the measured window" in line for line in lines)
    assert not any("%" in line and "Q2C ms" in line for line in lines)


def _section(role_secs, holds=None):
    procs = []
    total = 0.0
    for k, (name, bios, secs) in enumerate(role_secs):
        q2c = sum(secs.values())
        total += q2c
        procs.append({"pid": k, "name": name, "bios": bios, "q2c_total_s": q2c,
                      "seconds": {c: secs.get(c, 0.0) for c in CAUSES}})
    return {"processes": procs, "all": {"q2c_total_s": total}, "holds": holds or {}}


def test_why_names_the_largest_difference_first_with_both_sides():
    from blksim.sim.explain_report import why_paragraph
    cfq = {"explain": {"sda": _section(
        [("session.0", 100, {"held": 0.41, "elevator": 0.09, "service": 0.5}),
         ("session.1", 100, {"held": 0.41, "elevator": 0.09, "service": 0.5}),
         ("dbwr", 10, {"elevator": 0.02, "service": 0.08})],
        holds={"idle window": {"count": 5, "seconds": 0.8, "ends": {}}})}}
    deadline = {"explain": {"sda": _section(
        [("session.0", 100, {"elevator": 0.1, "service": 0.5}),
         ("session.1", 100, {"elevator": 0.1, "service": 0.5}),
         ("dbwr", 10, {"elevator": 0.05, "service": 0.05})])}}
    text = why_paragraph([("cfq", cfq), ("deadline", deadline)], limit=1)
    assert text == ("Why: cfq: session's I/O spent 41 % of its time held by idle window for "
                    "other processes (4.1 ms per bio); deadline: 0 % (0.0 ms per bio).")


def test_no_why_from_an_empty_window_or_without_explain():
    from blksim.sim.explain_report import why_paragraph
    full = {"explain": {"sda": _section([("r", 10, {"elevator": 0.5, "service": 0.5})])}}
    empty = {"explain": {"sda": _section([("r", 0, {})])}}
    assert why_paragraph([("a", full), ("b", empty)]) == ""
    assert why_paragraph([("a", full), ("b", {})]) == ""


def test_extra_difference_sources_add_their_sentences():
    from blksim.sim.explain_report import DIFFERENCE_SOURCES, why_paragraph
    one = {"explain": {"sda": _section([("r", 10, {"service": 1.0})])}}

    def decisions(la, a, lb, b):
        return [(99.0, f"{la} armed 40 idle windows, {lb} none")]
    assert why_paragraph([("cfq", one), ("noop", one)],
                         sources=[*DIFFERENCE_SOURCES, decisions]) == \
        "Why: cfq armed 40 idle windows, noop none."


def test_cli_run_and_compare_with_explain(tmp_path, capsys):
    import tomli_w
    from blksim.cli import main
    path = tmp_path / "c.toml"
    path.write_text(tomli_w.dumps(RAW))
    assert main(["run", str(path), "-q", "--explain", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "Where the I/O time went on sda" in out
    assert "explain" in json.loads((tmp_path / "o" / "results.json").read_text())
    assert main(["compare", str(path), "-q", "--explain", "--schedulers", "noop,cfq"]) == 0
    assert "Why: " in capsys.readouterr().out
    assert main(["run", str(path), "-q"]) == 0
    assert "Where the I/O time went" not in capsys.readouterr().out
