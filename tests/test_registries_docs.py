"""docs/architecture.md's registry examples work: its fixed-latency device type and reader application
model, written out as modules and imported, register themselves, run together to the
figures the page shows, and their keys behave as the built-ins' do."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

from blksim.apps import registry as app_registry
from blksim.disk_models import registry as device_registry

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _blocks() -> list:
    """(language, body) of every fenced block of the page."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", DOC.read_text(encoding="utf-8"),
                      flags=re.M | re.S)


@pytest.fixture
def examples(tmp_path, monkeypatch):
    """The page's two modules on sys.path; unregistered afterwards."""
    for lang, body in _blocks():
        first = body.split("\n", 1)[0]
        if lang == "python" and re.fullmatch(r"# \w+\.py", first):
            (tmp_path / first[2:]).write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("fixed_latency", "reader"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield tmp_path
    device_registry.unregister("fixed_latency")
    app_registry.unregister("reader")


def test_the_examples_run_to_the_figures_the_page_shows(examples):
    python = [body for lang, body in _blocks() if lang == "python"]
    shown = [body for lang, body in _blocks() if lang == ""][-1]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(python[-1], "architecture.md", "exec"), {})
    assert ast.literal_eval(out.getvalue()) == ast.literal_eval(shown)
    # each of the 16 reads of 64 KiB took the device's 2 ms, one after another
    assert ast.literal_eval(shown) == {"type": "reader", "bytes": 1 << 20, "seconds": 0.032,
                                       "mb_per_s": 32.768}


def test_the_example_device_type_is_a_device_type_like_the_built_ins(examples):
    __import__("fixed_latency")
    from blksim.sim.config import ConfigError, resolve, resolved_dict
    keys = list(device_registry.device_keys())
    assert keys[keys.index("flash") + 1] == "latency"      # what a device is, in type order
    raw = {"device": {"latency": "2ms", "queue_depth": 4},
           "job": [{"name": "j", "rw": "randread", "number_ios": 10}]}
    cfg = resolve(raw, "t.toml")
    assert (cfg.primary.type, cfg.primary.sectors) == ("fixed_latency", 1 << 31)
    assert resolved_dict(cfg, 4)["device"] == {"latency": "0.002s", "queue_depth": 4}
    with pytest.raises(ConfigError, match=r"^t.toml: \[device\]: give either drive or "
                                          r"fixed_latency, not both$"):
        resolve({**raw, "device": {"latency": "2ms", "drive": "cheetah15k4"}}, "t.toml")
    with pytest.raises(ConfigError, match=r"^t.toml: \[device\]: latency expected a "
                                          r"positive time, found '0ms'$"):
        resolve({**raw, "device": {"latency": "0ms"}}, "t.toml")
