"""RAID 6 (disk_models/raid_layout.py, disk_models/raid.py) and the PERC H755 preset: the
left-symmetric layout of Linux md hand-traced, the member I/Os of partial and full-stripe
writes, degraded operation with one member lost, properties over random arrays, and runs
of the controller preset over today's disks."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.disk_models.raid_layout import MemberIO, RaidLayout, RaidLayoutError
from tests.simhelpers import member_io_totals, simulate_raid as simulate


def counts(ios):
    return (sum(not io.write for io in ios), sum(io.write for io in ios))


def test_raid6_is_left_symmetric_as_linux_md():
    # five members, three data strips a row, traced by hand from raid5_compute_sector
    # (level 6, ALGORITHM_LEFT_SYMMETRIC): P on 4 - (r mod 5), Q on the member after it,
    # data strip d of the row on P + 2 + d:
    #   row 0:  Q  D0 D1 D2 P
    #   row 1:  D3 D4 D5 P  Q
    #   row 2:  D7 D8 P  Q  D6
    #   row 3:  D11 P Q  D9 D10
    #   row 4:  P  Q  D12 D13 D14
    #   row 5:  as row 0
    a = RaidLayout("raid6", 5, 1024, strip=8)
    assert a.data_members == 3 and a.capacity == 3 * (1024 // 8) * 8
    p_and_q = [(a.parity_member(r), a.q_member(r)) for r in range(6)]
    assert p_and_q == [(4, 0), (3, 4), (2, 3), (1, 2), (0, 1), (4, 0)]
    data = [[a.locate(8 * d)[0][0] for d in range(3 * r, 3 * r + 3)] for r in range(6)]
    assert data == [[1, 2, 3], [0, 1, 2], [4, 0, 1], [3, 4, 0], [2, 3, 4], [1, 2, 3]]
    assert a.locate(8 * 7 + 5) == [(0, 2 * 8 + 5)]           # D7, row 2, 6th sector
    assert a.parity_members(1) == (3, 4)
    assert RaidLayout("raid5", 5, 1024, strip=8).parity_members(1) == (3,)


def test_raid6_needs_four_members():
    with pytest.raises(RaidLayoutError, match="at least 4 members"):
        RaidLayout("raid6", 3, 1024, strip=8)


def test_a_small_write_reads_and_writes_data_p_and_q():
    # six members (four data strips a row), row 0: Q on 0, data on 1..4, P on 5.
    # One strip: read-modify-write reads 1 + 2, reconstruct-write the 3 other strips:
    # a tie, so read-modify-write (fewer members touched)
    a = RaidLayout("raid6", 6, 1024, strip=8)
    assert a.plan_write(0, 8) == [
        MemberIO(1, 0, 8, False), MemberIO(5, 0, 8, False), MemberIO(0, 0, 8, False),
        MemberIO(1, 0, 8, True), MemberIO(5, 0, 8, True), MemberIO(0, 0, 8, True)]
    # part of a strip: parity over the same sectors only
    assert a.plan_write(8 + 2, 4) == [
        MemberIO(2, 2, 4, False), MemberIO(5, 2, 4, False), MemberIO(0, 2, 4, False),
        MemberIO(2, 2, 4, True), MemberIO(5, 2, 4, True), MemberIO(0, 2, 4, True)]


def test_three_of_four_strips_are_written_by_reconstruct_write():
    # read-modify-write would read 3 + 2, reconstruct-write reads the one strip left (D3)
    a = RaidLayout("raid6", 6, 1024, strip=8)
    ios = a.plan_write(0, 24)
    assert [io for io in ios if not io.write] == [MemberIO(4, 0, 8, False)]
    assert sorted(io.member for io in ios if io.write) == [0, 1, 2, 3, 5]
    # a write across two rows plans each row on its own: row 0's D3, row 1's D4..D5
    ios = a.plan_write(24, 24)            # D3 (row 0) and D4, D5 (row 1)
    rows = {io.sector // 8 for io in ios}
    assert rows == {0, 1}


def test_a_full_stripe_write_reads_nothing():
    a = RaidLayout("raid6", 6, 1024, strip=8)
    row = 3                                 # P on 6-1-3 = 2, Q on 3, data on 4, 5, 0, 1
    ios = a.plan_write(row * 32, 32)
    assert counts(ios) == (0, 6)
    assert [(io.member, io.sector, io.nr_sectors) for io in ios] == [
        (4, 24, 8), (5, 24, 8), (0, 24, 8), (1, 24, 8), (2, 24, 8), (3, 24, 8)]


def test_degraded_raid6_reads_the_rows_data_and_p():
    a = RaidLayout("raid6", 5, 1024, strip=8, failed=2)
    # row 0: Q 0, data 1 2 3, P 4: D1 lives on the failed member 2
    assert sorted(io.member for io in a.plan_read(8, 8)) == [1, 3, 4]     # not Q (0)
    assert [io.member for io in a.plan_read(0, 8)] == [1]                 # D0 as usual


def test_degraded_raid6_writes_around_the_failed_member():
    a = RaidLayout("raid6", 5, 1024, strip=8, failed=2)
    # D1 on the failed member: its old data cannot be read, so reconstruct-write from D0
    # and D2; P and Q written, the failed member not
    ios = a.plan_write(8, 8)
    assert 2 not in {io.member for io in ios}
    assert counts(ios) == (2, 2) and {io.member for io in ios if io.write} == {4, 0}
    # row 2 (data 4 0 1, P 2, Q 3): P is lost, Q alone is kept up to date
    ios = a.plan_write(2 * 24, 8)           # D6 on member 4
    assert 2 not in {io.member for io in ios}
    assert {io.member for io in ios if io.write} == {4, 3}
    assert counts(ios) == (2, 2)           # old D6 and old Q; new D6 and Q


@settings(max_examples=200, deadline=None)
@given(members=st.integers(4, 10), strip=st.integers(1, 16), rows=st.integers(1, 12))
def test_every_sector_has_one_home_and_parity_never_collides(members, strip, rows):
    a = RaidLayout("raid6", members, rows * strip, strip=strip)
    homes = set()
    for row in range(rows):
        p, q = a.parity_member(row), a.q_member(row)
        assert p != q
        data = [a.locate((row * (members - 2) + d) * strip)[0][0] for d in range(members - 2)]
        # the row's data strips, P and Q use every member once
        assert sorted(data + [p, q]) == list(range(members))
    for lba in range(a.capacity):
        (home,) = a.locate(lba)
        row = home[1] // strip
        assert home[0] not in (a.parity_member(row), a.q_member(row))
        homes.add(home)
    assert len(homes) == a.capacity          # no two sectors share a place


@settings(max_examples=200, deadline=None)
@given(members=st.integers(4, 8), strip=st.sampled_from([1, 4, 8]),
       failed=st.one_of(st.none(), st.integers(0, 7)), data=st.data())
def test_a_write_writes_each_sector_once_and_both_parities(members, strip, failed, data):
    if failed is not None and failed >= members:
        failed = None
    a = RaidLayout("raid6", members, 8 * strip, strip=strip, failed=failed)
    lba = data.draw(st.integers(0, a.capacity - 1))
    nr = data.draw(st.integers(1, a.capacity - lba))
    ios = a.plan_write(lba, nr)
    reads = [io for io in ios if not io.write]
    writes = [io for io in ios if io.write]
    assert ios == reads + writes                       # reads first
    assert failed not in {io.member for io in ios}     # the lost member is never touched
    # the data written: every sector of the request once, on its home (not lost)
    written = {(io.member, s) for io in writes for s in range(io.sector,
                                                              io.sector + io.nr_sectors)}
    for x in range(lba, lba + nr):
        (home,) = a.locate(x)
        row = home[1] // strip
        assert (home in written) == (home[0] != failed)
        # and P and Q of its row, over its sector, unless lost
        for par in (a.parity_member(row), a.q_member(row)):
            if par != failed:
                assert (par, home[1]) in written
    assert len(written) == sum(io.nr_sectors for io in writes)   # no sector written twice




def test_raid6_small_writes_through_cost_six_member_ios():
    ctrl, seen, _ = simulate(
        {"level": "raid6", "members": 6, "service": "fixed", "service_time": "2ms",
         "capacity": "1g", "cache": 0},
        [{"name": "w", "rw": "randwrite", "bs": "4k", "iodepth": 4, "number_ios": 200}])
    assert len(seen) == 200
    reads, writes = member_io_totals(ctrl)
    assert (reads, writes) == (600, 600)      # old data, P, Q; new data, P, Q


def test_raid6_destaging_whole_rows_reads_nothing_and_writes_p_and_q_once_a_row():
    ctrl, seen, _ = simulate(
        {"level": "raid6", "members": 6, "service": "fixed", "service_time": "1ms",
         "capacity": "1g", "stripe_size": "64k", "cache": "64m",
         "write_policy": "write-back"},
        [{"name": "w", "rw": "write", "bs": "256k", "iodepth": 2, "number_ios": 64}])
    assert len(seen) == 64
    assert member_io_totals(ctrl)[0] == 0
    # 64 x 256k = 64 rows of four 64k data strips, written with their P and Q
    assert sum(s.sectors[1] for s in ctrl.member_stats) == 64 * 512 * 6 // 4


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cache=st.sampled_from([0, "64k", "1m"]),
       write_policy=st.sampled_from(["write-back", "write-through"]),
       failed=st.sampled_from([None, 0, 3]),
       jobs=st.lists(st.fixed_dictionaries({
           "rw": st.sampled_from(["read", "write", "randrw", "randwrite"]),
           "bs": st.sampled_from(["4k", "24k", "128k"]),
           "iodepth": st.integers(1, 8),
           "number_ios": st.integers(1, 60)}), min_size=1, max_size=3),
       seed=st.integers(0, 2**32))
def test_every_bio_completes_once_over_raid6(cache, write_policy, failed, jobs, seed):
    raid = {"level": "raid6", "members": 5, "service": "exponential",
            "service_time": "1ms", "capacity": "64m", "stripe_size": "16k", "cache": cache,
            "write_policy": write_policy, "member_queue_depth": 2}
    if failed is not None:
        raid["failed"] = failed
    tables = [{"name": f"j{i}", **j} for i, j in enumerate(jobs)]
    ctrl, seen, _ = simulate(raid, tables, run={"seed": seed}, device={"queue_depth": 8})
    issued = sum(j["number_ios"] for j in jobs)
    assert sorted(b.id for b in seen) == list(range(issued))
    for b in seen:
        assert 0.0 <= b.t_queue <= b.t_dispatch <= b.t_complete
    assert ctrl.outstanding() == 0
    if failed is not None:
        assert ctrl.member_ios[failed] == [0, 0]


@pytest.mark.parametrize("drive, level, members", [("exos10e2400", "raid6", 6),
                                                   ("exosx18", "raid10", 4)])
def test_a_run_of_the_perc_h755_over_todays_disks(drive, level, members):
    from blksim.disk_models.presets import load_preset
    ctrl, seen, f = simulate(
        {"controller": "perch755", "level": level, "members": members, "drive": drive},
        [{"name": "r", "rw": "randread", "bs": "4k", "iodepth": 8, "number_ios": 200},
         {"name": "w", "rw": "randwrite", "bs": "4k", "iodepth": 8, "number_ios": 200}],
        run={"duration": "5s"})
    assert len(seen) == 400
    dev = f["devices"]["sda"]
    assert dev["queue_depth"] == 256                  # MEGASAS_DEFAULT_CMD_PER_LUN
    assert dev["device"]["level"] == level
    raid = f["config"]["device"]["raid"]
    assert raid["cache"] == 8 << 30 and raid["write_policy"] == "write-back"
    assert raid["stripe_size"] == 64 << 10
    data = members - 2 if level == "raid6" else members // 2
    rows = load_preset(drive).capacity // 128
    assert ctrl.capacity == rows * 128 * data
    # write-back: the writes completed from the cache, faster than any member's seek
    assert len([b for b in seen if b.write and b.t_complete - b.t_dispatch < 1e-3]) > 100


def test_the_perc_h755_offers_raid6_but_not_raid50_or_other_stripes():
    import re
    from blksim.common.config_values import ConfigError
    with pytest.raises(ConfigError, match=re.escape("controller 'perch755' offers raid0, "
                                                    "raid1, raid5, raid6, raid10")):
        simulate({"controller": "perch755", "level": "raid50", "members": 6}, [])
    with pytest.raises(ConfigError, match="offers 64k"):
        simulate({"controller": "perch755", "level": "raid6", "members": 6,
                  "stripe_size": "128k"}, [])
