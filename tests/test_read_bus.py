"""A read's bus transfer to the host (`read_bus_end`): one sector at a time, none before
it is wholly in the buffer, so a bus slower than the media waits at a track switch."""

import pytest
from hypothesis import given, settings, strategies as st

from blksim.disk_models.drive import read_bus_end, sector_in_at


def sector_by_sector(runs, skip, n, start, bus):
    """The transfer traced one sector at a time: sector i leaves once the bus is free
    and it is in the buffer (the first ``skip`` are in already)."""
    arrive = [start] * skip
    for run in runs:
        count, t_first, dt = run[1], run[3], run[4]
        arrive += [t_first + (j + 1) * dt for j in range(count)]
    assert len(arrive) == n
    free = start
    for a in arrive:
        free = max(free, a) + bus
    return free


def test_bus_faster_than_the_media_ends_one_sector_after_the_media():
    runs = ((0, 10, 0.0, 1.0, 0.1),)
    assert read_bus_end(runs, 0, 10, 1.1, 0.01) == pytest.approx(2.0 + 0.01)


def test_bus_slower_than_the_media_runs_at_bus_speed_from_the_first_sector():
    runs = ((0, 10, 0.0, 1.0, 0.1),)
    assert read_bus_end(runs, 0, 10, 1.1, 0.3) == pytest.approx(1.1 + 10 * 0.3)


def test_a_slower_bus_waits_for_the_sector_after_a_switch():
    # 4 sectors from t=1, then a 2.0 s gap, then 4 more; bus 0.2 a sector: the first
    # four are sent by 1.9, sector 5 is in at 3.5, the last leaves at 3.5 + 4 * 0.2
    runs = ((0, 4, 0.0, 1.0, 0.1), (4, 4, 1.4, 3.4, 0.1))
    assert read_bus_end(runs, 0, 8, 1.1, 0.2) == pytest.approx(3.5 + 4 * 0.2)
    assert sector_in_at(runs, 5) == pytest.approx(3.5)
    assert sector_in_at(runs, 4) == pytest.approx(1.4)


def test_partial_hit_sends_the_buffered_sectors_first():
    # 6 sectors in the buffer from t=0, 2 from the media at 5.0 and 5.1
    runs = ((6, 2, 4.0, 5.0, 0.1),)
    assert read_bus_end(runs, 6, 8, 0.0, 0.2) == pytest.approx(5.1 + 2 * 0.2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.floats(0.0, 5.0), st.floats(0.01, 0.5)),
                min_size=1, max_size=5),
       st.integers(0, 10), st.floats(0.0, 3.0), st.floats(0.0, 1.0))
def test_closed_form_equals_the_sector_by_sector_trace(pieces, skip, start, bus):
    runs, t, lbn = [], 0.0, skip
    for count, gap, dt in pieces:
        t_first = t + gap
        runs.append((lbn, count, t, t_first, dt))
        t = t_first + count * dt
        lbn += count
    n = lbn
    assert read_bus_end(runs, skip, n, start, bus) == pytest.approx(
        sector_by_sector(runs, skip, n, start, bus), rel=1e-9, abs=1e-12)
