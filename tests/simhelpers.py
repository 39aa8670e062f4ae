"""Shared helpers for tests that run whole simulations."""

from __future__ import annotations

from blksim.sim.config import resolve
from blksim.sim.engine import Simulation


def make_config(jobs=(), traces=(), scheduler="noop", iosched=None, queue=None, run=None,
                device=None, source="test.toml"):
    """A validated RunConfig from plain Python tables."""
    raw = {
        "run": {"seed": 1, **(run or {})},
        "device": {"drive": "cheetah15k4", **(device or {})},
        "queue": {"scheduler": scheduler, **(queue or {}), "iosched": dict(iosched or {})},
    }
    if jobs:
        raw["job"] = [dict(j) for j in jobs]
    if traces:
        raw["trace"] = [dict(t) for t in traces]
    return resolve(raw, source, device_sectors=71687372)


def run_config(cfg, device=None, collect=False):
    """Run a config; with ``collect`` also return every completed bio in completion order."""
    seen = []
    hooks = (seen.append,) if collect else ()
    sim = Simulation(cfg, complete_hooks=hooks, device=device)
    outcome = sim.run()
    return (outcome, seen) if collect else outcome


def runs_again_to_the_same_figures(out, again) -> dict:
    """Run ``out``'s config.resolved.toml into ``again`` and check that results.json is
    the same (but for the run's name and configuration); the first results."""
    import json
    from blksim.cli import main
    assert main(["run", str(out / "config.resolved.toml"), "-q", "--out", str(again)]) == 0
    first = json.loads((out / "results.json").read_text())
    second = json.loads((again / "results.json").read_text())
    for key in ("name", "config"):
        first.pop(key), second.pop(key)
    assert first == second
    return first


def simulate_raw(raw: dict, source: str = "config.toml"):
    """Run the configuration tables ``raw``: (the run's first device, every completed bio
    in completion order, results.json's figures)."""
    from blksim.sim.config import resolved_dict
    from blksim.sim.results import results_dict
    cfg = resolve(raw, source)
    seen = []
    sim = Simulation(cfg, complete_hooks=(seen.append,))
    out = sim.run()
    depths = {n: q.device.queue_depth for n, q in sim.host.disks.items()}
    return sim.device, seen, results_dict(out, resolved_dict(cfg, depths))


def simulate_raid(raid: dict, jobs: list, run=None, queue=None, device=None):
    """``simulate_raw`` of a RAID controller (``[device.raid]`` = ``raid``) under noop
    with ``jobs``: (the controller, every completed bio, results.json's figures)."""
    raw = {"run": {"seed": 1, **(run or {})},
           "device": {"raid": raid, **(device or {})},
           "queue": {"scheduler": "noop", **(queue or {})},
           "job": jobs}
    return simulate_raw(raw, "raid.toml")


def member_io_totals(ctrl) -> tuple:
    """(reads, writes) the controller sent to its members."""
    return (sum(r for r, _ in ctrl.member_ios), sum(w for _, w in ctrl.member_ios))
