"""LUNs of one array behind one host link (``host_link``): their transfers share it, one
at a time at its rate, as the fs-maxdb study's six LUNs share one 2 Gb Fibre Channel
link; a LUN without the key keeps a link of its own (the figures of every earlier
configuration are unchanged)."""

import pytest

from blksim.sim.config import ConfigError, resolve
from tests.simhelpers import simulate_raw


def two_luns(link_a=None, link_b=None, rate_b=100):
    def lun(link, rate):
        raid = {"level": "raid0", "members": 8, "member_queue_depth": 2,
                "host_mb_per_s": rate}
        if link is not None:
            raid["host_link"] = link
        return {"raid": raid}
    jobs = [{"name": f"r{d}", "rw": "read", "bs": "512k", "iodepth": 8,
             "filename": f"/dev/{d}"} for d in ("sda", "sdb")]
    return {"run": {"seed": 1, "duration": "1s"}, "device": lun(link_a, 100),
            "devices": {"sdb": lun(link_b, rate_b)},
            "queue": {"scheduler": "noop"}, "job": jobs}


def throughput(raw):
    _, _, f = simulate_raw(raw, "link.toml")
    return f["totals"]["read"]["mb_per_s"]


def test_two_luns_on_one_link_share_its_rate():
    apart = throughput(two_luns())
    shared = throughput(two_luns("fc0", "fc0"))
    # eight members stream far faster than 100 MB/s: each LUN fills its own link,
    # and the two together fill the one they share
    assert 180 < apart <= 200                      # MB of 10^6 bytes a second
    assert 90 < shared <= 100
    # different names are different links
    assert throughput(two_luns("fc0", "fc1")) == pytest.approx(apart)


def test_a_shared_link_has_one_rate_and_a_name():
    with pytest.raises(ConfigError, match="host_link 'fc0': host_mb_per_s 200 differs"):
        throughput(two_luns("fc0", "fc0", rate_b=200))
    with pytest.raises(ConfigError, match="host_link expected a name"):
        resolve(two_luns(7, None), "link.toml")
