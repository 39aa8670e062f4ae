"""A sweep's figures read as their reader expects: the throughput timeline ends at its
last full interval with the warm-up shaded, the latency CDFs give the application's
transactions beside the block layer's I/Os, legends sit outside the axes, and a figure
without a label of the file's gets a readable name with its unit."""

import pytest

from blksim.experiments import figures as figmod
from blksim.experiments.sweep import plots as plotmod
from blksim.experiments.sweep import run_experiment
from blksim.experiments.sweep.definition import load_experiment
from blksim.experiments.sweep.labels import figure_name
from blksim.experiments.sweep.plots import throughput_steps

EXPERIMENT = """\
[experiment]
name = "ramped"
schedulers = ["noop", "deadline"]
seeds = 1
figure = "totals.read.iops"

[run]
duration = "2.5s"
ramp_time = "0.5s"
[device]
drive = "cheetah15k4"
[[job]]
name = "r"
rw = "randread"
bs = "8k"
numjobs = 2
"""


@pytest.fixture
def drawn(monkeypatch):
    """Every figure the report draws, by file name, instead of written."""
    out = {}

    def keep(fig, path, **kwargs):
        out[path.rsplit("/", 1)[-1]] = fig
    monkeypatch.setattr(plotmod, "save_figure", keep)
    return out


def test_the_throughput_ends_at_its_last_full_interval_and_shades_the_ramp(tmp_path, drawn):
    path = tmp_path / "e.toml"
    path.write_text(EXPERIMENT)
    exp = load_experiment(path)
    paths = run_experiment(exp, tmp_path / "o")
    assert paths["timeline_png"].endswith("throughput.png")
    ax = drawn["throughput.png"].axes[0]
    # a 2.5 s run: intervals [0, 1) and [1, 2), the ramp's included; not [2, 2.5)
    for line in ax.get_lines():
        assert max(line.get_xdata()) == 2 and min(line.get_xdata()) == 0
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["noop", "deadline", "ramp: not measured"]
    span = ax.patches[-1]                    # axvspan: x in data, y over the axes
    assert span.get_x() == 0 and span.get_width() == pytest.approx(0.5)
    assert "the run's last 0.5 s left out" in ax.get_xlabel()
    # the legend is outside the axes: it covers no bar, error bar or line
    for name in ("throughput.png", "figure.png", "latency_cdf.png"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        fig = drawn[name]
        renderer = FigureCanvasAgg(fig).get_renderer()
        legends = [a for a in fig.axes if a.get_legend() is not None]
        assert legends, name
        for a in legends:
            box = a.get_legend().get_window_extent(renderer)
            assert box.x0 >= a.get_window_extent(renderer).x1, name
    # the headline's axis is named from the figure's path, with its unit
    assert drawn["figure.png"].axes[0].get_ylabel() == "IOPS, reads (I/Os per second)"


def test_an_older_record_loses_its_cut_last_interval():
    record = {"figures": {"simulated_s": 4.8},
              "mb_per_s_by_second": [[0, 1.0], [1, 2.0], [2, 3.0], [3, 3.0], [4, 0.5]]}
    xs, ys = throughput_steps(record)
    assert xs == [0, 1, 2, 3, 4] and ys == [1.0, 2.0, 3.0, 3.0, 3.0]


def test_warmup_spans_name_the_ramp_and_an_applications_warmup():
    results = {"config": {"run": {"ramp_time": "2s"}},
               "apps": {"db": {"window_s": [60.0, 240.0]}, "load": {"type": "loader"}}}
    assert figmod.warmup_spans(results) == [
        (0.0, 2.0, "ramp: not measured"),
        (2.0, 60.0, "application warm-up:\nits figures not measured")]
    assert figmod.warmup_spans({"config": {"run": {"ramp_time": "0.0s"}}}) == []


def test_the_application_latency_cdf_is_of_its_transactions(tmp_path, drawn):
    from blksim.experiments.sweep import find
    exp = load_experiment(find("mysql-tpcc"))
    tasks = [t for t in exp.tasks(seeds=1, scale=0.02)]
    paths = run_experiment(exp, tmp_path / "m", seeds=1, scale=0.02, tasks=tasks)
    from blksim.experiments.sweep.runner import ResultStore
    record = ResultStore(tmp_path / "m").get(tasks[0].key)
    app = record["app_cdf_ms"]["mysql"]
    assert app["what"] == "transactions"
    # its median is the median results.json gives the transactions (three digits)
    median = [ms for ms, q in app["cdf"] if q == 0.5][0]
    assert median == pytest.approx(record["figures"]["apps"]["mysql"]["response_ms"]["p50"],
                                   rel=5e-3)
    cdf = drawn["latency_cdf.png"]
    assert [a.get_xlabel() for a in cdf.axes] == [
        "Q2C latency of each block I/O (ms)", "mysql: latency of each of its transactions (ms)"]
    assert cdf.axes[1].get_ylabel() == "fraction of transactions"
    assert paths["cdf_png"].endswith("latency_cdf.png")


def test_figures_without_a_label_get_a_readable_name_with_a_unit():
    assert figure_name("apps.mysql.tps") == "mysql transactions per second (tps)"
    assert figure_name("apps.mysql.by_transaction.new_order.tpm") == \
        "mysql new_order transactions per minute (tpm)"
    assert figure_name("apps.db.response_ms.p95") == "db response time, p95 (ms)"
    assert figure_name("totals.all.q2c.p99_ms") == "Q2C latency of all I/O, p99 (ms)"
    assert figure_name("totals.write.mb_per_s") == "throughput, writes (MB/s, 10^6 bytes)"
    assert figure_name("iostat.sdb.%util") == "sdb utilisation (%)"
    assert figure_name("apps.db.redo.write_ms") == "apps.db.redo.write_ms (ms)"
    assert figure_name("fairness.jain") == "fairness.jain"


def test_plot_timeline_ends_at_its_last_full_interval_and_shades_the_ramp(tmp_path,
                                                                          monkeypatch):
    import os
    from blksim.cli import main
    from blksim.experiments import run_plots
    drawn = []
    monkeypatch.setattr(figmod, "save_figure", lambda fig, path, **kw: drawn.append(fig))
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples")
    out = tmp_path / "noop"
    assert main(["run", os.path.join(root, "mixed.toml"), "-q", "--duration", "3.5s",
                 "--set", "run/ramp_time=1s", "--set", "queue/scheduler=noop",
                 "--per-request", "--out", str(out)]) == 0
    run = run_plots.load_run(str(out))
    run_plots.plot_timeline([run], str(tmp_path / "t.png"), bin_s=1.0)
    ax = drawn[-1].axes[0]
    (line,) = ax.get_lines()
    # bins [1, 2) and [2, 3): after the 1 s ramp, before the cut [3, 3.5); no false drop
    assert list(line.get_xdata()) == [1, 2, 3] and min(line.get_ydata()) > 0
    assert ax.get_legend_handles_labels()[1] == ["noop", "ramp: not measured"]
    assert "the run's last 0.5 s left out" in ax.get_xlabel()
