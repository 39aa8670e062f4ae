"""fio's I/O engines (blksim.sim.ioengine): the submission loop traced by hand from fio's
do_io, the kernel's plugging around a submission, sleeping for a request, and properties
over random engine settings."""

import pytest
import simpy
from hypothesis import given, settings, strategies as st

from blksim.common.config_values import ConfigError
from blksim.sim.clock import SimpyClock
from blksim.sim.ioengine import NO_PLUG, PLUG_RULES, engine_available, plug_rule
from blksim.sim.workload import BioIds, JobProcess
from blksim.traces.jobs import parse_job
from tests.simhelpers import make_config

DEVICE = 1 << 24


class FakeQueue:
    """A queue that logs what a process does and completes bios when told to (or after
    ``service`` seconds); it refuses a request to the bios whose ids are in ``refuse``
    until `grant`."""

    def __init__(self, clock, service=None, refuse=()):
        self.clock = clock
        self.service = service
        self.refuse = set(refuse)
        self.log = []               # ("P"|"U"|"Q", time, bio id)
        self.live = []              # submitted, not completed
        self.waiting = {}
        self.plugged = 0
        self.exited = []
        self.max_live = 0

    def start_plug(self, pid, now):
        assert self.plugged == 0, "a plug inside a plug"
        self.plugged = 1
        self.log.append(("P", now, None))

    def finish_plug(self, pid, now):
        assert self.plugged == 1, "an unplug without a plug"
        self.plugged = 0
        self.log.append(("U", now, None))

    def submit_bio(self, bio, now=None):
        now = self.clock.now if now is None else now
        bio.t_queue = now
        self.log.append(("Q", now, bio.id))
        self.live.append(bio)
        self.max_live = max(self.max_live, len(self.live))
        if self.service is not None:
            self.clock.call_at(now + self.service(bio), lambda _ev, b=bio: self.complete(b))
        return bio.id not in self.refuse

    def when_request(self, bio, wake):
        self.waiting[bio.id] = (bio, wake)

    def grant(self, bio_id):
        bio, wake = self.waiting.pop(bio_id)
        wake(bio)

    def complete(self, bio):
        self.live.remove(bio)
        bio.t_complete = self.clock.now
        bio.on_complete(bio)

    def complete_oldest(self, n=1):
        for _ in range(n):
            self.complete(self.live[0])

    def process_exited(self, pid):
        self.exited.append((pid, self.clock.now))

    def batches(self):
        """The submissions as [(plugged, [bio ids])], one entry per plug or lone bio."""
        out, current = [], None
        for kind, _t, bid in self.log:
            if kind == "P":
                current = []
            elif kind == "U":
                out.append((True, current))
                current = None
            elif current is not None:
                current.append(bid)
            else:
                out.append((False, [bid]))
        return out


class Pattern:
    """Reads (or writes) at sectors 0, 8, 16, ..."""

    def __init__(self, write=False):
        self.n = 0
        self.write = write

    def next_io(self):
        self.n += 1
        return (self.n - 1) * 8, 8, self.write


def process(job, kernel="6.6", write=False, service=None, refuse=(), cpu=0):
    env = simpy.Environment()
    clock = SimpyClock(env)
    queue = FakeQueue(clock, service, refuse)
    spec = parse_job({"name": "j", "rw": "randwrite" if write else "randread", **job}, "t", DEVICE)
    proc = JobProcess(clock, queue, BioIds(), 1000, "j", spec, Pattern(write), None,
                      kernel=kernel, cpu=cpu)
    proc.start()
    env.run(until=0.0 + 1e-12)            # the start
    return env, queue, proc


def step(env, until):
    env.run(until=until)


def test_libaio_batches_and_reaps_as_fios_do_io():
    # Traced by hand through fio's do_io: iodepth 8, iodepth_batch_submit 4: two io_submit
    # calls of 4 at once (each of more than AIO_PLUG_THRESHOLD = 2: plugged); full, so it
    # waits for iodepth_batch_complete_min = 2 completions.
    env, q, proc = process({"ioengine": "libaio", "iodepth": 8, "iodepth_batch_submit": 4,
                            "iodepth_batch_complete_min": 2, "iodepth_batch_complete_max": 8,
                            "number_ios": 14})
    assert q.batches() == [(True, [0, 1, 2, 3]), (True, [4, 5, 6, 7])]
    q.complete_oldest(1)                       # one is not enough: nothing happens
    assert len(q.batches()) == 2 and proc.want == 2
    q.complete_oldest(1)                       # two: reaped; it queues two (fewer than the
    # batch of 4), is full again, and td_io_getevents submits them before it waits: one
    # io_submit of 2, not plugged (2 is not more than 2), and no lone plug on 6.6
    assert q.batches()[2:] == [(False, [8]), (False, [9])]
    assert proc.want == 2 and proc.in_flight == 8
    # Three complete while it waits: at the second it reaps those two (the third is not
    # done yet when it returns), queues and submits two more; then one is left over.
    q.complete_oldest(3)
    assert q.batches()[4:] == [(False, [10]), (False, [11])]
    assert proc.reapable == 1 and proc.want == 2
    q.complete_oldest(1)                       # 2 again: 2 more, then number_ios (14) is met
    assert q.batches()[6:] == [(False, [12]), (False, [13])]
    assert not q.exited                        # (it finds it is done when it next looks)
    q.complete_oldest(len(q.live))
    assert [pid for pid, _t in q.exited] == [1000] and proc.issued == 14


def test_a_reap_of_three_refills_in_a_batch():
    # iodepth 6, batch 3, complete_min 3: it sleeps until three have completed, reaps the
    # three, queues three, and the third fills the batch: one plugged io_uring_enter.
    env, q, proc = process({"ioengine": "io_uring", "iodepth": 6, "iodepth_batch": 3,
                            "iodepth_batch_complete_min": 3})
    assert q.batches() == [(True, [0, 1, 2]), (True, [3, 4, 5])]
    q.complete_oldest(2)
    assert len(q.batches()) == 2 and proc.reapable == 2
    q.complete_oldest(1)
    assert q.batches()[2:] == [(True, [6, 7, 8])] and proc.want == 3


def test_completions_while_asleep_are_reaped_together_up_to_the_maximum():
    # libaio asleep for a request at bio 5; three complete meanwhile. Woken, it submits the
    # rest of its batch and, full, reaps all three at once (min 1, max 8): io_getevents
    # returns every completion there is, up to the maximum.
    env, q, proc = process({"ioengine": "libaio", "iodepth": 6, "iodepth_batch": 6,
                            "iodepth_batch_complete_max": 8}, refuse={4})
    assert [k for k, *_ in q.log] == ["P", "Q", "Q", "Q", "Q", "Q"] and proc.asleep
    q.complete_oldest(3)
    q.grant(4)
    assert q.batches() == [(True, [0, 1, 2, 3, 4, 5]), (True, [6, 7, 8])]
    assert proc.reapable == 0 and proc.in_flight == 6


def test_fio_defaults_resubmit_one_per_completion():
    env, q, proc = process({"ioengine": "libaio", "iodepth": 4})
    assert q.batches() == [(False, [0]), (False, [1]), (False, [2]), (False, [3])]
    q.complete_oldest(1)
    assert q.batches()[4:] == [(False, [4])] and proc.in_flight == 4


def test_polling_settings_reap_after_every_submission():
    # iodepth_batch_complete_min = max = 0 is fio's io_in_polling; wait_for_completions
    # then raises the minimum to 1, so each I/O is waited for: one in flight.
    env, q, proc = process({"ioengine": "libaio", "iodepth": 8,
                            "iodepth_batch_complete_min": 0, "iodepth_batch_complete_max": 0})
    assert q.batches() == [(False, [0])] and proc.want == 1
    q.complete_oldest(1)
    assert q.batches()[1:] == [(False, [1])] and len(q.live) == 1


def test_complete_min_zero_waits_like_one_when_full():
    env, q, proc = process({"ioengine": "libaio", "iodepth": 2,
                            "iodepth_batch_complete_min": 0, "iodepth_batch_complete_max": 2})
    assert len(q.live) == 2 and proc.want == 1


def test_fixup_of_batch_values():
    job = parse_job({"name": "j", "iodepth": 16, "iodepth_batch_submit": 0,
                     "iodepth_batch_complete_min": 4}, "t", DEVICE)
    assert (job.iodepth_batch_submit, job.iodepth_batch_complete_min,
            job.iodepth_batch_complete_max) == (16, 4, 4)
    job = parse_job({"name": "j", "iodepth": 4, "iodepth_batch": 64}, "t", DEVICE)
    assert job.iodepth_batch_submit == 4
    with pytest.raises(ValueError, match="only one of 'iodepth_batch_submit' and its alias"):
        parse_job({"name": "j", "iodepth_batch": 2, "iodepth_batch_submit": 2}, "t", DEVICE)


@pytest.mark.parametrize("kernel, write, plugged", [
    ("6.6", False, False), ("6.6", True, False), ("6.1", True, True), ("6.1", False, False),
    ("5.4", True, True), ("5.4", False, False), ("2.6.18", True, False)])
def test_a_synchronous_engine_plugs_only_writes_where_blkdev_write_iter_does(
        kernel, write, plugged):
    env, q, proc = process({"ioengine": "psync", "number_ios": 2}, kernel, write,
                           service=lambda b: 0.001)
    step(env, 1.0)
    assert q.batches() == [(plugged, [0]), (plugged, [1])]
    assert [t for k, t, _ in q.log if k == "Q"] == [0.0, 0.001]


@pytest.mark.parametrize("kernel, lone", [("5.4", True), ("5.10", True), ("5.15", True),
                                          ("6.1", False), ("6.6", False)])
def test_a_lone_async_read_is_plugged_through_blkdev_direct_io_until_5_16(kernel, lone):
    env, q, proc = process({"ioengine": "libaio", "iodepth": 2}, kernel)
    assert q.batches() == [(lone, [0]), (lone, [1])]


@pytest.mark.parametrize("engine, kernel, batches", [
    # two I/Os in one call: io_submit plugs more than 2 (each then alone up to 5.15)
    ("libaio", "5.15", [(True, [0]), (True, [1])]),
    ("libaio", "6.1", [(False, [0]), (False, [1])]),
    # io_uring_enter: more than 2 in 5.4, always in 5.10, more than 1 in 5.15, more than 2 on
    ("io_uring", "5.4", [(True, [0]), (True, [1])]),
    ("io_uring", "5.10", [(True, [0, 1])]),
    ("io_uring", "5.15", [(True, [0, 1])]),
    ("io_uring", "6.1", [(False, [0]), (False, [1])]),
])
def test_a_submission_of_two_is_plugged_as_each_line_plugs_it(engine, kernel, batches):
    env, q, proc = process({"ioengine": engine, "iodepth": 2, "iodepth_batch_submit": 2},
                           kernel)
    assert q.batches() == batches


def test_io_uring_on_5_10_plugs_even_a_lone_sqe():
    env, q, proc = process({"ioengine": "io_uring", "iodepth": 2}, "5.10")
    assert q.batches() == [(True, [0]), (True, [1])]


def test_plug_rules_by_kernel_line():
    assert plug_rule("2.6.18") is NO_PLUG and plug_rule("2.6.32") is NO_PLUG
    assert plug_rule("6.6") is PLUG_RULES["6.6"]
    assert plug_rule("6.12") is PLUG_RULES["6.6"]           # a later line keeps 6.6's
    assert plug_rule("5.5") is PLUG_RULES["5.4"]
    assert engine_available("io_uring", "5.4") and not engine_available("io_uring", "2.6.32")
    assert engine_available("libaio", "2.6.18")


def test_libaio_sleeps_for_a_request_and_io_uring_goes_on():
    # bio 1 finds no free request: libaio's io_submit sleeps there, its plug in place;
    # bios 2 and 3 wait until it is woken; io_uring hands it to io-wq and goes on.
    job = {"iodepth": 4, "iodepth_batch_submit": 4}
    env, q, proc = process({"ioengine": "libaio", **job}, refuse={1})
    assert q.log == [("P", 0.0, None), ("Q", 0.0, 0), ("Q", 0.0, 1)] and proc.asleep
    q.complete_oldest(1)                       # a completion does not wake it
    assert len(q.log) == 3
    q.grant(1)
    # the rest of its batch, into the same plug; then, full, it reaps the completion that
    # came while it slept and submits one more
    assert q.batches() == [(True, [0, 1, 2, 3]), (False, [4])] and not proc.asleep
    assert proc.in_flight == 4
    env, q, proc = process({"ioengine": "io_uring", **job}, refuse={1})
    assert q.batches() == [(True, [0, 1, 2, 3])] and not proc.asleep


def test_thinktime_holds_the_slot_of_every_nth_completion():
    env, q, proc = process({"ioengine": "libaio", "iodepth": 2, "thinktime": "1ms",
                            "thinktime_blocks": 2, "number_ios": 6},
                           service=lambda b: 0.010)
    step(env, 1.0)
    times = [t for k, t, _ in q.log if k == "Q"]
    # 0, 0; at 10 ms the first completion refills at once, the second's I/O waits 1 ms;
    # at 20 ms the same (22 ms); the last (done at 32 ms) thinks, and the process exits
    # when that think time ends
    assert times == pytest.approx([0.0, 0.0, 0.010, 0.011, 0.020, 0.022])
    assert q.exited and q.exited[0][1] == pytest.approx(0.033)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(0, 14), st.integers(0, 14), st.integers(0, 14),
       st.sampled_from(["libaio", "io_uring", "psync", None]),
       st.sampled_from(["2.6.18", "5.4", "6.1", "6.6"]),
       st.lists(st.integers(1, 9), min_size=1, max_size=20), st.integers(1, 40),
       st.booleans())
def test_nothing_lost_depth_bounded_plugs_paired(depth, batch, cmin, cmax, engine, kernel,
                                                 services, ios, write):
    job = {"iodepth": depth, "iodepth_batch_submit": batch,
           "iodepth_batch_complete_min": cmin, "iodepth_batch_complete_max": cmax,
           "number_ios": ios}
    if engine is not None:
        job["ioengine"] = engine
    draws = iter(services * (ios // len(services) + 1))
    env, q, proc = process(job, kernel, write, service=lambda b: next(draws) * 1e-3)
    step(env, 10.0)
    assert proc.issued == ios and proc.exited and not q.live
    assert q.max_live <= (1 if engine == "psync" else depth)
    assert q.plugged == 0
    ids = [bid for k, _t, bid in q.log if k == "Q"]
    assert ids == list(range(ios))                    # every bio once, in order
    if kernel == "2.6.18":
        assert all(k == "Q" for k, *_ in q.log)       # no per-task plugging before 2.6.39


# ---------------------------------------------------------------------- configuration

def test_an_unknown_engine_is_one_line_listing_the_valid_ones():
    with pytest.raises(ValueError) as info:
        parse_job({"name": "j", "ioengine": "vsync"}, "t.toml: job 'j'", DEVICE)
    message = str(info.value)
    assert message == ("t.toml: job 'j': ioengine: expected one of psync, sync, pvsync, "
                       "libaio, io_uring, found 'vsync'")


def test_io_uring_needs_a_kernel_that_has_it():
    with pytest.raises(ConfigError, match=r"ioengine = 'io_uring' needs Linux 5.1 or later "
                                          r"\(io_uring_enter\(2\)\); \[run\] kernel is 2.6.18"):
        make_config(jobs=[{"name": "j", "ioengine": "io_uring"}])


def test_a_synchronous_engine_caps_iodepth_with_fios_note():
    cfg = make_config(jobs=[{"name": "j", "ioengine": "pvsync", "iodepth": 8}])
    assert cfg.jobs[0].iodepth == 1
    assert "queue depth will be capped at 1" in cfg.warnings[0]


def test_an_fio_file_without_ioengine_runs_psync_as_fio_does(tmp_path):
    from blksim.sim.config import resolve
    path = tmp_path / "j.fio"
    path.write_text("[global]\niodepth=32\n[a]\nrw=randread\n[b]\nrw=read\n"
                    "ioengine=libaio\n")
    cfg = resolve({"fio": str(path), "run": {"kernel": "2.6.18"}}, str(tmp_path / "c.toml"),
                  device_sectors=DEVICE)
    a, b = cfg.jobs
    assert a.ioengine == "psync" and a.iodepth == 1
    assert any(f"{path}:3: job 'a' names no ioengine: it runs on fio's default, psync" in w
               for w in cfg.warnings)
    assert any("job 'a': iodepth 32 capped at 1" in w for w in cfg.warnings)
    assert b.ioengine == "libaio" and b.iodepth == 32


# ---------------------------------------------------------------------- on the multi-queue layer

def _mq_run(job, kernel="6.6", cpus=4, hw_queues=1):
    from blksim.sim.config import resolve
    from blksim.sim.engine import Simulation
    raw = {"run": {"kernel": kernel, "seed": 1}, "host": {"cpus": cpus},
           "device": {"service": "fixed", "service_time": "1ms", "servers": hw_queues,
                      "nr_hw_queues": hw_queues, "queue_depth": 32},
           "queue": {"scheduler": "none"}, "job": [{"name": "j", "rw": "randread", **job}]}
    sim = Simulation(resolve(raw, "mq.toml"))
    events = []
    q = sim.queue
    q.subscribe("block_bio_queue", lambda _q, bio, now: events.append(("Q", bio.id)))
    q.subscribe("block_rq_issue", lambda _q, rq, now: events.append(("D", rq.bios[0].id)))
    q.subscribe("block_unplug", lambda _q, n, explicit, now: events.append(("U", n)))
    q.subscribe("block_rq_insert", lambda _q, rq, now: events.append(("I", rq.bios[0].id)))
    outcome = sim.run()
    return events, outcome, sim


def test_an_io_uring_batch_reaches_the_mq_queue_in_one_plug():
    # 6.6, none: four SQEs in one io_uring_enter are plugged together; the unplug issues
    # them, so every Q comes before the first D
    events, outcome, _ = _mq_run({"ioengine": "io_uring", "iodepth": 4,
                                  "iodepth_batch_submit": 4, "number_ios": 4})
    assert events[:5] == [("Q", 0), ("Q", 1), ("Q", 2), ("Q", 3), ("U", 4)]
    assert sorted(e for e in events if e[0] == "D") == [("D", i) for i in range(4)]
    assert outcome.metrics.read.ios == 4


def test_fio_default_batching_on_mq_issues_each_bio_as_it_comes():
    # libaio, batch 1 on 6.6: io_submit of one is not plugged and none issues directly:
    # Q then D for each
    events, outcome, _ = _mq_run({"ioengine": "libaio", "iodepth": 2, "number_ios": 2})
    assert events[:4] == [("Q", 0), ("D", 0), ("Q", 1), ("D", 1)]


def test_bios_reach_the_software_queue_of_their_cpu():
    # 4 CPUs, 2 hardware queues; the clones run on CPUs 0, 1, 2 (the idlest first): each
    # request's ctx is its bio's CPU, and its hctx the one the CPU maps to
    from blksim.block.mq.cpumap import map_queues
    from blksim.sim.config import resolve
    from blksim.sim.engine import Simulation
    raw = {"run": {"kernel": "6.6"}, "host": {"cpus": 4},
           "device": {"service": "fixed", "service_time": "1ms", "servers": 2,
                      "nr_hw_queues": 2, "queue_depth": 32},
           "queue": {"scheduler": "none"},
           "job": [{"name": "j", "rw": "randread", "ioengine": "io_uring", "iodepth": 2,
                    "numjobs": 3, "number_ios": 6}]}
    sim = Simulation(resolve(raw, "mq.toml"))
    seen = {}
    sim.queue.subscribe("block_rq_issue", lambda _q, rq, now: seen.setdefault(
        rq.pid, set()).add((rq.bios[0].cpu, rq.ctx, rq.hctx.index)))
    sim.run()
    cpu_map = map_queues(4, 2, True)
    assert cpu_map == (0, 0, 1, 1)
    assert seen == {pid: {(cpu, cpu, cpu_map[cpu])} for pid, cpu in
                    ((1000, 0), (1001, 1), (1002, 2))}


def test_on_5_4_a_lone_async_read_is_plugged_and_unplugged_alone():
    # __blkdev_direct_IO plugs around its one bio (5.4-5.15): Q, then the unplug of one
    events, _outcome, _ = _mq_run({"ioengine": "libaio", "iodepth": 2, "number_ios": 2},
                                  kernel="5.4")
    assert events[:2] == [("Q", 0), ("U", 1)] and ("D", 0) in events[2:4]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["5.4", "5.10", "5.15", "6.1", "6.6"]),
       st.sampled_from(["none", "mq-deadline"]),
       st.sampled_from(["libaio", "io_uring", "psync", None]), st.integers(1, 48),
       st.integers(0, 16), st.integers(0, 8), st.integers(0, 16), st.integers(1, 3),
       st.integers(1, 6), st.integers(1, 3), st.sampled_from([2, 4, 16]),
       st.sampled_from([None, "shared", "split"]), st.booleans())
def test_engines_on_the_mq_layer_lose_nothing(kernel, scheduler, engine, depth, batch, cmin,
                                             cmax, numjobs, cpus, hw, tags, policy, write):
    from blksim.sim.config import resolve
    from blksim.sim.engine import Simulation
    job = {"name": "j", "rw": "randwrite" if write else "randread", "iodepth": depth,
           "iodepth_batch_submit": batch, "iodepth_batch_complete_min": cmin,
           "iodepth_batch_complete_max": cmax, "numjobs": numjobs, "number_ios": 25}
    if engine is not None:
        job["ioengine"] = engine
    if policy is not None:
        job["cpus_allowed"] = f"0-{cpus - 1}" if cpus > 1 else "0"
        job["cpus_allowed_policy"] = policy
    raw = {"run": {"kernel": kernel}, "host": {"cpus": cpus},
           "device": {"service": "exponential", "service_time": "300us", "servers": hw,
                      "nr_hw_queues": hw, "queue_depth": tags},
           "queue": {"scheduler": scheduler}, "job": [job]}
    done = []
    sim = Simulation(resolve(raw, "p.toml"), complete_hooks=(done.append,))
    sim.run()
    assert len(done) == 25 * numjobs == len({b.id for b in done})
    assert all(p.exited for p in sim.processes)
    for b in done:
        assert 0 <= b.cpu < cpus
        assert b.t_queue <= b.t_dispatch <= b.t_complete


def test_an_fio_file_takes_the_batching_and_cpu_options(tmp_path):
    from blksim.sim.config import resolve
    path = tmp_path / "b.fio"
    path.write_text("[global]\nioengine=libaio\niodepth=16\niodepth_batch=8\n"
                    "iodepth_batch_complete=4\ncpus_allowed=1-2\ncpus_allowed_policy=split\n"
                    "[a]\nrw=randread\nnumjobs=2\n")
    cfg = resolve({"fio": str(path)}, str(tmp_path / "c.toml"), device_sectors=DEVICE)
    job = cfg.jobs[0]
    assert (job.iodepth_batch_submit, job.iodepth_batch_complete_min,
            job.iodepth_batch_complete_max) == (8, 4, 4)
    assert job.cpus_allowed == (1, 2) and job.cpus_allowed_policy == "split"
    assert not any("ioengine" in w for w in cfg.warnings)
