"""The clock fires callbacks at exactly the requested time."""

import simpy
from hypothesis import given
from hypothesis import strategies as st

from blksim.sim.clock import SimpyClock


@given(st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=1,
                max_size=20))
def test_callbacks_fire_at_exactly_the_requested_time(times):
    env = simpy.Environment()
    clock = SimpyClock(env)
    seen = []

    def chain(remaining):
        def fire(_ev):
            seen.append(clock.now)
            if remaining:
                # schedule relative to an awkward current time, as a device does
                clock.call_at(clock.now + remaining[0], chain(remaining[1:]))
        return fire

    first = times[0]
    clock.call_at(first, chain(times[1:]))
    env.run()
    expected = [first]
    for t in times[1:]:
        expected.append(expected[-1] + t)
    assert seen == expected


def test_past_times_fire_now_in_order():
    env = simpy.Environment()
    clock = SimpyClock(env)
    seen = []
    clock.call_at(1.0, lambda ev: (clock.call_at(0.5, lambda e: seen.append(("late", clock.now))),
                                   clock.call_at(1.0, lambda e: seen.append(("same", clock.now)))))
    env.run()
    assert seen == [("late", 1.0), ("same", 1.0)]
