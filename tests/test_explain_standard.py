"""Every explained run has the elevator's decisions and the device side beside the
causes, counted over the measured window only; the why paragraph gives the mechanism
behind the largest differences."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


def _plain_decisions(msgs, start):
    """What `DecisionLog` must count, by the plain rules of its docstring (dicts only):
    events -> {detail: n}; spans -> [count, seconds, {start detail: [n, s]},
    {end detail: n}, open, restarted]; per pid the same two."""
    events, spans, opened, restarted = {}, {}, {}, {}
    pevents, pspans = {}, {}
    for event, pid, detail, now in msgs:
        word = detail if isinstance(detail, str) else "-" if detail is None else str(detail)
        kind = 1 if event.endswith("_start") else 2 if event.endswith("_end") else 0
        name = event.rsplit("_", 1)[0] if kind else None
        if now < start:
            if kind == 1:
                opened.setdefault(name, {})[pid] = (start, word)
            elif kind == 2:
                opened.setdefault(name, {}).pop(pid, None)
            continue
        row = events.setdefault(event, {})
        row[word] = row.get(word, 0) + 1
        if pid:
            row = pevents.setdefault(pid, {}).setdefault(event, {})
            row[word] = row.get(word, 0) + 1
        if kind == 1:
            if pid in opened.setdefault(name, {}):
                restarted[name] = restarted.get(name, 0) + 1
            else:
                opened[name][pid] = (now, word)
        elif kind == 2:
            targets = [spans.setdefault(name, [0, 0.0, {}, {}])]
            if pid:
                targets.append(pspans.setdefault(pid, {}).setdefault(name, [0, 0.0, {}, {}]))
            o = opened.setdefault(name, {}).pop(pid, None)
            for sp in targets:
                sp[3][word] = sp[3].get(word, 0) + 1
                if o is not None:
                    sp[0] += 1
                    sp[1] += now - o[0]
                    cell = sp[2].setdefault(o[1], [0, 0.0])
                    cell[0] += 1
                    cell[1] += now - o[0]
    for name, starts in opened.items():
        if starts:
            spans.setdefault(name, [0, 0.0, {}, {}])
    for name, sp in spans.items():
        sp += [len(opened.get(name, {})), restarted.get(name, 0)]
    return events, spans, pevents, pspans


def _counted(summary):
    """`DecisionLog.summary` in `_plain_decisions`' shape."""
    def span(sp):
        return [sp["count"], sp["total_ms"],
                {w: [c["count"], c["total_ms"]] for w, c in sp["by_start"].items()},
                sp["outcomes"]]
    events = {e: row["by_detail"] for e, row in summary["events"].items()}
    spans = {n: span(sp) + [sp["open"], sp["restarted"]]
             for n, sp in summary["spans"].items()}
    pevents = {int(p): row["events"] for p, row in summary["processes"].items()
               if row["events"]}
    pspans = {int(p): {n: span(sp) for n, sp in row["spans"].items()}
              for p, row in summary["processes"].items() if row["spans"]}
    return events, spans, pevents, pspans


def _in_ms(spans):
    for sp in spans.values():
        sp[1] = round(sp[1] * 1e3, 6)
        sp[2] = {w: [n, round(s * 1e3, 6)] for w, (n, s) in sp[2].items()}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["batch", "hold", "slice"]),
                          st.sampled_from(["_start", "_end", ""]),
                          st.sampled_from([0, 0, 7, 8]),
                          st.sampled_from(["read", "write", "", None, 3, "swept"]),
                          st.integers(0, 3),
                          st.booleans()),
                max_size=60))
def test_decisions_counted_in_place_are_the_plain_rules_counts(draws):
    # the log's fast paths (a detail's cell found by identity, a span of pid 0 kept in
    # fields) against the rules counted with dicts: details equal but not the same
    # string, numbers and None, restarts, unmatched ends, a window starting at 0.002 s
    msgs, t = [], 0.0
    for span, suffix, pid, detail, step, copy in draws:
        t += step * 0.001
        if copy and isinstance(detail, str):
            detail = "".join(list(detail))      # equal, not identical
        msgs.append((span + suffix if suffix else span + "_msg", pid, detail, t))
    log = DecisionLog(_queue(), start=0.002)
    for event, pid, detail, now in msgs:
        log.message(None, event, pid, detail, now)
    events, spans, pevents, pspans = _plain_decisions(msgs, 0.002)
    _in_ms(spans)
    for per_pid in pspans.values():
        _in_ms(per_pid)
    for sp in spans.values():
        sp[1] = pytest.approx(sp[1], abs=1e-6)
    got = _counted(log.summary(now=t + 1.0))
    assert got[0] == events and got[2] == pevents
    assert got[1] == spans
    assert got[3] == {p: {n: sp for n, sp in per.items()} for p, per in pspans.items()}


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
