"""fio's random_distribution (zipf, pareto, normal, zoned), rate (bandwidth), ramp_time and
bs=READ,WRITE in [[job]] tables and fio job files."""

from collections import Counter

import pytest

import blksim
from blksim.sim.config import ConfigError, resolve
from blksim.traces.distributions import parse_random_distribution, slot_chooser


def run(job, duration="20s", **run_keys):
    cfg = {"run": {"duration": duration, **run_keys}, "device": {"drive": "cheetah15k4"},
           "job": [{"name": "j", "rw": "randread", "bs": "4k", "size": "400m", **job}]}
    return blksim.run(cfg)


def shares(r, blocks=102400):
    """Distinct 4 KiB blocks per I/O (near 1 for uniform draws over many blocks, small
    for a skewed distribution), and the share of I/Os in the region's first 10 %."""
    sectors = r.requests["sector"]
    distinct = len({int(s) // 8 for s in sectors}) / len(sectors)
    first = sum(1 for s in sectors if s // 8 < blocks // 10) / len(sectors)
    return distinct, first


def test_uniform_zipf_and_zoned_offsets_differ_as_fio_defines_them():
    distinct_uniform, first_uniform = shares(run({}))
    distinct_zipf, first_zipf = shares(run({"random_distribution": "zipf:1.2"}))
    _, first_zoned = shares(run({"random_distribution": "zoned:60/10:30/20:8/30:2/40"}))
    assert first_uniform == pytest.approx(0.10, abs=0.03)
    assert distinct_uniform > 0.95 and distinct_zipf < 0.5
    # zipf's hot blocks are scattered over the region, not packed at its start
    assert first_zipf < 0.25
    # zoned: 60 % of the I/Os in the first 10 % of the region
    assert first_zoned == pytest.approx(0.60, abs=0.05)


@pytest.mark.parametrize("text", ["pareto:0.3", "normal:5", "zipf:0.8"])
def test_every_skewed_distribution_concentrates_the_draws(text):
    import random
    choose = slot_chooser(parse_random_distribution(text), 10000)
    rng = random.Random(3)
    draws = Counter(choose(rng.random) for _ in range(20000))
    assert all(0 <= k < 10000 for k in draws)
    assert sum(c for _, c in draws.most_common(1000)) / 20000 > 0.25


def test_rate_caps_the_bandwidth_and_bs_takes_a_read_and_a_write_size():
    r = run({"rw": "randrw", "bs": "4k,16k", "rate": "400k", "rate_process": "linear"},
            duration="30s")
    f = r.figures["totals"]
    assert (f["all"]["bytes"] / r.measured_s) == pytest.approx(400 * 1024, rel=0.03)
    sizes = {(str(d), int(n)) for d, n in zip(r.requests["dir"], r.requests["sectors"])}
    assert sizes == {("R", 8), ("W", 32)}


def test_a_jobs_ramp_time_starts_the_measurement():
    r = run({"ramp_time": "5s"}, duration="12s")
    assert r.measured_s == pytest.approx(7.0, abs=0.1)
    measured = r.requests[r.requests["measured"]]
    assert measured["q_s"].min() >= 5.0 and r.figures["totals"]["all"]["ios"] == len(measured)


def test_an_fio_file_takes_the_options(tmp_path):
    path = tmp_path / "skew.fio"
    path.write_text("[global]\nrw=randread\nbs=4k\nsize=400m\nramp_time=1\n"
                    "[hot]\nrandom_distribution=zipf:1.2\n")
    r = blksim.run(str(path), duration="6s")
    assert r.measured_s == pytest.approx(5.0, abs=0.1)
    assert r.figures["config"]["job"][0]["random_distribution"] == "zipf:1.2"


@pytest.mark.parametrize("job, message", [
    ({"random_distribution": "zipf:1"}, "random_distribution: expected random, zipf:THETA"),
    ({"random_distribution": "zoned:60/10:30/20"}, "zoned:ACCESS/SIZE"),
    ({"rate": "1m,2m"}, "separate read,write rates are not simulated"),
    ({"rate": "1m", "rate_iops": 100}, "rate or rate_iops, not both"),
    ({"bs": "4k,16k,8k"}, "READ,WRITE sizes such as 4k,16k"),
    ({"ramp_time": "30s"}, "ramp_time leaves nothing to measure"),
])
def test_fio_option_errors_name_the_key(job, message):
    cfg = {"run": {"duration": "10s"}, "job": [{"name": "j", "rw": "randread", **job}]}
    with pytest.raises(ConfigError, match=message):
        resolve(cfg, "x.toml")
