"""blksim._compat.trace_boundary: a hint to PyPy's JIT that must leave the function it
marks as it was (same object, same results) on every interpreter."""

from blksim._compat import trace_boundary
from blksim.block.legacy_queue import RequestQueue


def test_a_marked_function_is_returned_as_it_is_and_still_works():
    def step(x, y=2):
        return x * y + 1

    marked = trace_boundary(step)
    assert marked is step
    assert [marked(x) for x in range(3)] == [1, 3, 5]
    assert marked(3, y=5) == 16
    # marking twice (a function shared by two decorators) is harmless
    assert trace_boundary(step) is step


def test_a_marked_method_stays_a_plain_method():
    class Queue:
        def __init__(self):
            self.events = []

        @trace_boundary
        def on_event(self, when):
            self.events.append(when)
            return len(self.events)

    q = Queue()
    assert q.on_event(0.5) == 1 and q.on_event(1.0) == 2
    assert q.events == [0.5, 1.0]
    # the legacy queue's device event is the function written in its class, no wrapper
    assert RequestQueue.__dict__["_device_event"].__qualname__ == "RequestQueue._device_event"
    assert not hasattr(RequestQueue._device_event, "__wrapped__")
