"""Queueing-theory sanity: noop on a single-server device under Poisson arrivals.

With exponential service the response time (Q2C) must match M/M/1's mean
1/(mu - lambda); with constant service, M/D/1's S + rho*S / (2(1 - rho)).
"""

import math

import pytest

from blksim.disk_models.synthetic import ServiceLawDevice
from tests.simhelpers import make_config, run_config

RATE = 100.0        # arrivals per second
SERVICE = 0.005     # mean service time, s (rho = 0.5)
N = 200_000


def _poisson_reads(seed):
    return make_config(
        jobs=[{"name": "poisson", "rw": "randread", "bs": "4k", "rate_iops": RATE,
               "number_ios": N}],
        scheduler="noop", queue={"nomerges": 2}, run={"seed": seed})


@pytest.mark.parametrize("law, expected", [
    ("exponential", 1.0 / (1.0 / SERVICE - RATE)),                            # M/M/1
    ("fixed", SERVICE + RATE * SERVICE * SERVICE / (2 * (1 - RATE * SERVICE))),  # M/D/1
])
def test_mean_response_time_matches_theory(law, expected):
    cfg = _poisson_reads(seed=11)
    device = ServiceLawDevice(law, SERVICE, capacity=71687372, seed=5)
    outcome = run_config(cfg, device=device)
    m = outcome.metrics
    assert m.read.ios == N
    assert math.isclose(m.read.q2c.mean, expected, rel_tol=0.03), (m.read.q2c.mean, expected)


def test_mm1_response_time_is_exponential():
    # In M/M/1 (FCFS) the response time is exponential with rate mu - lambda.
    cfg = _poisson_reads(seed=3)
    outcome = run_config(cfg, device=ServiceLawDevice("exponential", SERVICE,
                                                      capacity=71687372, seed=9))
    rate = 1.0 / SERVICE - RATE
    q2c = outcome.metrics.read.q2c
    assert math.isclose(q2c.percentile(50), math.log(2) / rate, rel_tol=0.05)
    assert math.isclose(q2c.percentile(90), math.log(10) / rate, rel_tol=0.05)


def test_utilisation_law_on_the_drive():
    # Throughput equals the arrival rate when the drive is not saturated.
    cfg = make_config(jobs=[{"name": "p", "rw": "randread", "bs": "4k", "rate_iops": 60,
                             "number_ios": 3000}], scheduler="deadline")
    m = run_config(cfg).metrics
    assert m.read.ios == 3000
    assert math.isclose(m.read.ios / m.elapsed, 60, rel_tol=0.06)


def test_service_law_device_from_the_configuration(tmp_path, capsys):
    import json

    from blksim.cli import main
    path = tmp_path / "mm1.toml"
    path.write_text("""
[run]
seed = 4
[device]
service = "exponential"
service_time = "5ms"
[queue]
scheduler = "noop"
nomerges = 2
[[job]]
name = "arrivals"
rw = "randread"
rate_iops = 100
number_ios = 60000
""")
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert results["device"]["law"] == "exponential"
    assert math.isclose(results["totals"]["read"]["q2c"]["mean_ms"], 10.0, rel_tol=0.05)
    assert results["config"]["device"]["service"] == "exponential"
