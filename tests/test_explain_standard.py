"""Every explained run has the elevator's decisions and the device side beside the
causes, counted over the measured window only; the why paragraph gives the mechanism
behind the largest differences."""

import pytest
import simpy

from blksim.block.legacy_queue import QueueSettings, RequestQueue
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import get_scheduler
from blksim.sim.clock import SimpyClock
from blksim.sim.explain_decisions import DecisionLog
from blksim.sim.explain_device import DeviceLog
from blksim.sim.explain_report import explain_lines, why_paragraph

RAW = {"run": {"seed": 3, "duration": 0.5},
       "device": {"drive": "cheetah15k4", "queue_depth": 4},
       "queue": {"scheduler": "cfq"},
       "job": [{"name": "reader", "rw": "randread", "numjobs": 4}]}


def _figures(raw):
    from blksim.api import simulate
    from blksim.sim.config import resolve
    return simulate(resolve(raw, "t.toml"), per_request=False, explain=True).figures


def test_an_explained_run_has_decisions_and_device_sections_in_json_and_terminal():
    fig = _figures(RAW)
    sec = fig["explain"]["sda"]
    dec, dev = sec["decisions"], sec["device"]
    assert dec["scheduler"] == "cfq"
    # four sync readers of one request each: cfq idles after each of them
    hold = dec["spans"]["hold"]
    assert hold["count"] > 0 and sum(hold["outcomes"].values()) == hold["count"]
    assert 0 < dev["tags"]["mean"] <= 4 and dev["tags"]["max"] <= 4
    text = "\n".join(explain_lines(fig["explain"]))
    assert "decisions of cfq" in text and "tags in use" in text


def test_the_why_paragraph_gives_the_mechanism_behind_it():
    cfq = _figures(RAW)
    deadline = _figures({**RAW, "queue": {"scheduler": "deadline"}})
    text = why_paragraph([("cfq", cfq), ("deadline", deadline)])
    assert text.startswith("Why: ")
    # cfq serves one reader at a time in slices; deadline sends all four to the drive
    assert "Behind it: " in text and "slices" in text and "queued in the device" in text


class _Clock:
    now = 0.0


def _queue():
    env = simpy.Environment()
    device = ServiceLawDevice("fixed", 0.010, capacity=1 << 30, queue_depth=4)
    cls = get_scheduler("noop")
    return RequestQueue(lambda dq: cls.create(dq, {}, hz=250), device, SimpyClock(env),
                        QueueSettings(nr_requests=128))


def test_decisions_before_the_window_are_not_counted_but_an_open_hold_is_timed_from_it():
    q = _queue()
    log = DecisionLog(q, start=1.0)
    send = log.message
    send(q, "batch_start", 0, "read", 0.2)         # before the window: not counted
    send(q, "hold_start", 7, "idle window", 0.5)   # open when the window starts
    send(q, "hold_start", 8, "idle window", 0.6)
    send(q, "hold_end", 8, "hit", 0.7)             # wholly before: not counted
    send(q, "hold_end", 7, "timeout", 1.25)        # timed from 1.0: 250 ms
    s = log.summary(now=2.0)
    assert "batch_start" not in s["events"]
    assert s["spans"]["hold"]["count"] == 1
    assert s["spans"]["hold"]["total_ms"] == pytest.approx(250.0)
    assert s["spans"]["hold"]["outcomes"] == {"timeout": 1}
    assert s["window_s"] == pytest.approx(1.0)


def test_decisions_kept_and_counted_in_batches_count_as_one_by_one():
    # more messages than one batch, a summary in the middle of them: the same figures
    # as a log that counts each message at once (the batch flushed after each one)
    from blksim.sim import explain_decisions
    msgs = []
    t = 0.0
    for i in range(3 * explain_decisions._BATCH + 7):
        t += 0.001
        word = "write" if i % 5 == 0 else "read"
        msgs.append(("batch_start", 0, word, t))
        msgs.append(("fifo_expired", 1000 + i % 3, word, t))
        msgs.append(("batch_end", 0, "swept" if i % 4 else "fifo_batch", t + 0.0005))
        if i % 9 == 0:
            msgs.append(("hold_start", 1000 + i % 3, "idle window", t))
            msgs.append(("hold_end", 1000 + i % 3, "hit" if i % 2 else "timeout", t + 0.0007))
    batched, single = DecisionLog(_queue(), start=0.05), DecisionLog(_queue(), start=0.05)
    middle = len(msgs) // 2
    for k, (event, pid, detail, now) in enumerate(msgs):
        batched.message(None, event, pid, detail, now)
        single.message(None, event, pid, detail, now)
        single._count_pending()
        if k == middle:
            assert batched.summary(now=now) == single.summary(now=now)
    assert batched._pending            # (some are still kept when the run ends)
    a, b = batched.summary(now=t + 1.0), single.summary(now=t + 1.0)
    assert a == b and a["spans"]["batch"]["count"] > 3 * explain_decisions._BATCH // 2


def test_tags_before_the_window_count_from_its_start():
    q = _queue()
    log = DeviceLog(q, start=1.0)
    log._issued(q, None, 0.2)          # two in use from before the window
    log._issued(q, None, 0.4)
    log._completed(q, None, 1.5)       # one from 1.5 s
    s = log.summary(now=2.0)
    # 0.5 s at 2 tags, then 0.5 s at 1: a mean of 1.5 over the 1 s window
    assert s["tags"]["mean"] == pytest.approx(1.5)
    assert s["tags"]["histogram"] == {"1": pytest.approx(0.5), "2": pytest.approx(0.5)}


def test_bios_still_in_flight_at_the_end_are_reported_per_process_with_their_age():
    # one reader at a time on a 10 ms device, a run that ends 4 ms into a request
    raw = {"run": {"seed": 1, "duration": 0.054},
           "device": {"service": "fixed", "service_time": "10ms", "capacity": "1g"},
           "queue": {"scheduler": "noop"},
           "job": [{"name": "reader", "rw": "randread"}]}
    sec = _figures(raw)["explain"]["sda"]
    assert sec["all"]["bios"] == 5
    [late] = sec["unfinished"]
    assert late["name"] == "reader" and late["bios"] == 1
    assert late["oldest_ms"] == pytest.approx(4.0, abs=1e-6)
    assert "still in flight at the end" in "\n".join(explain_lines({"sda": sec}))


def test_the_device_queue_depth_difference_is_a_mechanism_sentence():
    from blksim.sim.explain_report import device_differences
    a = {"device": {"tags": {"mean": 0.8, "max": 4}}}
    b = {"device": {"tags": {"mean": 13.0, "max": 64}}}
    [(mag, text)] = device_differences("cfq", a, "deadline", b)
    assert mag == pytest.approx(12.2 / 13.0)
    assert text == ("deadline kept 13.0 requests at the device on average (at most 64); "
                    "cfq 0.8 (at most 4)")
    # close means, or an empty window, make no sentence
    assert device_differences("x", a, "y", {"device": {"tags": {"mean": 0.7, "max": 4}}}) == []
    assert device_differences("x", a, "y", {"device": {"tags": {"mean": None}}}) == []


def test_an_elevator_without_decisions_prints_none_and_windows_run_to_the_end():
    noop = _figures({**RAW, "queue": {"scheduler": "noop"}})
    assert "decisions of" not in "\n".join(explain_lines(noop["explain"]))
    deadline = _figures({**RAW, "queue": {"scheduler": "deadline"}})
    # the decisions' window is the run's, not the last message's
    assert deadline["explain"]["sda"]["decisions"]["window_s"] == pytest.approx(0.5)
