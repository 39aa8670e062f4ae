"""The open loop (``rate``) of every OLTP engine: Little's law for the arrival rate, an
M/D/1 queue against its analytical mean, whether the rate was held, and its errors."""

import pytest

from blksim.api import run as api_run
from blksim.sim.config import ConfigError, resolve

pytestmark = pytest.mark.filterwarnings("ignore:.*steady-state:UserWarning",
                                        "ignore:.*warming up:UserWarning")

ENGINE_POOL = {"oracle": "db_cache_size", "innodb": "innodb_buffer_pool_size",
               "postgresql": "shared_buffers"}


def figures(app, duration="30s", seed=5):
    cfg = {"run": {"duration": duration, "seed": seed}, "host": {"memory": "1g"},
           "device": {"drive": "cheetah15k4"}, "devices": {"sdb": {"drive": "cheetah15k4"}},
           "app": [app]}
    return api_run(cfg, per_request=False).figures["apps"]["oltp"]


@pytest.mark.parametrize("engine", sorted(ENGINE_POOL))
def test_littles_law_holds_for_the_open_loop_rate(engine):
    # transactions that read from the disk and commit: mean in the system (waiting for a
    # session or served) = rate x mean response time, over 25 s of about 80 per second.
    # Tolerance 5 %: the boundary terms (transactions in the system at the window's ends)
    # over some 2000 transactions.
    rate = 80.0
    f = figures({"type": "oltp", "engine": engine, "data_device": "/dev/sda",
                 "log_device": "/dev/sdb", "data_size": "256m",
                 ENGINE_POOL[engine]: "16m", "sessions": 6, "rate": rate, "warmup": "5s"})
    o = f["open_loop"]
    r = f["response_ms"]["mean"] / 1e3
    assert o["held"] and o["dropped"] == 0
    assert o["mean_in_system"] == pytest.approx(rate * r, rel=0.05)
    assert o["mean_in_system"] == pytest.approx(f["tps"] * r, rel=0.05)
    # the arrivals are Poisson at the rate: 2000 of them are within 3 standard deviations
    n = o["arrivals_per_s"] * 25.0
    assert abs(n - rate * 25.0) < 3 * (rate * 25.0) ** 0.5
    assert o["waited"] > 0 and o["session_wait_ms"]["mean"] > 0


def test_one_session_with_a_fixed_cpu_time_is_an_md1_queue():
    # no I/O (no page read or changed), 1 ms of CPU each, one session: an M/D/1 queue at
    # utilisation 0.8 (800 per second), whose mean response is
    # D + rho D / (2 (1 - rho)) = 1 ms + 2 ms = 3 ms (Pollaczek-Khinchine)
    f = figures({"type": "oltp", "data_device": "/dev/sda", "reads": 0, "writes": 0,
                 "cpu_time": "1ms", "cpu_distribution": "fixed", "sessions": 1,
                 "rate": 800, "warmup": "2s"}, duration="60s")
    assert f["response_ms"]["mean"] == pytest.approx(3.0, rel=0.08)
    o = f["open_loop"]
    assert o["held"]
    # the wait for the session: mean 2 ms; a transaction arriving to an idle session does
    # not wait (1 - rho = 20 % of them)
    assert o["session_wait_ms"]["mean"] == pytest.approx(
        2.0 / 0.8, rel=0.08)                        # over those that waited
    assert o["waited"] / f["transactions"] == pytest.approx(0.8, abs=0.02)


def test_a_rate_beyond_the_database_is_not_held():
    f = figures({"type": "oltp", "data_device": "/dev/sda", "reads": 0, "writes": 0,
                 "cpu_time": "1ms", "cpu_distribution": "fixed", "sessions": 1,
                 "rate": 1500, "warmup": "1s"}, duration="5s")
    o = f["open_loop"]
    assert not o["held"]
    assert f["tps"] == pytest.approx(1000.0, rel=0.01)       # the session's 1 ms each
    assert o["waiting_at_end"] > 1000


def test_the_closed_loop_has_no_open_loop_figures():
    f = figures({"type": "oltp", "data_device": "/dev/sda", "reads": 0, "writes": 0,
                 "cpu_time": "1ms", "sessions": 1}, duration="2s")
    assert "open_loop" not in f


@pytest.mark.parametrize("keys, message", [
    ({"rate": -5}, r"rate expected transactions per second, from 0 \(the closed loop\) "
                   r"to 1e7, found -5"),
    ({"rate": "800/s"}, r"rate expected transactions per second"),
    ({"rate": 800, "think_time": "1s"}, r"rate = 800 is an open loop: arrivals, not "
                                        r"think_time, pace the sessions"),
])
def test_open_loop_errors_name_the_key(keys, message):
    app = {"type": "oltp", "data_device": "/dev/sda", **keys}
    with pytest.raises(ConfigError, match=message) as info:
        resolve({"app": [app]}, "x.toml")
    assert "\n" not in str(info.value) and "x.toml" in str(info.value)
