"""Switching the elevator at run time (writing queue/scheduler, 2.6.18's
elevator_switch): drain, bypass, take-over; per-phase results; configuration."""

import json
import math

import pytest
import simpy

from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import get_scheduler
from blksim.block.legacy_queue import QueueSettings, RequestQueue
from blksim.cli import main
from blksim.sim.clock import SimpyClock
from blksim.sim.config import ConfigError
from blksim.cli.tables import _fmt_p, run_table
from blksim.sim.results import results_dict, results_json
from blksim.block.request import Bio
from tests.simhelpers import make_config, run_config


def _queue(scheduler="noop", queue_depth=1, service=0.010, hz=250):
    env = simpy.Environment()
    clock = SimpyClock(env)
    device = ServiceLawDevice("fixed", service, capacity=1 << 30, queue_depth=queue_depth)
    done = []
    cls = get_scheduler(scheduler)
    q = RequestQueue(lambda dq: cls.create(dq, {}, hz=hz), device, clock,
                     QueueSettings(hz=hz))
    q.subscribe("block_bio_complete", lambda _q, bio, _now: done.append(bio))
    return env, q, device, done


def _factory(name, hz=250):
    cls = get_scheduler(name)
    return lambda dq: cls.create(dq, {}, hz=hz)


_ids = iter(range(10**9))


def _bio(sector, pid=1, write=True, n=8):
    return Bio(next(_ids), sector, n, write, not write, pid, on_complete=lambda b: None)


def _at(env, t, fn):
    def proc():
        yield env.timeout(t - env.now)
        fn()
    env.process(proc())


def test_switch_drains_queued_requests_then_the_new_elevator_takes_over():
    """Five async writes at t=0 on a fixed 10 ms device (depth 1), noop: the 4th
    unplugs the queue (unplug_thresh) and one goes to the device; four wait in
    noop. At 1 ms the switch to deadline drains those four to the dispatch list
    (in noop's order), and waits while requests noop handled are outstanding,
    polling every msleep(10) = 4 jiffies at HZ=250 (16, 32, 48, 64 ms). The five
    complete at 10..50 ms, so deadline takes over at 64 ms. A write queued at
    5 ms, during the switch, bypasses both elevators: back of the dispatch list,
    never merged (though contiguous with a queued request), served sixth."""
    env, q, dev, done = _queue()
    writes = [_bio(s) for s in (800, 100, 500, 300, 900)]
    for b in writes:
        _at(env, 0.0, lambda b=b: q.submit_bio(b))
    infos = []
    _at(env, 0.001, lambda: q.switch_elevator(_factory("deadline"), "deadline", infos.append))
    late = _bio(508)                           # contiguous with the request at 500
    _at(env, 0.005, lambda: q.submit_bio(late))
    seen = {}

    def probe():
        seen["switching"] = q.switching
        seen["elevator"] = q.elevator.name

    _at(env, 0.063, probe)
    after = _bio(2000)
    _at(env, 0.070, lambda: q.submit_bio(after))
    env.run()
    assert seen == {"switching": True, "elevator": "noop"}
    assert len(infos) == 1
    info = infos[0]
    assert info["drained"] == 4 and info["bypassed"] == 1 and not info["noop"]
    assert math.isclose(info["done_s"], 0.064)
    assert q.elevator.name == "deadline" and q.elevator_name == "deadline"
    assert not q.switching
    assert len(done) == 7 and len({b.id for b in done}) == 7
    assert q.bio_merges == 0
    first = writes[0]
    assert first.t_dispatch == 0.0                 # dispatched when the 4th unplugged
    order = [b.sector for b in done]
    assert order[0] == 800
    assert sorted(order[1:5]) == [100, 300, 500, 900]   # the drained four, noop's order
    assert order[5] == 508 and math.isclose(late.t_dispatch, 0.050)
    assert order[6] == 2000 and after.t_queue == 0.070
    assert q.idle()


def test_switch_on_an_idle_queue_is_immediate():
    env, q, dev, done = _queue("deadline")
    infos = []
    _at(env, 0.5, lambda: q.switch_elevator(_factory("cfq"), "cfq", infos.append))
    b = _bio(100, write=False)
    _at(env, 0.6, lambda: q.submit_bio(b))
    env.run()
    assert infos[0]["done_s"] == 0.5 and infos[0]["drained"] == 0
    assert q.elevator.name == "cfq" and len(done) == 1


def test_writing_the_active_name_does_nothing():
    env, q, dev, done = _queue("noop")
    old = q.elevator
    infos = []
    for s in (100, 300):
        _at(env, 0.0, lambda s=s: q.submit_bio(_bio(s)))
    _at(env, 0.001, lambda: q.switch_elevator(_factory("noop"), "noop", infos.append))
    env.run()
    assert q.elevator is old and infos[0]["noop"] and infos[0]["drained"] == 0
    assert len(done) == 2


def test_a_switch_during_a_switch_waits_for_it():
    env, q, dev, done = _queue("noop")
    for s in (800, 100, 500, 300, 900):
        _at(env, 0.0, lambda s=s: q.submit_bio(_bio(s)))
    infos = []
    _at(env, 0.001, lambda: q.switch_elevator(_factory("deadline"), "deadline", infos.append))
    _at(env, 0.002, lambda: q.switch_elevator(_factory("cfq"), "cfq", infos.append))
    env.run()
    assert [i["scheduler"] for i in infos] == ["deadline", "cfq"]
    assert math.isclose(infos[1]["asked_s"], 0.002)
    assert infos[1]["started_s"] == infos[0]["done_s"] == infos[1]["done_s"]
    assert q.elevator.name == "cfq" and len(done) == 5


# ---------------------------------------------------------------------- whole runs

SWITCHED = [
    {"name": "r", "rw": "randread", "bs": "4k", "numjobs": 2, "thinktime": "1ms"},
    {"name": "w", "rw": "randwrite", "bs": "16k", "iodepth": 16, "offset": "1g"},
]


def _switched_config(**run):
    cfg = make_config(jobs=SWITCHED, scheduler="noop",
                      run={"duration": "3s", "client_timeout": "100ms", **run})
    return cfg


def _with_switches(cfg, switches):
    from blksim.sim.config import SwitchSpec
    from blksim.block.elevator import resolve_tunables
    cfg.switches = [SwitchSpec(at, name, resolve_tunables(get_scheduler(name).tunables, {}, name))
                    for at, name in switches]
    return cfg


def _check_phases_add_up(r):
    phases = r["phases"]
    for d in ("read", "write", "all"):
        t = r["totals"][d]
        assert sum(p["totals"][d]["ios"] for p in phases) == t["ios"]
        assert sum(p["totals"][d]["bytes"] for p in phases) == t["bytes"]
        assert math.isclose(sum(p["totals"][d]["disk_time_s"] for p in phases),
                            t["disk_time_s"], rel_tol=1e-6, abs_tol=1e-9)
        if t["timeouts"] is not None:
            assert sum(p["totals"][d]["timeouts"] for p in phases) == t["timeouts"]
        maxes = [p["totals"][d]["q2c"]["max_ms"] for p in phases if p["totals"][d]["ios"]]
        if maxes:
            assert max(maxes) == t["q2c"]["max_ms"]
    by_pid = {p["pid"]: p for p in r["processes"]}
    for pid, proc in by_pid.items():
        parts = [q for ph in phases for q in ph["processes"] if q["pid"] == pid]
        assert sum(q["all"]["ios"] for q in parts) == proc["all"]["ios"]
        assert sum(q["issued"] for q in parts) == proc["issued"]
        assert math.isclose(sum(q["disk_time_s"] for q in parts), proc["disk_time_s"],
                            rel_tol=1e-6, abs_tol=1e-9)
    # Phases cover the measured time; they can cover more when the workload ended
    # before the last switch (the last phase then measures nothing).
    # (Each figure is rounded to the nanosecond in results.json.)
    covered = sum(p["measured_s"] for p in phases)
    assert covered >= r["measured_s"] - 1e-8
    if phases[-1]["totals"]["all"]["ios"]:
        assert math.isclose(covered, r["measured_s"], rel_tol=1e-9, abs_tol=1e-8)
    assert sum(p["bios_completed"] for p in phases) == r["block_layer"]["bios_completed"]


def test_noop_deadline_cfq_mid_run_per_phase_results():
    cfg = _with_switches(_switched_config(), [(1.0, "deadline"), (2.0, "cfq")])
    outcome, done = run_config(cfg, collect=True)
    r = results_dict(outcome, {})
    assert [p["scheduler"] for p in r["phases"]] == ["noop", "deadline", "cfq"]
    assert [(p["start_s"], p["end_s"]) for p in r["phases"]] == [(0, 1), (1, 2), (2, 3)]
    sw = r["phases"][1]["switch"]
    assert sw["drained_requests"] > 0 and sw["drain_ms"] > 0
    assert r["phases"][1]["iosched"]["read_expire"] == 500
    for ph in r["phases"]:
        assert ph["totals"]["all"]["ios"] > 50
        assert 0 < ph["fairness"]["jain_throughput"] <= 1
    _check_phases_add_up(r)
    # every bio counts in the phase it was queued in
    starts = [0.0, 1.0, 2.0]
    counts = [0, 0, 0]
    for b in done:
        counts[sum(1 for s in starts if b.t_queue >= s) - 1] += 1
    assert counts == [p["bios_completed"] for p in r["phases"]]
    assert len({b.id for b in done}) == len(done)
    text = run_table(r)
    assert "phases (each bio counts in the phase it was queued in):" in text
    assert " 2 cfq " in text
    # each phase's Q2C p99 keeps the three digits its histogram gives it
    for ph in r["phases"]:
        row = next(line for line in text.splitlines()
                   if line.startswith(f"{ph['index']:>2} {ph['scheduler']} "))
        assert _fmt_p(ph["totals"]["all"]["q2c"]["p99_ms"]) in row


def test_ramp_time_inside_a_phase():
    cfg = _with_switches(_switched_config(ramp_time="1.5s"), [(1.0, "deadline"), (2.0, "cfq")])
    r = results_dict(run_config(cfg), {})
    first, second, third = r["phases"]
    assert first["totals"]["all"]["ios"] == 0 and first["measured_s"] == 0.0
    assert first["fairness"]["processes"] == 0 and first["fairness"]["jain_throughput"] is None
    assert math.isclose(second["measured_s"], 0.5)
    _check_phases_add_up(r)


def test_switched_run_is_reproducible():
    texts = []
    for _ in range(2):
        cfg = _with_switches(_switched_config(), [(0.7, "cfq"), (1.9, "anticipatory")])
        texts.append(results_json(results_dict(run_config(cfg), {})))
    assert texts[0] == texts[1]


def test_run_without_switch_has_one_phase_equal_to_the_totals():
    r = results_dict(run_config(_switched_config()), {})
    assert len(r["phases"]) == 1
    ph = r["phases"][0]
    assert ph["scheduler"] == "noop" and "switch" not in ph
    assert ph["totals"] == r["totals"] and ph["processes"] == r["processes"]
    assert ph["fairness"] == r["fairness"]


# ---------------------------------------------------------------------- configuration

SMALL = """
[run]
seed = 2
duration = "2s"

[queue]
scheduler = "noop"

[[job]]
name = "r"
rw = "randread"
numjobs = 2

[[job]]
name = "w"
rw = "randwrite"
bs = "16k"
iodepth = 8
"""


def test_switch_tables_from_the_cli_and_the_resolved_config(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(SMALL + '\n[[switch]]\nat = "0.5s"\nscheduler = "deadline"\n'
                    '[switch.iosched]\nfifo_batch = 4\n\n[[switch]]\nat = "1200ms"\n'
                    'scheduler = "cfq"\n')
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["run", str(path), "--quiet", "--out", str(first)]) == 0
    out = capsys.readouterr().out
    assert "deadline" in out and "cfq" in out
    resolved = (first / "config.resolved.toml").read_text()
    assert "[[switch]]" in resolved and 'at = "1.2s"' in resolved
    assert main(["run", str(first / "config.resolved.toml"), "--quiet",
                 "--out", str(second)]) == 0
    r1 = json.loads((first / "results.json").read_text())
    r2 = json.loads((second / "results.json").read_text())
    assert r1["phases"] == r2["phases"] and r1["totals"] == r2["totals"]
    assert r1["phases"][1]["iosched"]["fifo_batch"] == 4
    assert r1["config"]["switch"][0]["iosched"]["fifo_batch"] == 4


@pytest.mark.parametrize("switch, expected", [
    ({"at": "1s", "scheduler": "cfqq"},
     "[[switch]] #1: scheduler: unknown scheduler 'cfqq'; valid: anticipatory, cfq"),
    ({"at": "1s", "scheduler": "cfq", "iosched": {"fifo_batch": 4}},
     "[[switch]] #1: unknown tunable queue/iosched/fifo_batch for scheduler 'cfq'; valid: "),
    ({"at": "1s", "scheduler": "deadline", "iosched": {"fifo_batch": -1}},
     "queue/iosched/fifo_batch = -1 is out of range"),
    ({"at": "2s", "scheduler": "cfq"}, "[[switch]] #1: at = '2s' is not before [run] duration"),
    ({"at": "5s", "scheduler": "cfq"}, "is not before [run] duration = '2s'"),
    ({"at": "0s", "scheduler": "cfq"}, "at must be after the start of the run"),
    ({"scheduler": "cfq"}, "[[switch]] #1: at is required"),
    ({"at": "1s"}, "[[switch]] #1: scheduler is required"),
    ({"at": "1s", "scheduler": "cfq", "when": 3}, "unknown key 'when'; valid keys: at, "),
    ({"at": "soon", "scheduler": "cfq"}, "[[switch]] #1: "),
    ({"at": "1s", "scheduler": "noop", "iosched": {}}, None),
    ({"at": "1s", "scheduler": "noop", "iosched": {"x": 1}}, "already the active one"),
])
def test_switch_config_errors(switch, expected):
    from blksim.sim.config import resolve
    raw = {"run": {"seed": 1, "duration": "2s"}, "queue": {"scheduler": "noop"},
           "job": [{"name": "a", "rw": "read"}], "switch": [switch]}
    if expected is None:
        cfg = resolve(raw, "t.toml", device_sectors=1 << 30)
        assert cfg.switches[0].scheduler == "noop"
        return
    with pytest.raises(ConfigError) as exc:
        resolve(raw, "t.toml", device_sectors=1 << 30)
    assert expected in str(exc.value)
    assert str(exc.value).startswith("t.toml: ")


def test_switches_must_be_in_time_order():
    from blksim.sim.config import resolve
    raw = {"queue": {"scheduler": "noop"}, "job": [{"name": "a", "rw": "read"}],
           "switch": [{"at": "2s", "scheduler": "cfq"}, {"at": "1500ms", "scheduler": "noop"}]}
    with pytest.raises(ConfigError, match=r"\[\[switch\]\] #2: at = '1500ms' must be later "
                                          r"than the previous switch's at = '2s'"):
        resolve(raw, "t.toml", device_sectors=1 << 30)
    raw["switch"] = {"at": "1s"}
    with pytest.raises(ConfigError, match=r"array of tables \(\[\[switch\]\]\)"):
        resolve(raw, "t.toml", device_sectors=1 << 30)


def test_bad_switch_on_the_cli_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(SMALL + '\n[[switch]]\nat = "3s"\nscheduler = "cfq"\n')
    assert main(["run", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("blksim: error: ") and err.count("\n") == 1
    assert "[[switch]] #1: at = '3s' is not before [run] duration" in err


def test_writing_the_active_name_keeps_the_tunables_and_reruns(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(SMALL.replace('scheduler = "noop"', 'scheduler = "deadline"\n'
                                  '[queue.iosched]\nfifo_batch = 4')
                    + '\n[[switch]]\nat = "1s"\nscheduler = "deadline"\n')
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["run", str(path), "--quiet", "--out", str(first)]) == 0
    assert main(["run", str(first / "config.resolved.toml"), "--quiet",
                 "--out", str(second)]) == 0
    capsys.readouterr()
    r = json.loads((first / "results.json").read_text())
    assert [p["iosched"]["fifo_batch"] for p in r["phases"]] == [4, 4]
    assert r["phases"][1]["switch"]["noop"] and r["phases"][1]["switch"]["drain_ms"] == 0.0
    assert (first / "results.json").read_text() != "" and \
        json.loads((second / "results.json").read_text())["phases"] == r["phases"]


TWO_DISKS_SWITCHED = """
[run]
seed = 1
duration = "600ms"
[device]
drive = "cheetah15k4"
[queue]
scheduler = "deadline"
[devices.sdb]
drive = "cheetah15k4"
[devices.sdb.queue]
scheduler = "cfq"
[[switch]]
device = "sdb"
at = "300ms"
scheduler = "noop"
[[job]]
name = "a"
rw = "randread"
[[job]]
name = "b"
rw = "randread"
filename = "/dev/sdb"
"""


def test_phases_table_of_a_switched_second_disk_names_its_schedulers(tmp_path, capsys):
    """Issue 29, finding 7: phase 0 of a run whose sdb switches was labelled with sda's
    scheduler (deadline); it is sdb's (cfq), and the switch's phase names sdb."""
    path = tmp_path / "two.toml"
    path.write_text(TWO_DISKS_SWITCHED)
    assert main(["run", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    i = out.index("phases (each bio counts in the phase it was queued in):")
    assert out[i + 1].split()[:3] == ["#", "scheduler", "from"]
    assert out[i + 2].split()[:4] == ["0", "sdb:", "cfq", "0.000"]
    assert out[i + 3].split()[:4] == ["1", "sdb:", "noop", "0.300"]


THREE_DISKS_SWITCHED = TWO_DISKS_SWITCHED.replace('[[switch]]', '''[devices.sdc]
drive = "cheetah15k4"
[devices.sdc.queue]
scheduler = "noop"
[[switch]]
device = "sdc"
at = "100ms"
scheduler = "deadline"
[[switch]]''') + '''[[job]]
name = "c"
rw = "randread"
filename = "/dev/sdc"
'''


def test_each_phase_record_names_its_disk_and_the_scheduler_that_disk_ran(tmp_path, capsys):
    """Issue 29: phase 0 of a run with several disks carried sda's scheduler (deadline) and
    no ``device`` in results.json; each phase now says which disk it concerns, the
    scheduler and tunables that disk ran, and every disk's scheduler in the phase."""
    path = tmp_path / "three.toml"
    path.write_text(THREE_DISKS_SWITCHED)
    out = tmp_path / "out"
    assert main(["run", str(path), "--quiet", "--out", str(out)]) == 0
    phases = json.loads((out / "results.json").read_text())["phases"]
    got = [(ph["device"], ph["scheduler"], ph["schedulers"]) for ph in phases]
    assert got == [
        ("sdc", "noop", {"sda": "deadline", "sdb": "cfq", "sdc": "noop"}),
        ("sdc", "deadline", {"sda": "deadline", "sdb": "cfq", "sdc": "deadline"}),
        ("sdb", "noop", {"sda": "deadline", "sdb": "noop", "sdc": "deadline"}),
    ]
    assert phases[0]["iosched"] == {}                         # noop's (sdc's), not sda's
    assert "fifo_batch" in phases[1]["iosched"]
    # the table reads the phases, not the configuration
    lines = capsys.readouterr().out.splitlines()
    i = lines.index("phases (each bio counts in the phase it was queued in):")
    assert lines[i + 2].split()[1:5] == ["sdc:", "noop,", "sdb:", "cfq"]
    assert lines[i + 3].split()[1:3] == ["sdc:", "deadline"]
    assert lines[i + 4].split()[1:3] == ["sdb:", "noop"]
    results = json.loads((out / "results.json").read_text())
    results["config"] = {}                   # no configuration to fall back on
    from blksim.cli.tables import _phase_labels
    assert _phase_labels(results)[0] == "sdc: noop, sdb: cfq"


def test_one_disk_phases_carry_no_device():
    cfg = make_config(jobs=[{"name": "r", "rw": "randread"}], scheduler="noop",
                      run={"duration": "0.2s"})
    from blksim.sim.engine import Simulation
    assert "device" not in Simulation._phase_info(cfg)[0]
