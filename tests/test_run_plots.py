"""`blksim plot cdf|latency|timeline`: figures of finished runs from their folders."""

import pytest

from blksim.cli import main

CONFIG = """\
[run]
duration = "2s"
[device]
drive = "{drive}"
[[job]]
name = "r"
rw = "randread"
numjobs = 2
[[job]]
name = "w"
rw = "write"
bs = "64k"
iodepth = 4
"""


@pytest.fixture
def runs(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG.format(drive="cheetah15k4"))
    assert main(["compare", str(cfg), "-q", "--schedulers", "noop,cfq", "--per-request",
                 "--out", str(tmp_path / "runs")]) == 0
    assert main(["run", str(cfg), "-q", "--out", str(tmp_path / "plain")]) == 0
    other = tmp_path / "o.toml"
    other.write_text(CONFIG.format(drive="atlas10k"))
    assert main(["run", str(other), "-q", "--per-request", "--out", str(tmp_path / "atlas")]) == 0
    return tmp_path


@pytest.mark.parametrize("kind, extra", [("cdf", []), ("latency", ["--per-process"]),
                                         ("timeline", ["--bin", "250ms"])])
def test_each_figure_is_drawn(runs, capsys, kind, extra):
    out = runs / f"{kind}.png"
    assert main(["plot", kind, str(runs / "runs" / "noop"), str(runs / "runs" / "cfq"),
                 "--out", str(out)] + extra) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 15000
    svg = runs / f"{kind}.svg"
    assert main(["plot", kind, str(runs / "runs" / "noop"), "--out", str(svg)]) == 0
    assert svg.read_text().lstrip().startswith("<?xml")


def test_a_cdf_without_requests_uses_the_percentiles(runs, capsys):
    assert main(["plot", "cdf", str(runs / "plain"), str(runs / "runs" / "cfq"),
                 "--out", str(runs / "p.png")]) == 0


@pytest.mark.parametrize("args, message", [
    (["latency", "{plain}"], "no requests.csv; a latency timeline needs every bio's times"),
    (["cdf", "{noop}", "{atlas}"], "differ from"),
    (["cdf", "{runs}"], "no results.json"),
    (["cdf", "{noop}", "--labels", "a,b"], "--labels: 2 labels for 1 runs"),
    (["timeline", "{noop}", "--bin", "0"], "--bin: expected a positive time"),
])
def test_plot_errors_are_one_line(runs, capsys, args, message):
    paths = {"plain": runs / "plain", "noop": runs / "runs" / "noop", "atlas": runs / "atlas",
             "runs": runs / "runs"}
    args = [a.format(**{k: str(v) for k, v in paths.items()}) for a in args]
    assert main(["plot", *args, "--out", str(runs / "x.png")]) == 2
    assert message in capsys.readouterr().err
    assert main(["plot", "cdf", str(paths["noop"]), "--out", str(runs / "x.nope")]) == 2
    assert "cannot draw a .nope file" in capsys.readouterr().err
