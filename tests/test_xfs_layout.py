"""XFS made by mkfs.xfs and its allocator (hostio.fs.xfs, xfs_mkfs): the layout by hand
for a 2 GiB device in both eras; interleaved writers fragment less than on ext3;
delayed allocation turns small appends into large extents; directories spread over
AGs; the bmap B+tree's blocks; bad mkfs and mount options."""

import pytest

from blksim.hostio.fs import build
from blksim.hostio.fs.ext3 import Ext3
from blksim.hostio.fs.xfs import Xfs

GIB = 1 << 30
SECTORS_2G = 2 * GIB // 512


def test_layout_by_hand_xfsprogs_2_8_for_2_6_18():
    x = Xfs(SECTORS_2G, "-f", "", "", "2.6.18")
    g = x.geometry
    # 524288 4 KiB blocks: 128 MiB to 8 GiB -> dblocks >> 3: 8 AGs of 65536 blocks
    assert (g.block_size, g.dblocks, g.agcount, g.agsize) == (4096, 524288, 8, 65536)
    # log: max(1000, 160 * 16, 524288 / 8192) = 2560 blocks (10 MiB), version 1, in AG
    # 8 / 2 = 4 after its SB/AGF/AGI/AGFL block and the bno, cnt, ino roots (blocks 1-3)
    assert (g.log_blocks, g.log_version, g.log_agno) == (2560, 1, 4)
    assert g.log_start == 4 * 65536 + 4
    assert x.journal_extents() == ((262148 * 8, 2560 * 8),)
    # the root directory: AG 0, after the 4 AGFL blocks: chunk at block 8, inode 128
    assert x.dirs["/"] == (128, 0) and g.inode_size == 256
    assert x.mount.barrier is True and x.mount.inode64 is False and x.fallocate is False


def test_layout_by_hand_current_xfsprogs_for_6_6():
    x = Xfs(SECTORS_2G, "", "", "", "6.6")
    g = x.geometry
    # a single device of 128 MiB to 4 TiB: 4 AGs; log max(524288 / 2048, 64 MiB) blocks
    assert (g.agcount, g.agsize, g.log_blocks, g.log_version) == (4, 131072, 16384, 2)
    assert g.log_start == 2 * 131072 + 6 and g.inode_size == 512 and g.crc
    # prealloc 6 + AGFL 4 = 10, the 8-block chunk aligned: block 16, inode 16 * 8 = 128
    assert x.dirs["/"] == (128, 0)
    assert x.mount.inode64 and x.mount.relatime and x.fallocate


@pytest.mark.parametrize("size,kernel,agcount,agsize,log_blocks", [
    # xfsprogs 2.8.0: > 8 GiB -> dblocks >> 4; log dblocks / 2048 (the 2048:1 ratio)
    (100 * GIB, "2.6.18", 16, 1638400, 12800),
    # under 128 MiB: 16 MiB AGs; the log max(1000, max_tr_res * 16) = 2560 blocks
    (64 << 20, "2.6.18", 4, 4096, 2560),
    # current: 4 AGs for one device under 4 TiB; log max(dblocks / 2048, 64 MiB)
    (100 * GIB, "6.6", 4, 6553600, 16384),
    ((1 << 40), "6.6", 4, 67108864, 131072),
])
def test_default_geometry_by_size(size, kernel, agcount, agsize, log_blocks):
    g = Xfs(size // 512, "", "", "", kernel).geometry
    assert (g.agcount, g.agsize, g.log_blocks) == (agcount, agsize, log_blocks)
    assert g.log_start == (agcount // 2) * agsize + g.prealloc_blocks


def test_agcount_and_log_options():
    x = Xfs(SECTORS_2G, "-d agcount=16 -l size=32m -i size=512 -b size=4096", "", "",
            "2.6.18")
    g = x.geometry
    assert (g.agcount, g.agsize, g.log_blocks, g.log_agno) == (16, 32768, 8192, 8)
    assert Xfs(SECTORS_2G, "-d agsize=256m").geometry.agcount == 8


def test_interleaved_writers_fragment_less_than_on_ext3():
    """Two threads writing one 64 MiB file in turn, 64 KiB a call."""
    ext3 = Ext3(SECTORS_2G, "-j", "", "s")
    xfs = Xfs(SECTORS_2G, "", "", "s", "2.6.18")
    e3 = ext3.place_file("/d/f", 64 << 20, 2, 64 << 10)
    ex = xfs.place_file("/d/f", 64 << 20, 2, 64 << 10)
    assert sum(n for _, n in ex) == 64 << 11
    # ext3 gives a new extent per call; XFS places each thread's part at its file
    # offset's distance from the first (xfs_bmap_adjacent), so the parts meet
    assert len(e3) > 500 and len(ex) == 1


def test_delayed_allocation_turns_small_appends_into_one_extent():
    x = Xfs(SECTORS_2G, "", "", "", "2.6.18")
    ex = x.place_file("/d/log", 16 << 20, 1, 4096)          # 4096 appends of 4 KiB
    assert ex == ((ex[0][0], 16 << 11),)
    assert x.files["/d/log"].delay == [] and len(x.files["/d/log"].extents) == 1


def test_files_in_different_directories_go_to_different_ags():
    for kernel in ("2.6.18", "6.6"):
        x = Xfs(SECTORS_2G, "", "", "", kernel)
        ags = []
        for d in ("a", "b", "c"):
            x.place_file(f"/{d}/f", 8 << 20)
            ags.append(x.files[f"/{d}/f"].agno)
        x.place_file("/a/g", 8 << 20)
        # directories rotor from AG 0 (xfs_ialloc_next_ag); files stay in their dir's AG
        assert ags == [0, 1, 2] and x.files["/a/g"].agno == 0
        g = x.geometry
        for d, agno in zip("abc", ags):
            sector = x.placed[f"/{d}/f"][1][0][0]
            assert sector // 8 // g.agsize == agno          # data near the inode


def test_speculative_preallocation_is_given_back_at_close():
    x = Xfs(SECTORS_2G, "", "allocsize=1m", "", "2.6.18")
    free = x.free_blocks()
    x.place_file("/d/f", 100 * 4096, 1, 4096)
    # the file's 100 blocks and nothing else: the 1 MiB reserved beyond EOF is given back,
    # the directory is short-form (no block) with its inode in the root's chunk
    assert free - x.free_blocks() == 100


def test_bmap_btree_blocks_are_read_first():
    # a file whose extents do not fit in a 256-byte inode (9): place files between its
    # writes (4 KiB preallocation) so that its extents cannot merge
    x = Xfs(SECTORS_2G, "", "allocsize=4k", "", "2.6.18")
    inode = None
    for k in range(40):
        x.place_file(f"/d/f{k}", 4096)
        if inode is None:
            x.place_file("/d/big", 4096)
            inode = x.files["/d/big"]
        x._delay_write(inode, inode.size, 1)
        x._writeback(inode)
    x._build_tree(inode)
    assert len(inode.extents) > 9 and inode.tree
    chain = x.metadata_blocks("/d/big", 0)
    assert len(chain) == 1 and chain[0][1] == 8
    assert x.metadata_blocks("/d/f0", 0) == []


@pytest.mark.parametrize("kind,mkfs,mount,kernel,words", [
    ("xfs", "-q", "", "2.6.18", "unknown mkfs.xfs option '-q'"),
    ("xfs", "-d bogus=1", "", "2.6.18", "unknown mkfs.xfs suboption -d 'bogus'"),
    ("xfs", "-m crc=1", "", "2.6.18", "unknown mkfs.xfs option '-m'"),
    ("xfs", "-d size=3g", "", "2.6.18", "larger than the device"),
    ("xfs", "-l size=600m", "", "6.6", "does not fit in an allocation group"),
    ("xfs", "-l size=200m", "", "2.6.18", "above the maximum log size"),
    ("xfs", "-d agcount=300", "", "2.6.18", "outside 4096 to"),
    ("xfs", "", "logbsize=48k", "2.6.18", "logbsize= expected 16k, 32k"),
    ("xfs", "", "logbsize=512k", "6.6", "logbsize= expected 16k, 32k"),
    ("xfs", "", "logbsize=64k", "2.6.18", "a version 1 log takes 16k or 32k"),
    ("xfs", "", "logbufs=9", "2.6.18", "logbufs= expected 2 to 8"),
    ("xfs", "", "nobarrier", "6.6", "unknown XFS mount option 'nobarrier'"),
    ("xfs", "", "relatime", "2.6.18", "unknown XFS mount option 'relatime'"),
    ("xfs", "", "delaylog", "2.6.18", "exists only in Linux 2.6.35 to 3.2"),
    ("xfs", "", "data=ordered", "2.6.18", "unknown XFS mount option 'data=ordered'"),
    ("xfs", "", "allocsize=3k", "2.6.18", "allocsize= expected a power of 2"),
])
def test_bad_input_names_the_option(kind, mkfs, mount, kernel, words):
    with pytest.raises(ValueError) as info:
        build(kind, SECTORS_2G, mkfs, mount, "", kernel)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_mount_options_of_each_line():
    x = Xfs(SECTORS_2G, "-l version=2", "nobarrier,logbufs=4,logbsize=256k,noatime",
            "", "2.6.18")
    assert (x.barrier, x.mount.logbufs, x.mount.logbsize, x.atime) == (False, 4, 262144,
                                                                         False)
    assert Xfs(SECTORS_2G, "", "inode32", "", "6.6").mount.inode64 is False
    assert Xfs(SECTORS_2G, "", "", "", "2.6.24").fallocate is True
    assert Ext3.fallocate is False


def test_inode32_on_a_large_filesystem_rotors_first_data():
    # 8 TiB with 4 KiB blocks: 1 TiB AGs (2.8: >= 32 TiB only; here agcount=8), inode
    # numbers pass 32 bits beyond AG 0: inodes in AG 0, first data rotor over the AGs
    sectors = 8 * (1 << 40) // 512
    x = Xfs(sectors, "-d agcount=9", "", "", "2.6.18")
    assert x._inode32
    x.place_file("/a/f", 4096)
    x.place_file("/b/g", 4096)
    assert x.files["/a/f"].agno == x.files["/b/g"].agno == 0
    ags = [x.placed[p][1][0][0] // 8 // x.geometry.agsize for p in ("/a/f", "/b/g")]
    assert ags == [0, 1]
    y = Xfs(sectors, "-d agcount=9", "inode64", "", "2.6.18")
    assert not y._inode32


# ---------------------------------------------------------------- placement property
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FILES = st.lists(st.tuples(st.sampled_from(["/a", "/b", "/a/c", "/d"]),
                           st.integers(1, 3000), st.integers(1, 4),
                           st.sampled_from([1, 16, 256])), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(FILES, st.sampled_from(["2.6.18", "6.6"]),
       st.sampled_from(["", "allocsize=64k", "allocsize=4k"]),
       st.sampled_from(["-d agcount=4", "-d agcount=9", ""]))
def test_every_block_is_allocated_once(files, kernel, mount, mkfs):
    """Files of random sizes written by 1-4 threads: each file gets exactly its blocks,
    no block twice (nor one of the log or of an AG's head), and the free space plus the
    allocated blocks make the filesystem."""
    x = Xfs(256 * (1 << 20) // 512, mkfs, mount, "", kernel)
    g = x.geometry
    free0 = x.free_blocks()
    used = bytearray(g.dblocks)
    spb = x.sectors_per_block
    for b in range(g.log_start, g.log_start + g.log_blocks):
        used[b] = 1
    for agno in range(g.agcount):
        used[g.ag_start(agno):g.ag_start(agno) + g.prealloc_blocks] = \
            b"\x01" * g.prealloc_blocks
    total = 0
    for k, (d, blocks, writers, per) in enumerate(files):
        extents = x.place_file(f"{d}/f{k}", blocks * 4096, writers, per * 4096)
        assert sum(n for _, n in extents) == blocks * spb
        for sector, n in extents:
            for b in range(sector // spb, (sector + n) // spb):
                assert not used[b], (k, b)
                used[b] = 1
        total += blocks
        inode = x.files[f"{d}/f{k}"]
        assert not inode.delay and inode.extents[-1][0] + inode.extents[-1][2] == blocks
        tree = sum(len(p) for _f, p in inode.tree)
        total += len({b for _f, p in inode.tree for b in p}) if tree else 0
    for agno_chunks in x._chunks:                     # no data in an inode chunk
        for block, _used in agno_chunks:
            assert not any(used[block:block + g.inode_chunk_blocks])
    # what left the free space: the files, their B+tree blocks, the inode chunks
    chunks = sum(len(c) for c in x._chunks) - 1       # the root's chunk was mkfs's
    assert free0 - x.free_blocks() == total + chunks * g.inode_chunk_blocks


def test_a_bad_option_in_a_configuration_names_the_table():
    from blksim.sim.config import ConfigError, resolve
    raw = {"run": {"seed": 1}, "device": {"service": "fixed", "service_time": "1ms",
                                           "capacity": "2g"},
           "filesystems": {"/dev/sda": {"type": "xfs", "mount": "logbsize=20k"}},
           "file": [{"path": "/d/f", "device": "/dev/sda", "size": "4m"}],
           "job": [{"name": "w", "rw": "write", "bs": "4k", "number_ios": 1,
                    "filename": "/d/f"}]}
    with pytest.raises(ConfigError) as info:
        resolve(raw, "x.toml")
    text = str(info.value)
    assert text.startswith("x.toml: [filesystems.'/dev/sda']") and "logbsize=" in text
    raw["filesystems"]["/dev/sda"]["mount"] = "noatime"
    cfg = resolve(raw, "x.toml")
    fs = cfg.filesystems["sda"]
    assert fs.type == "xfs" and fs.layer.kind == "xfs" and fs.atime is False
    assert fs.table() == {"type": "xfs", "mkfs": "", "mount": "noatime"}
