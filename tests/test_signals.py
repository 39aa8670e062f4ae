"""SIGTERM and SIGHUP (what kill, timeout and CI send) stop blksim as Ctrl-C does: no
temporary file is left behind, and an output directory holds nothing or a complete set."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blksim._compat import ON_PYPY

ROOT = Path(__file__).resolve().parents[1]


def _default_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_mid_run_leaves_no_partial_output(tmp_path, sig):
    out, bt = tmp_path / "out", tmp_path / "bt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "blksim", "run", str(ROOT / "examples" / "mixed.toml"), "-q",
         "--duration", "100000s", "--out", str(out), "--per-request", "--blktrace", str(bt)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        # a shell running this suite in the background ignores SIGINT, and the child would
        # inherit that: Python then leaves SIGINT ignored instead of raising KeyboardInterrupt
        preexec_fn=_default_signals)
    try:
        deadline = time.monotonic() + 60
        while not (out.is_dir() and any(out.iterdir())):      # the run is writing
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the run never started writing"
            time.sleep(0.05)
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=30 if ON_PYPY else 60)
        except subprocess.TimeoutExpired:
            # PyPy may run a signal handler inside a finaliser, where the exception it
            # raises is ignored; a second signal stops the run (docs/configuration.md)
            assert ON_PYPY, "the run did not stop"
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig
    name = "interrupted" if sig == signal.SIGINT else f"stopped by {signal.Signals(sig).name}"
    assert err == f"blksim: {name}; no output was left half-written\n"
    assert list(out.iterdir()) == []
    assert not bt.exists() or list(bt.iterdir()) == []
