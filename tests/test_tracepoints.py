"""The block layer's tracepoints: what fires when, with which arguments; subscribers that
raise; and that no module above the block layer patches a queue or a device."""

import ast
from pathlib import Path

import pytest
import simpy

from blksim.block.legacy_queue import QueueSettings, RequestQueue
from blksim.block.request import Bio
from blksim.block.tracepoints import TRACEPOINTS, StopRun, TracepointFault
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import get_scheduler
from blksim.sim.clock import SimpyClock

ROOT = Path(__file__).resolve().parents[1]


def _queue(nr_requests=128, depth=1):
    env = simpy.Environment()
    device = ServiceLawDevice("fixed", 0.010, capacity=1 << 30, queue_depth=depth)
    cls = get_scheduler("noop")
    q = RequestQueue(lambda dq: cls.create(dq, {}, hz=250), device, SimpyClock(env),
                     QueueSettings(nr_requests=nr_requests))
    return env, q


def _log_all(q):
    """Subscribe to every tracepoint; the log holds (name, args after the queue)."""
    log = []
    for name in TRACEPOINTS:
        q.subscribe(name, lambda dev, *args, name=name: log.append((name, args)))
    return log


def _bio(sector, n=8, write=True, sync=False, pid=1):
    return Bio(sector, sector, n, write, sync, pid, on_complete=lambda b: None)


def test_one_async_write_passes_every_point_of_its_life_in_order():
    env, q = _queue()
    log = _log_all(q)
    b = _bio(100)
    q.submit_bio(b, 0.0)
    env.run()
    names = [n for n, _ in log]
    assert names == ["block_bio_queue", "block_getrq", "block_plug", "block_rq_insert",
                     "block_unplug_timer", "block_unplug_io", "block_rq_issue",
                     "block_rq_complete", "block_bio_complete"]
    args = dict(log)
    assert args["block_bio_queue"] == (b, 0.0)
    assert args["block_getrq"] == (b, 1, 0.0)           # rw: a write
    rq = args["block_rq_insert"][0]
    assert (rq.sector, rq.nr_sectors, rq.bios) == (100, 8, [b])
    assert args["block_unplug_timer"] == (1, 0.004)      # one request; one jiffy at HZ=250
    assert args["block_rq_issue"] == (rq, 0.004)
    assert args["block_rq_complete"] == (rq, pytest.approx(0.014))
    assert args["block_bio_complete"] == (b, pytest.approx(0.014))


def test_merges_fire_back_and_front_merge_and_no_new_request():
    env, q = _queue()
    log = _log_all(q)
    q.submit_bio(_bio(100), 0.0)
    back, front = _bio(108), _bio(92)
    q.submit_bio(back, 0.0)
    q.submit_bio(front, 0.0)
    assert [n for n, _ in log].count("block_getrq") == 1
    assert ("block_bio_backmerge", (back, 0.0)) in log
    assert ("block_bio_frontmerge", (front, 0.0)) in log


def test_a_bio_that_finds_no_free_request_fires_sleeprq():
    env, q = _queue(nr_requests=1)
    log = _log_all(q)
    q.submit_bio(_bio(100, sync=True), 0.0)
    late = _bio(5000, sync=True)
    assert not q.submit_bio(late, 0.0)
    assert log[-1] == ("block_sleeprq", (late, 1, 0.0))


def test_a_sync_bio_unplugs_for_io_without_a_timer():
    env, q = _queue()
    log = _log_all(q)
    q.submit_bio(_bio(100), 0.0)                # async: plugs
    q.submit_bio(_bio(5000, sync=True), 0.0)    # sync: unplugs at once
    names = [n for n, _ in log]
    assert "block_unplug_io" in names and "block_unplug_timer" not in names


def test_unknown_tracepoint_lists_the_valid_ones_and_unsubscribe_stops_calls():
    env, q = _queue()
    with pytest.raises(ValueError, match="block_rq_issue"):
        q.subscribe("block_rq_dispatch", print)
    seen = []
    fn = seen.append
    q.subscribe("block_bio_queue", lambda dev, bio, now: fn(bio))
    only = q.subscribers("block_bio_queue")[0]
    q.unsubscribe("block_bio_queue", only)
    q.submit_bio(_bio(1), 0.0)
    assert seen == [] and q.subscribers("block_bio_queue") == ()


class Exploding:
    def issue(self, q, rq, now):
        raise KeyError("no such request")


def test_a_raising_subscriber_stops_the_run_with_a_tracepoint_fault():
    env, q = _queue()
    q.subscribe("block_rq_issue", Exploding().issue)
    with pytest.raises(TracepointFault) as err:
        q.submit_bio(_bio(100, sync=True), 0.0)
    assert str(err.value) == (f"tracepoint block_rq_issue on sda: subscriber {__name__}:"
                              f"Exploding.issue raised KeyError: 'no such request'")


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_fire_calls_every_subscriber_in_order_and_names_the_one_that_raised(n):
    # fire is written out for one and two subscribers, with a loop for the rest:
    # each count calls all, in order, and a fault names its own subscriber
    from blksim.block.tracepoints import fire

    class Dev:
        name = "sdz"
    calls = []

    def make(k, bad=False):
        def sub(dev, a, b):
            calls.append((k, dev.name, a, b))
            if bad:
                raise ValueError(f"bad {k}")
        sub.__qualname__ = f"sub{k}"
        return sub
    fire(tuple(make(k) for k in range(n)), "block_rq_issue", Dev(), 7, 0.5)
    assert calls == [(k, "sdz", 7, 0.5) for k in range(n)]
    for bad in range(n):
        calls.clear()
        subs = tuple(make(k, k == bad) for k in range(n))
        with pytest.raises(TracepointFault, match=f"subscriber {__name__}:sub{bad} raised "
                                                   f"ValueError: bad {bad}$"):
            fire(subs, "block_rq_issue", Dev(), 7, 0.5)
        assert [c[0] for c in calls] == list(range(bad + 1))


def test_stop_run_passes_through_untouched():
    env, q = _queue()

    def stop(dev, rq, now):
        raise StopRun()
    q.subscribe("block_rq_issue", stop)
    with pytest.raises(StopRun):
        q.submit_bio(_bio(100, sync=True), 0.0)


SMALL = """
[run]
seed = 3
duration = "200ms"
[device]
drive = "cheetah15k4"
[queue]
scheduler = "deadline"
[[job]]
name = "w"
rw = "randwrite"
bs = "4k"
iodepth = 4
"""


def test_a_subscriber_fault_in_a_cli_run_leaves_no_output(tmp_path, capsys, monkeypatch):
    """Exit 2, one line naming the subscriber and the tracepoint, and none of the run's
    files (results.json, requests.csv, blktrace, iolog) half-written or in place."""
    from blksim.cli import main
    from blksim.traces import blktrace_out

    calls = []

    def issue(self, q, rq, now):
        calls.append(rq)
        if len(calls) == 20:
            raise OSError("disk full")
    monkeypatch.setattr(blktrace_out.BlktraceRecorder, "issue", issue)
    config = tmp_path / "small.toml"
    config.write_text(SMALL)
    out, bt, iolog = tmp_path / "out", tmp_path / "bt", tmp_path / "io.log"
    code = main(["run", str(config), "-q", "--out", str(out), "--per-request",
                 "--blktrace", str(bt), "--iolog", str(iolog)])
    _, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0] == (f"blksim: error: tracepoint block_rq_issue on sda: subscriber "
                        f"{__name__}:test_a_subscriber_fault_in_a_cli_run_leaves_no_output."
                        f"<locals>.issue raised OSError: disk full")
    left = [p for p in tmp_path.rglob("*") if p.is_file() and p != config]
    assert left == []


# ---------------------------------------------------------------------- no patching
def _queue_and_device_names() -> set:
    """The public methods of the request queue (and its bases) and of the device protocol,
    and the objects a queue is built around."""
    names = {"device", "elevator"}
    for path, classes in ((ROOT / "block" / "legacy_queue.py", {"RequestQueue"}),
                          (ROOT / "block" / "tracepoints.py", {"Traced"}),
                          (ROOT / "block" / "elevator_boundary.py", {"ElevatorBoundary"}),
                          (ROOT / "disk_models" / "base.py", {"Device"})):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in classes:
                names |= {f.name for f in node.body if isinstance(f, ast.FunctionDef)
                          and not f.name.startswith("__")}
    return names


def _patches_in(tree, names: set) -> list:
    """Every ``x.name = ...`` in ``tree`` with ``name`` in ``names`` and ``x`` not self."""
    out = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        out.extend((node.lineno, ast.unparse(t)) for t in targets
                   if isinstance(t, ast.Attribute) and t.attr in names
                   and not (isinstance(t.value, ast.Name) and t.value.id in ("self", "cls")))
    return out


def test_no_module_above_the_block_layer_replaces_a_queue_or_device_attribute():
    """Recorders subscribe to tracepoints; nobody swaps ``queue.device`` or wraps
    ``queue.submit_bio`` any more."""
    names = _queue_and_device_names()
    assert {"submit_bio", "run_queue", "subscribe", "submit", "pop_completed"} <= names
    files = [ROOT / "api.py", *(p for room in ("schedulers", "traces", "hostio", "apps", "sim",
                                               "experiments", "cli")
                                for p in (ROOT / room).rglob("*.py"))]
    bad = [f"{p.relative_to(ROOT)}:{line}: {target}" for p in files
           for line, target in _patches_in(ast.parse(p.read_text(encoding="utf-8")), names)
           # a parsed trace record's field, not a queue's
           if not (p.name == "blktrace.py" and target == "out.device")]
    assert not bad, "\n".join(bad)


def test_the_patch_finder_finds_a_patch():
    tree = ast.parse("sim.queue.device = proxy\nq.submit_bio = wrapped\nself.device = d\n")
    assert _patches_in(tree, _queue_and_device_names()) == [
        (1, "sim.queue.device"), (2, "q.submit_bio")]
