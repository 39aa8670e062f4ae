"""The CPU cost model over random multi-queue runs (hypothesis): no bio lost or ended
twice, Q <= D <= C still, a CPU never runs two pieces of work at once, every process
reaps its last I/O, and the busy time adds up to the work charged plus the spinning;
and its reports (results.json, the text table, the resolved configuration)."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.sim.config import resolve
from blksim.sim.engine import Simulation

job_strategy = st.fixed_dictionaries({
    "rw": st.sampled_from(["randread", "randwrite", "randrw", "read"]),
    "ioengine": st.sampled_from(["libaio", "io_uring", "psync", None]),
    "iodepth": st.integers(1, 16),
    "iodepth_batch_submit": st.integers(1, 4),
    "iodepth_batch_complete_min": st.integers(0, 2),
    "iodepth_batch_complete_max": st.integers(0, 2),      # added to the minimum
    "number_ios": st.integers(1, 60),
    "numjobs": st.integers(1, 3),
    "thinktime": st.sampled_from([0, 0, 5]),                  # microseconds, as fio
    "rate_iops": st.sampled_from([None, None, None, 200000]),  # open loop: no call costs
})


def _raw(jobs, scheduler, cpus, hw_queues, affinity, kernel, law, seed):
    tables = []
    for i, j in enumerate(jobs):
        t = {k: v for k, v in j.items() if v is not None}
        t["name"] = f"j{i}"
        # both 0: fio's polling loop (io_in_polling)
        t["iodepth_batch_complete_max"] += t["iodepth_batch_complete_min"]
        tables.append(t)
    return {"run": {"kernel": kernel, "seed": seed},
            "host": {"cpus": cpus, "cpu_costs": True},
            "device": {"service": law, "service_time": "3us", "servers": 4,
                       "nr_hw_queues": hw_queues, "queue_depth": 8},
            "queue": {"scheduler": scheduler, "rq_affinity": affinity}, "job": tables}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(job_strategy, min_size=1, max_size=3),
       scheduler=st.sampled_from(["none", "mq-deadline", "kyber", "bfq"]),
       cpus=st.integers(1, 4), hw_queues=st.integers(1, 3),
       affinity=st.sampled_from([0, 1, 2]),
       kernel=st.sampled_from(["5.4", "5.10", "5.15", "6.1", "6.6"]),
       law=st.sampled_from(["fixed", "exponential"]), seed=st.integers(0, 2**32))
def test_nothing_lost_and_no_cpu_runs_two_pieces_at_once(jobs, scheduler, cpus, hw_queues,
                                                         affinity, kernel, law, seed):
    done = []
    sim = Simulation(resolve(_raw(jobs, scheduler, cpus, hw_queues, affinity, kernel, law,
                                  seed), "p.toml"), complete_hooks=(done.append,))
    ct = sim.host.cpu_time
    for cpu in ct.cpus:
        cpu.record = []
    sim.run()
    issued = sum(p.issued for p in sim.processes)
    assert issued == sum(j["number_ios"] * j["numjobs"] for j in jobs)
    ids = [b.id for b in done]
    assert sorted(ids) == list(range(issued))      # none lost, none completed twice
    for b in done:
        assert 0.0 <= b.t_queue <= b.t_dispatch <= b.t_complete
    # every bio's end_io ran after its completion's CPU work: each process reaped all
    # it submitted and exited
    for p in sim.processes:
        assert p.exited and p.outstanding == 0 and p.in_flight == 0 and p.reapable == 0
    # one piece of work at a time on each CPU, none left running
    for cpu in ct.cpus:
        assert cpu.running is None and not cpu.waiting
        last_end = 0.0
        for start, end in cpu.record:
            assert last_end <= start <= end
            last_end = end
    # busy = what was charged + what was spent spinning; per process, usr + sys is
    # what its calls cost
    busy = sum(sum(c.busy) for c in ct.cpus)
    spin = sum(c.spin for c in ct.cpus)
    assert abs(busy - (ct.work_done + spin)) <= 1e-12 * max(busy, 1.0)
    assert abs(spin - sum(lk.spun for lk in ct.locks.values())) <= 1e-12 * max(spin, 1e-3)
    if scheduler in ("none", "kyber"):
        assert spin == 0.0


RAW = {"run": {"kernel": "6.6", "seed": 3}, "host": {"cpus": 2, "cpu_costs": True},
       "device": {"service": "fixed", "service_time": "2us", "servers": 8,
                  "nr_hw_queues": 2, "queue_depth": 64},
       "queue": {"scheduler": "mq-deadline"},
       "job": [{"name": "r", "rw": "randread", "ioengine": "libaio", "iodepth": 16,
                "numjobs": 2, "number_ios": 500}]}


def _write(tmp_path, raw, name="c.toml"):
    import tomli_w
    path = tmp_path / name
    path.write_text(tomli_w.dumps(raw))
    return path


def test_results_and_table_report_cpu_use_as_mpstat_and_fio(tmp_path):
    from blksim.cli import main
    out = tmp_path / "out"
    assert main(["run", str(_write(tmp_path, RAW)), "-q", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    cpus = res["cpus"]
    assert [r["cpu"] for r in cpus["per_cpu"]] == [0, 1] and cpus["all"]["cpu"] == "all"
    for row in (*cpus["per_cpu"], cpus["all"]):
        total = sum(row[k] for k in ("usr_pct", "sys_pct", "irq_pct", "soft_pct",
                                     "idle_pct"))
        assert abs(total - 100.0) < 0.01
    # two hctxs, each CPU its own: every completion local, in the interrupt (irq)
    assert all(r["irq_pct"] > 0 and r["soft_pct"] == 0 for r in cpus["per_cpu"])
    assert cpus["scheduler_locks"]["sda"]["acquisitions"] == 1000
    for p in res["processes"]:
        assert p["usr_cpu_pct"] == 0.0 and 0.0 < p["sys_cpu_pct"] < 100.0
    from blksim.cli.tables import run_table
    table = run_table(res)
    assert "CPUs over" in table and "%usr" in table and "%soft" in table
    assert "usr_cpu %" in table and "scheduler lock of sda: 1,000 acquisitions" in table
    # the resolved configuration carries every figure and runs again to the same results
    again = tmp_path / "again"
    assert main(["run", str(out / "config.resolved.toml"), "-q", "--out", str(again)]) == 0
    second = json.loads((again / "results.json").read_text())
    assert second["cpus"] == cpus
    assert res["config"]["host"]["cpu_costs"]["engine"]["libaio"]["submit_ns"] == 987.0


def test_a_run_without_cpu_costs_reports_none(tmp_path):
    from blksim.cli import main
    from blksim.cli.tables import run_table
    raw = json.loads(json.dumps(RAW))
    del raw["host"]["cpu_costs"]
    out = tmp_path / "out"
    assert main(["run", str(_write(tmp_path, raw)), "-q", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert "cpus" not in res and "cpu_costs" not in res["config"].get("host", {})
    assert all("sys_cpu_pct" not in p for p in res["processes"])
    assert "CPUs over" not in run_table(res)


def test_the_model_uses_the_queue_through_the_protocol_only(tmp_path, monkeypatch):
    # every disk queue refuses a name outside block/queue_protocol.py to callers
    # outside the block layer (tests/test_queue_protocol.py's CheckedMqQueue)
    import blksim.sim.host as host
    from blksim.cli import main
    from tests.test_queue_protocol import CheckedMqQueue
    monkeypatch.setattr(host, "MqQueue", CheckedMqQueue)
    raw = json.loads(json.dumps(RAW))
    raw["host"]["cpus"] = 4
    raw["queue"]["rq_affinity"] = 2
    raw["job"][0]["numjobs"] = 4
    raw["job"][0]["number_ios"] = 100
    assert main(["run", str(_write(tmp_path, raw)), "-q", "--out", str(tmp_path / "o")]) == 0
