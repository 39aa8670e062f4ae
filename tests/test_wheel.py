"""What ``pip install`` puts on a user's machine: one package, ``blksim``, whole.

The wheel is built offline from this checkout, installed (without dependencies,
which the test environment already has) into a folder of its own, and used from
a folder that is not the checkout, so nothing of the source tree can stand in for
what the wheel lacks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")
    # A copy of the checkout without what a clean clone lacks, so stale build output
    # or an old egg-info cannot slip into the wheel.
    source = build / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.egg-info", "__pycache__", ".hypothesis",
        ".pytest_cache", "dist"))
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                          "--no-build-isolation", "-q", "-w", str(out), str(source)],
                         capture_output=True, text=True, env=env, cwd=build)
    if res.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{res.stdout}\n{res.stderr}")
    (whl,) = out.glob("blksim-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    return target


def _run(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(installed))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def test_the_wheel_installs_one_top_level_package(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"blksim"}
    for module in ("blksim/__init__.py", "blksim/__main__.py", "blksim/sim/engine.py",
                   "blksim/cli/app.py", "blksim/schedulers/deadline.py",
                   "blksim/disk_models/drive.py", "blksim/traces/blktrace.py",
                   "blksim/experiments/validation/study.py"):
        assert module in names, module
    assert not [n for n in names if n.startswith("blksim/tests/") or "/benchmarks/" in n]


def test_the_wheel_carries_data_docs_and_examples(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names
                            if n.endswith(".dist-info/entry_points.txt"))
    assert "blksim = blksim.cli.app:main" in entry_points
    for path in ("blksim/disk_models/presets/cheetah9LP.toml",
                 "blksim/experiments/flagship.toml",
                 "blksim/experiments/validation/disksim_scores.toml",
                 "blksim/disk_models/disksim/data/disksim-4.0-validation.tar.xz",
                 "blksim/disk_models/disksim/data/COPYING",
                 "blksim/docs/configuration.md", "blksim/docs/img/teaching-heads.png",
                 "blksim/examples/mixed.toml", "blksim/examples/teaching-queue.trace",
                 "blksim/experiments/tenants.toml", "blksim/experiments/data/README.md",
                 "blksim/experiments/data/reader.alibaba.csv.xz",
                 "blksim/experiments/data/backup.tencent.csv.xz"):
        assert path in names, path


def test_the_installed_package_runs_from_anywhere(installed, tmp_path):
    res = _run(installed, tmp_path, "-c", "import blksim, blksim.sim.engine; print(blksim.__file__)")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(installed / "blksim" / "__init__.py")
    res = _run(installed, tmp_path, "-m", "blksim", "examples", "--copy", "ex")
    assert res.returncode == 0, res.stderr
    res = _run(installed, tmp_path, "-m", "blksim", "run", "ex/mixed.toml", "-q",
               "--duration", "1s")
    assert res.returncode == 0, res.stderr
    assert "scheduler deadline" in res.stdout
    env_cache = dict(BLKSIM_CACHE_DIR=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, "-m", "blksim", "validate", "hp_c2247a", "hp_c2247a"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(installed), **env_cache))
    assert res.returncode == 0, res.stderr
    assert re.search(r"DiskSim 4.0 published \(ms\) +0\.090  \(blksim <= DiskSim\)", res.stdout)
    res = _run(installed, tmp_path, "-m", "blksim", "docs")
    assert res.returncode == 0 and str(installed / "blksim" / "docs") in res.stdout
    res = _run(installed, tmp_path, "-m", "blksim", "--help")
    assert str(installed / "blksim" / "docs") in res.stdout
    assert "source tree" not in res.stdout
