"""A hardware RAID controller behind the host's queue: the behaviour its users rely on.

RAID 0 scales sequential reads with the members; RAID 5 small writes cost four member
I/Os through a write-through cache and full-stripe writes no reads; mirrors spread reads
and write both copies; a write-back cache absorbs a burst at controller speed and falls to
disk speed once full of dirty data; a degraded RAID 5 reads the whole row to rebuild a
lost strip; and every bio completes once over every array, cache and scheduler.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.schedulers import SCHEDULERS
from blksim.sim.config import ConfigError, resolve, resolved_dict
from blksim.sim.engine import Simulation
from blksim.sim.results import results_dict
from tests.simhelpers import member_io_totals as totals
from tests.simhelpers import simulate_raid as simulate


def test_raid0_sequential_reads_scale_with_the_members():
    """Members with a tagged queue (2) stream back to back, as the bare drive does."""
    job = [{"name": "seq", "rw": "read", "bs": "512k", "iodepth": 8}]
    raw = {"run": {"seed": 1, "duration": "2s"}, "device": {"queue_depth": 2},
           "queue": {"scheduler": "noop"}, "job": job}
    cfg = resolve(raw, "x.toml")
    out = Simulation(cfg).run()
    drive = results_dict(out, resolved_dict(cfg, 2))["totals"]["read"]["mb_per_s"]
    assert drive > 80                      # the outer zone's media rate, about 96 MB/s
    for n in (2, 4):
        _, _, f = simulate({"level": "raid0", "members": n, "member_queue_depth": 2}, job,
                           run={"duration": "2s"})
        assert f["totals"]["read"]["mb_per_s"] == pytest.approx(n * drive, rel=0.10)


def test_the_host_link_caps_an_array_faster_than_it():
    job = [{"name": "seq", "rw": "read", "bs": "512k", "iodepth": 8}]
    _, _, f = simulate({"level": "raid0", "members": 8, "member_queue_depth": 2,
                        "host_mb_per_s": 300}, job, run={"duration": "1s"})
    assert 270 < f["totals"]["read"]["mb_per_s"] <= 300           # MB of 10^6 bytes


def test_raid5_small_writes_through_the_cache_cost_four_member_ios():
    ctrl, seen, _ = simulate(
        {"level": "raid5", "members": 5, "service": "fixed", "service_time": "2ms",
         "capacity": "1g", "cache": 0},
        [{"name": "w", "rw": "randwrite", "bs": "4k", "iodepth": 4, "number_ios": 300}])
    assert len(seen) == 300
    assert totals(ctrl) == (600, 600)            # old data + old parity, new data + parity


def test_raid5_full_stripe_writes_read_nothing():
    ctrl, seen, _ = simulate(
        {"level": "raid5", "members": 5, "service": "fixed", "service_time": "2ms",
         "capacity": "1g", "stripe_size": "64k", "write_policy": "write-through"},
        [{"name": "w", "rw": "write", "bs": "256k", "iodepth": 2, "number_ios": 50}])
    assert len(seen) == 50
    assert totals(ctrl)[0] == 0
    # four data strips and their parity a row (a member's strips of consecutive rows go
    # as one I/O, so sectors are counted rather than I/Os)
    assert sum(st.sectors[1] for st in ctrl.member_stats) == 50 * 512 * 5 // 4


@pytest.mark.parametrize("level, members", [("raid1", 2), ("raid10", 4)])
def test_mirrors_spread_reads_over_both_copies_and_write_both(level, members):
    ctrl, _, _ = simulate(
        {"level": level, "members": members, "service": "exponential",
         "service_time": "5ms", "capacity": "1g"},
        [{"name": "r", "rw": "randread", "bs": "4k", "iodepth": 8, "number_ios": 2000},
         {"name": "w", "rw": "randwrite", "bs": "4k", "iodepth": 1, "number_ios": 200}])
    for a in range(0, members, 2):
        ra, wa = ctrl.member_ios[a]
        rb, wb = ctrl.member_ios[a + 1]
        assert min(ra, rb) > 0.35 * (ra + rb)        # both copies serve reads
        assert wa == wb                               # every write reaches both
    assert sum(w for _, w in ctrl.member_ios) == 2 * 200


def test_a_write_back_cache_absorbs_a_burst_then_falls_to_disk_speed():
    raid = {"level": "raid10", "members": 4, "drive": "cheetah15k4", "cache": "2m",
            "write_policy": "write-back", "overhead": "20us"}
    _, seen, _ = simulate(raid, [{"name": "w", "rw": "randwrite", "bs": "4k",
                                  "iodepth": 4, "number_ios": 3000}])
    lat = [b.t_complete - b.t_queue for b in sorted(seen, key=lambda b: b.id)]
    burst = lat[:200]                      # 800 KiB: under the 2 MiB cache's high water
    late = lat[-1000:]                     # long after the cache filled with dirty lines
    assert max(burst) < 0.0005              # controller speed: overhead + transfer
    assert sum(late) / len(late) > 0.002    # waiting for destages to the drives


def test_degraded_raid5_reads_rebuild_from_every_surviving_member():
    ctrl, seen, _ = simulate(
        {"level": "raid5", "members": 4, "service": "fixed", "service_time": "1ms",
         "capacity": "1g", "stripe_size": "64k", "failed": 2},
        [{"name": "r", "rw": "randread", "bs": "4k", "iodepth": 1, "number_ios": 400}])
    assert ctrl.member_ios[2] == [0, 0]
    reads = sum(r for r, _ in ctrl.member_ios)
    # a quarter of the strips were on member 2 (3 data strips a row, rotating parity):
    # each such read costs 3 reads, the others 1
    assert 400 < reads < 400 + 2 * 400
    lost = (reads - 400) / 2
    assert 0.15 * 400 < lost < 0.35 * 400


def test_members_and_the_array_are_reported():
    _, _, f = simulate({"controller": "perc5i", "level": "raid5", "members": 3,
                        "service": "fixed", "service_time": "1ms", "capacity": "1g"},
                       [{"name": "r", "rw": "randrw", "number_ios": 50}])
    assert f["devices"]["sda"]["device"]["level"] == "raid5"
    assert f["devices"]["sda"]["queue_depth"] == 128
    assert [k for k in f["iostat"]] == ["sda", "sda.m0", "sda.m1", "sda.m2"]
    assert f["devices"]["sda.m1"]["kind"] == "member"
    raid = f["config"]["device"]["raid"]
    assert raid["cache"] == 256 << 20 and raid["write_policy"] == "write-back"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(level=st.sampled_from(["raid0", "raid1", "raid5", "raid10"]),
       wide=st.booleans(),
       cache=st.sampled_from([0, "64k", "1m"]),
       write_policy=st.sampled_from(["write-back", "write-through"]),
       read_policy=st.sampled_from(["none", "read-ahead", "adaptive"]),
       failed=st.booleans(),
       scheduler=st.sampled_from(sorted(SCHEDULERS)),
       jobs=st.lists(st.fixed_dictionaries({
           "rw": st.sampled_from(["read", "write", "randrw", "randwrite"]),
           "bs": st.sampled_from(["4k", "24k", "128k"]),
           "iodepth": st.integers(1, 8),
           "number_ios": st.integers(1, 60)}), min_size=1, max_size=3),
       seed=st.integers(0, 2**32))
def test_every_bio_completes_once_over_every_array(level, wide, cache, write_policy,
                                                   read_policy, failed, scheduler, jobs, seed):
    members = {"raid0": 2, "raid1": 2, "raid5": 3, "raid10": 4}[level] + (2 if wide else 0)
    raid = {"level": level, "members": members, "service": "exponential",
            "service_time": "1ms", "capacity": "64m", "stripe_size": "16k", "cache": cache,
            "write_policy": write_policy, "read_policy": read_policy,
            "member_queue_depth": 2}
    if failed and level != "raid0":
        raid["failed"] = members - 1
    tables = [{"name": f"j{i}", **j} for i, j in enumerate(jobs)]
    ctrl, seen, _ = simulate(raid, tables, run={"seed": seed},
                             queue={"scheduler": scheduler}, device={"queue_depth": 8})
    issued = sum(j["number_ios"] for j in jobs)
    assert sorted(b.id for b in seen) == list(range(issued))
    for b in seen:
        assert 0.0 <= b.t_queue <= b.t_dispatch <= b.t_complete
    assert ctrl.outstanding() == 0 and not ctrl._blocked
    assert all(not w for w in ctrl._waiting)


@pytest.mark.parametrize("raid, message", [
    ({"level": "raid5", "members": 3, "service": "fixed", "service_time": "1ms",
      "capacity": "32k", "stripe_size": "64k"},
     r"\[device.raid\]: stripe_size: a member of 64 sectors is smaller than one strip"),
    ({"controller": "sas5ir", "level": "raid5", "members": 3},
     r"\[device.raid\]: level = 'raid5'; controller 'sas5ir' offers raid0, raid1"),
    ({"level": "raid0", "members": 2, "failed": 1},
     r"\[device.raid\]: failed: raid0 has no redundancy"),
    ({"controller": "perc6", "level": "raid0", "members": 2},
     r"controller: unknown preset 'perc6'; presets: perc5i, perch755, sas5ir"),
    ({"level": "raid5", "members": 3, "cache": "1m", "low_water": 0.9},
     r"low_water \(0.9\) must be below high_water \(0.75\)"),
    ({"level": "raid50", "members": 6},
     r"level = 'raid50'; valid: raid0, raid1, raid10, raid5, raid6"),
    ({"members": 4}, r"\[device.raid\]: level is required"),
    ({"level": "raid5", "members": 3, "service": "fixed", "service_time": "1ms",
      "capacity": 0}, r"\[device.raid\]: capacity expected a positive multiple of 512 bytes"),
    ({"level": "raid5", "members": 3, "cache": "6k"},
     r"\[device.raid\]: cache expected 0 \(no cache\) or a multiple of 4k \(its line\), "
     r"found '6k'"),
    ({"level": "raid0", "members": 2, "max_member_io": "6k"},
     r"\[device.raid\]: max_member_io expected a multiple of 4k up to 32m, found '6k'"),
    ({"level": "raid0", "members": 2, "stripe_size": "2k"},
     r"\[device.raid\]: stripe_size expected a power of two of at least 4k, found '2k'"),
])
def test_raid_errors_name_the_key(raid, message):
    with pytest.raises(ConfigError, match=message):
        resolve({"device": {"raid": raid}, "job": [{"name": "j"}]}, "x.toml")


def test_a_drive_beside_raid_is_an_error():
    with pytest.raises(ConfigError, match=r"\[device\]: drive with raid"):
        resolve({"device": {"drive": "cheetah9LP", "raid": {"level": "raid0", "members": 2}},
                 "job": [{"name": "j"}]}, "x.toml")


@pytest.mark.parametrize("device", [
    {"raid": {"level": "raid0", "members": 2, "drive": "cheetah15k4"}},
    {"raid": {"level": "raid1", "members": 2, "service": "fixed", "service_time": "1ms",
              "capacity": "1g"}},
    {"service": "exponential", "service_time": "5ms", "capacity": "1g"},
])
def test_plot_heads_refuses_a_device_without_cylinders(tmp_path, capsys, device):
    """A RAID LUN (or a service-law device) has no head: `plot heads` drew invented
    cylinders (104,092 on a LUN of 56,625-cylinder drives); now one line, no figure."""
    import tomli_w

    from blksim.cli import main
    cfg = tmp_path / "c.toml"
    cfg.write_text(tomli_w.dumps({"device": device, "job": [{"name": "j", "number_ios": 20}]}))
    out = tmp_path / "h.png"
    assert main(["plot", "heads", str(cfg), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("blksim: error: plot heads: the device (") and err.count("\n") == 1
    assert "no head and no cylinders" in err
    assert not out.exists()
