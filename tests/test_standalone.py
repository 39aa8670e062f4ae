"""The product stands alone: no tracked file points outside the repository.

Users have the repository or the installed package and nothing beside it, so no
file that git tracks (code, tests, docs, data) may name a path outside the
repository: in particular the team's reference folder beside the checkout (its
reference notes, validation data and design notes).
The files are the ones ``git ls-files`` lists; without git or a ``.git``
folder (an unpacked sdist, an installed wheel) the test is skipped.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Strings that only a path outside the repository contains.
# Spelled in parts so that this file does not itself name the folder.
_SHELF = "sha" + "red"
OUTSIDE = (f"../{_SHELF}", f"{_SHELF}/reference", f"{_SHELF}/validation", "DESIGN" + ".md",
           "linux-schedulers" + ".md")

#: This file names the strings it looks for; it is the one file allowed to.
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()


def _tracked_files() -> list[str]:
    """Paths (relative to the repository root) of every file git tracks."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot list the tracked files")
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout (no .git): cannot list the tracked files")
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"git ls-files failed: {exc}")
    return [name for name in out.decode("utf-8", "surrogateescape").split("\0") if name]


def test_no_tracked_file_points_outside_the_repository():
    found = []
    for name in _tracked_files():
        if name == SELF:
            continue
        path = ROOT / name
        if not path.is_file():       # deleted in the work tree, or a submodule
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            for needle in OUTSIDE:
                if needle in line:
                    found.append(f"{name}:{lineno}: {needle!r}: {line.strip()[:120]}")
    assert not found, ("files point outside the repository:\n" + "\n".join(found))
