"""What the elevator decided during a run, from its own messages (``block_elv_msg``).

Every elevator says what it decided through its queue's ``block_elv_msg`` tracepoint
(``(q, event, pid, detail, now)``; each class lists its events, their meaning and the
kernel function they mark in ``events``: docs/schedulers.md). `DecisionLog` subscribes
and keeps, in memory that does not grow with the run:

* per event, how many times it came and how often with each detail;
* *spans*: an event ``X_start`` opens span ``X`` for its process (``pid``) and the next
  ``X_end`` of that process closes it. ``hold`` (the disk kept idle for one process:
  CFQ's idle window, AS's anticipation, BFQ's idling), ``slice`` (CFQ), ``batch``
  (deadline, mq-deadline) and ``wr`` (BFQ's weight raising) are spans. Per span: how
  many closed, their total and mean time, per start detail (a slice's class, a batch's
  direction) and per end detail, the *outcome* (a hold's ``hit`` or ``timeout``, the
  reason a slice ended). A second ``X_start`` while one is open is counted, not nested;
  an ``X_end`` with none open counts as an outcome only;
* per process (pid other than 0), its events and spans likewise.

`DecisionLog.summary` gives all that as a JSON-ready dict, `lines` as terminal lines,
and `decision_differences` compares two runs' summaries (two schedulers on one
workload) and says, largest first, where their decisions differ most.

The device side (tags in use, a RAID controller's cache) is `blksim.sim.explain_device`.
"""

from __future__ import annotations

#: What a hold is called, per scheduler, in sentences.
_HOLD_NOUN = {"cfq": ("armed", "idle windows", "expired unused"),
              "anticipatory": ("started", "anticipations", "timed out"),
              "bfq": ("armed", "idling periods", "expired unused")}
#: What the other spans are called in sentences: (verb, noun).
_SPAN_NOUN = {"slice": ("gave", "slices"), "batch": ("ran", "batches"),
              "wr": ("weight-raised queues", "times")}
#: Sentences for counted events: a format of ``n`` (the count) and ``top`` (its
#: commonest details).
_EVENT_PHRASE = {
    "fifo_expired": "served {n} requests past their FIFO deadline",
    "writes_starved": "started {n} write batches because reads had starved writes",
    "batch_switch": "switched batch direction {n} times",
    "antic_skipped": "declined to anticipate {n} times ({top})",
    "idle_window_off": "turned a process's idling off {n} times ({top})",
    "idle_window_on": "turned a process's idling back on {n} times",
    "hw_tag": "detected command queueing at the device",
    "throttled": "found a domain out of tokens {n} times ({top})",
    "depth_adjusted": "resized a domain's token pool {n} times ({top})",
    "expire": "expired its in-service queue {n} times ({top})",
}
# How much a difference of each kind weighs in `decision_differences`: holding the disk
# idle for one process delays every other one, so it comes first.
_WEIGHT_HOLD, _WEIGHT_SPAN, _WEIGHT_EVENT = 1.0, 0.5, 0.3


class _Cell:
    """A count and (for a span's start detail) its seconds: a field to add to in place,
    where a count kept in a dict would be looked up and stored again."""

    __slots__ = ("n", "s")

    def __init__(self) -> None:
        self.n = 0
        self.s = 0.0


class _Tally:
    """Counts per detail (a word), in the order the details first came. The last
    detail's cell is kept at hand: an elevator's messages of one event nearly always
    repeat one detail (its words are the same string objects each time)."""

    __slots__ = ("cells", "word", "cell")

    def __init__(self) -> None:
        self.cells: dict = {}            # word -> _Cell
        self.word = None
        self.cell = None

    def at(self, word: str) -> _Cell:
        """The cell of ``word`` (made on first use)."""
        if word is self.word:
            return self.cell
        cell = self.cells.get(word)
        if cell is None:
            cell = self.cells[word] = _Cell()
        self.word = word
        self.cell = cell
        return cell

    def counts(self) -> dict:
        """word -> count."""
        return {word: cell.n for word, cell in self.cells.items()}


class _Span:
    """Closed spans of one kind (or of one kind for one process): count, total seconds,
    per start detail its count and seconds, per end detail its count."""

    __slots__ = ("count", "total", "by_start", "outcomes")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.by_start = _Tally()
        self.outcomes = _Tally()

    def close(self, seconds: float, start_detail: str, end_detail: str) -> None:
        self.count += 1
        self.total += seconds
        row = self.by_start.at(start_detail)
        row.n += 1
        row.s += seconds
        self.outcomes.at(end_detail).n += 1

    def unmatched_end(self, end_detail: str) -> None:
        self.outcomes.at(end_detail).n += 1

    def summary(self) -> dict:
        out = _timed(self.count, self.total)
        out["by_start"] = {k: _timed(c.n, c.s)
                           for k, c in sorted(self.by_start.cells.items())}
        out["outcomes"] = dict(sorted(self.outcomes.counts().items()))
        return out


def _timed(count: int, seconds: float) -> dict:
    """``count``, ``total_ms`` and (when there is one) ``mean_ms``."""
    out = {"count": count, "total_ms": round(seconds * 1e3, 6)}
    if count:
        out["mean_ms"] = round(seconds * 1e3 / count, 6)
    return out


class _SpanState:
    """One span's open starts (shared by its start and end events) and what closed:
    per process (pid other than 0) its start's (time, detail) in ``pids``; the span of
    no process (pid 0: a queue-wide batch) in fields of its own (``zero``: open, since
    ``zero_t`` with detail ``zero_word``: no tuple made per start); ``reopened``: starts
    while one was open; ``closed``: the `_Span` of every process (made at the first end
    in the window)."""

    __slots__ = ("pids", "zero", "zero_t", "zero_word", "reopened", "closed")

    def __init__(self) -> None:
        self.pids: dict = {}
        self.zero = False
        self.zero_t = 0.0
        self.zero_word = None
        self.reopened = 0
        self.closed = None

    def still_open(self) -> int:
        return len(self.pids) + (1 if self.zero else 0)

    def put(self, pid: int, t: float, word: str) -> None:
        """Open the span of ``pid`` (0: no process) at ``t`` with detail ``word``,
        replacing one open."""
        if pid:
            self.pids[pid] = (t, word)
        else:
            self.zero = True
            self.zero_t = t
            self.zero_word = word


class _Event:
    """What `DecisionLog` keeps of one event name: its ``kind`` (0 a plain event, 1 the
    start of a span, 2 its end), its ``span``'s name and `_SpanState` (``state``), its
    counts per detail in the window (``words``), per process (pid other than 0) the same
    (``by_pid``: pid -> `_Tally`) and, for an end, the span's closed spans per process
    (``pid_spans``: pid -> `_Span`). One record per event name, found with one lookup
    per message (no key tuples to build and hash)."""

    __slots__ = ("kind", "span", "state", "words", "by_pid", "pid_spans")

    def __init__(self, event: str, states: dict) -> None:
        if event.endswith("_start"):
            self.kind, self.span = 1, event[:-6]
        elif event.endswith("_end"):
            self.kind, self.span = 2, event[:-4]
        else:
            self.kind, self.span = 0, None
        self.state = None
        if self.kind:
            self.state = states.get(self.span)
            if self.state is None:
                self.state = states[self.span] = _SpanState()
        self.words = _Tally()
        self.by_pid: dict = {}
        self.pid_spans: dict = {}


class DecisionLog:
    """Subscribes to ``queue``'s ``block_elv_msg`` and counts what its elevator decided
    (module docstring). ``start``: the beginning of the window (default: the queue's
    clock now). `close` unsubscribes."""

    def __init__(self, queue, start: float | None = None) -> None:
        self.queue = queue
        self.start = queue.clock.now if start is None else start
        self.last = self.start
        self._events: dict = {}          # event -> _Event
        self._open: dict = {}            # span -> _SpanState
        self._subscribed = True
        queue.subscribe("block_elv_msg", self.message)

    def close(self) -> None:
        """Stop listening (the counts stay)."""
        if self._subscribed:
            self.queue.unsubscribe("block_elv_msg", self.message)
            self._subscribed = False

    def message(self, _q, event: str, pid: int, detail, now: float) -> None:
        """The ``block_elv_msg`` subscriber: count one message. An elevator such as
        mq-deadline sends one for nearly every request, so the common case makes
        nothing: a cell found by the detail's identity, a span of no process opened
        and closed in fields (keeping each message to count later, as a tuple, cost
        more than counting it)."""
        ev = self._events.get(event)
        if ev is None:
            ev = self._events[event] = _Event(event, self._open)
        word = detail if detail.__class__ is str else "-" if detail is None else str(detail)
        kind = ev.kind
        if now < self.start:
            # before the measured window: nothing counted, but a span open when the
            # window starts is timed from its start
            if kind:
                self._before_window(ev.state, kind, pid, word)
            return
        self.last = now
        ev.words.at(word).n += 1
        if pid:
            tally = ev.by_pid.get(pid)
            if tally is None:
                tally = ev.by_pid[pid] = _Tally()
            tally.at(word).n += 1
        if kind == 1:
            state = ev.state
            if (pid in state.pids) if pid else state.zero:
                state.reopened += 1
            else:
                state.put(pid, now, word)
        elif kind == 2:
            state = ev.state
            span = state.closed
            if span is None:
                span = state.closed = _Span()
            if pid:
                pspan = ev.pid_spans.get(pid)
                if pspan is None:
                    pspan = ev.pid_spans[pid] = _Span()
                opened = state.pids.pop(pid, None)
                if opened is None:
                    span.unmatched_end(word)
                    pspan.unmatched_end(word)
                else:
                    t0, start_word = opened
                    span.close(now - t0, start_word, word)
                    pspan.close(now - t0, start_word, word)
            elif state.zero:
                state.zero = False
                span.close(now - state.zero_t, state.zero_word, word)
            else:
                span.unmatched_end(word)

    def _before_window(self, state: _SpanState, kind: int, pid: int, word: str) -> None:
        """A span's start or end before the window: a start opens it from the
        window's start (replacing one open), an end closes it uncounted."""
        if kind == 1:
            state.put(pid, self.start, word)
        elif pid:
            state.pids.pop(pid, None)
        else:
            state.zero = False

    def summary(self, now: float | None = None) -> dict:
        """What was decided, JSON-ready: ``scheduler``, ``window_s`` (from ``start`` to
        ``now``, default the last message), ``events`` (per event its ``count`` and
        ``by_detail``), ``spans`` (per span ``count``, ``total_ms``, ``mean_ms``,
        ``by_start``, ``outcomes``, and ``open``: still open at the end), ``processes``
        (per pid, as a string: its ``events`` and ``spans``) and ``meanings`` (the
        elevator's own ``events`` table)."""
        if now is None:             # the end of the run: the clock's, once it has run
            now = max(self.last, getattr(self.queue.clock, "now", self.last))
        end = now
        elevator = self.queue.elevator
        still_open = {name: st.still_open() for name, st in self._open.items()
                      if st.still_open()}
        closed = {name for name, st in self._open.items() if st.closed is not None}
        spans = {}
        for name in sorted(closed | set(still_open)):
            st = self._open[name]
            span = st.closed or _Span()
            spans[name] = {**span.summary(), "open": still_open.get(name, 0),
                           "restarted": st.reopened}
        events = {event: ev.words.counts() for event, ev in self._events.items()
                  if ev.words.cells}
        procs: dict = {}
        for event, ev in self._events.items():
            for pid, tally in ev.by_pid.items():
                procs.setdefault(pid, {"events": {}, "spans": {}})["events"][event] = \
                    tally.counts()
        for ev in self._events.values():
            for pid, span in ev.pid_spans.items():
                procs.setdefault(pid, {"events": {}, "spans": {}})["spans"][ev.span] = span
        return {
            "scheduler": getattr(elevator, "name", None),
            "window_s": round(max(end - self.start, 0.0), 9),
            "events": {e: {"count": sum(c.values()), "by_detail": dict(sorted(c.items()))}
                       for e, c in sorted(events.items())},
            "spans": spans,
            "processes": {str(pid): {
                "events": {e: dict(sorted(c.items())) for e, c in sorted(p["events"].items())},
                "spans": {s: sp.summary() for s, sp in sorted(p["spans"].items())}}
                for pid, p in sorted(procs.items())},
            "meanings": dict(getattr(elevator, "events", {}) or {}),
        }


# ---------------------------------------------------------------------- terminal lines
def _top(counts: dict, n: int = 3) -> str:
    """The commonest details: ``think_time 5, seeky 2``."""
    best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return ", ".join(f"{k} {v:,}" for k, v in best)


def _outcome_share(span: dict, word: str) -> float | None:
    """The share (0..1) of closed spans whose outcome is ``word``, or None."""
    closed = sum(span.get("outcomes", {}).values())
    if not closed:
        return None
    return span["outcomes"].get(word, 0) / closed


def lines(summary: dict) -> list[str]:
    """``summary`` (`DecisionLog.summary`) as terminal lines: each span with its count,
    mean time and outcomes, then each other event with its commonest details, then the
    processes held for longest."""
    name = summary.get("scheduler") or "the elevator"
    window = summary.get("window_s", 0.0)
    out = [f"decisions of {name} over {window:.3f} s:"]
    spans = summary.get("spans", {})
    events = summary.get("events", {})
    if not spans and not events:
        out.append("  none reported")
        return out
    for span_name, span in spans.items():
        text = f"  {span_name}: {span['count']:,} closed"
        if span["count"]:
            text += f", {span['mean_ms']:.3f} ms each, {span['total_ms'] / 1e3:.3f} s in all"
        parts = [f"{k} {_timed_text(v)}" for k, v in span["by_start"].items()]
        if parts and list(span["by_start"]) != ["-"]:
            text += f" ({'; '.join(parts)})"
        if span["outcomes"]:
            text += f"; ended: {_top(span['outcomes'], 6)}"
        if span.get("open"):
            text += f"; {span['open']:,} still open"
        out.append(text)
    for event, row in events.items():
        if event.endswith("_start") or event.endswith("_end"):
            continue
        text = f"  {event}: {row['count']:,}"
        if list(row["by_detail"]) != ["-"]:
            text += f" ({_top(row['by_detail'], 4)})"
        out.append(text)
    held = []
    for pid, proc in summary.get("processes", {}).items():
        hold = proc.get("spans", {}).get("hold")
        if hold and hold["count"]:
            held.append((hold["total_ms"], pid, hold))
    for total_ms, pid, hold in sorted(held, key=lambda h: (-h[0], h[1]))[:5]:
        share = _outcome_share(hold, "timeout")
        text = (f"  held for pid {pid}: {hold['count']:,} x {hold['mean_ms']:.3f} ms = "
                f"{total_ms / 1e3:.3f} s")
        if share is not None:
            text += f" ({share * 100:.0f} % timed out)"
        out.append(text)
    return out


def _timed_text(row: dict) -> str:
    return (f"{row['count']:,} x {row['mean_ms']:.3f} ms" if row.get("count")
            else "0")


# ---------------------------------------------------------------------- comparison
def _hold_sentence(s: dict) -> str:
    name = s.get("scheduler") or "?"
    hold = s["spans"]["hold"]
    verb, noun, unused = _HOLD_NOUN.get(name, ("kept", "holds for one process",
                                               "timed out"))
    text = f"{name} {verb} {hold['count']:,} {noun}"
    if hold["count"]:
        text += f" ({hold['mean_ms']:.1f} ms each"
        share = _outcome_share(hold, "timeout")
        if share is not None:
            text += f", {share * 100:.0f} % {unused}"
        text += ")"
    return text


def _span_sentence(s: dict, span_name: str) -> str:
    name = s.get("scheduler") or "?"
    span = s["spans"][span_name]
    if span_name == "wr":
        return f"{name} weight-raised queues {span['count']:,} times"
    verb, noun = _SPAN_NOUN.get(span_name, ("had", f"{span_name} spans"))
    text = f"{name} {verb} {span['count']:,} {noun}"
    if span["count"]:
        text += f" ({span['mean_ms']:.1f} ms each)"
    return text


def _event_sentence(s: dict, event: str) -> str:
    name = s.get("scheduler") or "?"
    row = s["events"][event]
    phrase = _EVENT_PHRASE.get(event, "sent " + event + " {n} times")
    return f"{name} " + phrase.format(n=f"{row['count']:,}", top=_top(row["by_detail"]))


def _measures(s: dict) -> dict:
    """What `decision_differences` compares: key -> (value, weight, sentence)."""
    out = {}
    for span_name, span in s.get("spans", {}).items():
        if span_name == "hold":
            out[("hold",)] = (span["total_ms"], _WEIGHT_HOLD, _hold_sentence(s))
        else:
            out[("span", span_name)] = (span["count"], _WEIGHT_SPAN,
                                        _span_sentence(s, span_name))
    for event, row in s.get("events", {}).items():
        if not (event.endswith("_start") or event.endswith("_end")):
            out[("event", event)] = (row["count"], _WEIGHT_EVENT, _event_sentence(s, event))
    return out


def _absent(s: dict, key: tuple) -> str:
    name = s.get("scheduler") or "?"
    if key == ("hold",):
        return f"{name} held nothing back"
    if key[0] == "span":
        return f"{name} had no {_SPAN_NOUN.get(key[1], ('', key[1]))[1]}"
    return f"{name} none"


def decision_differences(a: dict, b: dict) -> list[tuple[float, str]]:
    """The differences between two runs' decisions (`DecisionLog.summary` of each),
    largest first, as (magnitude, sentence) pairs, e.g. ``(1.0, "cfq armed 1,204 idle
    windows (8.0 ms each, 71 % expired unused); deadline held nothing back")``.

    Each measure is a hold's total time, a span's count or an event's count; its
    magnitude is the relative difference, ``|a - b| / max(a, b)`` (0 to 1), weighted by
    what it does to other processes: 1 for holds (the disk kept idle for one process),
    0.5 for the other spans, 0.3 for single events. Measures equal on both sides are
    left out; ties are ordered by sentence."""
    ma, mb = _measures(a), _measures(b)
    out = []
    for key in set(ma) | set(mb):
        va, wa, sa = ma.get(key, (0, 0.0, None))
        vb, wb, sb = mb.get(key, (0, 0.0, None))
        top = max(va, vb)
        if top <= 0 or va == vb:
            continue
        magnitude = round(abs(va - vb) / top * max(wa, wb), 6)
        first, second = (sa, sb) if va >= vb else (sb, sa)
        other = b if va >= vb else a
        if second is None or (min(va, vb) == 0):
            second = _absent(other, key)
        out.append((magnitude, f"{first}; {second}"))
    out.sort(key=lambda pair: (-pair[0], pair[1]))
    return out
