"""block/devmapper.py: dmsetup tables, and 2.6's dm bio splitting and remapping
(drivers/md/dm.c max_io_len, dm-linear, dm-stripe stripe_map), hand-traced and as
properties."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.block.devmapper import DmTableError, Piece, parse_dm_table


def test_linear_concatenation_splits_at_the_target_boundary():
    table = parse_dm_table("0 1000 linear sdb 100\n1000 2000 linear sdc 0\n", "vg0-data")
    assert table.size == 3000
    assert table.map_bio(990, 20) == [Piece("sdb", 1090, 10, 990), Piece("sdc", 0, 10, 1000)]
    assert table.map_bio(1500, 8) == [Piece("sdc", 500, 8, 1500)]
    assert table.devices() == [("sdb", 100, 1000), ("sdc", 0, 2000)]


def test_striped_deals_chunks_round_robin_and_splits_at_chunk_boundaries():
    # chunk 0 -> sdb row 0, chunk 1 -> sdc row 0, chunk 2 -> sdb row 1, ...
    table = parse_dm_table("0 1024 striped 2 128 sdb 0 sdc 64")
    assert table.map_bio(100, 64) == [Piece("sdb", 100, 28, 100), Piece("sdc", 64, 36, 128)]
    assert table.map_bio(256, 8) == [Piece("sdb", 128, 8, 256)]
    assert table.map_bio(384 + 5, 3) == [Piece("sdc", 64 + 128 + 5, 3, 389)]
    # a 512-sector bio from 0 becomes four chunk-sized pieces
    assert [p.nr_sectors for p in table.map_bio(0, 512)] == [128] * 4
    assert table.devices() == [("sdb", 0, 512), ("sdc", 64, 512)]


@pytest.mark.parametrize("text, message", [
    ("", "the table has no target"),
    ("0 100 linear sdb 0\n200 100 linear sdc 0", "starts at sector 200, expected 100"),
    ("5 100 linear sdb 0", "starts at sector 5, expected 0"),
    ("0 100 mirror sdb 0", "target expected linear or striped, found 'mirror'"),
    ("0 100 linear sdb", "linear expected '<device> <offset>'"),
    ("0 1_000 linear sdb 0", "length expected an integer >= 1, found '1_000'"),
    ("0 0 linear sdb 0", "length expected an integer >= 1, found '0'"),
    ("0 1024 striped 2 96 sdb 0 sdc 0", "power of two of at least 8"),
    ("0 1024 striped 2 4 sdb 0 sdc 0", "power of two of at least 8"),
    ("0 1000 striped 3 8 a 0 b 0 c 0", "not divisible by the 3 stripes"),
    ("0 1020 striped 2 8 a 0 b 0", "not divisible by the chunk size 8"),
    ("0 1024 striped 2 8 a 0", "expected 2 '<device> <offset>' pairs, found 1"),
    ("0 100", "line expected '<start> <length> <target> <arguments>'"),
])
def test_bad_tables_name_the_line_and_what_is_wrong(text, message):
    with pytest.raises(DmTableError, match=message) as caught:
        parse_dm_table(text, origin="vg0.table")
    assert str(caught.value).startswith("vg0.table")


def test_a_bio_outside_the_device_is_refused():
    table = parse_dm_table("0 100 linear sdb 0")
    with pytest.raises(DmTableError, match="outside the device"):
        table.map_bio(96, 8)


@st.composite
def tables(draw):
    """A table of 1-4 targets, each on devices of its own (so the map is one-to-one)."""
    lines, start, dev = [], 0, 0
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            length = draw(st.integers(1, 300))
            lines.append(f"{start} {length} linear d{dev} {draw(st.integers(0, 50))}")
            dev += 1
        else:
            stripes = draw(st.integers(1, 4))
            chunk = draw(st.sampled_from([8, 16, 64]))
            rows = draw(st.integers(1, 4))
            length = stripes * chunk * rows
            pairs = " ".join(f"d{dev + k} {draw(st.integers(0, 50))}" for k in range(stripes))
            lines.append(f"{start} {length} striped {stripes} {chunk} {pairs}")
            dev += stripes
        start += length
    return parse_dm_table("\n".join(lines))


@given(table=tables(), data=st.data())
@settings(max_examples=150, deadline=None)
def test_splitting_covers_the_bio_once_and_maps_as_sector_by_sector(table, data):
    sector = data.draw(st.integers(0, table.size - 1))
    nr = data.draw(st.integers(1, table.size - sector))
    pieces = table.map_bio(sector, nr)
    # the pieces follow one another over exactly the bio's sectors
    assert pieces[0].logical == sector and sum(p.nr_sectors for p in pieces) == nr
    for a, b in zip(pieces, pieces[1:]):
        assert b.logical == a.logical + a.nr_sectors
    for p in pieces:
        # each piece is one extent of its device: every sector maps as the piece says
        for k in (0, p.nr_sectors - 1):
            (one,) = table.map_bio(p.logical + k, 1)
            assert (one.device, one.sector) == (p.device, p.sector + k)
        target = next(t for t in table.targets
                      if t.start <= p.logical < t.start + t.length)
        assert p.logical + p.nr_sectors <= target.start + target.length
        if target.split:            # a striped piece stays within one chunk
            first = (p.logical - target.start) // target.split
            last = (p.logical + p.nr_sectors - 1 - target.start) // target.split
            assert first == last


@given(table=tables())
@settings(max_examples=60, deadline=None)
def test_the_map_is_one_to_one_and_stays_in_the_extents(table):
    seen = set()
    extents = {}
    for device, first, n in table.devices():
        extents.setdefault(device, []).append((first, first + n))
    for s in range(table.size):
        (p,) = table.map_bio(s, 1)
        assert (p.device, p.sector) not in seen
        seen.add((p.device, p.sector))
        assert any(lo <= p.sector < hi for lo, hi in extents[p.device])
