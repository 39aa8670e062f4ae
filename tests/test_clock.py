"""The clock fires callbacks at exactly the requested time."""

from heapq import heappush

import simpy
from hypothesis import given
from hypothesis import strategies as st

from blksim.sim.clock import Call, SimpyClock, _push_short, run_events


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


# --------------------------------------------------------------- the queue's order
_entry_lists = st.lists(st.tuples(st.integers(0, 3).map(float), st.integers(0, 2)),
                        max_size=12)


@given(_entry_lists, _entry_lists)
def test_push_leaves_the_queue_exactly_as_heappush(existing, pushed):
    """`_push_short` (PyPy's push, with its shortcut for a queue of one entry) makes the
    very list heapq.heappush makes, entry by entry, whatever the queue held."""
    ids = iter(range(10**6))
    ours, theirs = [], []
    for when, prio in existing + pushed:
        entry = (when, prio, next(ids), object())
        _push_short(ours, entry)
        heappush(theirs, entry)
        assert ours == theirs


@given(st.lists(st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.5]), max_size=3),
                min_size=1, max_size=40),
       st.booleans())
def test_run_events_fires_calls_in_simpys_order(children, bounded):
    """Calls that queue calls (many at the current instant, as kblockd's run is) fire
    in the same order under `run_events` as under simpy's own ``env.run``, and that
    order is (time, order queued); with a limit, the same ones are left queued."""
    def play(runner):
        env = simpy.Environment()
        clock = SimpyClock(env)
        seen = []
        todo = iter(children)

        def fire(ev, name):
            seen.append((ev.when, name))
            for k, delay in enumerate(next(todo, [])):
                clock.call_at(clock.now + delay, lambda e, n=f"{name}.{k}": fire(e, n))

        clock.call_at(0.0, lambda e: fire(e, "r"))
        clock.call_at(0.0, lambda e: fire(e, "s"))
        runner(env)
        # (simpy 4.1's run leaves its spent stop mark queued; only the calls count)
        return seen, sorted(entry[0] for entry in env._queue if entry[3].__class__ is Call)

    until = 2.5 if bounded else None
    ours = play(lambda env: run_events(env, until))
    assert ours == play(lambda env: env.run(until))
    times = [when for when, _ in ours[0]]
    assert times == sorted(times)
