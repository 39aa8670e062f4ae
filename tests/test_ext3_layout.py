"""ext3's layout and allocator (hostio.fs.ext3): mke2fs 1.39's geometry hand-computed,
the block map's indirect blocks, ext3_find_goal and the reservation window, interleaved
writers fragmenting a file, every block accounted once, and the bad-input errors."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.hostio.fs import build
from blksim.hostio.fs.ext3 import Ext3
from blksim.hostio.fs.ext3_mkfs import Ext3Geometry, Ext3MountOptions

GIB = 1 << 30
SECTORS_2G = 2 * GIB // 512


def test_default_geometry_of_a_2_gib_device_as_mke2fs_1_39():
    g = Ext3Geometry(2 * GIB)
    # 4 KiB blocks, 32768 per group: 524288 blocks in 16 groups
    assert (g.block_size, g.blocks, g.blocks_per_group, g.groups) == (4096, 524288, 32768, 16)
    # inode_ratio 8192: 262144 inodes, 16384 a group, 128-byte inodes: 512 table blocks
    assert (g.inodes_per_group, g.inode_table_blocks, g.inodes) == (16384, 512, 262144)
    # resize_inode: room for 1024x growth = 16384 groups = 128 descriptor blocks - 1 used
    assert (g.desc_blocks, g.reserved_gdt) == (1, 127)
    # figure_journal_size: 512 Ki blocks is not < 512 Ki, so 16384 blocks (64 MiB)
    assert g.journal_blocks == 16384
    # superblock + 1 descriptor + 127 reserved + 2 bitmaps + 512 inode table
    assert g.group_metadata(0) == (0, 643) and g.group_metadata(1) == (32768, 643)
    assert g.group_metadata(2) == (65536, 514)           # no backup in group 2


def test_sparse_super_keeps_backups_in_groups_0_1_and_powers_of_3_5_7():
    g = Ext3Geometry(16 * GIB)
    assert [k for k in range(g.groups) if g.has_super(k)] == [0, 1, 3, 5, 7, 9, 25, 27, 49,
                                                                81, 125]
    g = Ext3Geometry(2 * GIB, "-O ^sparse_super")
    assert all(g.has_super(k) for k in range(g.groups))


def test_usage_types_and_inode_ratio():
    assert Ext3Geometry(2 * GIB, "-T largefile").inodes == 2048           # 2 GiB / 1 MiB
    assert Ext3Geometry(2 * GIB, "-T largefile4").inodes_per_group == 32   # 512/16
    assert Ext3Geometry(2 * GIB, "-T news").inodes == 2 * GIB // 4096
    assert Ext3Geometry(2 * GIB, "-i 65536 -I 256").inode_table_blocks == 128
    small = Ext3Geometry(256 << 20)                  # <= 512 MiB: the "small" type
    assert (small.block_size, small.first_data_block, small.blocks_per_group) == \
        (1024, 1, 8192)
    assert Ext3Geometry(2 * GIB, "-J size=32").journal_blocks == 8192


def test_mount_options_and_their_2_6_18_defaults():
    m = Ext3MountOptions("")
    assert (m.data, m.commit, m.barrier, m.atime) == ("ordered", 5.0, False, True)
    m = Ext3MountOptions("data=writeback,commit=15,barrier=1,noatime,nodiratime")
    assert (m.data, m.commit, m.barrier, m.atime, m.diratime) == \
        ("writeback", 15.0, True, False, False)
    assert Ext3MountOptions("commit=0").commit == 5.0


@pytest.mark.parametrize("mkfs, mount, message", [
    ("-q", "", r"unknown mkfs option '-q'"),
    ("-O dir_index,extents", "", r"-O: unknown feature 'extents'"),
    ("-T huge", "", r"-T expected one of"),
    ("-b 8192", "", r"-b expected 1024, 2048 or 4096"),
    ("-J size=4000", "", r"-J size=4000: the journal \(1024000 blocks\) is larger than"),
    ("-J size=2", "", r"must be 1024 to 102400 blocks"),
    ("-b 4096 1000000", "", r"block count 1000000 .* is larger than the device"),
    ("-I 100", "", r"-I expected a power of 2"),
    ("", "data=fast", r"data= expected ordered, writeback or journal"),
    ("", "nobarrier", r"unknown ext3 mount option 'nobarrier'"),
    ("", "barrier=2", r"barrier= expected 0 or 1"),
])
def test_bad_options_are_one_line_naming_the_option(mkfs, mount, message):
    with pytest.raises(ValueError, match=message) as err:
        build("ext3", SECTORS_2G, mkfs, mount)
    assert "\n" not in str(err.value)


def test_mke2fs_places_root_lost_found_resize_then_the_journal_with_its_indirect_blocks():
    fs = Ext3(SECTORS_2G)
    j = fs.journal_extents()
    # after group 0's 643 metadata blocks: root (1), lost+found (4), resize dind (1)
    assert j[0] == (649 * 8, 12 * 8)                   # the 12 direct blocks
    assert j[1] == ((649 + 13) * 8, 1024 * 8)           # the indirect block skipped
    assert sum(n for _, n in j) == 16384 * 8


def test_a_sequential_file_is_contiguous_but_for_its_indirect_blocks():
    fs = Ext3(SECTORS_2G)
    e = fs.place_file("/a", 12 * 4096 + 2048 * 4096)
    start = e[0][0] // 8
    assert e[0] == (start * 8, 96)                       # 12 direct blocks
    # the indirect block lies just before block 12, the next one before block 1036
    assert e[1] == ((start + 13) * 8, 1024 * 8)
    assert fs.metadata_blocks("/a", 12) == [((start + 12) * 8, 8)]
    assert fs.metadata_blocks("/a", 5) == []
    dind = fs.metadata_blocks("/a", 12 + 1024)
    assert len(dind) == 2 and dind[0][0] == e[1][0] + 1024 * 8 and dind[1][0] == dind[0][0] + 8
    assert dind[1][0] + 8 == e[2][0]                     # DIND, IND, then the data


def test_the_reservation_window_doubles_when_more_than_half_used():
    fs = Ext3(SECTORS_2G)
    fs.place_file("/a", 40 * 4096)
    inode = fs.files["/a"]
    # windows of 8, 16, 32 blocks: the third one covers blocks 24..55 of the file
    # (one indirect block among them)
    assert inode.rsv_goal == 32


def test_interleaved_writers_fragment_the_file_in_extents():
    one = Ext3(SECTORS_2G).place_file("/f", 64 << 20)
    two = Ext3(SECTORS_2G).place_file("/f", 64 << 20, writers=2, write_bytes=64 << 10)
    four = Ext3(SECTORS_2G).place_file("/f", 64 << 20, writers=4, write_bytes=64 << 10)
    # 12 direct, the IND's 1024, 15 runs under the DIND, one cut by group 1's metadata
    assert len(one) == 1 + 1 + 15 + 1
    # the writers share the inode's one reservation window: each 64 KiB call lands after
    # the other thread's last one, so nearly every one of the 1024 calls is an extent
    assert len(two) > 1000 and len(four) > 1000
    for e in (one, two, four):
        assert sum(n for _, n in e) == (64 << 20) // 512


def test_a_thread_starting_mid_file_continues_after_the_nearest_earlier_pointer():
    # thread 0 writes its whole half in one call, then thread 1 starts at block 2048:
    # ext3_find_near finds block 2047's pointer in the same indirect block, so the file
    # is laid out exactly as one writer would
    one = Ext3(SECTORS_2G).place_file("/f", 16 << 20)
    two = Ext3(SECTORS_2G).place_file("/f", 16 << 20, writers=2, write_bytes=8 << 20)
    assert two == one


def test_orlov_spreads_top_level_directories_and_their_files_follow():
    fs = Ext3(16 * GIB // 512, "", "", seed="1/sdb")
    g = fs.geometry
    a = fs.place_file("/a/data", 8 << 20)
    b = fs.place_file("/b/data", 8 << 20)
    ga, gb = fs.dirs["/a"][1], fs.dirs["/b"][1]
    # a group with a superblock backup has fewer free blocks than the average: skipped;
    # the second directory goes to a group with no directory yet
    assert ga != gb and not g.has_super(ga) and not g.has_super(gb)
    for group, extents in ((ga, a), (gb, b)):
        assert all(g.group_start(group) * 8 <= s < g.group_start(group + 1) * 8
                   for s, _ in extents)
    fs.place_file("/a/sub/more", 1 << 20)      # a deeper directory: its parent's group
    assert fs.dirs["/a/sub"][1] == ga and fs.files["/a/sub/more"].group == ga
    again = Ext3(16 * GIB // 512, "", "", seed="1/sdb")
    assert again.place_file("/a/data", 8 << 20) == a     # the same seed, the same groups
    others = {Ext3(16 * GIB // 512, "", "", seed=f"{k}/sdb").place_file("/a/data", 4096)
              for k in range(6)}
    assert len(others) > 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 4), st.integers(1, 64),
                          st.sampled_from(["", "/d", "/d/e", "/x"])),
                min_size=1, max_size=8),
       st.sampled_from(["", "-b 1024", "-b 2048 -T largefile"]))
def test_every_block_is_accounted_once(files, mkfs):
    fs = Ext3(256 << 20 >> 9, mkfs)
    g = fs.geometry
    owner = {}

    def own(block, what):
        assert block not in owner, (block, what, owner.get(block))
        owner[block] = what
    for k in range(g.groups):
        start, n = g.group_metadata(k)
        for b in range(start, min(start + n, g.blocks)):
            own(b, "meta")
    spb = fs.sectors_per_block
    for s, n in fs.journal_extents():
        for b in range(s // spb, (s + n) // spb):
            own(b, "journal")
    for i, (blocks, writers, per, folder) in enumerate(files):
        path = f"{folder}/f{i}"
        e = fs.place_file(path, blocks * g.block_size, writers, per * g.block_size)
        assert sum(n for _, n in e) == blocks * spb
        for s, n in e:
            for b in range(s // spb, (s + n) // spb):
                own(b, path)
        for key, b in fs.files[path].where.items():
            own(b, ("indirect", i, key))
    # mke2fs's root, lost+found, resize inode and the journal's indirect blocks
    allocated = fs.owner_count
    assert len(owner) <= allocated
    # (and one block for each directory made)
    assert allocated - len(owner) == len(fs.dirs) + min(12, 16384 // g.block_size) + \
        (1 if g.reserved_gdt else 0) + _journal_indirect(g) + g.first_data_block
    assert all(fs.used[b] for b in owner)
    assert fs.free_blocks() == g.blocks - allocated


def _journal_indirect(g) -> int:
    """Indirect blocks of a journal of ``g.journal_blocks`` (ext3's block map)."""
    a = g.block_size // 4
    n = g.journal_blocks - 12
    if n <= 0:
        return 0
    ind = 1
    n -= a
    if n > 0:
        ind += 1 + -(-min(n, a * a) // a)
    return ind
