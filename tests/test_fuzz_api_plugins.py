"""Fuzzing the Python API and the scheduler plugin boundary (issue 29).

Plugins: `Chaos`, a scheduler plugin whose every choice is random (drawn from a seed and
per-mille odds that hypothesis picks and passes as the plugin's own tunables, the way a
user sets them). Its legal choices: which held request to dispatch, how many at once,
tail or sorted insertion, idling a while behind a timer, kicking the queue, front-merge
and neighbour answers. Its illegal ones: dispatching a request again, dispatching one the
block layer merged away, putting something else on the dispatch list, claiming a
dispatch it did not make, dropping its requests, a wake-up time that is no time, a
neighbour that is no request. Property: **every bio completes exactly once whatever the
plugin does**: the run either ends with every bio completed once, or stops with one line
naming the plugin and the hook; and a plugin that made only legal choices is never
stopped.

API: the arguments of `blksim.run`, `blksim.compare` and `blksim.config_from_text` drawn
from plausible values (right and wrong names, numbers, units), one of them at a time from
values of every type; each call either runs, or raises TypeError or ConfigError with one
line. Both disks of the plugin runs use the plugin, so a request one disk's instance takes
from the other's ("foreign") is exercised too.
"""

from __future__ import annotations

import math
import random
import warnings

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import blksim
from blksim.block.elevator import Elevator, Tunable
from blksim.block.legacy_queue import ElevatorFault, SimulationError

#: What the current example's plugin did that is not allowed (reset per example).
ILLEGAL: list = []

_ODDS = ("twice", "merged", "stranger", "liar", "drop", "badtime", "badnbr", "foreign",
         "spin")


def _odds(name: str, doc: str) -> Tunable:
    return Tunable(name, 0, "per mille", 0, 1000, doc)


class Chaos(Elevator):
    """A scheduler that decides everything at random (see the module docstring)."""

    name = "chaos"
    uses_timers = True
    tunables = (
        Tunable("seed", 0, "", 0, 2**31 - 1, "its random choices' seed"),
        Tunable("hold", 0, "per mille", 0, 900, "idle behind a timer instead of dispatching"),
        Tunable("batch", 0, "per mille", 0, 1000, "dispatch several requests at once"),
        Tunable("pick", 0, "per mille", 0, 1000, "dispatch a random held request"),
        _odds("twice", "dispatch a request it dispatched before"),
        _odds("merged", "keep a request merged away, and dispatch it later"),
        _odds("stranger", "put something that is no request on the dispatch list"),
        _odds("liar", "say it moved a request when it moved none"),
        _odds("drop", "forget every request it holds"),
        _odds("badtime", "set a wake-up time that is no time"),
        _odds("badnbr", "answer a merge question with something that is no request"),
        _odds("foreign", "dispatch a request another disk's instance holds"),
        _odds("spin", "from then on, ask for a queue run now instead of dispatching"),
    )
    #: Every instance of the current example (one per disk): what "foreign" takes from.
    instances: list = []

    def __init__(self, dq, params=None, hz=250):
        super().__init__(dq, params, hz)
        self.rng = random.Random(self.params["seed"])
        self.held: list = []
        self.sent: list = []
        self.spinning = False
        Chaos.instances.append(self)

    def _chance(self, key: str) -> bool:
        return self.rng.random() * 1000 < self.params[key]

    def _illegal(self, key: str) -> bool:
        if self._chance(key):
            ILLEGAL.append(key)
            return True
        return False

    def add(self, rq, now):
        self.held.append(rq)
        if self.rng.random() < 0.05:
            self.kick_queue = True

    def dispatch(self, now, force=False):
        rng = self.rng
        if not force:
            if self.sent and self._illegal("twice"):
                self.dq.add_tail(rng.choice(self.sent))
                return 1
            if self._illegal("stranger"):
                self.dq.append(rng.choice([None, 7, "rq", object()]))
                return 1
            others = [e for e in Chaos.instances if e is not self and e.held]
            if others and self._illegal("foreign"):
                self.dq.add_tail(rng.choice(others).held.pop(0))
                return 1
            if self.held and self._illegal("liar"):
                return 1
            if self.held and self._illegal("drop"):
                self.held.clear()
                return 0
            if self.held and (self.spinning or self._illegal("spin")):
                self.spinning = True
                if rng.random() < 0.5:
                    self.kick_queue = True
                else:
                    self.wakeup_at = now
                return 0
            if self._illegal("badtime"):
                self.wakeup_at = rng.choice([math.nan, -math.inf, math.inf, now - 0.5, "soon"])
                return 0
            if self.held and self._chance("hold"):
                self.wakeup_at = now + rng.uniform(1e-4, 0.02)       # legal: idle a while
                return 0
        if not self.held:
            return 0
        n = len(self.held) if force else 1
        if not force and self._chance("batch"):
            n = rng.randint(1, min(4, len(self.held)))
        for _ in range(n):
            i = rng.randrange(len(self.held)) if self._chance("pick") else 0
            rq = self.held.pop(i)
            (self.dq.add_sorted if rng.random() < 0.5 else self.dq.add_tail)(rq)
            self.sent.append(rq)
        return n

    def _neighbour(self):
        if self._illegal("badnbr"):
            return self.rng.choice([7, "rq", object()])
        return self.rng.choice(self.held) if self.held and self.rng.random() < 0.5 else None

    def merge_candidate(self, bio, now):
        return self._neighbour()

    def former(self, rq):
        return self._neighbour()

    def latter(self, rq):
        return self._neighbour()

    def requests_merged(self, rq, nxt, now):
        if not self._illegal("merged") and nxt in self.held:
            self.held.remove(nxt)

    def empty(self):
        return not self.held

    def queued(self):
        return len(self.held)


SPEC = f"{__name__}:Chaos"


def _config(switch_at: float | None, depth: int) -> dict:
    """Finite jobs (their bios all complete well within the duration on a fair
    scheduler): on sda sequential async writes that merge and random sync reads, on sdb
    random reads; both disks under the plugin."""
    cfg = {"run": {"seed": 3, "duration": "30s"},
           "device": {"drive": "cheetah15k4", "queue_depth": depth},
           "queue": {"scheduler": SPEC},
           "devices": {"sdb": {"drive": "cheetah15k4", "queue": {"scheduler": SPEC}}},
           "job": [{"name": "w", "rw": "write", "bs": "4k", "iodepth": 8, "sync": False,
                    "number_ios": 60},
                   {"name": "r", "rw": "randread", "bs": "4k", "numjobs": 2,
                    "number_ios": 15},
                   {"name": "b", "rw": "randread", "bs": "4k", "iodepth": 4,
                    "number_ios": 20, "filename": "/dev/sdb"}]}
    if switch_at is not None:
        cfg["switch"] = [{"at": f"{switch_at}ms", "scheduler": "deadline"}]
    return cfg


per_mille = st.sampled_from([0, 0, 0, 5, 50, 300])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), hold=st.sampled_from([0, 100, 600]),
       batch=st.sampled_from([0, 300, 1000]), pick=st.sampled_from([0, 500, 1000]),
       odds=st.one_of(st.just(dict.fromkeys(_ODDS, 0)),            # legal choices only
                      st.fixed_dictionaries({k: per_mille for k in _ODDS})),
       switch_at=st.one_of(st.none(), st.integers(1, 400)), depth=st.sampled_from([1, 4]))
def test_every_bio_completes_exactly_once_whatever_a_plugin_does(seed, hold, batch, pick,
                                                                  odds, switch_at, depth):
    ILLEGAL.clear()
    Chaos.instances = []
    tunables = {"seed": seed, "hold": hold, "batch": batch, "pick": pick, **odds}
    cfg = _config(switch_at, depth)
    overrides = {f"{disk}queue/iosched/{k}": v for k, v in tunables.items()
                 for disk in ("", "sdb/")}
    overrides["sdb/queue/iosched/seed"] = (seed + 1) % 2**31
    from blksim.block import elevator_boundary
    limit, elevator_boundary.SPIN_LIMIT = elevator_boundary.SPIN_LIMIT, 300  # short spins
    try:
        r = blksim.run(cfg, set=overrides)
    except SimulationError as exc:
        text = str(exc)
        assert isinstance(exc, ElevatorFault), text
        assert ILLEGAL, f"a plugin that made only legal choices was stopped: {text}"
        assert "\n" not in text
        assert text.startswith((f"scheduler 'chaos' ({SPEC}) on sda: ",
                                f"scheduler 'chaos' ({SPEC}) on sdb: ")), text
        hook = text[len(f"scheduler 'chaos' ({SPEC}) on sda: "):].split(" ")[0]
        assert hook in ("dispatch()", "dispatch(force=True)", "wakeup_at", "former()",
                        "latter()", "merge_candidate()", "kick_queue"), text
        event(f"stopped at {hook}")
        return
    finally:
        elevator_boundary.SPIN_LIMIT = limit
    event("completed, illegal choices made" if ILLEGAL else "completed, legal choices only")
    ids = r.requests["bio"].tolist()
    assert len(ids) == len(set(ids)), "a bio completed twice"
    issued = sum(p.issued for p in r.processes)
    assert len(ids) == issued == 60 + 2 * 15 + 20, (len(ids), issued, ILLEGAL)
    assert r.fairness.unfinished == 0


# ---------------------------------------------------------------------- the API

junk = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
    st.text(max_size=12), st.binary(max_size=4),
    st.sampled_from(["noop", "deadline", "", " ", ",", "sda", "sdb", "/dev/sdb", "2ms",
                     "queue/nr_requests=8", "run/seed=1", "cfq,noop", "noop,noop"]),
    st.lists(st.one_of(st.none(), st.integers(), st.sampled_from(["noop", "sdb", "", "x"])),
             max_size=3),
    st.dictionaries(st.sampled_from(["queue/nr_requests", "queue/iosched/fifo_batch",
                                     "run/seed", 1]),
                    st.one_of(st.none(), st.integers(-5, 300), st.text(max_size=3)),
                    max_size=2),
    st.just(object()))

#: Small: the runs end after 40 bios whatever the duration.
API_CONFIG = {"run": {"duration": "50ms"}, "device": {"drive": "cheetah15k4"},
              "devices": {"sdb": {"drive": "cheetah15k4"}},
              "job": [{"name": "r", "rw": "randread", "number_ios": 20},
                      {"name": "s", "rw": "randread", "filename": "/dev/sdb",
                       "number_ios": 20}]}


def _one_outcome(call) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = call()
        except (TypeError, blksim.ConfigError) as exc:
            text = str(exc)
            assert text and "\n" not in text, text
            event(type(exc).__name__)
            return
    event("ran")
    results = r.values() if isinstance(r, dict) else [r]
    for one in results:
        assert isinstance(one, blksim.RunResult)


#: Plausible values of each argument: right and wrong names, numbers, units, paths.
PLAUSIBLE = {
    "scheduler": st.one_of(st.none(), st.sampled_from(["noop", "cfq", "bogus", "", "a:B"])),
    "seed": st.one_of(st.none(), st.integers(-3, 2**64)),
    "duration": st.one_of(st.none(), st.floats(-1, 0.1), st.sampled_from(["20ms", "0s", "x"])),
    "set": st.one_of(st.none(), st.dictionaries(
        st.sampled_from(["queue/nr_requests", "device/queue_depth", "sdb/queue/nomerges",
                         "queue/iosched/slice_idle"]),
        st.one_of(st.integers(-2, 600), st.booleans(), st.text(max_size=2)), max_size=2)),
    "per_request": st.booleans(),
    "schedulers": st.lists(st.sampled_from(["noop", "cfq", "deadline", "x", ""]), max_size=3),
    "devices": st.one_of(st.none(), st.lists(st.sampled_from(["sda", "sdb", "/dev/sdb", "sdz",
                                                              ""]), max_size=3)),
}


def _arguments(data, names: tuple) -> dict:
    """Plausible values for ``names``, one of them (or none) replaced by any value."""
    wild = data.draw(st.sampled_from((None,) + names), label="wild")
    return {n: data.draw(junk if n == wild else PLAUSIBLE[n], label=n) for n in names}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_run_takes_any_argument_or_says_which_is_wrong(data):
    kw = _arguments(data, ("scheduler", "seed", "duration", "set", "per_request"))
    _one_outcome(lambda: blksim.run(API_CONFIG, **kw))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compare_takes_any_argument_or_says_which_is_wrong(data):
    kw = _arguments(data, ("schedulers", "devices", "per_request", "seed"))
    _one_outcome(lambda: blksim.compare(API_CONFIG, kw.pop("schedulers"), **kw))


@settings(max_examples=40, deadline=None)
@given(text=junk, source=junk)
def test_config_from_text_takes_any_argument_or_says_which_is_wrong(text, source):
    try:
        blksim.config_from_text(text, source)
    except (TypeError, blksim.ConfigError) as exc:
        assert str(exc) and "\n" not in str(exc)


@pytest.mark.parametrize("source", ["\n", "a\nb", "config\r", "\x00"])
def test_a_source_of_more_than_one_line_is_refused(source):
    # the source starts every error line: "\n: not valid TOML: ..." was two lines
    with pytest.raises(blksim.ConfigError, match=r"^source: expected a name of printable"):
        blksim.config_from_text("0", source)


@pytest.mark.parametrize("path", [None, 5, b"x.toml", [], object()])
def test_load_config_of_a_non_path_is_a_type_error(path):
    with pytest.raises(TypeError, match=r"^path: expected a file path"):
        blksim.load_config(path)
