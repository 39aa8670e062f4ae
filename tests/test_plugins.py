"""Scheduler plugins: found by entry point or module:Class, listed, run, and refused
in one line when broken, never at the cost of the built-in schedulers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from blksim.schedulers import SCHEDULERS, get_scheduler
from blksim.schedulers.registry import PluginError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "plugins" / "deadline_early"
SPEC = "deadline_early:DeadlineEarlyElevator"


def _blksim(*args, pythonpath=(), cwd=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "blksim", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example plugin installed as a user would, offline, into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("src")
    src = build / "deadline_early"
    src.mkdir()
    for f in ("pyproject.toml", "deadline_early.py", "README.md"):
        (src / f).write_bytes((EXAMPLE / f).read_bytes())
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--no-build-isolation", "--target", str(target), str(src)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return target


def fake_plugin(folder: Path, name: str, value: str, module_text: str | None = None,
                module: str | None = None) -> Path:
    """An installed distribution with one blksim.schedulers entry point, in ``folder``."""
    dist = folder / f"fake_{abs(hash(name)) % 10**6}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fake-{name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[blksim.schedulers]\n{name} = {value}\n")
    if module_text is not None:
        (folder / f"{module}.py").write_text(textwrap.dedent(module_text))
    return folder


# --- the example plugin, installed --------------------------------------------------

def test_installed_plugin_is_listed_with_its_tunables(installed):
    res = _blksim("schedulers", pythonpath=[installed])
    assert res.returncode == 0 and res.stderr == ""
    lines = res.stdout.splitlines()
    i = lines.index(f"deadline-early  (plugin: {SPEC}, entry point group blksim.schedulers)")
    assert lines[i + 1].startswith("    queue/iosched/read_expire ")
    assert any(l.startswith("    queue/iosched/early_ms ") for l in lines[i:i + 8])
    assert lines[0] == "noop"                                  # built-ins first, unchanged


def test_installed_plugin_beats_deadline_on_late_reads(installed, tmp_path):
    """The flagship workload: deadline lets reads it passes over wait until read_expire
    (500 ms); deadline-early takes them early_ms (100 ms) sooner."""
    res = _blksim("demo", "-q", "--schedulers", "deadline,deadline-early", "--duration", "8s",
                  "--out", str(tmp_path), pythonpath=[installed])
    assert res.returncode == 0, res.stderr
    dl = json.loads((tmp_path / "deadline" / "results.json").read_text())
    early = json.loads((tmp_path / "deadline-early" / "results.json").read_text())
    assert early["scheduler"] == "deadline-early"
    dl, early = dl["totals"]["read"], early["totals"]["read"]
    assert dl["q2c"]["max_ms"] > 490
    assert early["q2c"]["max_ms"] < dl["q2c"]["max_ms"] - 50
    assert early["q2c"]["p99_ms"] < dl["q2c"]["p99_ms"]
    assert early["ios"] > 0.8 * dl["ios"]                        # and reads still flow


def test_plugin_tunable_is_set_like_any_other(installed, tmp_path):
    res = _blksim("run", str(ROOT / "examples" / "mixed.toml"), "-q", "--duration", "1s",
                  "--set", "queue/scheduler=deadline-early", "--set",
                  "queue/iosched/early_ms=40", "--out", str(tmp_path), pythonpath=[installed])
    assert res.returncode == 0, res.stderr
    resolved = (tmp_path / "config.resolved.toml").read_text()
    assert 'scheduler = "deadline-early"' in resolved and "early_ms = 40" in resolved
    res = _blksim("run", str(ROOT / "examples" / "mixed.toml"), "-q", "--set",
                  "queue/scheduler=deadline-early", "--set", "queue/iosched/early_ms=-1",
                  pythonpath=[installed])
    assert res.returncode == 2 and "queue/iosched/early_ms = -1 is out of range" in res.stderr


# --- module:Class, no installation -----------------------------------------------------

@pytest.fixture
def on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))


def test_module_class_in_a_configuration_file(on_path, tmp_path, capsys):
    from blksim.cli import main
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[run]\nduration = "1s"\n[queue]\nscheduler = "{SPEC}"\n'
                   f'[queue.iosched]\nearly_ms = 20\n[[job]]\nname = "r"\nrw = "randread"\n')
    assert main(["run", str(cfg), "-q"]) == 0
    assert f"scheduler {SPEC}" in capsys.readouterr().out


def test_module_class_in_compare_and_plot_heads(on_path, tmp_path, capsys):
    from blksim.cli import main
    out = tmp_path / "cmp"
    assert main(["compare", str(ROOT / "examples" / "teaching-random.toml"), "-q",
                 "--schedulers", f"deadline,{SPEC}", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["deadline",
                                                     "deadline_early.DeadlineEarlyElevator"]
    assert main(["plot", "heads", str(ROOT / "examples" / "teaching-queue.toml"),
                 "--scheduler", SPEC, "--out", str(tmp_path / "h.png")]) == 0
    assert (tmp_path / "h.png").stat().st_size > 0


def test_early_ms_zero_is_deadline_exactly(on_path):
    import blksim
    cfg = blksim.builtin_config()
    a = blksim.run(cfg, scheduler="deadline", duration="3s", per_request=False)
    b = blksim.run(cfg, scheduler=SPEC, duration="3s", per_request=False,
                   set={"queue/iosched/early_ms": 0})
    for key in ("totals", "processes", "fairness", "block_layer"):
        assert json.dumps(a.figures[key], sort_keys=True) == \
            json.dumps(b.figures[key], sort_keys=True), key


# --- bad plugins ---------------------------------------------------------------------------

BAD_MODULE = """
    from blksim.block.elevator import Elevator, Tunable
    from blksim.schedulers.noop import NoopElevator

    class NotAnElevator:
        pass

    class NoHooks(Elevator):
        name = "nohooks"

    class TwoTunables(NoopElevator):
        tunables = (Tunable("x", 1, "ms", 0, 9, ""), Tunable("x", 1, "ms", 0, 9, ""))

    class OutOfRange(NoopElevator):
        tunables = (Tunable("x", 10, "ms", 0, 9, ""),)

    class BadName(NoopElevator):
        tunables = (Tunable("Read Expire", 1, "ms", 0, 9, ""),)

    class NotATunable(NoopElevator):
        tunables = (("x", 1),)
"""


@pytest.mark.parametrize("attr, message", [
    ("NotAnElevator", "is not a subclass of blksim.block.elevator.Elevator"),
    ("NoHooks", "NoHooks lacks the hook(s) add, dispatch, requests_merged, empty, queued"),
    ("TwoTunables", "tunable 'x' is declared twice"),
    ("OutOfRange", "tunable 'x': default 10 is outside its range [0, 9]"),
    ("BadName", "tunable name 'Read Expire' is not a sysfs file name"),
    ("NotATunable", "is not a blksim.block.elevator.Tunable"),
    ("Missing", "module badplug has no Missing"),
])
def test_a_bad_plugin_class_is_one_clear_error(tmp_path, monkeypatch, attr, message):
    (tmp_path / "badplug.py").write_text(textwrap.dedent(BAD_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as exc:
        get_scheduler(f"badplug:{attr}")
    text = str(exc.value)
    assert text.startswith(f"scheduler plugin 'badplug:{attr}': ") and message in text
    assert "\n" not in text


def test_a_plugin_that_fails_to_import_is_one_clear_error(tmp_path, monkeypatch):
    (tmp_path / "crashplug.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as exc:
        get_scheduler("crashplug:X")
    assert str(exc.value) == (f"scheduler plugin 'crashplug:X': cannot import crashplug "
                              f"({tmp_path / 'crashplug.py'}): RuntimeError: no GPU here")


def test_broken_entry_points_do_not_stop_the_built_ins(tmp_path):
    fake_plugin(tmp_path, "crashy", "crashy_mod:Elev", "raise ImportError('missing dep')\n",
                "crashy_mod")
    fake_plugin(tmp_path / "b", "hookless", "hookless_mod:Elev", """
        from blksim.block.elevator import Elevator
        class Elev(Elevator):
            name = "hookless"
        """, "hookless_mod")
    path = [tmp_path, tmp_path / "b"]
    res = _blksim("schedulers", pythonpath=path)
    assert res.returncode == 0
    assert res.stdout.splitlines()[:2] == ["noop", "    (no tunables)"]
    assert all(name in res.stdout.splitlines() for name in SCHEDULERS)
    warnings = res.stderr.splitlines()
    assert len(warnings) == 2
    assert warnings[0] == ("blksim: warning: scheduler plugin 'crashy' (crashy_mod:Elev): cannot "
                           f"import crashy_mod ({tmp_path / 'crashy_mod.py'}): ImportError: "
                           "missing dep")
    assert warnings[1].startswith("blksim: warning: scheduler plugin 'hookless' "
                                  "(hookless_mod:Elev): Elev lacks the hook(s) add")
    res = _blksim("run", str(ROOT / "examples" / "mixed.toml"), "-q", "--duration", "1s",
                  pythonpath=path)
    assert res.returncode == 0 and "scheduler deadline" in res.stdout
    res = _blksim("run", str(ROOT / "examples" / "mixed.toml"), "-q", "--set",
                  "queue/scheduler=crashy", pythonpath=path)
    assert res.returncode == 2
    assert res.stderr == ("blksim: error: " + str(ROOT / "examples" / "mixed.toml")
                          + ": queue/scheduler: scheduler plugin 'crashy' (crashy_mod:Elev): "
                          f"cannot import crashy_mod ({tmp_path / 'crashy_mod.py'}): "
                          "ImportError: missing dep\n")


def test_unknown_names_list_installed_plugins(tmp_path):
    fake_plugin(tmp_path, "myelev", "nowhere:X")
    res = _blksim("compare", str(ROOT / "examples" / "mixed.toml"), "--schedulers",
                  "deadline,nosuch", pythonpath=[tmp_path])
    assert res.returncode == 2
    assert "unknown scheduler 'nosuch'; valid: anticipatory, cfq, clook, cscan, deadline, fcfs, " \
           "look, noop, scan, sptf, sstf (2.6 kernels); none, mq-deadline" in res.stderr
    assert ", myelev, or module:Class" in res.stderr
