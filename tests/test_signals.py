"""SIGTERM and SIGHUP (what kill, timeout and CI send) stop blksim as Ctrl-C does: no
temporary file is left behind, and an output directory holds nothing or a complete set."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blksim.sim import stopping

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
        # one signal is enough, even where its exception is raised inside a finaliser
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig
    name = "interrupted" if sig == signal.SIGINT else f"stopped by {signal.Signals(sig).name}"
    assert err == f"blksim: {name}; no output was left half-written\n"
    assert list(out.iterdir()) == []
    assert not bt.exists() or list(bt.iterdir()) == []


class _DropsTheStop:
    """A finaliser that swallows the exception a signal raised inside it, as Python
    does with any exception raised in a ``__del__``."""

    def __del__(self) -> None:
        try:
            stopping.request_stop(signal.SIGTERM)
        except stopping.Stopped:
            pass


def test_a_stop_dropped_by_a_finaliser_is_raised_again_by_the_event_loop():
    from blksim.api import run
    config = ROOT / "examples" / "mixed.toml"
    _DropsTheStop()
    gc.collect()                        # freed (PyPy frees it only here): the stop is dropped
    try:
        with pytest.raises(stopping.Stopped) as caught:
            run(config, duration="600s", per_request=False)   # > 4096 events
        assert caught.value.signum == signal.SIGTERM
    finally:
        stopping.clear()
    assert run(config, duration="600s", per_request=False).simulated_s == 600.0  # cleared


def test_a_file_created_just_before_the_stop_is_removed_too(tmp_path, monkeypatch, capsys):
    # the signal may strike after a temporary file exists and before its owner has
    # recorded it: the stop still removes it (traces/records.PendingFile)
    from blksim.cli import app
    from blksim.cli import main
    from blksim.traces.records import PendingFile

    def open_then_stop(self, measure_from=0.0):
        os.makedirs(self.out_dir, exist_ok=True)
        PendingFile(os.path.join(self.out_dir, "requests.csv"))     # not yet recorded
        raise stopping.Stopped(signal.SIGTERM)

    monkeypatch.setattr(app._Outputs, "open_csv", open_then_stop)
    out = tmp_path / "out"
    assert main(["run", str(ROOT / "examples" / "mixed.toml"), "-q", "--out", str(out),
                 "--per-request"]) == 128 + signal.SIGTERM
    assert "stopped by SIGTERM" in capsys.readouterr().err
    assert list(out.iterdir()) == []
