"""The host's CPUs as a cost (blksim.sim.cpu_time): throughput bounded by the CPU cost
where the device is faster, the bound moving with the CPUs and the scheduler's lock,
completions placed by rq_affinity, locks handed over as traced by hand, the figures
adding up."""

import pytest
import simpy

from blksim.common.config_values import ConfigError
from blksim.sim.clock import SimpyClock, run_events
from blksim.sim.config import resolve
from blksim.sim.cpu_time import (ENGINE_COSTS, HOST_COSTS, SCHEDULER_COSTS, CpuTime, Piece,
                                 SpinLock, build_costs, completion_cpu, parse_cpu_costs)
from blksim.sim.engine import Simulation

NS = 1e-9
LIBAIO_NS = ENGINE_COSTS["libaio"]["submit_ns"] + ENGINE_COSTS["libaio"]["reap_ns"] \
    + HOST_COSTS["irq_ns"] + HOST_COSTS["complete_ns"]
URING_NS = ENGINE_COSTS["io_uring"]["submit_ns"] + ENGINE_COSTS["io_uring"]["reap_ns"] \
    + HOST_COSTS["irq_ns"] + HOST_COSTS["complete_ns"]


def raw_run(scheduler="none", cpus=1, numjobs=1, engine="libaio", service_time="2us",
            law="fixed", hw_queues=None, ios=3000, iodepth=32, costs=True, kernel="6.6",
            rq_affinity=1, job=None):
    return {"run": {"kernel": kernel, "seed": 1}, "host": {"cpus": cpus, "cpu_costs": costs},
            "device": {"service": law, "service_time": service_time, "servers": 8,
                       "nr_hw_queues": hw_queues or cpus, "queue_depth": 64},
            "queue": {"scheduler": scheduler, "rq_affinity": rq_affinity},
            "job": [{"name": "j", "rw": "randread", "ioengine": engine, "iodepth": iodepth,
                     "numjobs": numjobs, "number_ios": ios, **(job or {})}]}


def simulate(raw, record=False):
    """(IOPS up to the last completion, the CpuTime, the Simulation, completed bios)."""
    done = []
    sim = Simulation(resolve(raw, "cpu.toml"), complete_hooks=(done.append,))
    if record:
        for cpu in sim.host.cpu_time.cpus:
            cpu.record = []
    sim.run()
    last = max(b.t_complete for b in done)
    return len(done) / last, sim.host.cpu_time, sim, done


# ---------------------------------------------------------------------- the preset
def test_the_preset_reproduces_the_cited_per_core_rates():
    # Axboe 2019: libaio 608K IOPS per core with interrupts, io_uring 1620K polled (no
    # interrupt): the preset's parts add up to those per-I/O costs within a nanosecond
    assert LIBAIO_NS == pytest.approx(1e9 / 608e3, abs=1.0)
    polled = URING_NS - HOST_COSTS["irq_ns"]
    assert polled == pytest.approx(1e9 / 1620e3, abs=1.0)
    # Documentation/block/bfq-iosched.rst: bfq's hooks 1.9 us, mq-deadline's 0.7 us
    for name, us in (("bfq", 1.9), ("mq-deadline", 0.7)):
        c = SCHEDULER_COSTS[name]
        assert (c["submit_ns"] + c["complete_ns"]) * 1e-3 == pytest.approx(us)
        assert c["lock"]
    assert not SCHEDULER_COSTS["kyber"]["lock"] and not SCHEDULER_COSTS["none"]["lock"]


# ---------------------------------------------------------------------- the bound
@pytest.mark.parametrize("engine, per_io_ns", [("libaio", LIBAIO_NS), ("io_uring", URING_NS)])
def test_one_cpu_bounds_iops_at_one_over_the_cost(engine, per_io_ns):
    # 8 servers of 2 us: 4M IOPS; one CPU doing 1645 ns (926 ns) of work per I/O can
    # give 1/c = 608K (1080K)
    iops, ct, _, done = simulate(raw_run(engine=engine))
    assert iops == pytest.approx(1e9 / per_io_ns, rel=0.005)
    # every piece of the work is counted: the CPU was busy c for each of the I/Os
    assert ct.work_done == pytest.approx(len(done) * per_io_ns * NS, rel=1e-9)
    assert sum(ct.cpus[0].busy) == pytest.approx(ct.work_done, rel=1e-12)


def test_a_slower_device_bounds_it_instead():
    # 8 servers of 20 us: 400K IOPS, below one CPU's 608K
    iops, ct, _, done = simulate(raw_run(service_time="20us"))
    assert iops == pytest.approx(400e3, rel=0.01)
    # the CPU is busy 400K x 1645 ns = 66 % of the time
    elapsed = len(done) / iops
    assert sum(ct.cpus[0].busy) / elapsed == pytest.approx(400e3 * LIBAIO_NS * NS, rel=0.01)


def test_the_bound_moves_with_the_cpus_until_the_device_bounds_it():
    one, _, _, _ = simulate(raw_run(cpus=1, numjobs=1))
    two, _, _, _ = simulate(raw_run(cpus=2, numjobs=2))
    assert two == pytest.approx(2 * one, rel=0.01)
    # 8 servers of 5 us: 1.6M IOPS; four CPUs could give 2.4M: the device bounds it
    four, _, _, _ = simulate(raw_run(cpus=4, numjobs=4, service_time="5us"))
    assert four == pytest.approx(1.6e6, rel=0.02)


def test_one_hardware_queue_takes_every_interrupt_on_its_first_cpu():
    # 2 CPUs, one hctx: the interrupt lands on CPU 0 (rq_affinity 1, one shared cache),
    # so CPU 0 completes CPU 1's I/Os too, and the pair falls short of twice one CPU
    iops, ct, sim, _ = simulate(raw_run(cpus=2, numjobs=2, hw_queues=1))
    cpu0, cpu1 = ct.cpus
    assert cpu1.busy[2] == cpu1.busy[3] == 0.0          # no irq, no softirq on CPU 1
    assert cpu0.busy[3] > 0.0                           # one hctx: BLOCK_SOFTIRQ
    assert iops < 1.6 * 1e9 / LIBAIO_NS


def test_the_scheduler_cost_adds_to_the_path():
    # one CPU: no one to contend with; mq-deadline adds its 700 ns, kyber its 500 + 200
    for name in ("mq-deadline", "kyber"):
        c = SCHEDULER_COSTS[name]
        iops, ct, _, _ = simulate(raw_run(scheduler=name))
        assert iops == pytest.approx(1e9 / (LIBAIO_NS + c["submit_ns"] + c["complete_ns"]),
                                     rel=0.005)
        assert all(lk.contended == 0 for lk in ct.locks.values())


@pytest.mark.parametrize("cpus, below", [(2, 0.98), (4, 0.9)])
def test_mq_deadlines_lock_makes_more_cpus_scale_less_than_none(cpus, below):
    scale = {}
    spin = {}
    for name in ("none", "mq-deadline"):
        one, _, _, _ = simulate(raw_run(scheduler=name, law="exponential"))
        more, ct, _, _ = simulate(raw_run(scheduler=name, cpus=cpus, numjobs=cpus,
                                          law="exponential"))
        scale[name] = more / one
        spin[name] = sum(c.spin for c in ct.cpus)
        if name == "mq-deadline":
            # the lock is a server too: never more than one hold at a time, 1/700 ns
            assert more <= 1e9 / SCHEDULER_COSTS[name]["submit_ns"] * 1.001
    # none: a CPU and an hctx per process, no shared lock: cpus times one CPU
    assert scale["none"] == pytest.approx(cpus, rel=0.01)
    assert spin["none"] == 0.0
    # mq-deadline's dd->lock is held 700 ns per request from every CPU: they queue for
    # it (2 CPUs: busy 60 % of the time, 4: 120 % asked for, so it bounds them)
    assert spin["mq-deadline"] > 0.0
    assert scale["mq-deadline"] < below * scale["none"]


# ---------------------------------------------------------------------- locks, by hand
def _clock():
    env = simpy.Environment()
    return env, SimpyClock(env)


def test_a_held_lock_is_spun_on_and_handed_over_in_arrival_order():
    # CPU 0: 1 us unlocked then 2 us under the lock; CPU 1: 0.5 us then 2 us under it.
    # CPU 1 reaches the lock at 0.5 and holds it to 2.5; CPU 0 reaches it at 1.0, spins
    # 1.5 us, holds it 2.5 to 4.5. A third piece queued behind CPU 1's starts at 2.5.
    env, clock = _clock()
    ct = CpuTime(clock, 2, build_costs(parse_cpu_costs(True, "t")), "6.6", record=True)
    lock = SpinLock()
    ends = {}
    def end(name):
        return lambda: ends.setdefault(name, clock.now)
    ct._run(0, Piece([(1e-6, 1, None), (2e-6, 1, lock)], 1, end("a")))
    ct._run(1, Piece([(0.5e-6, 1, None), (2e-6, 1, lock)], 2, end("b")))
    ct._run(1, Piece([(1e-6, 3, None)], None, end("c")))
    run_events(env)
    assert ends["b"] == pytest.approx(2.5e-6) and ends["a"] == pytest.approx(4.5e-6)
    assert ends["c"] == pytest.approx(3.5e-6)
    assert lock.acquired == 2 and lock.contended == 1 and lock.spun == pytest.approx(1.5e-6)
    assert ct.cpus[0].spin == pytest.approx(1.5e-6)
    assert ct.cpus[0].busy[1] == pytest.approx(4.5e-6)     # 1 + 1.5 spinning + 2
    assert ct.cpus[1].busy == pytest.approx([0.0, 2.5e-6, 0.0, 1e-6])
    assert ct.by_pid[1] == pytest.approx([0.0, 4.5e-6])
    assert ct.process_figures(1) == {"usr_cpu_pct": 0.0, "sys_cpu_pct": 100.0}
    assert [t for piece in ct.cpus[1].record for t in piece] == \
        pytest.approx([0.0, 2.5e-6, 2.5e-6, 3.5e-6])


@pytest.mark.parametrize("affinity, expected", [(0, 0), (1, 0), (2, 3)])
def test_rq_affinity_places_the_completion(affinity, expected):
    # interrupt on CPU 0, submitted on CPU 3: only 2 (SAME_FORCE) moves it; 1 would
    # only for CPUs sharing no cache, and blksim's CPUs share one
    assert completion_cpu(affinity, 0, 3) == expected


@pytest.mark.parametrize("kernel, remote_class", [("5.10", 2), ("5.15", 3), ("6.6", 3)])
def test_a_remote_completion_is_an_irq_until_5_15_then_a_softirq(kernel, remote_class):
    # 4 CPUs, 2 hctxs; the process runs on CPU 3, whose hctx's interrupt lands on its
    # first CPU (1 on 5.x's round robin map, 2 on 6.6's groups); rq_affinity 2 sends
    # each completion back to CPU 3 by IPI
    raw = raw_run(cpus=4, hw_queues=2, kernel=kernel, rq_affinity=2, ios=200,
                  job={"cpus_allowed": "3"})
    _, ct, sim, _ = simulate(raw)
    irq_cpu = sim.queue.hctxs[sim.queue.cpu_map[3]].cpus[0]
    assert irq_cpu != 3
    busy3 = ct.cpus[3].busy
    assert busy3[remote_class] == pytest.approx(200 * HOST_COSTS["complete_ns"] * NS)
    assert busy3[5 - remote_class] == 0.0                 # nothing in the other column
    assert ct.cpus[irq_cpu].busy[2] == pytest.approx(200 * HOST_COSTS["irq_ns"] * NS)


# ---------------------------------------------------------------------- configuration
def test_cpu_costs_are_off_unless_asked_for():
    sim = Simulation(resolve(raw_run(costs=False), "c.toml"))
    assert sim.host.cpu_time is None and sim.queue.cpu_time is None
    raw = raw_run()
    del raw["host"]["cpu_costs"]
    assert resolve(raw, "c.toml").cpu_costs is None


def test_overrides_and_their_errors():
    costs = parse_cpu_costs({"irq_ns": 0, "engine": {"libaio": {"submit_ns": 100}},
                             "scheduler": {"mine": {"submit_ns": 50, "lock": True}}}, "t")
    assert costs["irq_ns"] == 0.0 and costs["engine"]["libaio"] == {"submit_ns": 100.0,
                                                                     "reap_ns": 164.0}
    assert costs["scheduler"]["mine"]["lock"] is True
    built = build_costs(costs)
    assert built.scheduler("mine") == (pytest.approx(50e-9), 0.0, True)
    assert costs["scheduler"]["mine"] == {"submit_ns": 50.0, "complete_ns": 0.0, "lock": True}
    assert built.scheduler("a-plugin") == (0.0, 0.0, False)
    for bad, match in ((3, "expected true, false or a table"),
                       ({"irq": 1}, "unknown key 'irq'"),
                       ({"irq_ns": -1}, "irq_ns expected a number of ns"),
                       ({"engine": {"spdk": {}}}, "unknown engine 'spdk'"),
                       ({"engine": {"libaio": {"complete_ns": 1}}}, "unknown key"),
                       ({"scheduler": {"bfq": {"lock": 1}}}, "lock expected true or false")):
        with pytest.raises(ConfigError, match=match):
            parse_cpu_costs(bad, "t: [host]")
    raw = raw_run()
    raw["run"]["kernel"] = "2.6.18"
    raw["queue"] = {"scheduler": "noop"}
    with pytest.raises(ConfigError, match=r"cpu_costs: the CPU cost model is the "
                                          r"multi-queue layer's"):
        resolve(raw, "c.toml")


def test_an_override_changes_the_bound():
    raw = raw_run()
    raw["host"]["cpu_costs"] = {"engine": {"libaio": {"submit_ns": 2000}}}
    iops, _, _, _ = simulate(raw)
    per_io = LIBAIO_NS - ENGINE_COSTS["libaio"]["submit_ns"] + 2000
    assert iops == pytest.approx(1e9 / per_io, rel=0.005)


def test_a_cpu_bound_process_reports_its_share_as_fio_would():
    # one CPU, CPU-bound: the process's run time is N x 1645 ns, of which its own calls
    # (io_submit's 987 and io_getevents' 164 ns per I/O) are sys: 1151/1645 = 70 %;
    # the interrupt's 309 ns per request is the CPU's %irq, the completion's 185 %soft
    _, ct, _, done = simulate(raw_run())
    f = ct.process_figures(1000)
    lib = ENGINE_COSTS["libaio"]
    assert f["usr_cpu_pct"] == 0.0
    assert f["sys_cpu_pct"] == pytest.approx(
        100 * (lib["submit_ns"] + lib["reap_ns"]) / LIBAIO_NS, rel=0.005)
    row = ct.figures(len(done) * LIBAIO_NS * NS)["per_cpu"][0]
    assert row["irq_pct"] == pytest.approx(100 * HOST_COSTS["irq_ns"] / LIBAIO_NS, rel=0.005)
    assert row["soft_pct"] == pytest.approx(100 * HOST_COSTS["complete_ns"] / LIBAIO_NS,
                                            rel=0.005)
    assert row["idle_pct"] < 0.5


def test_cpu_figures_cover_the_measured_window_not_the_timers_after_it():
    """kyber's statistics timer runs on after the last I/O (the run's simulated time
    stretches to 100 ms); a CPU-bound run's CPU 0 must still read busy over the ~9 ms
    measured, not idle over the 100 ms simulated."""
    import blksim
    raw = {"run": {"kernel": "6.6"}, "host": {"cpu_costs": True},
           "device": {"service": "fixed", "service_time": "10us", "servers": 8,
                      "queue_depth": 32},
           "queue": {"scheduler": "kyber"},
           "job": [{"name": "r", "rw": "randread", "bs": "4k", "iodepth": 32,
                    "number_ios": 4000}]}
    res = blksim.run(raw, per_request=False)
    cpus = res.figures["cpus"]
    assert res.figures["simulated_s"] > 5 * res.figures["measured_s"]
    assert cpus["elapsed_s"] == res.figures["measured_s"]
    assert cpus["per_cpu"][0]["idle_pct"] < 5.0
