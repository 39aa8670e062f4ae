"""Configuring a multi-queue run: kernel lines, the kernel's default scheduler (and its
note), schedulers of the wrong kind, the multi-queue [queue] keys and their errors."""

import pytest

from blksim.sim.config import ConfigError, resolve


def raw(kernel=None, queue=None, device=None):
    r = {"device": device or {"drive": "cheetah9LP"},
         "job": [{"name": "j", "rw": "randread", "number_ios": 10}]}
    if kernel is not None:
        r["run"] = {"kernel": kernel}
    if queue is not None:
        r["queue"] = queue
    return r


SERVICE = {"service": "fixed", "service_time": "100us", "nr_hw_queues": 4, "servers": 4}


@pytest.mark.parametrize("kernel", ["5.4", "5.10", "5.15", "6.1", "6.6"])
def test_every_lts_line_runs_and_a_disk_gets_mq_deadline_by_default(kernel):
    cfg = resolve(raw(kernel), "t.toml")
    assert cfg.scheduler == "mq-deadline"
    assert any("chose mq-deadline (one hardware queue" in w for w in cfg.warnings)


def test_a_device_with_several_hardware_queues_gets_none():
    cfg = resolve(raw("6.6", device=SERVICE), "t.toml")
    assert cfg.scheduler == "none" and cfg.primary.nr_hw_queues == 4
    assert any("chose none (4 hardware queues" in w for w in cfg.warnings)


def test_a_multi_queue_scheduler_without_a_kernel_runs_on_the_newest_line():
    cfg = resolve(raw(queue={"scheduler": "none"}), "t.toml")
    assert cfg.kernel == "6.6"
    assert any("follows kernel 6.6" in w for w in cfg.warnings)
    assert resolve(raw(), "t.toml").kernel == "2.6.18"


@pytest.mark.parametrize("kernel, scheduler, message", [
    ("6.6", "cfq", "removed with the legacy block layer in Linux 5.0; kernel 6.6 has: none, "
                   "mq-deadline"),
    ("2.6.18", "mq-deadline", r"is a multi-queue scheduler \(Linux 5.0 on\)"),
    ("6.6", "fcfs", "a textbook algorithm, which blksim runs on the 2.6 queue"),
])
def test_a_scheduler_of_the_other_kind_is_refused(kernel, scheduler, message):
    with pytest.raises(ConfigError, match=message):
        resolve(raw(kernel, {"scheduler": scheduler}), "t.toml")


def test_multi_queue_keys_and_their_errors():
    cfg = resolve(raw("6.1", {"rq_affinity": 2, "wbt_lat_usec": 0, "nr_requests": 64}),
                  "t.toml")
    assert (cfg.primary.rq_affinity, cfg.primary.wbt_lat_usec, cfg.nr_requests) == (2, 0, 64)
    assert cfg.primary.rotational is True
    assert resolve(raw("6.6", device=SERVICE), "t.toml").primary.rotational is False
    with pytest.raises(ConfigError, match=r"\[queue\]: nr_hw_queues is not a queue file"):
        resolve(raw("6.6", {"nr_hw_queues": 4}), "t.toml")
    with pytest.raises(ConfigError, match="rq_affinity is a multi-queue kernel's"):
        resolve(raw("2.6.18", {"rq_affinity": 1}), "t.toml")
    with pytest.raises(ConfigError, match="nr_requests"):
        resolve(raw("6.6", {"nr_requests": 4096}), "t.toml")
    with pytest.raises(ConfigError, match="appeared in Linux 6.1"):
        resolve(raw("5.15", {"scheduler": "mq-deadline",
                             "iosched": {"prio_aging_expire": 100}}), "t.toml")
    with pytest.raises(ConfigError, match="kernel = '5.2' is not supported"):
        resolve(raw("5.2"), "t.toml")
    with pytest.raises(ConfigError, match="kernel = '2.6.20' is not supported"):
        resolve(raw("2.6.20"), "t.toml")


def test_a_later_kernel_follows_the_newest_line_not_newer_than_it():
    cfg = resolve(raw("6.8"), "t.toml")
    assert cfg.kernel == "6.6"
    assert any("kernel = '6.8': the run follows the 6.6 line" in w for w in cfg.warnings)
    assert resolve(raw("5.19"), "t.toml").kernel == "5.15"


def test_the_resolved_configuration_runs_again_the_same():
    from blksim.sim.resolved_config import resolved_dict
    cfg = resolve(raw("6.6", {"rq_affinity": 2}), "t.toml")
    again = resolve(resolved_dict(cfg, 4), "t.toml")
    assert (again.kernel, again.scheduler, again.nr_requests, again.primary.rq_affinity) == \
        ("6.6", "mq-deadline", 8, 2)      # 2 * min(queue_depth 4, 128): written out
