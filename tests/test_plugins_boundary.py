"""The block layer checks what a scheduler plugin hands it (issue 29, finding 7): a request
dispatched twice or after it was merged away, a wake-up time that cannot be one, a hook's
return value that cannot mean anything. Each stops the run with one line naming the
scheduler, the hook and the value, instead of completing bios twice or stalling; and a
plugin whose import raises anything (SystemExit included) is one line naming its file."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import blksim
from blksim.schedulers import get_scheduler
from blksim.schedulers.registry import PluginError
from blksim.block.legacy_queue import SimulationError

ROOT = Path(__file__).resolve().parents[1]

#: A small workload on one disk: random reads and async writes, a few hundred bios.
CONFIG = {
    "run": {"seed": 5, "duration": "0.5s"},
    "device": {"drive": "cheetah15k4", "queue_depth": 2},
    "job": [{"name": "r", "rw": "randread", "bs": "4k", "numjobs": 2},
            {"name": "w", "rw": "write", "bs": "4k", "iodepth": 4, "sync": False}],
}

PLUGINS = """
    import math
    from collections import deque
    from blksim.block.elevator import Elevator


    class Fifo(Elevator):
        '''A plain FIFO: the legal base the faulty ones below change one thing of.'''
        name = "fifo"

        def __init__(self, dq, params=None, hz=250):
            super().__init__(dq, params, hz)
            self.fifo = deque()

        def add(self, rq, now):
            self.fifo.append(rq)

        def dispatch(self, now, force=False):
            if not self.fifo:
                return 0
            self.dq.add_tail(self.fifo.popleft())
            return 1

        def requests_merged(self, rq, nxt, now):
            self.fifo.remove(nxt)

        def former(self, rq):
            i = self.fifo.index(rq)
            return self.fifo[i - 1] if i else None

        def latter(self, rq):
            i = self.fifo.index(rq)
            return self.fifo[i + 1] if i + 1 < len(self.fifo) else None

        def empty(self):
            return not self.fifo

        def queued(self):
            return len(self.fifo)


    class Twice(Fifo):
        '''Dispatches every request a second time (it forgets to forget it).'''
        name = "twice"

        def __init__(self, dq, params=None, hz=250):
            super().__init__(dq, params, hz)
            self.again = deque()

        def dispatch(self, now, force=False):
            if self.again:
                self.dq.add_tail(self.again.popleft())
                return 1
            if not self.fifo:
                return 0
            rq = self.fifo.popleft()
            self.again.append(rq)
            self.dq.add_tail(rq)
            return 1

        def empty(self):
            return not self.fifo and not self.again


    class Merged(Fifo):
        '''Keeps a request the block layer merged into another, and dispatches it.'''
        name = "merged"

        def requests_merged(self, rq, nxt, now):
            pass                                # nxt stays in the FIFO


    class Stranger(Fifo):
        '''Puts something that is not a request on the dispatch list.'''
        name = "stranger"

        def dispatch(self, now, force=False):
            if not self.fifo:
                return 0
            self.fifo.popleft()
            self.dq.append("rq")
            return 1


    class Lost(Fifo):
        '''Takes requests and drops them: says it is empty while they wait.'''
        name = "lost"

        def dispatch(self, now, force=False):
            self.fifo.clear()
            return 0


    class DropOnForce(Fifo):
        '''Forgets its requests when a scheduler switch drains it.'''
        name = "drop-on-force"

        def dispatch(self, now, force=False):
            if force:
                self.fifo.clear()
                return 0
            return super().dispatch(now, force)


    class Nothing(Fifo):
        '''Its create() returns nothing.'''
        name = "nothing"

        @classmethod
        def create(cls, dq, params=None, hz=250, kernel="2.6.18"):
            return None


    class NoSuper(Fifo):
        '''Its __init__ forgets the base class's.'''
        name = "nosuper"

        def __init__(self, dq, params=None, hz=250):
            self.fifo = deque()


    class Shared(Fifo):
        '''One FIFO for every instance (a class attribute): the disks' requests mix.'''
        name = "shared"
        fifo = deque()

        def __init__(self, dq, params=None, hz=250):
            Elevator.__init__(self, dq, params, hz)


    class Liar(Fifo):
        '''Says, every tenth call, that it moved a request when it moved none.'''
        name = "liar"
        calls = 0

        def dispatch(self, now, force=False):
            self.calls += 1
            if self.calls % 10 == 0:
                return 1
            return super().dispatch(now, force)


    class Timer(Fifo):
        '''Holds its requests until a timer it sets to WHEN(now).'''
        name = "timer"
        uses_timers = True
        WHEN = staticmethod(lambda now: now + 0.001)

        def __init__(self, dq, params=None, hz=250):
            super().__init__(dq, params, hz)
            self.open = False

        def add(self, rq, now):
            super().add(rq, now)
            if not self.open:
                self.wakeup_at = self.WHEN(now)

        def timer_fired(self, now):
            self.open = True

        def dispatch(self, now, force=False):
            if not (self.open or force):
                return 0
            return super().dispatch(now, force)


    class Undeclared(Timer):
        '''Sets a timer without declaring uses_timers.'''
        name = "undeclared"
        uses_timers = False


    class Spinner(Fifo):
        '''Asks for a queue run (KICK) or a wake-up now (else) instead of dispatching.'''
        name = "spinner"
        uses_timers = True
        KICK = True

        def dispatch(self, now, force=False):
            if force:
                return super().dispatch(now, force)
            if self.fifo:
                if self.KICK:
                    self.kick_queue = True
                else:
                    self.wakeup_at = now
            return 0


    class NowSpinner(Spinner):
        name = "now-spinner"
        KICK = False


    class Ticker(Spinner):
        '''Waits a microsecond at a time for a moment that never comes.'''
        name = "ticker"

        def dispatch(self, now, force=False):
            if force:
                return Fifo.dispatch(self, now, force)
            if self.fifo:
                self.wakeup_at = now + 1e-6
            return 0


    class NanTimer(Timer):
        name = "nan-timer"
        WHEN = staticmethod(lambda now: math.nan)


    class PastTimer(Timer):
        name = "past-timer"
        WHEN = staticmethod(lambda now: now - 0.5)


    class MinusInfTimer(Timer):
        name = "minus-inf-timer"
        WHEN = staticmethod(lambda now: -math.inf)


    class TextTimer(Timer):
        name = "text-timer"
        WHEN = staticmethod(lambda now: "soon")


    class BadFormer(Fifo):
        '''Answers former() with something that is not a request.'''
        name = "bad-former"

        def former(self, rq):
            return 7


    class BadCandidate(Fifo):
        '''Answers merge_candidate() with something that is not a request.'''
        name = "bad-candidate"

        def merge_candidate(self, bio, now):
            return bio
"""


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    (tmp_path / "faulty_plugins.py").write_text(textwrap.dedent(PLUGINS))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "faulty_plugins"
    sys.modules.pop("faulty_plugins", None)


def _run(cls: str, **kw):
    return blksim.run(CONFIG, scheduler=f"faulty_plugins:{cls}", **kw)


def test_the_legal_fifo_completes_every_bio_once(plugins):
    r = _run("Fifo")
    ids = r.requests["bio"]
    assert len(ids) > 100 and len(set(ids.tolist())) == len(ids)
    assert r.all.ios == len(ids)


def test_a_request_dispatched_twice_stops_the_run_naming_the_plugin(plugins):
    # before: every bio completed twice (duplicate bio ids, twice the IOPS)
    with pytest.raises(SimulationError) as exc:
        _run("Twice")
    text = str(exc.value)
    assert "\n" not in text
    assert text.startswith("scheduler 'twice' (faulty_plugins:Twice) on sda: dispatch() ")
    assert "already dispatched" in text and "request #" in text


def _queue(cls):
    """A request queue on a fixed-service device under plugin class ``cls``, its clock's
    simpy environment, and the list of completed bios."""
    import simpy
    from blksim.disk_models.synthetic import ServiceLawDevice
    from blksim.block.legacy_queue import QueueSettings, RequestQueue
    from blksim.sim.clock import SimpyClock
    env = simpy.Environment()
    device = ServiceLawDevice("fixed", 0.001, capacity=1 << 30, queue_depth=1)
    done = []
    q = RequestQueue(lambda dq: get_scheduler(f"faulty_plugins:{cls}").create(dq, {}),
                     device, SimpyClock(env), QueueSettings())
    q.subscribe("block_bio_complete", lambda _q, bio, _now: done.append(bio))
    return env, q, done


def _write(sector, n=8):
    from blksim.block.request import Bio
    return Bio(sector, sector, n, True, False, 1)


def test_a_request_merged_away_then_dispatched_stops_the_run(plugins):
    # 0+8 and 16+8 queue (plugged); 8+8 back-merges into the first, which then coalesces
    # with 16+8: that request is gone, its bios now the first's
    env, q, done = _queue("Fifo")
    for sector in (0, 16, 8):
        q.submit_bio(_write(sector))
    env.run()
    assert q.request_merges == 1 and sorted(b.id for b in done) == [0, 8, 16]
    env, q, done = _queue("Merged")
    for sector in (0, 16, 8, 1000):             # 1000+8: so dispatch() is asked again
        q.submit_bio(_write(sector))
    with pytest.raises(SimulationError, match=r"^scheduler 'merged' \(faulty_plugins:Merged\) "
                                              r"on sda: dispatch\(\) put request #1 \(W 16\+8\) "
                                              r"on the dispatch list after the block layer merged"):
        env.run()


def test_a_neighbour_that_is_not_a_request(plugins):
    env, q, done = _queue("BadFormer")
    q.submit_bio(_write(16))
    with pytest.raises(SimulationError, match=r"on sda: former\(\) returned 7: expected a "
                                              r"request it holds, or None$"):
        q.submit_bio(_write(8))                 # a front merge: former() is asked


def test_a_merge_candidate_that_is_not_a_request(plugins):
    env, q, done = _queue("BadCandidate")
    q.submit_bio(_write(16))
    with pytest.raises(SimulationError, match=r"on sda: merge_candidate\(\) returned "
                                              r"Bio\(#100 W 100\+8 pid=1\): expected"):
        q.submit_bio(_write(100))


@pytest.mark.parametrize("cls, found", [
    ("Stranger", "'rq'"),
])
def test_something_that_is_not_a_request_on_the_dispatch_list(plugins, cls, found):
    with pytest.raises(SimulationError, match=rf"dispatch\(\) put {found} on the dispatch list"):
        _run(cls)


def test_requests_dropped_by_the_plugin_stop_the_run(plugins):
    # before: the bios never completed and the run ended as if nothing were wrong
    with pytest.raises(SimulationError, match=r"^scheduler 'lost' .*: dispatch\(\) moved no "
                                              r"request and empty\(\) is True, but"):
        _run("Lost")


def test_requests_dropped_in_a_switch_drain_stop_the_run(plugins):
    # before: the switch waited for them for ever (a 10 ms poll until the run's end)
    env, q, done = _queue("DropOnForce")
    for sector in (0, 1000, 2000):
        q.submit_bio(_write(sector))
    with pytest.raises(SimulationError, match=r"^scheduler 'drop-on-force' "
                                              r"\(faulty_plugins:DropOnForce\) on sda: "
                                              r"dispatch\(force=True\) drained the elevator, "
                                              r"yet 3 request\(s\) given to add\(\) are "
                                              r"neither on the dispatch list nor dispatched"):
        q.switch_elevator(get_scheduler("noop").create, "noop")


def test_a_request_of_another_disk_stops_the_run(plugins):
    # before: sda's device served sdb's requests (and the reverse)
    cfg = {"run": {"seed": 2, "duration": "200ms"},
           "device": {"drive": "cheetah15k4"}, "devices": {"sdb": {"drive": "cheetah15k4"}},
           "job": [{"name": "a", "rw": "randread", "iodepth": 4},
                   {"name": "b", "rw": "randread", "iodepth": 4, "filename": "/dev/sdb"}]}
    with pytest.raises(SimulationError, match=r"^scheduler 'shared' \(faulty_plugins:Shared\) "
                                              r"on sd[ab]: dispatch\(\) put request #[0-9]+ "
                                              r"\(R [0-9]+\+8\) on the dispatch list: a request "
                                              r"queued on sd[ab], not on sd[ab] \(state shared "
                                              r"between the scheduler's instances, one per disk\?\)$"):
        blksim.run(cfg, scheduler="faulty_plugins:Shared", per_request=False)


def test_a_dispatch_that_claims_requests_it_did_not_move(plugins):
    with pytest.raises(SimulationError, match=r"dispatch\(\) returned 1 but moved no request"):
        _run("Liar")


@pytest.mark.parametrize("cls, what", [
    ("Nothing", "create() returned None: expected an instance of "
                "blksim.block.elevator.Elevator"),
    ("NoSuper", "create() built an elevator without the dispatch list it was given (its "
                "__init__ must call super().__init__(dispatch_queue, params, hz))"),
])
def test_an_elevator_that_is_not_one_is_refused_before_the_run(plugins, cls, what):
    name = {"Nothing": "nothing", "NoSuper": "nosuper"}[cls]
    with pytest.raises(SimulationError) as exc:
        _run(cls)
    assert str(exc.value) == f"scheduler {name!r} (faulty_plugins:{cls}) on sda: {what}"


def test_a_timer_without_uses_timers_stops_the_run(plugins):
    # before: the timer was never set, the requests never dispatched: 0 completions
    with pytest.raises(SimulationError, match=r"^scheduler 'undeclared' .* on sda: dispatch\(\) "
                                              r"moved no request and waits for wakeup_at = "
                                              r"0\.00[0-9]* or kick_queue = False, which the "
                                              r"block layer honours only for a scheduler that "
                                              r"declares uses_timers = True$"):
        _run("Undeclared")


@pytest.mark.parametrize("cls, what", [("Spinner", "kick_queue"), ("NowSpinner", "wakeup_at")])
def test_a_plugin_that_asks_for_queue_runs_without_end_is_stopped(plugins, monkeypatch,
                                                                   cls, what):
    # before: the run hung at t = 0 (a kick, or a wake-up now, from dispatch() itself)
    from blksim.block import elevator_boundary
    monkeypatch.setattr(elevator_boundary, "SPIN_LIMIT", 500)
    with pytest.raises(SimulationError, match=rf"^scheduler '[a-z-]+' \(faulty_plugins:{cls}\) "
                                              rf"on sda: {what} asked for 500 queue runs at "
                                              rf"0\.000000000 s that issued nothing: simulated "
                                              rf"time cannot pass"):
        _run(cls)


def test_a_plugin_that_holds_its_requests_for_ever_is_stopped(plugins, monkeypatch):
    # before: a run without a duration never ended (a wake-up every microsecond, for ever)
    from blksim.block import elevator_boundary
    monkeypatch.setattr(elevator_boundary, "STALL_LIMIT", 500)
    cfg = {"job": [{"name": "r", "rw": "randread", "number_ios": 5}]}
    with pytest.raises(SimulationError, match=r"^scheduler 'ticker' \(faulty_plugins:Ticker\) "
                                              r"on sda: wakeup_at asked for 500 queue runs "
                                              r"from 0\.000001000 s to 0\.000501000 s that "
                                              r"issued nothing while 1 request\(s\) waited and "
                                              r"the device was idle: they would wait for ever$"):
        blksim.run(cfg, scheduler="faulty_plugins:Ticker", per_request=False)


def test_a_legal_timer_runs(plugins):
    r = _run("Timer")
    assert r.all.ios > 100


@pytest.mark.parametrize("cls, value", [
    ("NanTimer", "nan"), ("PastTimer", r"0\.[0-9]+ s, before now"),
    ("MinusInfTimer", "-inf"), ("TextTimer", "'soon'"),
])
def test_a_wake_up_time_that_cannot_be_one_stops_the_run(plugins, cls, value):
    # before: wakeup_at = nan stalled the run with 0 completions
    with pytest.raises(SimulationError) as exc:
        _run(cls)
    text = str(exc.value)
    assert "\n" not in text
    assert f"(faulty_plugins:{cls}) on sda: wakeup_at = " in text
    assert __import__("re").search(value, text), text


def test_the_cli_prints_one_line_and_exits_2(plugins, tmp_path, capsys):
    from blksim.cli import main
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nduration = "0.3s"\n[[job]]\nname = "r"\nrw = "randread"\n')
    assert main(["run", str(cfg), "-q", "--scheduler", "faulty_plugins:NanTimer",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("blksim: error: scheduler 'nan-timer'")
    assert not (tmp_path / "out" / "results.json").exists()


# --- plugins whose import raises ------------------------------------------------------------

@pytest.mark.parametrize("body, what", [
    ("raise SystemExit(3)", "SystemExit: 3"),
    ("import sys; sys.exit('bye')", "SystemExit: bye"),
    ("raise GeneratorExit()", "GeneratorExit"),
    ("class E(BaseException): pass\nraise E('odd')", "E: odd"),
    ("raise RuntimeError('no GPU here')", "RuntimeError: no GPU here"),
])
def test_a_plugin_import_that_raises_anything_is_one_line_naming_its_file(
        tmp_path, monkeypatch, body, what):
    path = tmp_path / "exitplug.py"
    path.write_text(body + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("exitplug", None)
    with pytest.raises(PluginError) as exc:
        get_scheduler("exitplug:X")
    text = str(exc.value)
    assert text.startswith("scheduler plugin 'exitplug:X': cannot import exitplug (")
    assert str(path) in text and text.endswith(what) and "\n" not in text


def test_a_plugin_calling_sys_exit_does_not_end_blksim_silently(tmp_path):
    (tmp_path / "exitplug.py").write_text("import sys\nsys.exit(0)\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nduration = "0.1s"\n[[job]]\nname = "r"\nrw = "randread"\n')
    env = {"PYTHONPATH": str(tmp_path)}
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path),
                                                       os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-m", "blksim", "run", str(cfg), "-q",
                          "--scheduler", "exitplug:X"], capture_output=True, text=True,
                         env=env, cwd=ROOT.parent, timeout=120)
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert res.stderr.count("\n") == 1 and "exitplug.py" in res.stderr
    assert "SystemExit: 0" in res.stderr


def test_an_installed_plugin_calling_sys_exit_is_a_warning_in_the_listing(tmp_path,
                                                                         monkeypatch):
    from blksim.schedulers.registry import plugin_listing
    from test_plugins import fake_plugin
    fake_plugin(tmp_path, "quitter", "quitter_mod:Elev", "import sys\nsys.exit(1)\n",
                "quitter_mod")
    monkeypatch.syspath_prepend(str(tmp_path))
    good, bad = plugin_listing()
    assert [name for name, *_ in good if name == "quitter"] == []
    assert bad == [f"scheduler plugin 'quitter' (quitter_mod:Elev): cannot import quitter_mod "
                   f"({tmp_path / 'quitter_mod.py'}): SystemExit: 1"]


# --- a plugin hook that raises during the run -------------------------------------------

RAISING = """
    from faulty_plugins import Fifo


    class Boom(Fifo):
        '''Raises from dispatch() once it has seen twenty requests.'''
        name = "boom"
        seen = 0

        def add(self, rq, now):
            self.seen += 1
            super().add(rq, now)

        def dispatch(self, now, force=False):
            if self.seen > 20:
                self._explode(now)
            return super().dispatch(now, force)

        def _explode(self, now):
            raise KeyError(f"no slot at {now:.3f}")


    class Quits(Fifo):
        '''Calls sys.exit() from add().'''
        name = "quits"

        def add(self, rq, now):
            import sys
            sys.exit(0)


    class BadInit(Fifo):
        '''Its __init__ raises (on the disk it is switched to, during the run).'''
        name = "bad-init"

        def __init__(self, dq, params=None, hz=250):
            raise ZeroDivisionError("division by zero")
"""


@pytest.fixture
def raising(plugins, tmp_path):
    (tmp_path / "raising_plugins.py").write_text(textwrap.dedent(RAISING))
    yield "raising_plugins"
    sys.modules.pop("raising_plugins", None)


def test_an_exception_escaping_a_plugin_hook_is_one_elevator_fault_line(raising):
    from blksim.block.legacy_queue import ElevatorFault
    with pytest.raises(ElevatorFault) as exc:
        blksim.run(CONFIG, scheduler="raising_plugins:Boom")
    text = str(exc.value)
    assert "\n" not in text, text
    assert text.startswith("scheduler 'boom' (raising_plugins:Boom) on sda: dispatch() "
                           "raised KeyError: 'no slot at "), text
    assert "raising_plugins.py:" in text            # where it raised
    assert isinstance(exc.value.__cause__, KeyError)   # the original, chained


def test_sys_exit_in_a_plugin_hook_stops_the_run_with_one_line(raising, tmp_path, capsys):
    from blksim.cli import main
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nduration = "0.3s"\n[[job]]\nname = "r"\nrw = "randread"\n')
    # before: main() raised SystemExit(0), blksim ended silently with status 0
    assert main(["run", str(cfg), "-q", "--scheduler", "raising_plugins:Quits",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("blksim: error: scheduler 'quits' (raising_plugins:Quits) on sda: "
                          "add() raised SystemExit: 0 (at ")
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_plugin_switched_to_whose_init_raises_is_one_line(raising):
    from blksim.block.legacy_queue import ElevatorFault
    cfg = dict(CONFIG, switch=[{"at": "0.2s", "scheduler": "raising_plugins:BadInit"}])
    with pytest.raises(ElevatorFault) as exc:
        blksim.run(cfg)
    text = str(exc.value)
    assert text.startswith("scheduler 'bad-init' (raising_plugins:BadInit) on sda: "
                           "__init__() raised ZeroDivisionError: division by zero"), text


def test_a_built_in_elevator_raising_keeps_its_traceback(monkeypatch):
    # a built-in raising is blksim's bug: not dressed up as a plugin's fault
    from blksim.schedulers.deadline import DeadlineElevator as Deadline

    def broken(self, rq, now):
        raise KeyError("built-in bug")
    monkeypatch.setattr(Deadline, "add", broken)
    with pytest.raises(KeyError):
        blksim.run(CONFIG, scheduler="deadline")
