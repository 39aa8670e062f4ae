"""The real blkparse and btt read blksim's --blktrace output, and agree with its figures.

Installs the Debian package blktrace when ``blkparse`` or ``btt`` is missing
(CI runs as root on a fresh machine); skips only when that is impossible.
"""

import json
import os
import re
import shutil
import subprocess

import pytest

from blksim.cli import main

CONFIG = """\
[run]
seed = 3
[device]
drive = "cheetah15k4"
[queue]
scheduler = "{scheduler}"
nr_requests = {nr_requests}

[[job]]
name = "reader"
rw = "randread"
numjobs = 2
iodepth = 2
number_ios = 300

[[job]]
name = "logger"
rw = "write"
bs = "4k"
iodepth = 16
number_ios = 600

[[job]]
name = "scanner"
rw = "read"
bs = "8k"
offset = "10g"
thinktime = "1ms"
number_ios = 200
"""


def _have_tools() -> bool:
    return shutil.which("blkparse") is not None and shutil.which("btt") is not None


def ensure_blktrace() -> None:
    """Install the blktrace package if its tools are missing, or skip saying why not."""
    if _have_tools():
        return
    if os.geteuid() != 0:
        pytest.skip("blkparse/btt are not installed and installing the Debian package "
                    "blktrace needs root")
    if shutil.which("apt-get") is None:
        pytest.skip("blkparse/btt are not installed and there is no apt-get to install them")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        subprocess.run(["apt-get", "install", "-y", "-qq", "blktrace"], check=True, env=env,
                       timeout=600, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        pytest.skip(f"could not install the Debian package blktrace: {exc} "
                    f"{err.decode(errors='replace')[-300:]}")
    assert _have_tools(), "apt-get installed blktrace but blkparse/btt are still missing"


def btt_averages(text: str) -> dict:
    """The ALL table of btt's report: name -> (min, avg, max, n)."""
    section = text.split("==================== All Devices ====================", 1)[1]
    section = section.split("====================", 1)[0]
    out = {}
    for line in section.splitlines():
        m = re.match(r"^(\w2\w)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$", line)
        if m:
            out[m.group(1)] = (float(m.group(2)), float(m.group(3)), float(m.group(4)),
                               int(m.group(5)))
    return out


@pytest.mark.parametrize("scheduler, nr_requests", [("deadline", 128), ("noop", 4)])
def test_btt_q2c_d2c_match_blksim(tmp_path, scheduler, nr_requests):
    ensure_blktrace()
    cfg = tmp_path / "run.toml"
    cfg.write_text(CONFIG.format(scheduler=scheduler, nr_requests=nr_requests))
    trace_dir = tmp_path / "trace"
    assert main(["run", str(cfg), "-q", "--out", str(tmp_path / "out"),
                 "--blktrace", str(trace_dir)]) == 0
    assert sorted(os.listdir(trace_dir)) == ["sda.blktrace.0"]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    total = results["totals"]["all"]

    text = subprocess.run(["blkparse", "-i", "sda", "-d", "dump.bin"], cwd=trace_dir,
                          check=True, capture_output=True, text=True).stdout
    letters = {m.group(1) for m in re.finditer(r"^\s*8,0\s+0\s+\d+\s+[\d.]+\s+\d+\s+(\w+)\s",
                                               text, re.M)}
    assert {"Q", "G", "I", "D", "C", "M"} <= letters
    if nr_requests == 4:
        assert "S" in letters                     # submitters slept for a free request
    for name in ("[reader.0]", "[reader.1]", "[logger]", "[scanner]"):
        assert name in text
    assert "Skips: 0 forward" in text

    report = subprocess.run(["btt", "-i", "dump.bin"], cwd=trace_dir, check=True,
                            capture_output=True, text=True).stdout
    avg = btt_averages(report)
    bios = total["ios"]
    assert avg["Q2C"][3] == bios and avg["D2C"][3] == bios
    # btt prints seconds to the ns; blksim's results are ms to the ns.
    assert avg["Q2C"][1] == pytest.approx(total["q2c"]["mean_ms"] / 1e3, abs=2e-9)
    assert avg["D2C"][1] == pytest.approx(total["d2c"]["mean_ms"] / 1e3, abs=2e-9)
    q2d = avg["Q2C"][1] - avg["D2C"][1]
    assert q2d == pytest.approx(total["q2d"]["mean_ms"] / 1e3, abs=4e-9)
    assert avg["Q2C"][2] == pytest.approx(total["q2c"]["max_ms"] / 1e3, abs=2e-9)


STACK = """\
[run]
seed = 4
[device]
service = "exponential"
service_time = "3ms"
capacity = "8g"
[devices.sdb]
drive = "cheetah15k4"
[devices.sdc]
drive = "cheetah15k4"
[devices.sdc.queue]
scheduler = "cfq"
[volumes."vg0/data"]
type = "striped"
devices = ["/dev/sdb", "/dev/sdc"]
stripe_size = "16k"

[[job]]
name = "db"
rw = "randrw"
bs = "24k"
iodepth = 4
number_ios = 400
filename = "/dev/vg0/data"
"""


def test_btt_reads_a_device_mapper_run(tmp_path):
    """One file set per device; dm-0 has Q and C, its disks A (remap <- (253,0)) before
    each clone's Q; btt's Q2C of the dm device equals blksim's per-bio Q2C."""
    ensure_blktrace()
    cfg = tmp_path / "run.toml"
    cfg.write_text(STACK)
    trace_dir = tmp_path / "trace"
    assert main(["run", str(cfg), "-q", "--out", str(tmp_path / "out"),
                 "--blktrace", str(trace_dir)]) == 0
    assert sorted(os.listdir(trace_dir)) == ["dm-0.blktrace.0", "sda.blktrace.0",
                                             "sdb.blktrace.0", "sdc.blktrace.0"]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    total = results["totals"]["all"]
    text = subprocess.run(["blkparse", "-i", "dm-0", "-i", "sdb", "-i", "sdc", "-d",
                           "dump.bin"], cwd=trace_dir, check=True, capture_output=True,
                          text=True).stdout
    remaps = re.findall(r"^\s*8,(16|32)\s+0\s+\d+\s+[\d.]+\s+\d+\s+A\s+\w+\s+(\d+) \+ (\d+) "
                        r"<- \(253,0\) (\d+)", text, re.M)
    clones = sum(results["devices"][d]["block_layer"]["requests_allocated"]
                 + results["devices"][d]["block_layer"]["bio_merges"] for d in ("sdb", "sdc"))
    assert len(remaps) == clones > total["ios"]       # 24 KiB bios over 16 KiB chunks split
    assert "Skips: 0 forward" in text
    report = subprocess.run(["btt", "-i", "dump.bin"], cwd=trace_dir, check=True,
                            capture_output=True, text=True).stdout
    m = re.search(r"^Q2Cdm\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$", report, re.M)
    assert m, report[:2000]
    assert int(m.group(4)) == total["ios"]
    assert float(m.group(2)) == pytest.approx(total["q2c"]["mean_ms"] / 1e3, abs=2e-9)
    assert float(m.group(3)) == pytest.approx(total["q2c"]["max_ms"] / 1e3, abs=2e-9)


def test_btt_per_device_q2c_d2c_equal_blksims(tmp_path):
    """btt over one device's trace gives that device's Q2C and D2C, as results.json's
    devices.NAME.latency gives them (a disk's: every bio and clone its queue took)."""
    ensure_blktrace()
    cfg = tmp_path / "run.toml"
    cfg.write_text(STACK + '\n[[job]]\nname = "direct"\nrw = "randread"\nnumber_ios = 150\n'
                   'filename = "/dev/sdb"\n')
    trace_dir = tmp_path / "trace"
    assert main(["run", str(cfg), "-q", "--out", str(tmp_path / "out"),
                 "--blktrace", str(trace_dir)]) == 0
    devices = json.loads((tmp_path / "out" / "results.json").read_text())["devices"]
    for name in ("sdb", "sdc"):
        subprocess.run(["blkparse", "-i", name, "-d", f"{name}.bin", "-o", "/dev/null"],
                       cwd=trace_dir, check=True, capture_output=True)
        report = subprocess.run(["btt", "-i", f"{name}.bin"], cwd=trace_dir, check=True,
                                capture_output=True, text=True).stdout
        avg = btt_averages(report)
        lat = devices[name]["latency"]
        assert avg["Q2C"][3] == avg["D2C"][3] == lat["bios"] > 0
        assert avg["Q2C"][1] == pytest.approx(lat["q2c_mean_ms"] / 1e3, abs=2e-9)
        assert avg["D2C"][1] == pytest.approx(lat["d2c_mean_ms"] / 1e3, abs=2e-9)
        assert avg["Q2C"][2] == pytest.approx(lat["q2c_max_ms"] / 1e3, abs=2e-9)
