"""A multi-queue run's results: the figures per hardware queue (results.json and the
text table) add up to the block layer's."""

import json

from blksim.cli import main

CONFIG = """
[run]
kernel = "6.6"
duration = "200ms"
ramp_time = "50ms"
[device]
service = "fixed"
service_time = "1ms"
servers = 2
nr_hw_queues = 2
queue_depth = 2
[[job]]
name = "r"
rw = "randread"
bs = "4k"
iodepth = 8
"""


def test_hardware_queue_figures_add_up(tmp_path, capsys):
    path = tmp_path / "mq.toml"
    path.write_text(CONFIG)
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    sda = results["devices"]["sda"]
    hw = sda["hw_queues"]
    assert [h["hctx"] for h in hw] == [0, 1]
    # measured from ramp_time: the requests sent equal the requests allocated (give or
    # take those in flight across the window's edges)
    sent = sum(h["requests"] for h in hw)
    assert abs(sent - sda["block_layer"]["requests_allocated"]) <= 8
    assert sum(h["tag_waits"] for h in hw) > 0       # iodepth 8 over 2 tags
    assert "hardware queues of sda: hctx0 (CPUs 0)" in out
