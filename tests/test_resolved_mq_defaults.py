"""The resolved configuration of a multi-queue run reads back: a default the kernel
computes below what sysfs accepts (nr_requests = 2 * queue_depth 1 = 2 < BLKDEV_MIN_RQ)
is left out rather than written and then refused."""

from __future__ import annotations

import json


def test_a_depth_1_devices_default_nr_requests_reads_back(tmp_path):
    from blksim.cli import main
    path = tmp_path / "c.toml"
    path.write_text("""
[run]
kernel = "6.6"
duration = "1s"
[device]
service = "fixed"
service_time = "5ms"
[queue]
scheduler = "mq-deadline"
[[job]]
name = "j"
rw = "randread"
""")
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o")]) == 0
    resolved = tmp_path / "o" / "config.resolved.toml"
    assert "nr_requests" not in resolved.read_text()
    assert main(["run", str(resolved), "-q", "--out", str(tmp_path / "o2")]) == 0
    a = json.loads((tmp_path / "o" / "results.json").read_text())
    b = json.loads((tmp_path / "o2" / "results.json").read_text())
    assert a["totals"] == b["totals"] and a["totals"]["read"]["ios"] > 0
