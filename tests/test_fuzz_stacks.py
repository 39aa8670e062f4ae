"""Random storage stacks through ``blksim run`` (issue 29): disks, partitions, LVM and
hand-written volumes, files, file systems, applications' file sets and jobs, drawn from
sensible values, values at the edges and names that do not exist. Each run ends within a
time bound, with exit status 0 and sane figures, or one line naming the configuration
file and what is wrong (exit status 2), and leaves nothing behind. The long form (more
examples) is marked slow."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from tests.test_fuzz_commands import EDGE, FAST, LONG, numbers, run_cli_config

DISKS = ["sda", "sdb", "sdc"]
GOOD_SIZE = st.sampled_from(["4k", "1m", "8m", "32m", "64m", "100m", 4096])
BAD_SIZE = st.one_of(st.sampled_from(["200m", "1g", 0, 512, 1000, "63k"]), EDGE)
GOOD_OFFSET = st.sampled_from([0, "0", "4k", "1m", "100m"])
PART_SIZE = st.sampled_from(["1m", "8m", "32m"])
PART_START = st.sampled_from(["1m", "40m"])
BAD_OFFSET = st.one_of(st.sampled_from(["31k", "250m"]), EDGE)


def pick(draw, good, bad):
    """Mostly a good value; about one time in sixteen a bad one (at an edge, or too big)
    (a middle value: hypothesis favours the ends of a range)."""
    return draw(bad) if draw(st.integers(0, 15)) == 5 else draw(good)


@st.composite
def stacks(draw):
    """A configuration of a random stack (mostly valid: bad values are the minority)."""
    ndisks = draw(st.integers(1, 3))
    disks = DISKS[:ndisks]
    blocks = []
    cfg: dict = {"run": {"duration": "0.3s"}, "devices": {}}
    for name in disks:
        table = {"service": "fixed", "service_time": "1ms",
                 "capacity": draw(st.sampled_from(["256m", "256m", "64m", "1g"]))}
        nparts = draw(st.sampled_from([0, 0, 1, 2, 3]))
        if nparts:
            parts = []
            for k in range(nparts):
                p = {}
                if k < nparts - 1 or draw(st.booleans()):
                    p["size"] = pick(draw, PART_SIZE, BAD_SIZE)
                if draw(st.integers(0, 4)) == 0:
                    p["start"] = pick(draw, PART_START, BAD_OFFSET)
                parts.append(p)
            table["partition"] = parts
            blocks += [f"{name}{k + 1}" for k in range(nparts)]
        blocks.append(name)
        cfg["devices"][name] = table
    names = [f"/dev/{b}" for b in blocks]
    device = st.sampled_from(names * 8 + ["/dev/sdz"])
    volume = draw(st.sampled_from([None, "linear", "striped", "table"]))
    if volume in ("linear", "striped"):
        members = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        if draw(st.integers(0, 15)) == 5:
            members.append(draw(st.sampled_from(["/dev/sdz", members[0]])))
        v = {"type": volume, "devices": members}
        keys = ["stripe_size", "size"] if volume == "striped" else ["size"]
        if draw(st.integers(0, 15)) == 5:
            keys = ["stripe_size", "size", "extent_size", "pe_start"]
        for key in draw(st.lists(st.sampled_from(keys), max_size=2, unique=True)):
            v[key] = pick(draw, st.sampled_from(["4k", "64k", "1m", "8m"]), BAD_SIZE)
        cfg["volumes"] = {"vg/lv": v}
    elif volume == "table":
        lines, start = [], 0
        for _ in range(draw(st.integers(1, 3))):
            length = pick(draw, st.sampled_from([2048, 65536]), st.sampled_from([8, 0, 3]))
            at = pick(draw, st.sampled_from([0, 2048, 65536]), st.just(10 ** 12))
            if draw(st.booleans()):
                lines.append(f"{start} {length} linear {draw(device)} {at}")
            else:
                chunk = pick(draw, st.sampled_from([8, 128]), st.just(3))
                lines.append(f"{start} {length * 2} striped 2 {chunk} {draw(device)} {at} "
                             f"{draw(device)} {at}")
                length *= 2
            start += length
        cfg["volumes"] = {"vg/lv": {"table": "\n".join(lines)}}
    if volume:
        names.append("/dev/vg/lv")
        device = st.sampled_from(names * 8 + ["/dev/sdz"])
    files = []
    for i in range(draw(st.integers(0, 3))):
        f = {"path": f"/f{i}", "device": draw(device),
             "size": pick(draw, GOOD_SIZE, BAD_SIZE)}
        if draw(st.integers(0, 3)) == 0:
            f["offset"] = pick(draw, GOOD_OFFSET, BAD_OFFSET)
        if draw(st.integers(0, 3)) == 0:
            f["fragments"] = pick(draw, st.sampled_from([2, 3]), st.sampled_from([0, 10 ** 9]))
        files.append(f)
    if files:
        cfg["file"] = files
    fs = {}
    for _ in range(draw(st.integers(0, 2))):
        t = {"type": pick(draw, st.sampled_from(["ext3", "none"]), st.just("xfs"))}
        if draw(st.booleans()):
            t["journal_size"] = pick(draw, st.sampled_from(["4m", "8m"]), BAD_SIZE)
        fs[draw(device)] = t
    if fs:
        cfg["filesystems"] = fs
    if draw(st.booleans()):
        cfg["host"] = {"page_cache": pick(draw, GOOD_SIZE, BAD_SIZE)}
    app = draw(st.sampled_from([None, None, "fileserver", "oltp"]))
    if app == "fileserver":               # its file set laid out after the device's files
        cfg["app"] = [{"type": "fileserver", "device": draw(device), "files": 20,
                       "file_sizes": [["16k", 50], ["64k", 50]], "step_time": "0.3s"}]
    elif app == "oltp":                   # data and redo logs, maybe on different devices
        cfg["app"] = [{"type": "oltp", "data_device": draw(device),
                       "log_device": draw(device), "sessions": 2, "data_size": "16m",
                       "db_cache_size": "4m", "log_file_size": "1m", "log_groups": 2}]
    targets = names + [f["path"] for f in files]
    cfg["job"] = [{"name": f"j{k}", "rw": draw(st.sampled_from(["read", "randwrite", "write",
                                                                 "randread"])),
                   "bs": draw(st.sampled_from(["4k", "64k"])), "number_ios": 20,
                   "filename": draw(st.sampled_from(targets)),
                   **({"direct": 1} if draw(st.booleans()) else {})}
                  for k in range(draw(st.integers(1, 2)))]
    return cfg


def _run_stack(tmp_path, capsys, cfg):
    ran = run_cli_config(tmp_path, capsys, cfg, name="stack.toml")
    if ran is None:
        return
    code, results, stdout, err, path = ran
    if code == 2:
        assert err.startswith(f"blksim: error: {path}: ") or \
            err.startswith(f"blksim: error: {path} "), err
        return
    for where, value in numbers(results):
        assert math.isfinite(value), where
    totals = results["totals"]["all"]
    assert totals["ios"] >= 0
    # a rate is null only for a run that completed nothing (docs/results.md)
    assert totals["mb_per_s"] >= 0 if totals["ios"] else totals["mb_per_s"] is None
    for name, row in results["iostat"].items():
        for key, value in row.items():
            assert value is None or value >= 0, (name, key, value)


@FAST
@given(cfg=stacks())
def test_random_stacks_run_or_name_what_is_wrong(tmp_path, capsys, cfg):
    _run_stack(tmp_path, capsys, cfg)


@pytest.mark.slow
@LONG
@given(cfg=stacks())
def test_random_stacks_run_or_name_what_is_wrong_long(tmp_path, capsys, cfg):
    _run_stack(tmp_path, capsys, cfg)
