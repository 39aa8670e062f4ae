"""Storage stacks: several disks, partitions and device-mapper volumes in one run.

Hand-traced cases of the remapping and splitting (Linux 2.6.18's blk_partition_remap and
dm's __split_bio), conservation over random stacks under every scheduler (every bio
completes once, nothing lost, Q <= D <= C, every sector reaches exactly one disk), and the
configuration's errors.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.schedulers import SCHEDULERS
from blksim.sim.config import ConfigError, apply_overrides, resolve
from blksim.sim.engine import Simulation
from blksim.sim.results import results_dict
from blksim.sim.config import resolved_dict

SVC = {"service": "fixed", "service_time": "1ms", "capacity": "1g"}


def run(raw, collect=True):
    cfg = resolve(raw, "stack.toml")
    seen = []
    sim = Simulation(cfg, complete_hooks=(seen.append,) if collect else ())
    return cfg, sim, sim.run(), seen


def figures(cfg, sim, outcome):
    depths = {n: q.device.queue_depth for n, q in sim.host.disks.items()}
    return results_dict(outcome, resolved_dict(cfg, depths))


# ---------------------------------------------------------------------- partitions

def test_a_partition_remaps_onto_its_disk():
    raw = {"device": SVC,
           "device_partitions": None}
    raw = {"device": {**SVC, "partition": [{"size": "100m"}, {"start": "200m"}]},
           "job": [{"name": "p2", "rw": "read", "bs": "4k", "number_ios": 3,
                    "filename": "/dev/sda2"}]}
    cfg, sim, out, seen = run(raw)
    start = 200 * 2048
    assert [b.sector for b in seen] == [start, start + 8, start + 16]
    part = sim.host.blocks["sda2"]
    assert part.stats.ios == [3, 0] and part.stats.sectors == [24, 0]
    assert sim.host.blocks["sda1"].stats.ios == [0, 0]


def test_the_first_partition_starts_at_sector_63_and_the_last_takes_the_rest():
    cfg = resolve({"device": {**SVC, "partition": [{"size": "1m"}, {}]},
                   "job": [{"name": "a"}]}, "x.toml")
    p1, p2 = cfg.primary.partitions
    assert (p1.start, p1.sectors) == (63, 2048)
    assert p2.start == 63 + 2048 and p2.start + p2.sectors == 2 * 1024 * 1024


def test_the_same_workload_on_another_partition_lands_elsewhere_on_the_drive():
    """A drive's outer zones are faster: sequential reads on sda1 (outer) beat sda3."""
    def mbps(part):
        raw = {"run": {"duration": "2s"},
               "device": {"drive": "cheetah15k4",
                          "partition": [{"size": "1g"}, {"size": "30g"}, {}]},
               "job": [{"name": "r", "rw": "read", "bs": "256k", "filename": f"/dev/{part}"}]}
        cfg, sim, out, _ = run(raw, collect=False)
        return figures(cfg, sim, out)["totals"]["read"]["mb_per_s"]
    assert mbps("sda1") > 1.15 * mbps("sda3")


# ---------------------------------------------------------------------- device-mapper

def test_a_striped_bio_is_split_at_chunks_and_completes_once():
    raw = {"devices": {"sdb": SVC, "sdc": SVC},
           "device": SVC,
           "volumes": {"v": {"table": "0 262144 striped 2 128 sdb 0 sdc 0"}},
           "job": [{"name": "x", "rw": "read", "bs": "128k", "offset": "32k",
                    "number_ios": 1, "filename": "/dev/mapper/v"}]}
    cfg, sim, out, seen = run(raw)
    # logical 64..320: chunk 0 (64..128) on sdb, chunk 1 on sdc, chunk 2 (256..320) on sdb
    assert len(seen) == 1 and seen[0].sector == 64 and seen[0].nr_sectors == 256
    sdb, sdc = sim.host.disks["sdb"].stats, sim.host.disks["sdc"].stats
    assert (sdb.ios[0], sdb.sectors[0]) == (2, 128)
    assert (sdc.ios[0], sdc.sectors[0]) == (1, 128)
    dm = sim.host.blocks["dm-0"].stats
    assert dm.ios == [1, 0] and dm.sectors == [256, 0] and dm.in_flight == 0
    b = seen[0]
    assert b.t_queue <= b.t_dispatch <= b.t_complete
    # sdb's two pieces are back to back on a 1 ms device: the bio waits for both
    assert b.t_complete == pytest.approx(0.002, abs=1e-6)


def test_lvm_linear_concatenates_physical_volumes_after_pe_start():
    cfg = resolve({"device": SVC, "devices": {"sdb": SVC, "sdc": {**SVC, "capacity": "100m"}},
                   "volumes": {"vg0/data": {"type": "linear",
                                            "devices": ["/dev/sdb", "/dev/sdc"]}},
                   "job": [{"name": "a", "filename": "/dev/vg0/data"}]}, "x.toml")
    vol = cfg.volumes[0]
    extent = 8192
    per_1g = (2097152 - 384) // extent
    per_100m = (204800 - 384) // extent
    assert vol.table == (f"0 {per_1g * extent} linear sdb 384\n"
                         f"{per_1g * extent} {per_100m * extent} linear sdc 384\n")
    assert cfg.job_files == [("dm-0",)]


def test_a_clone_that_finds_no_request_puts_the_submitter_to_sleep():
    """nr_requests = 4 on the members: the rest of a dm bio's clones are made only after
    the submitter wakes; every bio still completes once."""
    member = {**SVC, "queue": {"nr_requests": 4}}
    raw = {"device": SVC, "devices": {"sdb": member, "sdc": member},
           "volumes": {"v": {"type": "striped", "devices": ["sdb", "sdc"],
                             "stripe_size": "4k"}},
           "job": [{"name": "w", "rw": "randwrite", "bs": "64k", "rate_iops": 2000,
                    "number_ios": 200, "filename": "/dev/mapper/v"}]}
    cfg, sim, out, seen = run(raw)
    assert len(seen) == 200 and len({b.id for b in seen}) == 200
    assert sum(q.waited for q in sim.host.disks.values()) > 0
    assert all(q.idle() for q in sim.host.disks.values())


# ---------------------------------------------------------------------- conservation

disk_strategy = st.fixed_dictionaries({
    "queue_depth": st.sampled_from([1, 4]),
    "scheduler": st.sampled_from(sorted(SCHEDULERS)),
    "nr_requests": st.sampled_from([4, 128]),
    "parts": st.sampled_from([0, 0, 1, 2, 3]),
    "raid": st.sampled_from([None, None, "raid5", "raid10"]),
    "write_back": st.booleans(),
})
PART_SIZES = {1: [{}], 2: [{"size": "100m"}, {}],
              3: [{"size": "40m"}, {"start": "60m", "size": "40m"}, {}]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(disks=st.lists(disk_strategy, min_size=1, max_size=3),
       volume=st.sampled_from([None, "linear", "striped", "table"]),
       jobs=st.lists(st.fixed_dictionaries({
           "rw": st.sampled_from(["read", "randwrite", "randrw"]),
           "bs": st.sampled_from(["4k", "64k", "512k"]),
           "iodepth": st.integers(1, 4),
           "number_ios": st.integers(1, 30),
           "target": st.integers(0, 20)}), min_size=1, max_size=4),
       file_jobs=st.lists(st.fixed_dictionaries({
           "rw": st.sampled_from(["randread", "randwrite", "write"]),
           "bs": st.sampled_from(["4k", "64k", "1m"]),
           "number_ios": st.integers(1, 20),
           "fragments": st.integers(1, 3),
           "target": st.integers(0, 20)}), max_size=3),
       seed=st.integers(0, 2**32))
def test_every_bio_completes_once_over_every_stack(disks, volume, jobs, file_jobs, seed):
    """Random stacks of disks (drives behind RAID controllers too), 0 to 3 partitions, an
    LVM or hand-written volume, files (in fragments) with direct I/O on any device: every
    bio completes once, every call returns, every sector reaches exactly one disk."""
    names = ["sda", "sdb", "sdc"][:len(disks)]
    raw = {"run": {"seed": seed}, "devices": {}}
    blocks = []
    for name, d in zip(names, disks):
        table = {"service": "exponential", "service_time": "2ms", "capacity": "256m",
                 "queue_depth": d["queue_depth"],
                 "queue": {"scheduler": d["scheduler"], "nr_requests": d["nr_requests"]}}
        if d["raid"]:                  # a RAID controller's LUN of four 128 MiB members
            del table["service"], table["service_time"], table["capacity"]
            table["raid"] = {"level": d["raid"], "members": 4, "service": "exponential",
                             "service_time": "2ms", "capacity": "128m",
                             "stripe_size": "16k", "cache": "256k",
                             "write_policy": "write-back" if d["write_back"]
                             else "write-through"}
        if d["parts"]:
            table["partition"] = PART_SIZES[d["parts"]]
            blocks += [f"{name}{k + 1}" for k in range(d["parts"])]
        else:
            blocks.append(name)
        raw["devices"][name] = table
    targets = list(blocks)
    if volume:
        members = blocks[-2:] if len(blocks) > 1 else blocks
        if volume == "table":          # the first 32 MiB of each member, concatenated
            raw["volumes"] = {"vg/lv": {"table": "".join(
                f"{k * 65536} 65536 linear /dev/{m} 0\n" for k, m in enumerate(members))}}
        else:
            raw["volumes"] = {"vg/lv": {"type": volume, "devices": members}}
        targets = [b for b in blocks if b not in members] + ["/dev/vg/lv"]
    raw["job"] = [{"name": f"j{i}", "rw": j["rw"], "bs": j["bs"], "iodepth": j["iodepth"],
                   "number_ios": j["number_ios"],
                   "filename": targets[j["target"] % len(targets)]}
                  for i, j in enumerate(jobs)]
    raw["file"] = [{"path": f"/f{i}", "device": targets[j["target"] % len(targets)],
                    "size": "8m", "fragments": j["fragments"], "fragment_gap": "64k"}
                   for i, j in enumerate(file_jobs)]
    raw["job"] += [{"name": f"f{i}", "rw": j["rw"], "bs": j["bs"], "direct": 1,
                    "number_ios": j["number_ios"], "filename": f"/f{i}"}
                   for i, j in enumerate(file_jobs)]
    cfg, sim, out, seen = run(raw)
    ids = [b.id for b in seen]
    assert len(set(ids)) == len(ids)                   # none twice, no clone measured
    if not file_jobs:                                  # (a call on a file takes an id too)
        assert sorted(ids) == list(range(sum(j["number_ios"] for j in jobs)))   # none lost
    assert len(seen) >= sum(j["number_ios"] for j in jobs + file_jobs)
    for b in seen:
        assert 0.0 <= b.t_queue <= b.t_dispatch <= b.t_complete
    # every sector of every bio reached exactly one disk
    disk_sectors = sum(sum(q.stats.sectors) for q in sim.host.disks.values())
    assert disk_sectors == sum(b.nr_sectors for b in seen)
    assert all(q.idle() for q in sim.host.disks.values())
    for q in sim.host.disks.values():
        if hasattr(q.device, "member_ios"):
            assert not q.device._blocked and not any(q.device._waiting)
    for dev in sim.host.blocks.values():
        if dev.kind == "dm":
            assert dev.stats.in_flight == 0 and not dev._wake
    assert out.metrics.completed == len(seen)
    f = figures(cfg, sim, out)
    for i, j in enumerate(file_jobs):                  # every call on a file returned
        p = next(p for p in f["processes"] if p["name"] == f"f{i}")
        assert p["calls"]["read"]["calls"] + p["calls"]["write"]["calls"] == j["number_ios"]


def test_same_seed_same_results_over_a_stack():
    raw = {"run": {"seed": 5, "duration": "1s"}, "device": {"drive": "cheetah9LP"},
           "devices": {"sdb": {"drive": "cheetah9LP", "queue": {"scheduler": "cfq"}}},
           "volumes": {"v": {"type": "striped", "devices": ["sda", "sdb"]}},
           "job": [{"name": "a", "rw": "randrw", "iodepth": 4, "filename": "/dev/mapper/v"},
                   {"name": "b", "rw": "read", "bs": "64k", "filename": "sdb"}]}
    texts = []
    for _ in range(2):
        cfg, sim, out, _ = run(raw, collect=False)
        texts.append(json.dumps(figures(cfg, sim, out), sort_keys=True))
    assert texts[0] == texts[1]


# ---------------------------------------------------------------------- several disks

def test_each_disk_has_its_own_elevator_and_a_switch_names_its_disk():
    raw = {"run": {"duration": "1s"}, "device": SVC,
           "devices": {"sdb": {**SVC, "queue": {"scheduler": "cfq"}}},
           "job": [{"name": "a", "filename": "/dev/sdb", "rw": "randread"}],
           "switch": [{"at": "0.5s", "scheduler": "noop", "device": "sdb"}]}
    cfg, sim, out, _ = run(raw, collect=False)
    assert sim.host.disks["sda"].elevator_name == "deadline"
    assert sim.host.disks["sdb"].elevator_name == "noop"
    f = figures(cfg, sim, out)
    assert f["phases"][1]["device"] == "sdb" and f["phases"][1]["scheduler"] == "noop"
    assert f["iostat"]["sda"]["r/s"] == 0 and f["iostat"]["sdb"]["r/s"] > 0


def test_set_addresses_a_disk_by_name():
    raw = {"device": SVC, "devices": {"sdb": SVC}, "job": [{"name": "a"}]}
    out = apply_overrides(raw, ["sdb/queue/scheduler=cfq", "sdb/device/queue_depth=8",
                                "queue/nr_requests=64", "sda/queue/nomerges=2"])
    cfg = resolve(out, "x.toml")
    assert cfg.devices["sdb"].scheduler == "cfq" and cfg.devices["sdb"].queue_depth == 8
    assert cfg.primary.nr_requests == 64 and cfg.primary.nomerges == 2
    with pytest.raises(ConfigError, match="no disk 'sdz'.*disks: sda, sdb"):
        apply_overrides(raw, ["sdz/queue/scheduler=cfq"])


def test_a_job_over_two_devices_alternates_between_them():
    raw = {"device": SVC, "devices": {"sdb": SVC},
           "job": [{"name": "a", "rw": "read", "bs": "4k", "number_ios": 6,
                    "filename": "/dev/sda:/dev/sdb"}]}
    cfg, sim, out, seen = run(raw)
    assert sim.host.disks["sda"].stats.ios[0] == 3 == sim.host.disks["sdb"].stats.ios[0]
    # each device has its own sequential position
    assert sorted(b.sector for b in seen) == [0, 0, 8, 8, 16, 16]


def test_compare_varies_only_the_named_disks():
    from blksim.api import resolve_comparison
    raw = {"device": SVC, "devices": {"sdb": SVC}, "job": [{"name": "a"}]}
    cfgs = resolve_comparison(raw, "x.toml", ["noop", "cfq"], devices=["sdb"])
    assert [c.devices["sdb"].scheduler for c in cfgs] == ["noop", "cfq"]
    assert [c.devices["sda"].scheduler for c in cfgs] == ["deadline", "deadline"]
    assert [c.compared for c in cfgs] == ["noop", "cfq"]


# ---------------------------------------------------------------------- errors

@pytest.mark.parametrize("raw, message", [
    ({"devices": {"sdb": SVC}, "volumes": {
        "a": {"type": "linear", "devices": ["sdb"]},
        "b": {"type": "linear", "devices": ["sdb"]}}},
     r"\[volumes.b\] physical volume sdb \(bytes 0 to 1073741824 of sdb\) overlaps "
     r"\[volumes.a\] physical volume sdb"),
    ({"devices": {"sdb": SVC}, "volumes": {"a": {"table": "0 1000 striped 2 128 sda 0 sdb 0"}}},
     r"\[volumes.a\] table:1: length 1000 is not divisible by the chunk size 128"),
    ({"devices": {"sdb": {**SVC, "capacity": "1m"}},
      "volumes": {"a": {"table": "0 4096 linear sdb 0"}}},
     r"\[volumes.a\]: sectors 0 to 4096 of sdb lie beyond its end \(2048 sectors\)"),
    ({"job": [{"name": "j", "filename": "/dev/sdq"}]},
     r"job 'j': filename: no device '/dev/sdq' in this run; devices: /dev/sda"),
    ({"device": {"partition": [{"size": "1g"}, {"start": "512m", "size": "1g"}]}},
     r"\[device\]: partition #2 \(sda2\): start = '512m' .* overlaps the previous partition"),
    ({"devices": {"sdb": SVC}, "volumes": {"a": {"type": "linear", "devices": ["sdx"]}}},
     r"\[volumes.a\]: devices: 'sdx' is not a disk or partition of this run"),
    ({"switch": [{"at": "1s", "scheduler": "noop", "device": "sdb"}]},
     r"\[\[switch\]\] #1: device = 'sdb' is not a disk of this run; disks: sda"),
    ({"devices": {"SDB": SVC}}, r"\[devices.SDB\]: a disk's name expected lower-case letters"),
    ({"devices": {"sdb": {**SVC, "partition": [{}]}},
      "volumes": {"a": {"type": "linear", "devices": ["sdb"]}}},
     r"\[volumes.a\] physical volume sdb \(bytes 0 to 1073741824 of sdb\) overlaps "
     r"\[devices.sdb\] partition table \(bytes 0 to 512 of sdb\)"),
    ({"devices": {"sdb": {**SVC, "bogus": 1}}}, r"\[devices.sdb\]: unknown key 'bogus'"),
    ({"devices": {"sdb": SVC}, "volumes": {"a": {"type": "striped", "devices": ["sda", "sdb"],
                                                  "stripe_size": "3k"}}},
     r"\[volumes.a\]: stripe_size expected a power of two of at least 4k"),
    # (a KeyError traceback before: the default stripe_size was looked up in the table)
    ({"devices": {"sdb": SVC}, "volumes": {"a": {"type": "striped", "devices": ["sda", "sdb"],
                                                  "extent_size": "4k"}}},
     r"\[volumes.a\]: stripe_size expected a divisor of extent_size \(4096 bytes\), found "
     r"'64k \(the default\)'"),
    ({"devices": {"sdb": SVC}, "volumes": {"a": {"type": "linear", "devices": ["sda", "sdb"],
                                                  "stripe_size": "64k"}}},
     r"\[volumes.a\]: stripe_size is for type = \"striped\"; a linear volume has no "
     r"stripes, found stripe_size = '64k'"),
])
def test_stack_errors_name_the_key(raw, message):
    raw = {"job": [{"name": "j"}], **raw}
    with pytest.raises(ConfigError, match=message):
        resolve(raw, "x.toml")


def test_a_trace_replays_on_a_device_not_on_a_file(tmp_path, capsys):
    """A [[trace]] whose filename is a [[file]] was accepted, then a KeyError in the
    engine: a trace's records are device sectors, so it names a disk, partition or
    volume."""
    from blksim.cli import main
    trace = tmp_path / "t.trace"
    trace.write_text("0.0 0 0 8 1\n1.0 0 8 8 1\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text('[device]\nservice = "fixed"\nservice_time = "1ms"\ncapacity = "1g"\n'
                   '[[file]]\npath = "/data/f"\ndevice = "/dev/sda"\nsize = "1m"\n'
                   '[[trace]]\npath = "t.trace"\nfilename = "/data/f"\n')
    assert main(["run", str(cfg), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"blksim: error: {cfg}: trace #1: filename: '/data/f' is a file; "
                          f"a trace replays on a disk, partition or volume"), err


def test_every_shipped_example_resolves_and_the_stacked_ones_run():
    import glob
    import os
    from blksim.sim.config import load_file
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    for path in sorted(glob.glob(os.path.join(root, "*.toml"))):
        raw = load_file(path)
        if "rpm" not in raw:                 # (teaching-drive.toml is a drive file)
            resolve(raw, path)
    for name in ("lvm-linear.toml", "raid10-writeback.toml"):
        path = os.path.join(root, name)
        raw = load_file(path)
        raw["run"]["duration"] = "0.5s"
        raw["run"]["ramp_time"] = "0.1s"
        cfg = resolve(raw, path)
        sim = Simulation(cfg)
        out = sim.run()
        f = figures(cfg, sim, out)
        assert f["totals"]["all"]["ios"] > 0
        assert len(f["iostat"]) >= 4


def test_an_iolog_of_a_stack_names_each_device(tmp_path):
    from blksim.cli import main
    cfg = tmp_path / "s.toml"
    cfg.write_text('[device]\nservice = "fixed"\nservice_time = "1ms"\ncapacity = "1g"\n'
                   '[[device.partition]]\nsize = "100m"\n[[device.partition]]\n'
                   '[devices.sdb]\nservice = "fixed"\nservice_time = "1ms"\ncapacity = "1g"\n'
                   '[volumes."vg/lv"]\ntype = "linear"\ndevices = ["sda2", "sdb"]\n'
                   '[[job]]\nname = "a"\nnumber_ios = 5\nfilename = "/dev/sda1"\n'
                   '[[job]]\nname = "b"\nnumber_ios = 7\nrw = "randwrite"\n'
                   'filename = "/dev/vg/lv"\n')
    log = tmp_path / "run.iolog"
    assert main(["run", str(cfg), "-q", "--iolog", str(log)]) == 0
    lines = log.read_text().splitlines()
    assert lines[:5] == ["fio version 3 iolog", "0 /dev/sda1 add", "0 /dev/mapper/vg-lv add",
                         "0 /dev/sda1 open", "0 /dev/mapper/vg-lv open"]
    assert lines[-1].endswith("/dev/mapper/vg-lv close")
    ios = [ln.split() for ln in lines if ln.split()[2] in ("read", "write")]
    assert sum(1 for f in ios if f[1] == "/dev/sda1") == 5
    assert sum(1 for f in ios if f[1] == "/dev/mapper/vg-lv" and f[2] == "write") == 7
    # a partition's bios keep their own sectors: a sequential reader from its start
    assert [int(f[3]) for f in ios if f[1] == "/dev/sda1"][:2] == [0, 4096]
    assert main(["run", str(cfg), "-q", "--iolog", str(log), "--iolog-filename", "x"]) == 2


@pytest.mark.parametrize("example", ["lvm-linear.toml", "raid10-writeback.toml",
                                     "buffered-read.toml", "ext3-fsync.toml"])
def test_the_resolved_configuration_of_a_stack_runs_again_to_the_same_figures(tmp_path,
                                                                              example):
    import os
    from blksim.cli import main
    from tests.simhelpers import runs_again_to_the_same_figures
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    first, again = tmp_path / "first", tmp_path / "again"
    assert main(["run", os.path.join(root, example), "-q", "--duration", "1.5s",
                 "--set", "run/ramp_time=0.5s", "--out", str(first)]) == 0
    runs_again_to_the_same_figures(first, again)


def test_tiny_times_are_written_back_readably():
    from blksim.sim.storage_config import seconds_text
    from blksim.common.units import parse_time
    for x in (5e-05, 1e-09, 2.5e-07, 0.5, 30.0):
        assert parse_time(seconds_text(x), "t", "s") == x


def test_recording_a_run_does_not_change_its_figures(tmp_path):
    """--blktrace, --iolog and --iostat wrap queues, volumes and open files: the figures
    stay those of the run without them."""
    import os
    from blksim.cli import main
    from tests.simhelpers import runs_again_to_the_same_figures
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    for example in ("ext3-fsync.toml", "lvm-linear.toml"):
        plain, recorded = tmp_path / f"p-{example}", tmp_path / f"r-{example}"
        args = ["run", os.path.join(root, example), "-q", "--duration", "2s",
                "--set", "run/ramp_time=0.5s"]
        assert main([*args, "--out", str(plain)]) == 0
        assert main([*args, "--out", str(recorded), "--iostat", "0.5s",
                     "--iolog", str(tmp_path / f"{example}.iolog"),
                     "--blktrace", str(tmp_path / f"bt-{example}")]) == 0
        a = json.loads((plain / "results.json").read_text())
        b = json.loads((recorded / "results.json").read_text())
        assert a == b
