"""io.pressure of applications' processes (`blksim.sim.pressure.AppTasks`): a session's
synchronous reads are its stall, hand-computed; an idle device shows none; queueing makes
more; waiting for another session, the log writer or a think time is no stall; the CPU
work of a transaction is running (some without full); an fsync's wait for the journal
commit is no stall; runs without groups untouched."""

from __future__ import annotations

import pytest

from blksim.block.psi import IDLE, IOWAIT, RUNNING
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation
from blksim.sim.results import results_dict


def _raw(app: dict, duration: str = "10s", device=None) -> dict:
    base = {"type": "oltp", "data_device": "/dev/sda", "data_size": "64m",
            "db_cache_size": "1m", "filesystemio_options": "directio", "reads": 1, "sessions": 1,
            "writes": 0, "cpu_time": 0, "think_time": "10ms",
            "think_distribution": "fixed", "cgroup": "db"}
    base.update(app)
    return {"run": {"seed": 1, "kernel": "6.6", "duration": duration},
            "host": {"memory": "1g"},
            "device": device or {"service": "fixed", "service_time": "5ms"},
            "queue": {"scheduler": "none", "nomerges": 2},
            "cgroups": {"db": {}},
            "app": [base]}


class _States:
    """Each pid's time (s) in each task state, from the run's ``Pressure.set`` calls."""

    def __init__(self, sim) -> None:
        self.time: dict = {}
        self.last: dict = {}
        original = sim.pressure.set

        def record(pid, cpu, state, now):
            old = self.last.get(pid)
            if old is not None:
                t = self.time.setdefault(pid, [0.0, 0.0, 0.0])
                t[old[0]] += now - old[1]
            self.last[pid] = (state, now)
            original(pid, cpu, state, now)
        sim.pressure.set = record

    def until(self, end: float) -> dict:
        """pid -> [idle, iowait, running] seconds up to ``end``."""
        out = {pid: list(t) for pid, t in self.time.items()}
        for pid, (state, since) in self.last.items():
            out.setdefault(pid, [0.0, 0.0, 0.0])[state] += end - since
        return out


def _run(raw):
    sim = Simulation(resolve(raw, "t.toml"))
    states = _States(sim)
    res = results_dict(sim.run(), {})
    return sim, res, states.until(res["simulated_s"])


def test_one_session_stalls_exactly_while_it_waits_for_its_reads():
    """One session: 10 ms of thought, then one page; a miss is a 5 ms O_DIRECT read
    (blk_io_schedule) on a one-server device. `some`'s total is the time the session
    waited for its reads, which the engine reports ("db file sequential read"), to the
    microsecond (one CPU: the PSI fold divides nothing away); nothing runs, so full =
    some; with (almost) every read a miss the share is 5 / 15."""
    sim, res, _ = _run(_raw({}))
    psi = res["cgroups"]["db"]["io_pressure"]
    app = res["apps"]["oltp"]
    waited = app["waits"]["db file sequential read"]["time_s"]
    assert app["waits"]["db file sequential read"]["waits"] > 400
    # the last read may be in flight at the end: at most one service time more
    assert waited <= psi["some"]["total_us"] / 1e6 <= waited + 0.005 + 1e-6
    assert psi["full"] == psi["some"]
    hits = app["buffer_pool"]["hit_ratio"]
    share = psi["some"]["total_us"] / 1e6 / res["simulated_s"]
    misses = 1 - hits
    assert share == pytest.approx(0.005 * misses / (0.010 + 0.005 * misses), abs=0.002)
    assert res["io_pressure"] == psi                  # the root holds only the database


def test_pressure_is_zero_on_an_idle_device():
    """The session thinks all along (its first think time outlasts the run)."""
    _, res, _ = _run(_raw({"think_time": "100s"}, duration="3s"))
    for kind in ("some", "full"):
        assert res["cgroups"]["db"]["io_pressure"][kind] == {
            "avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total_us": 0}


@pytest.mark.parametrize("sessions, share", [(1, 1 / 3), (2, 2 / 3), (4, 1.0)])
def test_pressure_grows_with_queueing(sessions, share):
    """N sessions, every read a miss (data far larger than the cache, uniform access):
    at least one waits exactly while the device is busy, so some's share is the device's
    utilization: N / 3 up to saturation (the utilization law, as for jobs)."""
    _, res, _ = _run(_raw({"sessions": sessions, "access": "uniform",
                           "data_size": "1g"}, duration="8s"))
    some = res["cgroups"]["db"]["io_pressure"]["some"]["total_us"] / 1e6 / res["simulated_s"]
    utilization = res["totals"]["all"]["iops"] * 0.005
    assert some == pytest.approx(utilization, abs=0.003)
    assert some == pytest.approx(share, abs=0.01)


def test_waiting_for_another_session_or_the_log_writer_is_not_iowait():
    """Sessions that change pages commit and wait for the log writer ("log file sync":
    a semaphore, not io_schedule), and wait for each other's reads of a page ("read by
    other session"); those waits are idle. Each session's iowait is its own reads; the
    log writer's iowait is its O_DIRECT writes (blk_io_schedule)."""
    raw = _raw({"sessions": 4, "reads": 4, "writes": 1, "data_size": "256k",
                "db_cache_size": "1m", "access": "uniform", "log_device": "/dev/sdb",
                "think_time": "20ms"}, duration="6s")
    raw["devices"] = {"sdb": {"service": "fixed", "service_time": "2ms"}}
    sim, res, times = _run(raw)
    app = res["apps"]["oltp"]
    waits = app["waits"]
    assert waits["log file sync"]["waits"] > 100
    names = {proc.pid: proc.name for proc in sim.processes if hasattr(proc, "pid")}
    sessions = [pid for pid, n in names.items() if n.startswith("oltp.") and
                n[5:].isdigit()]
    lgwr = next(pid for pid, n in names.items() if n == "oltp.lgwr")
    iowait = sum(times[pid][IOWAIT] for pid in sessions)
    own = waits["db file sequential read"]["time_s"]
    # the reads in flight at the end: at most one per session
    assert own <= iowait <= own + len(sessions) * 0.005 + 1e-6
    idle = sum(times[pid][IDLE] for pid in sessions)
    assert idle >= waits["log file sync"]["time_s"] + waits["read by other session"]["time_s"]
    assert times[lgwr][IOWAIT] == pytest.approx(
        app["redo"]["writes"] * app["redo"]["write_ms"] / 1e3, abs=0.003)
    assert all(times[pid][RUNNING] == 0 for pid in names if pid in times)


def test_a_sessions_cpu_work_is_running_so_full_is_less_than_some():
    """With cpu_time the session is running (or runnable on its processor) for that long:
    in the one-session case its stall is never full while it runs, but it runs only
    between its reads, so full = some still; with two sessions on one processor one may
    run while the other waits: full < some."""
    _, res, times = _run(_raw({"sessions": 2, "cpu_time": "5ms", "cpu_distribution":
                               "fixed", "cpus": 1, "access": "uniform",
                               "data_size": "1g"}, duration="5s"))
    psi = res["cgroups"]["db"]["io_pressure"]
    assert psi["full"]["total_us"] < psi["some"]["total_us"]
    cpu = res["apps"]["oltp"]["cpu"]["time_s"]
    running = sum(t[RUNNING] for t in times.values())
    assert running >= cpu                         # queued for the processor counts too


def test_an_fsyncs_wait_for_the_journal_commit_is_not_iowait(monkeypatch):
    """InnoDB's log writer on ext4 (6.6): write() then fsync(); the fsync waits for the
    data's writeback (iowait: folio_wait_writeback) and then for jbd2's commit
    (jbd2_log_wait_commit: wait_event, not iowait). Counting the commit's wait as iowait
    too (the control), the writer's iowait is exactly its time in the writes; counted
    right, it is less by the commits' time."""
    from blksim.hostio.fileio import OpenFile
    raw = _raw({"engine": "innodb", "innodb_flush_method": "fsync", "writes": 1,
                "log_device": "/dev/sdb", "think_time": "20ms"}, duration="4s")
    for key in ("filesystemio_options", "db_cache_size"):
        del raw["app"][0][key]
    raw["app"][0]["innodb_buffer_pool_size"] = "1m"
    raw["devices"] = {"sdb": {"service": "fixed", "service_time": "2ms"}}
    raw["filesystems"] = {"/dev/sdb": {"type": "ext4"}}

    def writer_iowait():
        sim, res, times = _run(raw)
        names = {proc.pid: proc.name for proc in sim.processes if hasattr(proc, "pid")}
        writer = next(pid for pid, n in names.items() if n == "oltp.log_writer")
        redo = res["apps"]["oltp"]["redo"]
        return times[writer][IOWAIT], redo["writes"] * redo["write_ms"] / 1e3
    iowait, busy = writer_iowait()
    monkeypatch.setattr(OpenFile, "plain_sleep", lambda self, done: done)
    control, busy_again = writer_iowait()
    assert busy_again == busy > 0.5
    # (write_ms is rounded, and a write may be in flight at the end)
    assert control == pytest.approx(busy, abs=0.007)
    assert 0.0 < iowait < busy - 0.3
