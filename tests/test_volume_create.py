"""The loader's creation phase (``create``): zeros, fallocate and none on a small volume,
by hand: the bytes each writes to the device and who writes them; creation by two
threads a volume placed as the allocator places two writers; the phases adding up;
bad input."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.api import simulate
from blksim.hostio.fs import build
from blksim.sim.config import ConfigError, resolve

MIB = 1 << 20


def config(how, fs=True, **keys):
    app = {"type": "loader", "tables": [["4m", 2]], "loaders": 2,
           "export_device": "/dev/sda", "data_device": "/dev/sdb", "log_device": "/dev/sdb",
           "data_cache": "16m", "log_size": "2m", "volume_size": "8m", "create": how,
           "create_threads": 2, "create_io_size": "256k", "index_ratio": 0,
           "stats_sample": 0}
    if "stats_rows" in keys and "stats_sample" not in keys:
        del app["stats_sample"]
    app.update(keys)
    raw = {"host": {"memory": "512m"}, "device": {"drive": "cheetah15k4"},
           "devices": {"sdb": {"drive": "cheetah15k4"}}, "app": [app]}
    if fs:
        raw["filesystems"] = {"/dev/sdb": {"type": "ext3", "mkfs": "-j -b 4096",
                                           "mount": "data=ordered"}}
    return resolve(raw, "t.toml")


class Writes:
    """Every completed write bio on sdb: (pid, device sector, sectors, completed at)."""

    def __init__(self):
        self.bios = []

    def __call__(self, bio):
        if bio.write and bio.dev == "sdb":
            self.bios.append((bio.pid, bio.sector, bio.nr_sectors, bio.t_complete))


def run(cfg):
    writes = Writes()
    res = simulate(cfg, per_request=False, complete_hooks=(writes,))
    return res.figures, writes.bios


def blocks_of(extents):
    """The 4 KiB blocks (in sectors / 8) that extents cover."""
    out = set()
    for start, n in extents:
        out.update(range(start // 8, (start + n) // 8))
    return out


def volumes(cfg):
    return {f.path: f for f in cfg.files if f.path.startswith("/db/")}


def created_blocks(bios, end):
    """Each 4 KiB block written before ``end``, with how many times."""
    count = {}
    for _pid, sector, n, t in bios:
        if t <= end:
            for b in range(sector // 8, (sector + n) // 8):
                count[b] = count.get(b, 0) + 1
    return count


def writers_of(f, bios, end):
    """The names of the processes whose write bios completed by ``end`` (kernel threads
    by pid)."""
    names = {p["pid"]: p["name"] for p in f["processes"]}
    return {names.get(pid, f"pid{pid}") for pid, _s, _n, t in bios if t <= end}


def test_none_writes_nothing_before_the_load_and_keeps_the_phases():
    f, _ = run(config("none"))
    loader = f["apps"]["loader"]
    assert [p["name"] for p in loader["phases"]] == ["load"]
    assert "create" not in loader and "create_written_mb" not in loader


@pytest.mark.parametrize("direct", [1, 0])
def test_zeros_writes_every_block_of_every_volume_once_by_its_threads(direct):
    # direct = 0: buffered, each thread fsyncs its part, so the phase still ends with
    # every block on the device
    cfg = config("zeros", direct=direct)
    f, bios = run(cfg)
    loader = f["apps"]["loader"]
    create = loader["phases"][0]
    assert create["name"] == "create" and create["finished"]
    vols = volumes(cfg)
    want = set()
    for v in vols.values():
        want |= blocks_of(v.extents)
    counts = created_blocks(bios, create["end_s"])
    # the volumes' blocks, each once; nothing else of the data device but the journal's
    # metadata (the direct writes' mtime)
    assert {b for b in counts if b in want} == want
    assert all(counts[b] == 1 for b in want)
    journal = blocks_of(cfg.filesystems["sdb"].layer.journal_extents())
    assert set(counts) - want <= journal
    # by the creation's own threads: two a volume, each its half
    by = {p["name"]: p["calls"]["write"]["bytes"] for p in f["processes"]
          if p["name"].startswith("loader.create")}
    assert by == {"loader.create.data01.0": 4 * MIB, "loader.create.data01.1": 4 * MIB,
                  "loader.create.log.0": MIB, "loader.create.log.1": MIB}
    # the direct writes are the creators' own (buffered, writeback's in their fsyncs or
    # pdflush's); the journal's are kjournald's; none are the loaders'
    who = writers_of(f, bios, create["end_s"])
    assert not {w for w in who if w.startswith("loader.")} - set(by)
    if direct:
        assert set(by) <= who
    assert loader["create_written_mb"] == pytest.approx(10 * MIB / 1e6)


def test_fallocate_on_ext3_is_glibcs_emulation_writing_every_block_once():
    # ext3 has no fallocate (and 2.6.18 no sys_fallocate): glibc writes a byte in every
    # block, the page cache makes each a whole page, the fsync writes them all
    cfg = config("fallocate")
    assert cfg.apps[0].native_fallocate == (False, False)
    f, bios = run(cfg)
    loader = f["apps"]["loader"]
    assert loader["create"] == "glibc emulation"
    create = loader["phases"][0]
    want = set()
    for v in volumes(cfg).values():
        want |= blocks_of(v.extents)
    counts = created_blocks(bios, create["end_s"])
    assert want <= set(counts) and all(counts[b] == 1 for b in want)
    # one buffered writer a volume, whose calls carried the whole volume
    by = {p["name"]: p["calls"]["write"]["bytes"] for p in f["processes"]
          if p["name"].startswith("loader.create")}
    assert by == {"loader.create.data01": 8 * MIB, "loader.create.log": 2 * MIB}
    # on the device: writeback's and the fsyncs' writes, none by the loaders
    who = writers_of(f, bios, create["end_s"])
    assert not {w for w in who if w.startswith("loader.")} - set(by)


def test_native_fallocate_writes_metadata_only(monkeypatch):
    # a filesystem whose class says fallocate = True on a kernel with the call: no data
    # block of the volumes is written, only the journal
    from blksim.hostio.fs.ext3 import Ext3
    monkeypatch.setattr(Ext3, "fallocate", True, raising=False)
    raw_cfg = config("fallocate")
    assert raw_cfg.apps[0].native_fallocate == (False, False)   # 2.6.18: no fallocate(2)
    app = {"type": "loader", "tables": [["4m", 2]], "loaders": 2,
           "export_device": "/dev/sda", "data_device": "/dev/sdb", "log_device": "/dev/sdb",
           "data_cache": "16m", "log_size": "2m", "volume_size": "8m",
           "create": "fallocate", "index_ratio": 0, "stats_sample": 0}
    cfg = resolve({"run": {"kernel": "2.6.32"}, "host": {"memory": "512m"},
                   "device": {"drive": "cheetah15k4"},
                   "devices": {"sdb": {"drive": "cheetah15k4"}},
                   "filesystems": {"/dev/sdb": {"type": "ext3", "mkfs": "-j",
                                                "mount": "data=ordered"}},
                   "app": [app]}, "t.toml")
    assert cfg.apps[0].native_fallocate == (True, True)
    f, bios = run(cfg)
    create = f["apps"]["loader"]["phases"][0]
    want = set()
    for v in volumes(cfg).values():
        want |= blocks_of(v.extents)
    counts = created_blocks(bios, create["end_s"])
    assert not (set(counts) & want)
    journal = blocks_of(cfg.filesystems["sdb"].layer.journal_extents())
    assert counts and set(counts) <= journal
    assert f["apps"]["loader"]["create_written_mb"] == 0


def test_two_threads_a_volume_are_placed_as_the_allocator_places_two_writers():
    cfg = config("zeros", create_threads=2, create_io_size="64k")
    vols = volumes(cfg)
    for v in vols.values():
        assert v.written == {"writers": 2, "write_size": 65536}
    # the same files, written the same way, on a fresh ext3 of the same device
    fs = build("ext3", cfg.filesystems["sdb"].layer.geometry.blocks * 8, "-j -b 4096",
               "data=ordered", f"{cfg.seed}/sdb")
    for path in ("/db/loader/data01", "/db/loader/log"):
        assert vols[path].extents == fs.place_file(path, vols[path].sectors * 512, 2, 65536)
    # interleaved writers fragment ext3's placement: more extents than one writer's
    one = config("zeros", create_threads=1, create_io_size="64k")
    assert len(volumes(cfg)["/db/loader/data01"].extents) > \
        len(volumes(one)["/db/loader/data01"].extents)


def test_the_phases_add_up_and_follow_one_another():
    f, _ = run(config("zeros", index_ratio=0.1, stats_rows=2000, stats_catalog=1,
                      volume_size="16m"))
    loader = f["apps"]["loader"]
    names = [p["name"] for p in loader["phases"]]
    assert names == ["create", "load", "index", "statistics"]
    assert loader["total_s"] == pytest.approx(sum(p["seconds"] for p in loader["phases"]),
                                              abs=1e-6)
    for a, b in zip(loader["phases"], loader["phases"][1:]):
        assert a["end_s"] == b["start_s"]
    assert loader["phases"][0]["start_s"] == 0
    # the statistics' catalog pages are written by the savepoint that ends the phase
    assert loader["pages_written"] == loader["pages_changed"]


def test_update_statistics_reads_the_rows_sample_and_commits_a_log_write_a_table():
    base = run(config("none", volume_size="16m"))[0]["apps"]["loader"]
    cfg = config("none", stats_rows=2000, stats_catalog=1, volume_size="16m")
    f = run(cfg)[0]["apps"]["loader"]
    assert cfg.apps[0].stats_fraction(0) == pytest.approx(2000 / (4 * MIB // 200))
    # a catalog page per table changed, and a 512-byte commit per table in the log
    assert f["pages_changed"] == base["pages_changed"] + 2
    assert f["log_mb"] == pytest.approx(base["log_mb"] + 2 * 512 / 1e6)


def test_update_statistics_commits_once_for_every_table_an_export_file_holds():
    base = run(config("none", volume_size="16m", tables_in_files=6))[0]["apps"]["loader"]
    cfg = config("none", stats_rows=1000, stats_catalog=1, volume_size="16m",
                 tables_in_files=6)
    assert cfg.apps[0].tables_per_file == (3, 3)
    # 1000 rows of each of a file's three tables
    assert cfg.apps[0].stats_fraction(0) == pytest.approx(3000 / (4 * MIB // 200))
    f = run(cfg)[0]["apps"]["loader"]
    assert f["pages_changed"] == base["pages_changed"] + 6
    assert f["log_mb"] == pytest.approx(base["log_mb"] + 6 * 512 / 1e6)
    assert f["pages_written"] == f["pages_changed"]


@pytest.mark.parametrize("keys, message", [
    ({"create": "zero"}, "create expected one of none, zeros, fallocate, found 'zero'"),
    ({"create_threads": 0}, "create_threads = 0 is out of range"),
    ({"create_io_size": "1000"}, "create_io_size expected a multiple of 4096"),
    ({"stats_catalog": 2}, "stats_catalog expected 1 or 0, found 2"),
    ({"stats_rows": 10, "stats_sample": 0.1}, "stats_rows: give stats_rows or stats_sample, not both"),
])
def test_bad_creation_keys_are_one_line_naming_the_key(keys, message):
    with pytest.raises(ConfigError) as err:
        config("zeros", **keys)
    text = str(err.value)
    assert message in text and "\n" not in text and text.startswith("t.toml: [[app]] #1")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4096), st.integers(1, 16))
def test_the_threads_parts_tile_the_volume_as_the_allocator_splits_it(blocks, threads):
    from blksim.apps.loader_create import parts
    nbytes = blocks * 4096
    got = parts(nbytes, threads)
    assert len(got) == threads
    # contiguous, in order, whole blocks, covering every byte once
    assert got[0][0] == 0 and got[-1][1] == nbytes
    assert all(a[1] == b[0] for a, b in zip(got, got[1:]))
    assert all(first % 4096 == 0 and first <= last for first, last in got)
    # ext3's split among writers: ceil(blocks / writers) blocks each
    per = -(-blocks // threads)
    assert [(last - first) // 4096 for first, last in got] == \
        [max(0, min(blocks, (k + 1) * per) - min(blocks, k * per)) for k in range(threads)]


def test_the_terminal_table_says_how_the_volumes_were_made_only_when_they_were():
    from blksim.apps.loader import lines
    made = run(config("zeros"))[0]["apps"]["loader"]
    text = lines("loader", made, None)
    assert text[-1] == "volumes made by zeros: 10.5 MB in the creators' write calls"
    assert "made by" not in "\n".join(lines("loader", run(config("none"))[0]["apps"]
                                            ["loader"], None))
