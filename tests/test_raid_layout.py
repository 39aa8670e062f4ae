"""disk_models/raid_layout.py: RAID 0/1/10/5 addresses and member I/Os, hand-traced and as
properties."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.disk_models.raid_layout import MemberIO, RaidLayout, RaidLayoutError


def counts(ios):
    return (sum(not io.write for io in ios), sum(io.write for io in ios))


def test_raid0_stripes_strips_round_robin():
    a = RaidLayout("raid0", 4, 10_000, strip=128)
    assert a.capacity == 4 * (10_000 // 128) * 128
    assert a.locate(0) == [(0, 0)] and a.locate(128) == [(1, 0)] and a.locate(512) == [(0, 128)]
    assert a.plan_read(100, 64) == [MemberIO(0, 100, 28, False), MemberIO(1, 0, 36, False)]


def test_raid5_is_left_symmetric_as_linux_md():
    # rows of 4 members (D = data strip number, P = parity):
    #   D0 D1 D2 P / D4 D5 P D3 / D8 P D6 D7 / P D9 D10 D11
    a = RaidLayout("raid5", 4, 1024, strip=8)
    layout = [[a.locate(8 * d)[0][0] for d in range(3 * r, 3 * r + 3)] for r in range(4)]
    assert layout == [[0, 1, 2], [3, 0, 1], [2, 3, 0], [1, 2, 3]]
    assert [a.parity_member(r) for r in range(4)] == [3, 2, 1, 0]


def test_raid5_small_write_costs_two_reads_and_two_writes():
    a = RaidLayout("raid5", 5, 100_000, strip=128)
    ios = a.plan_write(1000, 8)
    assert counts(ios) == (2, 2)                     # old data, old parity; new data, parity
    (data,) = a.locate(1000)
    parity = a.parity_member(1000 // (128 * 4))
    assert {io.member for io in ios} == {data[0], parity}


def test_raid5_full_stripe_write_reads_nothing():
    a = RaidLayout("raid5", 5, 100_000, strip=128)
    ios = a.plan_write(3 * 512, 512)                 # row 3, all four data strips whole
    assert counts(ios) == (0, 5)
    assert sorted(io.member for io in ios) == [0, 1, 2, 3, 4]


def test_raid5_takes_the_cheaper_of_rmw_and_reconstruct_write():
    a = RaidLayout("raid5", 5, 100_000, strip=128)
    # three of a row's four data strips whole: rmw reads 4, rcw reads the one left
    ios = a.plan_write(0, 384)
    assert counts(ios) == (1, 4)
    # two of four: rmw reads 3, rcw reads 2
    assert counts(a.plan_write(0, 256)) == (2, 3)


def test_mirrors_write_every_copy_and_read_one():
    r1 = RaidLayout("raid1", 2, 1000, strip=8)
    assert counts(r1.plan_write(10, 8)) == (0, 2) and counts(r1.plan_read(10, 8)) == (1, 0)
    assert r1.plan_read(10, 8, choose=lambda copies: copies[-1])[0].member == 1
    r10 = RaidLayout("raid10", 4, 1000, strip=8)
    assert [io.member for io in r10.plan_write(8, 8)] == [2, 3]      # strip 1: pair 1
    assert r10.capacity == 2 * (1000 // 8) * 8


def test_degraded_raid5_reads_every_survivor_of_the_row():
    a = RaidLayout("raid5", 4, 1024, strip=8, failed=1)
    assert a.locate(8) == [(1, 0)]                   # D1 lives on the failed member
    assert sorted(io.member for io in a.plan_read(8, 8)) == [0, 2, 3]
    assert [io.member for io in a.plan_read(0, 8)] == [0]        # D0 is read as usual


def test_degraded_raid5_writes_around_the_failed_member():
    a = RaidLayout("raid5", 4, 1024, strip=8, failed=1)
    # D1 (on the failed member): rebuild parity from D0 and D2, write parity only
    ios = a.plan_write(8, 8)
    assert counts(ios) == (2, 1) and 1 not in {io.member for io in ios}
    # D0 with its row's parity on member 3, D2's member alive: ordinary rmw
    assert counts(a.plan_write(0, 8)) == (2, 2)
    # row 2's parity is on the failed member: the data alone is written
    b = RaidLayout("raid5", 4, 1024, strip=8, failed=1)
    assert b.parity_member(2) == 1 and counts(b.plan_write(2 * 24, 8)) == (0, 1)


@pytest.mark.parametrize("args, message", [
    (("raid60", 8, 100), "level: expected one of"),
    (("raid5", 2, 100), "at least 3 members"),
    (("raid10", 5, 100), "even number of members"),
    (("raid0", 2, 64, 128), "smaller than one strip"),
    (("raid0", 2, 1000, 8, 0), "no redundancy"),
    (("raid1", 2, 1000, 8, 2), "failed: expected a member 0..1"),
])
def test_arrays_that_cannot_be_built_are_named(args, message):
    with pytest.raises(RaidLayoutError, match=message):
        RaidLayout(*args)


@given(level=st.sampled_from(["raid0", "raid10", "raid5", "raid1"]),
       members=st.integers(2, 6), strip=st.sampled_from([1, 8, 16]),
       rows=st.integers(1, 6))
@settings(max_examples=80, deadline=None)
def test_every_block_has_its_own_place_and_parity_its_own_member(level, members, strip, rows):
    if (level == "raid10" and members % 2) or (level == "raid5" and members < 3) \
            or (level == "raid10" and members < 4):
        return
    a = RaidLayout(level, members, rows * strip, strip=strip)
    seen = set()
    for lba in range(a.capacity):
        copies = a.locate(lba)
        assert len(copies) == {"raid0": 1, "raid5": 1, "raid10": 2, "raid1": members}[level]
        for member, sector in copies:
            assert 0 <= member < members and 0 <= sector < rows * strip
            assert (member, sector) not in seen
            seen.add((member, sector))
    if level == "raid5":
        for row in range(rows):
            data = {a.locate((row * (members - 1) + c) * strip)[0][0] for c in range(members - 1)}
            assert data | {a.parity_member(row)} == set(range(members))


@given(data=st.data())
@settings(max_examples=100, deadline=None)
def test_raid5_writes_touch_each_member_at_most_once_per_row_and_write_the_data(data):
    n = data.draw(st.integers(3, 6))
    a = RaidLayout("raid5", n, 64 * 8, strip=8)
    lba = data.draw(st.integers(0, a.capacity - 1))
    nr = data.draw(st.integers(1, min(64, a.capacity - lba)))
    ios = a.plan_write(lba, nr)
    written = sum(io.nr_sectors for io in ios if io.write)
    parity = sum(io.nr_sectors for io in ios if io.write) - nr
    assert written >= nr and parity > 0                    # the data, and some parity
    reads = [io for io in ios if not io.write]
    # never more reads than the costlier plan would need for a row: n - 1 per row
    rows = (lba + nr - 1) // (8 * (n - 1)) - lba // (8 * (n - 1)) + 1
    assert len(reads) <= (n - 1) * rows
