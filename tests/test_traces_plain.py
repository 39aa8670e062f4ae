"""traces/ is plain Python: it must not pull in simpy or the simulation engine."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_traces_imports_neither_simpy_nor_sim():
    code = ("import sys, blksim.traces, blksim.common.units, blksim.traces.jobs, "
            "blksim.traces.pattern, blksim.traces.disksim_ascii, blksim.traces.disksim_validate; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'simpy' or m.startswith('blksim.sim')); "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
