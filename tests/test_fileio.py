"""Files on devices, the page cache, buffered reads with 2.6.18's read-ahead, direct I/O.

The bios a buffered reader issues follow the read-ahead windows (hand-traced in
tests/test_readahead.py); a random reader's window collapses; a second pass over a cached
file issues no reads; direct I/O of one call at a time is never merged; every call
completes once under every scheduler; bad files and hosts are one-line errors.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.schedulers import SCHEDULERS
from blksim.sim.config import ConfigError, resolve, resolved_dict
from blksim.sim.engine import Simulation
from blksim.sim.results import results_dict

DEVICE = {"service": "fixed", "service_time": "1ms", "capacity": "4g"}


def simulate(jobs, files=None, host=None, device=None, queue=None, run=None, fs=None):
    raw = {"run": {"seed": 1, **(run or {})}, "device": {**DEVICE, **(device or {})},
           "queue": {"scheduler": "deadline", **(queue or {})},
           "file": files or [{"path": "/data/f", "device": "/dev/sda", "size": "64m"}],
           "job": jobs}
    if fs:
        raw["filesystems"] = {"/dev/sda": fs}
    if host:
        raw["host"] = host
    cfg = resolve(raw, "files.toml")
    bios = []
    sim = Simulation(cfg, complete_hooks=(bios.append,))
    out = sim.run()
    depths = {n: q.device.queue_depth for n, q in sim.host.disks.items()}
    return sim, sorted(bios, key=lambda b: b.id), results_dict(out, resolved_dict(cfg, depths))


def test_a_cold_sequential_reader_issues_the_read_ahead_windows():
    sim, bios, f = simulate([{"name": "r", "rw": "read", "bs": "4k", "number_ios": 200,
                              "filename": "/data/f"}])
    sizes = [b.nr_sectors for b in bios]
    # 16 KiB, 32 KiB, 64 KiB, then 128 KiB windows (read_ahead_kb = 128)
    assert sizes[:6] == [32, 64, 128, 256, 256, 256]
    assert [b.sector for b in bios[:4]] == [0, 32, 96, 224]
    calls = f["processes"][0]["calls"]["read"]
    assert calls["calls"] == 200 and calls["bytes"] == 200 * 4096


def test_read_ahead_kb_bounds_the_window():
    _, bios, _ = simulate([{"name": "r", "rw": "read", "bs": "4k", "number_ios": 300,
                            "filename": "/data/f"}], queue={"read_ahead_kb": 32})
    assert max(b.nr_sectors for b in bios) == 64
    _, bios, _ = simulate([{"name": "r", "rw": "read", "bs": "4k", "number_ios": 50,
                            "filename": "/data/f"}], queue={"read_ahead_kb": 0})
    assert {b.nr_sectors for b in bios} == {8}           # no read-ahead: page by page


def test_a_random_reader_reads_only_its_own_pages():
    _, bios, _ = simulate([{"name": "r", "rw": "randread", "bs": "8k", "number_ios": 100,
                            "offset": "4k", "filename": "/data/f"}])
    assert len(bios) == 100 and {b.nr_sectors for b in bios} == {16}


def test_a_second_pass_over_a_cached_file_issues_no_reads():
    job = {"name": "r", "rw": "read", "bs": "4k", "number_ios": 2 * 2048,
           "filename": "/data/f"}
    files = [{"path": "/data/f", "device": "/dev/sda", "size": "8m"}]
    _, bios, f = simulate([job], files=files)
    assert sum(b.nr_sectors for b in bios) == 8 * 2048   # the 8 MiB once
    assert f["page_cache"]["hits"] >= 2048
    _, bios, _ = simulate([{**job, "direct": 1}], files=files)
    assert len(bios) == 2 * 2048                          # direct: every call reads


def test_direct_reads_of_one_call_at_a_time_never_merge_buffered_ones_do():
    _, bios, f = simulate([{"name": "r", "rw": "read", "bs": "4k", "number_ios": 500,
                            "direct": 1, "filename": "/data/f"}])
    assert f["block_layer"]["bio_merges"] == 0 and len(bios) == 500
    # with the device busy with another reader, a window read while the previous one is
    # still queued joins it
    files = [{"path": "/data/f", "device": "/dev/sda", "size": "64m"},
             {"path": "/data/g", "device": "/dev/sda", "size": "64m"}]
    _, _, f = simulate([{"name": "r", "rw": "read", "bs": "4k", "number_ios": 3000,
                         "filename": "/data/f"},
                        {"name": "o", "rw": "randread", "bs": "4k", "iodepth": 8,
                         "number_ios": 3000, "direct": 1, "filename": "/data/g"}],
                       files=files)
    assert f["block_layer"]["bio_merges"] > 0


def test_a_file_maps_through_its_extents():
    files = [{"path": "/data/f", "device": "/dev/sda",
              "extents": [["1m", "64k"], ["10m", "64k"]]}]
    _, bios, _ = simulate([{"name": "w", "rw": "write", "bs": "128k", "number_ios": 1,
                            "direct": 1, "filename": "/data/f"}], files=files)
    assert [(b.sector, b.nr_sectors) for b in bios] == [(2048, 128), (20480, 128)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(st.fixed_dictionaries({
           "rw": st.sampled_from(["read", "randread", "randwrite"]),
           "bs": st.sampled_from(["4k", "12k", "64k"]),
           "iodepth": st.integers(1, 4),
           "number_ios": st.integers(1, 80),
           "direct": st.booleans(),
           "fsync": st.sampled_from([0, 0, 3]),
           "end_fsync": st.sampled_from([0, 1])}), min_size=1, max_size=4),
       scheduler=st.sampled_from(sorted(SCHEDULERS)),
       cache=st.sampled_from(["64k", "1m", "64m"]),
       nr_requests=st.sampled_from([4, 128]),
       ext3=st.booleans(),
       seed=st.integers(0, 2**32))
def test_every_call_completes_once(jobs, scheduler, cache, nr_requests, ext3, seed):
    tables = []
    for i, j in enumerate(jobs):
        tables.append({"name": f"j{i}", **j, "filename": "/data/f",
                       "direct": int(j["direct"])})
    sim, bios, f = simulate(tables, host={"memory": "1g", "page_cache": cache},
                            queue={"scheduler": scheduler, "nr_requests": nr_requests},
                            run={"seed": seed},
                            fs={"type": "ext3", "journal_size": "8m"} if ext3 else None)
    for job, t in zip(jobs, tables):
        p = next(p for p in f["processes"] if p["name"] == t["name"])
        c = p["calls"]
        assert c["read"]["calls"] + c["write"]["calls"] == job["number_ios"]
    assert len({b.id for b in bios}) == len(bios)
    for b in bios:
        assert 0.0 <= b.t_queue <= b.t_dispatch <= b.t_complete
    assert sim.host.disks["sda"].idle()
    assert len(sim.host.page_cache) <= sim.host.page_cache.capacity     # nothing being read
    wb = f["writeback"]                          # nothing lost: every dirty page written
    assert wb["pages_written"] == wb["pages_dirtied"] and wb["dirty_pages_at_end"] == 0


@pytest.mark.parametrize("raw, message", [
    ({"file": [{"path": "/a", "device": "/dev/sda", "size": "8g"}]},
     r"\[\[file\]\] #1 \(/a\): bytes 0 to 8589934592 lie beyond the end of sda"),
    ({"file": [{"path": "/a", "device": "/dev/sda", "size": "1g"},
               {"path": "/b", "device": "/dev/sda", "size": "1g", "offset": "512m"}]},
     r"\[\[file\]\] #2 \(/b\) \(bytes 536870912 to 1610612736 of sda\) overlaps "
     r"\[\[file\]\] #1 \(/a\) \(bytes 0 to 1073741824 of sda\)"),
    ({"host": {"memory": "1g", "page_cache": "2g"}},
     r"\[host\]: page_cache = '2g' is more than memory"),
    ({"host": {"page_cache": 0}},
     r"\[host\]: page_cache expected a positive multiple of 4 KiB \(a page\), found 0$"),
    ({"host": {"page_cache": "5000"}},
     r"\[host\]: page_cache expected a positive multiple of 4 KiB \(a page\), found '5000'"),
    ({"host": {"memory": 1048577}},
     r"\[host\]: memory expected a multiple of 4 KiB \(a page\), at least 1m, found 1048577"),
    ({"file": [{"path": "/a", "device": "/dev/sdz", "size": "1m"}]},
     r"device '/dev/sdz' is not a disk, partition or volume of this run"),
    ({"file": [{"path": "/a", "device": "/dev/sda", "size": "1000"}]},
     r"size expected a positive multiple of 4 KiB"),
    ({"vm": {"dirty_ratio": 5, "dirty_background_ratio": 10}},
     r"\[vm\]: dirty_ratio = 5 is below dirty_background_ratio = 10"),
    ({"vm": {"dirty_writeback": 5}}, r"\[vm\]: unknown key 'dirty_writeback'"),
    ({"job": [{"name": "d", "direct": 0}]},
     r"job 'd': direct = 0 on a device: buffered I/O through a block device's own page "
     r"cache is not modelled"),
])
def test_file_errors_name_the_key(raw, message):
    raw = {"device": DEVICE, "job": [{"name": "j"}], **raw}
    with pytest.raises(ConfigError, match=message):
        resolve(raw, "x.toml")



# ---------------------------------------------------------------------- writeback

def test_dirty_limits_follow_2_6_18():
    from blksim.hostio.writeback import dirty_limits, ratelimit_pages
    # dirty_ratio at most half the unmapped share (75 % -> 37), background as given
    assert dirty_limits(1000, 750, 40, 10) == (100, 370)
    assert dirty_limits(1000, 1000, 40, 10) == (100, 400)
    # at least 5 %, and the background ratio at most half of it
    assert dirty_limits(1000, 1000, 3, 10) == (20, 50)
    assert [ratelimit_pages(n) for n in (100, 65536, 1 << 20)] == [16, 1024, 1024]


def test_a_writer_below_the_background_limit_waits_for_the_expiry():
    sim, bios, f = simulate([{"name": "w", "rw": "write", "bs": "4k", "number_ios": 256,
                              "filename": "/data/f"}], host={"memory": "1g"})
    writes = [b for b in bios if b.write]
    assert writes and sum(b.nr_sectors for b in writes) == 256 * 8
    # pdflush's wb_kupdate runs every 5 s and writes what has been dirty 30 s
    assert min(b.t_queue for b in writes) == pytest.approx(30.0, abs=1e-6)
    assert {b.pid for b in writes} == {200}
    p = next(p for p in f["processes"] if p["name"] == "w")
    assert p["calls"]["write"]["calls"] == 256
    # each call only copied its page (4 KiB at 2 GB/s): never throttled
    assert p["calls"]["write"]["lat"]["max_ms"] == pytest.approx(0.002048, abs=1e-6)
    assert p["calls"]["throttled_s"] == 0.0


def test_a_writer_over_dirty_ratio_is_throttled_and_nothing_is_lost():
    sim, bios, f = simulate([{"name": "w", "rw": "write", "bs": "64k", "number_ios": 2000,
                              "filename": "/data/f"}],
                            files=[{"path": "/data/f", "device": "/dev/sda", "size": "1g"}],
                            host={"memory": "64m", "page_cache": "48m"})
    wb = f["writeback"]
    p = next(p for p in f["processes"] if p["name"] == "w")
    assert p["calls"]["throttled_s"] > 0.1
    assert wb["pages_written"] == wb["pages_dirtied"] == 2000 * 16
    # the writer wrote some of it itself, in its own context, as balance_dirty_pages does
    assert any(b.pid == 1000 for b in bios) and any(b.pid == 200 for b in bios)
    assert max(b.nr_sectors for b in bios) == 1024        # max_sectors_kb = 512


def test_a_partial_page_write_reads_the_page_first():
    _, bios, _ = simulate([{"name": "w", "rw": "write", "bs": "2k", "blockalign": "2k",
                            "number_ios": 1, "offset": "2k", "filename": "/data/f"}])
    assert [(b.write, b.sector, b.nr_sectors) for b in bios][0] == (False, 0, 8)



def test_fsync_returns_only_after_every_page_it_covered_is_on_the_device():
    raw = {"run": {"seed": 1}, "device": DEVICE, "queue": {"scheduler": "cfq"},
           "file": [{"path": "/data/f", "device": "/dev/sda", "size": "64m"}],
           "job": [{"name": "w", "rw": "write", "bs": "4k", "fsync": 16, "end_fsync": 1,
                    "number_ios": 40, "filename": "/data/f"}]}
    cfg = resolve(raw, "fsync.toml")
    bios, calls = [], []
    sim = Simulation(cfg, complete_hooks=(bios.append,))
    record = sim.metrics.record_call
    sim.metrics.record_call = lambda call: (calls.append(call), record(call))
    out = sim.run()
    fsyncs = [c for c in calls if c.nr_sectors == 0]
    assert len(fsyncs) == 3                  # after writes 16 and 32, and at the end
    for k, fs in enumerate(fsyncs):
        pages = min(16 * (k + 1), 40)
        covering = [b for b in bios if b.write and b.sector < pages * 8]
        assert sum(b.nr_sectors for b in covering) >= pages * 8
        for b in covering:
            assert b.t_queue <= b.t_dispatch <= b.t_complete <= fs.t_complete
    f = results_dict(out, resolved_dict(cfg, 1))
    p = next(p for p in f["processes"] if p["name"] == "w")
    assert p["calls"]["fsync"]["calls"] == 3 and p["calls"]["write"]["calls"] == 40


def test_iostat_interval_also_writes_dirty_and_writeback_over_time(tmp_path):
    import csv
    import json

    from blksim.cli import main
    cfg = tmp_path / "w.toml"
    cfg.write_text('[host]\nmemory = "64m"\npage_cache = "48m"\n'
                   '[[file]]\npath = "/f"\ndevice = "/dev/sda"\nsize = "256m"\n'
                   '[[job]]\nname = "w"\nrw = "write"\nbs = "64k"\nnumber_ios = 1000\n'
                   'filename = "/f"\n')
    out = tmp_path / "out"
    assert main(["run", str(cfg), "-q", "--out", str(out), "--iostat", "1s"]) == 0
    rows = list(csv.DictReader(open(out / "vmstat.csv")))
    results = json.loads((out / "results.json").read_text())
    wb = results["writeback"]
    mb = 4096 / (1 << 20)
    dirtied = sum(float(r["dirtied_mb_per_s"]) * float(r["interval_s"]) for r in rows)
    written = sum(float(r["written_mb_per_s"]) * float(r["interval_s"]) for r in rows)
    assert dirtied == pytest.approx(wb["pages_dirtied"] * mb, rel=1e-6)
    assert written == pytest.approx(wb["pages_written"] * mb, rel=1e-6)
    assert max(float(r["dirty_mb"]) + float(r["writeback_mb"]) for r in rows) > 0
    assert float(rows[-1]["dirty_mb"]) == 0.0
    # a run without files writes no vmstat.csv, and removes an old one
    cfg.write_text('[[job]]\nname = "r"\nnumber_ios = 10\n')
    assert main(["run", str(cfg), "-q", "--out", str(out), "--iostat", "1s"]) == 0
    assert not (out / "vmstat.csv").exists()


# ---------------------------------------------------------------------- ext3's journal

EXT3 = {"/dev/sda": {"type": "ext3", "journal_size": "32m"}}


def run_ext3(jobs, files=None):
    raw = {"run": {"seed": 1}, "device": DEVICE, "queue": {"scheduler": "deadline"},
           "filesystems": EXT3,
           "file": files or [{"path": "/data/f", "device": "/dev/sda", "size": "64m"},
                             {"path": "/data/g", "device": "/dev/sda", "size": "64m"}],
           "job": jobs}
    cfg = resolve(raw, "ext3.toml")
    bios, calls = [], []
    sim = Simulation(cfg, complete_hooks=(bios.append,))
    record = sim.metrics.record_call
    sim.metrics.record_call = lambda call: (calls.append(call), record(call))
    out = sim.run()
    return cfg, bios, calls, results_dict(out, resolved_dict(cfg, 1))


def test_an_ext3_fsync_writes_data_then_journal_then_commit_block():
    cfg, bios, calls, f = run_ext3([
        {"name": "other", "rw": "write", "bs": "4k", "number_ios": 50, "filename": "/data/g"},
        {"name": "w", "rw": "write", "bs": "4k", "fsync": 10, "number_ios": 10,
         "startdelay": "1ms", "filename": "/data/f"}])
    journal = 32 * 2048                                   # the journal's sectors, from 0
    fsync = next(c for c in calls if c.nr_sectors == 0)
    jbios = sorted((b for b in bios if b.write and b.sector < journal), key=lambda b: b.id)
    data = [b for b in bios if b.write and b.sector >= journal and b.t_complete <= fsync.t_complete]
    # the descriptor and the two inodes' blocks, then the commit block
    assert [b.nr_sectors for b in jbios[:2]] == [3 * 8, 8]
    assert jbios[0].pid == jbios[1].pid == 201
    # ordered mode: every data page of the transaction (both files) before the journal
    assert sum(b.nr_sectors for b in data) == (50 + 10) * 8
    assert max(b.t_complete for b in data) <= jbios[0].t_queue
    assert jbios[0].t_complete <= jbios[1].t_queue <= jbios[1].t_complete <= fsync.t_complete
    assert f["journals"]["sda"]["commits"] >= 1


def test_ext3_commits_every_commit_interval_without_fsync():
    cfg, bios, calls, f = run_ext3([{"name": "w", "rw": "write", "bs": "4k", "number_ios": 100,
                                     "filename": "/data/f"}])
    writes = [b for b in bios if b.write]
    # the transaction began with the first write at 0; kjournald commits it at 5 s, not
    # at pdflush's 30 s expiry
    assert min(b.t_queue for b in writes) == pytest.approx(5.0, abs=1e-6)
    assert sum(b.nr_sectors for b in writes if b.sector >= 32 * 2048) == 100 * 8
    assert f["journals"]["sda"]["journal_blocks"] == 3     # descriptor, inode, commit


@pytest.mark.parametrize("fs, files, message", [
    ({"/dev/sda": {"type": "jfs"}}, [], r"type expected one of [a-z0-9, ]+ or none, found 'jfs'"),
    ({"/dev/sda": {"type": "ext3", "journal_offset": "4g"}}, [],
     r"the journal's bytes .* lie beyond the end of sda"),
    ({"/dev/sda": {"type": "ext3", "journal_offset": "1g", "journal_size": "32m"}},
     [{"path": "/a", "device": "/dev/sda", "size": "2g"}],
     r"\[\[file\]\] #1 \(/a\) \(bytes 0 to 2147483648 of sda\) overlaps "
     r"\[filesystems.'/dev/sda'\] journal"),
    ({"/dev/sdz": {"type": "ext3"}}, [], r"'/dev/sdz' is not a disk, partition or volume"),
])
def test_filesystem_errors_name_the_key(fs, files, message):
    raw = {"device": DEVICE, "filesystems": fs, "file": files, "job": [{"name": "j"}]}
    with pytest.raises(ConfigError, match=message):
        resolve(raw, "x.toml")


def test_o_sync_buffered_writes_return_with_their_pages_on_the_device():
    cfg, bios, calls, f = run_ext3([{"name": "w", "rw": "write", "bs": "8k", "sync": 1,
                                     "number_ios": 20, "filename": "/data/f"}])
    writes = sorted((c for c in calls if c.write and c.nr_sectors), key=lambda c: c.id)
    assert len(writes) == 20
    data = [b for b in bios if b.write and b.sector >= 32 * 2048]
    for k, call in enumerate(writes):
        # the call's own two pages are on the device when it returns, and a commit too
        mine = [b for b in data if 32 * 2048 + 16 * k <= b.sector < 32 * 2048 + 16 * (k + 1)]
        assert mine and max(b.t_complete for b in mine) <= call.t_complete
    assert f["journals"]["sda"]["commits"] == 20


def test_a_synchronous_engine_keeps_one_io_in_flight_and_says_so():
    raw = {"device": DEVICE, "file": [{"path": "/f", "device": "/dev/sda", "size": "64m"}],
           "job": [{"name": "p", "rw": "randread", "iodepth": 8, "ioengine": "psync",
                    "direct": 1, "filename": "/f"},
                   {"name": "a", "rw": "randread", "iodepth": 8, "ioengine": "libaio",
                    "direct": 1, "filename": "/f"},
                   {"name": "b", "rw": "randread", "iodepth": 8, "ioengine": "libaio",
                    "filename": "/f"}]}
    cfg = resolve(raw, "e.toml")
    assert [j.iodepth for j in cfg.jobs] == [1, 8, 1]
    assert len(cfg.warnings) == 2 and "ioengine psync is synchronous" in cfg.warnings[0]
    assert "libaio on a buffered file is synchronous" in cfg.warnings[1]


def test_invalidate_drops_the_files_cached_pages_when_a_job_starts():
    files = [{"path": "/data/f", "device": "/dev/sda", "size": "1m"}]
    first = {"name": "a", "rw": "read", "bs": "4k", "number_ios": 256, "filename": "/data/f"}
    later = {**first, "name": "b", "startdelay": "1s"}
    _, bios, _ = simulate([first, later], files=files)
    assert sum(b.nr_sectors for b in bios) == 2 * 2048      # read again after invalidate
    _, bios, _ = simulate([first, {**later, "invalidate": 0}], files=files)
    assert sum(b.nr_sectors for b in bios) == 2048           # the second job hits the cache


def test_compare_shows_each_schedulers_calls_to_files(tmp_path, capsys):
    from blksim.cli import main
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[file]]\npath = "/f"\ndevice = "/dev/sda"\nsize = "64m"\n'
                   '[[job]]\nname = "w"\nrw = "write"\nfsync = 2\nnumber_ios = 20\n'
                   'filename = "/f"\n')
    assert main(["compare", str(cfg), "-q", "--schedulers", "noop,cfq"]) == 0
    out = capsys.readouterr().out
    assert "calls to files" in out
    rows = [line.split() for line in out.splitlines() if "w fsync /s" in line]
    assert len(rows) == 1 and len(rows[0]) == 6 and float(rows[0][-1]) > 0
