"""Layouts are checked for overlap across the whole stack (issue 29, finding 6): every
consumer of space (a file, an application's file, a file system and its journal, a
partition, a partition table, a volume's physical volumes or table targets) is mapped onto
its device, and two that share sectors without one lying inside the other by design are
one error line naming both, with their devices and byte ranges."""

import pytest
from hypothesis import given, strategies as st

from blksim.sim.config import ConfigError, resolve
from blksim.sim.overlaps import Use, by_design, check

SVC = {"service": "fixed", "service_time": "1ms", "capacity": "1g"}
PARTED = {**SVC, "partition": [{"start": "1m", "size": "500m"}, {}]}     # sdb1, sdb2
JOB = [{"name": "j"}]


def config(**raw):
    return {"device": SVC, "job": JOB, **raw}


@pytest.mark.parametrize("raw, message", [
    # a file on the whole disk and one on its partition, at offset 0 of each
    (config(devices={"sdb": PARTED},
            file=[{"path": "/a", "device": "/dev/sdb1", "size": "64m"},
                  {"path": "/b", "device": "/dev/sdb", "size": "64m", "offset": "1m"}]),
     r"x\.toml: \[\[file\]\] #2 \(/b\) \(bytes 1048576 to 68157440 of sdb\) overlaps "
     r"\[devices\.sdb\] partition #1 \(sdb1\) \(bytes 1048576 to 525336576 of sdb\)$"),
    # a file at offset 0 of a partitioned disk writes over its partition table
    (config(devices={"sdb": PARTED},
            file=[{"path": "/b", "device": "/dev/sdb", "size": "4k"}]),
     r"\[\[file\]\] #1 \(/b\) \(bytes 0 to 4096 of sdb\) overlaps \[devices\.sdb\] partition "
     r"table \(bytes 0 to 512 of sdb\)"),
    # a file on a physical volume and a logical volume on it
    (config(devices={"sdb": SVC},
            volumes={"vg/lv": {"type": "linear", "devices": ["/dev/sdb"], "size": "100m"}},
            file=[{"path": "/a", "device": "/dev/vg/lv", "size": "1m"},
                  {"path": "/raw", "device": "/dev/sdb", "size": "1m", "offset": "900m"}]),
     r"\[\[file\]\] #2 \(/raw\) \(bytes 943718400 to 944766976 of sdb\) overlaps "
     r"\[volumes\.'vg/lv'\] physical volume sdb \(bytes 0 to 1073741824 of sdb\)"),
    # ext3 on the disk and on its partition
    (config(devices={"sdb": PARTED},
            filesystems={"/dev/sdb": {"type": "ext3"}, "/dev/sdb1": {"type": "ext3"}}),
     r"\[filesystems\.'/dev/sdb'\] \(bytes 0 to 1073741824 of sdb\) overlaps "
     r"\[devices\.sdb\] partition table"),
    # a file system on a physical volume
    (config(devices={"sdb": SVC},
            volumes={"v": {"type": "striped", "devices": ["sda", "sdb"]}},
            filesystems={"/dev/sdb": {"type": "none"}}),
     r"\[filesystems\.'/dev/sdb'\] \(bytes 0 to 1073741824 of sdb\) overlaps "
     r"\[volumes\.v\] physical volume sdb"),
    # two targets of hand-written tables on the same sectors
    (config(devices={"sdb": SVC},
            volumes={"a": {"table": "0 2048 linear sdb 0"},
                     "b": {"table": "0 2048 linear sdb 1024"}}),
     r"\[volumes\.b\] table line 1 \(linear\) \(bytes 524288 to 1572864 of sdb\) overlaps "
     r"\[volumes\.a\] table line 1 \(linear\) \(bytes 0 to 1048576 of sdb\)"),
    # a striped table that names one device twice over the same sectors
    (config(devices={"sdb": SVC},
            volumes={"a": {"table": "0 4096 striped 2 128 sdb 0 sdb 1024"}}),
     r"\[volumes\.a\] table line 1 \(striped, stripe 2\) .* overlaps \[volumes\.a\] table "
     r"line 1 \(striped, stripe 1\)"),
    # a hand-written table over a partition of its disk
    (config(devices={"sdb": PARTED}, volumes={"a": {"table": "0 8192 linear sdb 4096"}}),
     r"\[volumes\.a\] table line 1 \(linear\) \(bytes 2097152 to 6291456 of sdb\) overlaps "
     r"\[devices\.sdb\] partition #1 \(sdb1\)"),
    # two files on a volume, named as the configuration names the volume
    (config(devices={"sdb": SVC}, volumes={"vg/lv": {"type": "linear", "devices": ["sdb"]}},
            file=[{"path": "/a", "device": "/dev/vg/lv", "size": "1m"},
                  {"path": "/b", "device": "/dev/mapper/vg-lv", "size": "1m",
                   "offset": "512k"}]),
     r"\[\[file\]\] #2 \(/b\) \(bytes 524288 to 1572864 of vg/lv \(dm-0\)\) overlaps "
     r"\[\[file\]\] #1 \(/a\) \(bytes 0 to 1048576 of vg/lv \(dm-0\)\)"),
    # two volumes on one physical volume (LVM keeps one volume group a device)
    (config(devices={"sdb": SVC}, volumes={"a": {"type": "linear", "devices": ["sdb"]},
                                           "b": {"type": "linear", "devices": ["sdb"]}}),
     r"\[volumes\.b\] physical volume sdb .* overlaps \[volumes\.a\] physical volume sdb"),
    # the journal and a file of the same device (the check that was per device before)
    (config(filesystems={"/dev/sda": {"type": "ext3", "journal_offset": "1g",
                                      "journal_size": "32m"}},
            file=[{"path": "/a", "device": "/dev/sda", "size": "2g"}]),
     None),
])
def test_overlaps_across_the_stack_are_one_line_naming_both(raw, message):
    if message is None:                  # sda is the 73 GB default drive here
        raw["device"] = {}
        message = (r"\[\[file\]\] #1 \(/a\) \(bytes 0 to 2147483648 of sda\) overlaps "
                   r"\[filesystems\.'/dev/sda'\] journal \(bytes 1073741824 to 1107296256 "
                   r"of sda\)")
    with pytest.raises(ConfigError, match=message) as err:
        resolve(raw, "x.toml")
    assert "\n" not in str(err.value)


def test_an_oltp_log_on_the_disk_under_its_data_partition_is_refused():
    """The audit's case: the redo log on /dev/sdb written over the partition table and
    the data files on /dev/sdb1."""
    raw = config(devices={"sdb": {**SVC, "partition": [{}]}},
                 app=[{"type": "oltp", "data_device": "/dev/sdb1", "log_device": "/dev/sdb",
                       "data_size": "64m", "log_file_size": "8m", "duration": "1s"}])
    with pytest.raises(ConfigError, match=r"x\.toml: \[\[app\]\] #1 \(oltp\) file "
                                          r"/db/oltp/redo01\.log \(bytes 0 to 8388608 of "
                                          r"sdb\) overlaps \[devices\.sdb\] partition table"):
        resolve(raw, "x.toml")


@pytest.mark.parametrize("raw", [
    # a file on the whole disk beyond its last partition
    config(devices={"sdb": {**SVC, "partition": [{"size": "500m"}]}},
           file=[{"path": "/a", "device": "/dev/sdb1", "size": "64m"},
                 {"path": "/b", "device": "/dev/sdb", "size": "64m", "offset": "600m"}]),
    # a file on a partition, a volume on the other, a file on the volume
    config(devices={"sdb": PARTED, "sdc": SVC},
           volumes={"vg/lv": {"type": "striped", "devices": ["sdb2", "sdc"]}},
           filesystems={"/dev/sdb1": {"type": "ext3"}, "/dev/vg/lv": {"type": "ext3"}},
           file=[{"path": "/a", "device": "/dev/sdb1", "size": "64m"},
                 {"path": "/b", "device": "/dev/vg/lv", "size": "64m"}]),
    # hand-written tables on disjoint sectors of one disk, as dmsetup allows
    config(devices={"sdb": SVC}, volumes={"a": {"table": "0 2048 linear sdb 0"},
                                          "b": {"table": "0 2048 linear sdb 2048"}}),
    # a hand-written table beyond the last partition of a partitioned disk
    config(devices={"sdb": {**SVC, "partition": [{"size": "500m"}]}},
           volumes={"a": {"table": "0 2048 linear /dev/sdb 1048576"}}),
])
def test_layouts_one_above_the_other_by_design_are_accepted(raw):
    resolve(raw, "x.toml")


# ---------------------------------------------------------------------- the sweep itself

USES = st.lists(st.builds(
    lambda kind, device, start, sectors: Use(f"{kind} on {device}", kind, device, start,
                                             sectors),
    st.sampled_from(["file", "journal", "filesystem", "partition", "volume", "label"]),
    st.sampled_from(["sda", "sdb"]), st.integers(0, 60), st.integers(0, 20)), max_size=8)


@given(uses=USES)
def test_the_check_refuses_exactly_the_layouts_with_a_pair_sharing_a_sector(uses):
    """Against every pair compared by brute force: an error iff two uses of one device
    share a sector and neither holds the other."""
    clash = [(a, b) for i, a in enumerate(uses) for b in uses[i + 1:]
             if a.device == b.device and a.start < b.end and b.start < a.end
             and a.sectors and b.sectors and not by_design(a, b)]
    if not clash:
        check(uses, "x.toml")
        return
    with pytest.raises(ConfigError) as err:
        check(uses, "x.toml")
    message = str(err.value)
    assert message.startswith("x.toml: ") and "\n" not in message
    # the two named are such a pair, the later of the two first
    assert any(message == f"x.toml: {b.text()} overlaps {a.text()}" for a, b in clash)
