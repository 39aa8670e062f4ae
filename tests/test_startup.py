"""Start-up: a command loads what it uses. The engine never loads a plotting library, and
building the command line's parser (``blksim --help``) loads neither numpy nor simpy."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(code: str) -> set[str]:
    probe = (f"{code}\nimport sys\n"
             "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return set(res.stdout.split())


def test_the_engine_loads_no_plotting_library():
    loaded = _loaded_after("import blksim.sim.engine, blksim.api")
    assert "simpy" in loaded                      # the probe sees what was imported
    assert not loaded & {"matplotlib", "PIL", "pandas", "scipy"}


def test_the_parser_loads_neither_numpy_nor_simpy():
    loaded = _loaded_after("from blksim.cli.app import build_parser\nbuild_parser()")
    assert "blksim" in loaded
    assert not loaded & {"numpy", "simpy", "matplotlib", "tqdm", "tomli_w"}


def test_a_command_other_than_trace_does_not_load_the_trace_readers():
    probe = ("from blksim.cli.app import build_parser\nbuild_parser('run')\nimport sys\n"
             "print(' '.join(m for m in sys.modules if m.startswith('blksim.')))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert "blksim.traces.detect" not in res.stdout.split()
    assert "blksim.cli.trace" in res.stdout.split()        # the probe sees modules


def test_validate_loads_neither_numpy_nor_simpy():
    # importing numpy costs more CPU than the whole 10,000-request replay
    loaded = _loaded_after("from blksim.cli.app import main\n"
                           "import contextlib, io\n"
                           "with contextlib.redirect_stdout(io.StringIO()):\n"
                           "    assert main(['validate', 'cheetah9LP', 'cheetah9LP']) == 0")
    assert "blksim" in loaded
    assert not loaded & {"numpy", "simpy", "matplotlib"}
