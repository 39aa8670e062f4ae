"""The host's CPUs (blksim.sim.cpus): [host] cpus, fio's cpus_allowed and
cpus_allowed_policy, placements worked by hand, and the CPU every bio carries."""

from collections import namedtuple

import pytest

from blksim.common.config_values import ConfigError
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.sim.cpus import DEFAULT_CPUS, CpuPlacer
from blksim.sim.job_config import cpu_list_text
from blksim.traces.jobs import parse_job
from tests.simhelpers import make_config, run_config

DEVICE = 1 << 24


def test_cpu_lists_as_fio_writes_them():
    job = parse_job({"name": "j", "cpus_allowed": "6,0-3, 2"}, "t", DEVICE)
    assert job.cpus_allowed == (0, 1, 2, 3, 6) and job.cpus_allowed_policy == "shared"
    assert cpu_list_text(job.cpus_allowed) == "0-3,6"
    assert parse_job({"name": "j", "cpus_allowed": 5}, "t", DEVICE).cpus_allowed == (5,)


@pytest.mark.parametrize("value", ["", "3-1", "a", "1-", "-2", "0--3", "٣", True, 1.5])
def test_bad_cpu_lists_name_the_key(value):
    with pytest.raises(ValueError, match=r"t: cpus_allowed: expected a CPU list"):
        parse_job({"name": "j", "cpus_allowed": value}, "t", DEVICE)


def test_policy_is_shared_or_split():
    with pytest.raises(ValueError, match="cpus_allowed_policy: expected one of shared, split"):
        parse_job({"name": "j", "cpus_allowed_policy": "spread"}, "t", DEVICE)


def test_placements_worked_by_hand():
    # 4 CPUs. Job A, 3 clones, any CPU: the idlest each time, lowest first: 0, 1, 2.
    # Job B, 3 clones, cpus_allowed 2-3 (shared): CPU 3 (empty), then 2 and 3 hold one
    # each -> 2 (lowest), then 3. Job C, 3 clones, cpus_allowed 0,2 split: fio's thread
    # numbers 7, 8, 9 -> list index (n - 1) mod 2 = 0, 1, 0 -> CPUs 0, 2, 0.
    p = CpuPlacer(4)
    assert [p.place_job(None) for _ in range(3)] == [0, 1, 2]
    assert [p.place_job((2, 3)) for _ in range(3)] == [3, 2, 3]
    assert [p.place_job((0, 2), "split") for _ in range(3)] == [0, 2, 0]
    assert p.load == [3, 1, 3, 2]
    # a trace process recorded on CPU 13 of a larger machine: 13 mod 4
    assert p.recorded(13) == 1


def test_host_cpus_key():
    assert make_config(jobs=[{"name": "j"}]).cpus == DEFAULT_CPUS
    from blksim.sim.config import resolve
    raw = {"host": {"cpus": 16}, "job": [{"name": "j"}]}
    assert resolve(raw, "c.toml", device_sectors=DEVICE).cpus == 16
    for bad in (0, 4097, "4", 2.0):
        with pytest.raises(ConfigError, match=r"c.toml: \[host\]: cpus"):
            resolve({"host": {"cpus": bad}, "job": [{"name": "j"}]}, "c.toml",
                    device_sectors=DEVICE)


def test_cpus_allowed_beyond_the_host_is_refused():
    with pytest.raises(ConfigError, match=r"job 'j': cpus_allowed = '2-5' names CPU 5, but "
                                          r"the host has CPUs 0 to 3 \(\[host\] cpus = 4\)"):
        make_config(jobs=[{"name": "j", "cpus_allowed": "2-5"}])


def test_every_bio_carries_its_process_cpu():
    cfg = make_config(jobs=[{"name": "a", "rw": "randread", "numjobs": 3, "iodepth": 2,
                             "number_ios": 20},
                            {"name": "b", "rw": "randwrite", "numjobs": 2, "number_ios": 20,
                             "cpus_allowed": "1,3", "cpus_allowed_policy": "split"}])
    outcome, done = run_config(cfg, device=ServiceLawDevice("fixed", 0.001, capacity=71687372),
                               collect=True)
    by_pid = {}
    for bio in done:
        by_pid.setdefault(bio.pid, set()).add(bio.cpu)
    # a.0..a.2 on 0, 1, 2; b's threads 4 and 5: (4 - 1) mod 2 = 1 -> CPU 3, then CPU 1
    assert by_pid == {1000: {0}, 1001: {1}, 1002: {2}, 1003: {3}, 1004: {1}}
    assert len(done) == 100


Rec = namedtuple("Rec", "time sector nr_sectors write pid cpu")


def test_a_trace_replay_uses_the_recorded_cpu_or_places_its_processes():
    import simpy
    from blksim.sim.clock import SimpyClock
    from blksim.sim.workload import BioIds, TraceReplay
    from tests.test_engines import FakeQueue

    def replay(records, placer):
        env = simpy.Environment()
        clock = SimpyClock(env)
        q = FakeQueue(clock)
        r = TraceReplay(clock, q, BioIds(), records, 7, "t", None, cpus=placer)
        r.start()
        env.run()
        return [(b.pid, b.cpu) for b in q.live]

    recs = [Rec(0.0, 0, 8, False, 5, 9), Rec(0.1, 8, 8, False, 5, 2), Rec(0.2, 0, 8, True, 6, 3)]
    assert replay(recs, CpuPlacer(4)) == [(5, 1), (5, 2), (6, 3)]
    Plain = namedtuple("Plain", "time sector nr_sectors write pid")
    plain = [Plain(0.0, 0, 8, False, 5), Plain(0.1, 8, 8, False, 6), Plain(0.2, 0, 8, True, 5)]
    placer = CpuPlacer(4)
    placer.place()                              # CPU 0 is taken by a job already
    assert replay(plain, placer) == [(5, 1), (6, 2), (5, 1)]


def test_a_blktrace_replay_submits_on_the_recorded_cpus(tmp_path):
    from blksim.traces.blktrace import TA_QUEUE, BlktraceFile, action_value
    files = [BlktraceFile(tmp_path / f"sda.blktrace.{cpu}", 8 << 20, cpu=cpu)
             for cpu in (0, 5)]
    for i in range(6):
        files[i % 2].event(1_000_000 * i, action_value(TA_QUEUE, False), 64 * i, 4096, 10 + i % 2)
    for f in files:
        f.close()
    cfg = make_config(traces=[{"path": str(tmp_path / "sda"), "format": "blktrace"}])
    _outcome, done = run_config(cfg, device=ServiceLawDevice("fixed", 0.0005,
                                                             capacity=71687372), collect=True)
    # CPU 5 of the capture is CPU 5 mod 4 = 1 of the default host
    assert sorted((b.pid, b.cpu) for b in done) == [(10, 0)] * 3 + [(11, 1)] * 3


def test_the_resolved_configuration_runs_again_to_the_same_figures(tmp_path):
    from blksim.cli import main
    from tests.simhelpers import runs_again_to_the_same_figures
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nkernel = "6.6"\nduration = "50ms"\n[host]\ncpus = 6\n'
                   '[device]\nservice = "fixed"\nservice_time = "200us"\nservers = 2\n'
                   'nr_hw_queues = 2\nqueue_depth = 32\n'
                   '[[job]]\nname = "u"\nrw = "randread"\nioengine = "io_uring"\niodepth = 16\n'
                   'iodepth_batch = 4\niodepth_batch_complete_min = 2\nnumjobs = 3\n'
                   'cpus_allowed = "1-2,5"\ncpus_allowed_policy = "split"\n')
    out = tmp_path / "o"
    assert main(["run", str(cfg), "-q", "--out", str(out)]) == 0
    resolved = (out / "config.resolved.toml").read_text()
    for line in ("cpus = 6", 'ioengine = "io_uring"', "iodepth_batch_submit = 4",
                 "iodepth_batch_complete_min = 2", "iodepth_batch_complete_max = 2",
                 'cpus_allowed = "1-2,5"', 'cpus_allowed_policy = "split"'):
        assert line in resolved
    runs_again_to_the_same_figures(out, tmp_path / "again")
