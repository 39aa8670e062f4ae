"""Application models: the file server's ramp, its client errors, its errors in the
configuration, and its resolved configuration running again to the same figures."""

import json

import pytest

from blksim.cli import main
from blksim.sim.config import ConfigError, resolve
from tests.simhelpers import runs_again_to_the_same_figures

FILESERVER = """\
[host]
memory = "512m"
page_cache = "32m"
[device]
drive = "cheetah15k4"
[[app]]
type = "fileserver"
device = "/dev/sda"
files = 2000
file_sizes = [["16k", 40], ["64k", 40], ["1m", 20]]
think_time = "50ms"
timeout = "{timeout}"
clients_start = 2
clients_step = 10
clients_end = 32
step_time = "4s"
"""


def run(tmp_path, timeout, name="fs"):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(FILESERVER.format(timeout=timeout))
    out = tmp_path / name
    assert main(["run", str(cfg), "-q", "--out", str(out)]) == 0
    return json.loads((out / "results.json").read_text()), out


def test_no_client_errors_when_the_timeout_is_longer_than_any_operation(tmp_path):
    results, _ = run(tmp_path, "60s")
    steps = results["apps"]["fileserver"]["steps"]
    assert [s["clients"] for s in steps] == [2, 12, 22, 32]
    assert all(s["errors"] == 0 for s in steps) and all(s["ops"] > 0 for s in steps)


def test_client_errors_appear_and_grow_past_saturation(tmp_path):
    results, _ = run(tmp_path, "400ms")
    steps = results["apps"]["fileserver"]["steps"]
    assert steps[0]["errors"] == 0
    assert steps[-1]["errors"] > steps[-2]["errors"] > 0
    # throughput stops growing with the clients once the disk is saturated
    assert steps[-1]["ops_per_s"] < 1.5 * steps[-2]["ops_per_s"]
    assert steps[-1]["lat_ms"]["mean"] > 3 * steps[0]["lat_ms"]["mean"]


def test_the_resolved_configuration_runs_again_to_the_same_figures(tmp_path):
    _, out = run(tmp_path, "400ms")
    runs_again_to_the_same_figures(out, tmp_path / "again")


@pytest.mark.parametrize("app, message", [
    ({"type": "database"},
     r"\[\[app\]\] #1: type expected one of fileserver, oltp, loader, found 'database'"),
    ({"type": "fileserver", "device": "/dev/sdq"}, r"device '/dev/sdq' is not a disk"),
    ({"type": "fileserver", "device": "/dev/sda", "files": 100, "file_sizes": [["1t", 1]]},
     r"its 100 files need .* bytes \(files, file_sizes\); sda has"),
    ({"type": "fileserver", "device": "/dev/sda", "file_sizes": [["6k", 1]]},
     r"file_sizes #1: file_sizes expected a multiple of 4096 bytes"),
    ({"type": "fileserver", "device": "/dev/sda", "clients_start": 4, "clients_end": 2},
     r"clients_end = 2 is out of range \[4, 10000\]"),
])
def test_app_errors_name_the_key(app, message):
    with pytest.raises(ConfigError, match=message):
        resolve({"app": [app]}, "x.toml")


def test_compare_prints_the_application_figure_first(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(FILESERVER.format(timeout="400ms"))
    assert main(["compare", str(cfg), "-q", "--schedulers", "deadline,cfq"]) == 0
    out = capsys.readouterr().out.splitlines()
    first_app = next(i for i, line in enumerate(out) if "clients ops/s" in line)
    first_block = next(i for i, line in enumerate(out) if line.startswith("read IOPS"))
    assert first_app < first_block
    assert sum("clients errors %" in line for line in out) == 4
