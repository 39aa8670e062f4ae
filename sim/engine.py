"""Build and run one simulation from a `RunConfig`.

The engine owns the simpy environment (the clock), derives every random
stream from the run's seed with `numpy.random.SeedSequence.spawn`, wires the
workload processes to the request queue and the device, and collects results.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field

import simpy

from blksim.block.legacy_queue import RequestQueue, SimulationError
from blksim.block.elevator_boundary import plugin_fault
from blksim.sim.clock import SimpyClock, run_events
from blksim.sim.config import RunConfig
from blksim.hostio.fileio import OpenFile
from blksim.sim.host import FileRoundRobin, Host, build_device, elevator_factory  # noqa: F401
from blksim.sim.metrics import Metrics
from blksim.sim.storage_config import PRIMARY
from blksim.sim.stopping import raise_if_requested
from blksim.sim.trace_process import TraceReplay
from blksim.sim.workload import BioIds, JobProcess
from blksim.traces.pattern import IoPattern, make_rngs


#: The pids of the flusher (pdflush) and of ext3's journal thread (kjournald), whose
#: bios are their own.
PDFLUSH_PID = 200
KJOURNALD_PID = 201


@dataclass
class RunOutcome:
    """What a finished run hands to reports: metrics, the queue and device, the config."""

    config: RunConfig
    metrics: Metrics
    queue: RequestQueue
    device: object
    sim_time: float
    processes: list
    wall_seconds: float
    replays: list = field(default_factory=list)   # results.json "replay": one dict per trace
    phases: list = field(default_factory=list)    # per phase: scheduler, iosched, switch times
    # the queue's counters when measurement started (ramp_time): requests allocated,
    # bio merges, request merges, bios that waited for a request
    queue_at_start: tuple = (0, 0, 0, 0)
    # open-loop sources that fell behind their schedule (results.json "behind_schedule")
    behind: list = field(default_factory=list)
    # sda's /proc/diskstats counters when measurement started and at the end
    # (`blksim.block.diskstats`; results.json "iostat")
    diskstats: tuple = ()
    # every block device (`sim.host.Host`), with each one's counters at the start of
    # measurement and at the end: name -> (sample, sample); disk -> queue counters at start
    host: object = None
    block_samples: dict = field(default_factory=dict)
    queues_at_start: dict = field(default_factory=dict)
    writeback: object = None         # hostio.writeback.Writeback of a run with files
    journals: dict = field(default_factory=dict)   # device name -> hostio.journal.Journal
    apps: dict = field(default_factory=dict)       # app name -> its stats (apps)
    # disk -> its hardware queues' counts when measurement started (multi-queue disks)
    hctx_at_start: dict = field(default_factory=dict)
    explain: object = None           # sim.explain.Explain of a run that asked for it
    cgroups: object = None           # block.cgroup.CgroupTree of a run with groups
    pressure: object = None          # block.psi.Pressure of a run with groups


def per_file_job(job, file_sectors: int, files: int):
    """The part of a job over several files (fio's ``filename=a:b``) that works on one
    of ``file_sectors`` sectors: fio divides ``size`` among the files."""
    from dataclasses import replace
    size = job.size
    if size is not None:
        size = max(size // files // job.max_bs * job.max_bs, job.max_bs)
    return replace(job, device_size=file_sectors * 512, size=size)


def open_trace(spec, capacity: int | None = None, stats=None, latency: bool = False):
    """An iterator of the trace records of a `TraceSpec`, as they are to be replayed:
    device, time window, request limit and sector remapping applied
    (`sim.replay.open_records`). ``capacity``: the simulated device's sectors."""
    from blksim.sim.replay import ReplayStats, open_records
    return open_records(spec, capacity if capacity is not None else 1 << 62,
                        stats if stats is not None else ReplayStats(), latency=latency)


class Simulation:
    """One configured run: call `run` once.

    ``device`` replaces the configured drive (tests use service-law devices);
    ``complete_hooks`` are called with every completed bio; ``progress`` is a
    `blksim.cli.progress.Progress` or None. ``blktrace`` (a directory) records the run
    as blktrace binary files there (`blksim.traces.blktrace_out`); ``iolog`` (a file)
    records every bio's submission as an fio iolog v3 (`blksim.traces.iolog_out`), naming
    the device ``iolog_filename``; ``iostat`` (a file and an interval in s) writes
    ``iostat -x``'s figures every interval as CSV (`blksim.sim.iostat_log`).
    ``explain`` True attributes every bio's time to its causes (`blksim.sim.explain`,
    results.json ``explain``); ``explain_extra`` adds collectors to it (name -> factory
    of a device's collector, `blksim.sim.explain.Explain`).
    """

    def __init__(self, cfg: RunConfig, complete_hooks=(), progress=None, device=None, *,
                 blktrace: str | None = None, iolog: str | None = None,
                 iolog_filename: str | None = None, iostat: tuple | None = None,
                 breakdowns: bool = False, explain: bool = False,
                 explain_extra: dict | None = None) -> None:
        self.cfg = cfg
        streams = make_rngs(cfg.seed, 1 + sum(j.numjobs for j in cfg.jobs))
        self.env = simpy.Environment()
        self.clock = SimpyClock(self.env)
        self.metrics = Metrics(start=cfg.ramp_time, client_timeout=cfg.client_timeout,
                               phase_starts=[sw.at for sw in cfg.switches])
        self.progress = progress
        self._hooks = tuple(complete_hooks)
        # every disk's drive draws its seed from stream 0, sda's first
        self.host = Host(cfg, self.clock, streams[0].getrandbits, device)
        self.queue = self.host.primary
        self._measure(cfg, self.host, self.metrics, self._hooks)
        # cgroup v2 groups (blksim.block.cgroup): None when the run has none
        self.cgroups = self.pressure = self.app_tasks = None
        if cfg.cgroups is not None:
            from blksim.block.psi import Pressure
            self.cgroups = cfg.cgroups.build()
            self.cgroups.install([d for d in self.host.blocks.values()
                                  if d.kind in ("disk", "dm")])
            self.pressure = Pressure(self.cgroups, cfg.hz)
            from blksim.sim.pressure import AppTasks
            self.app_tasks = AppTasks(self.pressure, self.clock)   # applications' states
            for front in self.host.throttles.values():     # io.max (blk-throttle)
                front.associate = self.cgroups.associate
            for name, policy in self.host.iolatency.items():   # io.latency (blk-iolatency)
                for group in self.cgroups.groups.values():
                    if name in group.io_latency:
                        policy.set_target(group, group.io_latency[name])
        self.device = self.queue.device
        if breakdowns:                      # each request carries where its time went
            for q in self.host.disks.values():
                if hasattr(q.device, "record_breakdown"):
                    q.device.record_breakdown = True
        # Boundaries first: scheduled before any workload event, they run before
        # everything else due at the same time, so a bio queued exactly at a
        # boundary belongs to the stretch that starts there.
        marks = sorted({cfg.ramp_time, *(sw.at for sw in cfg.switches)} - {0.0})
        for t in marks:
            self.clock.call_at(t, lambda _ev, t=t: self.metrics.mark_issued(
                t, self.issued_by_pid()))
        self.queues_at_start = {name: (0, 0, 0, 0) for name in self.host.disks}
        self.hctx_at_start = {name: q.hw_queue_counts() for name, q in self.host.disks.items()}
        self.samples_at_start = {name: dev.stats.sample(0.0)
                                 for name, dev in self.host.blocks.items()}
        if cfg.ramp_time:
            self.clock.call_at(cfg.ramp_time, self._start_measuring)
        self.phase_info = self._phase_info(cfg)
        for sw, info in zip(cfg.switches, self.phase_info[1:]):
            self.clock.call_at(sw.at, lambda _ev, sw=sw, info=info: self._switch(sw, info))

        horizon = cfg.duration
        ids = BioIds()
        self.writeback = None
        if cfg.files:
            from blksim.hostio.fileio import Submitter
            from blksim.hostio.writeback import Writeback
            flusher = Submitter(PDFLUSH_PID)
            if any(not job.direct and job.read_fraction < 1.0 for job in cfg.jobs):
                self.metrics.register_process(PDFLUSH_PID, "pdflush")   # it will write
            self.writeback = Writeback(self.clock, self.host.page_cache,
                                       cfg.memory // 4096, cfg.vm, flusher)
        self.journals = {}                      # device target -> hostio.journal.Journal
        journalled = {d: f for d, f in cfg.filesystems.items() if f.type != "none"}
        if journalled and self.writeback is not None:
            from blksim.hostio.fileio import Submitter
            from blksim.hostio.journal import Journal
            kjournald = Submitter(KJOURNALD_PID)
            kjournald.attaches_inode_wb = False     # jbd2's ordered data: the root's
            writes = {f.path for f in cfg.files if f.device in journalled}
            # on a filesystem made by mkfs, reads (atime) and direct writes (mtime) also
            # journal the inode
            atime = any(f.atime for f in journalled.values())
            made = any(f.layer is not None for f in journalled.values())
            # (an application's processes write their files on such a filesystem too)
            if cfg.apps and writes or any(
                    (job.read_fraction < 1.0 and (made or not job.direct)
                     or atime and job.read_fraction > 0.0) and writes & set(files)
                    for job, files in zip(cfg.jobs, cfg.job_files)):
                # the journal threads (ext3's kjournald, XFS's xfslogd, ...) share one
                # pid; the process is named after them all
                threads = dict.fromkeys(getattr(f.layer, "journal_thread", "kjournald")
                                        for f in journalled.values())
                self.metrics.register_process(KJOURNALD_PID, "+".join(threads))
            for device, fs in journalled.items():
                target = self.host.blocks[device]
                # a filesystem made by mkfs builds its own journal or log; the outline's
                # is jbd's
                make = getattr(fs.layer, "make_journal", Journal)
                self.journals[target] = make(fs, target, self.clock, ids, self.writeback,
                                             kjournald)
        self.processes = []
        pid = 1000
        stream = 1
        from blksim.sim.cpus import CpuPlacer
        self.cpus = placer = CpuPlacer(cfg.cpus)     # where each process runs (bio.cpu)
        for index, (job, table, files) in enumerate(zip(cfg.jobs, cfg.job_tables,
                                                       cfg.job_files)):
            group = self.group_of("job", index)
            open_file = self.file_opener(ids, bool(job.direct), bool(job.sync), group)
            for clone in range(job.numjobs):
                name = job.name if job.numjobs == 1 else f"{job.name}.{clone}"
                target = self.host.target(files, open_file)
                if isinstance(target, FileRoundRobin):
                    # one pattern per device, drawing from the clone's one stream
                    target.patterns = [
                        IoPattern(per_file_job(job, t.capacity, len(files)), clone,
                                  streams[stream]) for t in target.targets]
                    pattern = target
                else:
                    pattern = IoPattern(job, clone, streams[stream])
                stream += 1
                proc = JobProcess(self.clock, target, ids, pid, name, job, pattern, horizon,
                                  iodepth_given="iodepth" in table, kernel=cfg.kernel,
                                  cpu=placer.place_job(job.cpus_allowed,
                                                       job.cpus_allowed_policy),
                                  cpu_time=self.host.cpu_time)
                self.metrics.register_process(pid, name, job.nice, proc.ioprio)
                if job.prio is not None or job.prioclass is not None:
                    # the process set its I/O priority (blk-ioprio's 5.x NONE rule)
                    for ioprio in self.host.ioprio.values():
                        ioprio.explicit_pids.add(pid)
                self.processes.append(proc)
                if group is not None:
                    self.cgroups.place(pid, group)
                if self.pressure is not None:
                    from blksim.sim.pressure import watch
                    watch(proc, self.pressure, self.clock, cfg.kernel)
                pid += 1
        self.app_stats = {}
        for index, app in enumerate(cfg.apps):
            pid = self._start_app(app, ids, pid, horizon, self.group_of("app", index))
        self.replays = []
        self._start_replays(ids, horizon, placer)

        self.explain = None
        if explain:
            from blksim.sim.explain import Explain, standard_extra
            extra = standard_extra(cfg.ramp_time)
            extra.update(explain_extra or {})
            self.explain = Explain(self.host, cfg.ramp_time, self.process_name, extra)
        self.recorders = []
        if blktrace is not None:
            from blksim.traces.blktrace_out import BlktraceRecorder
            from blksim.traces.blktrace_out import DmBlktraceRecorder
            from blksim.block.mq.elevator import is_multiqueue
            for q in self.host.disks.values():
                rec = BlktraceRecorder(blktrace, self.process_name, q.number, q.name,
                                       multiqueue=is_multiqueue(cfg.kernel))
                self.recorders.append(rec)
                # a clone remapped onto a partition is traced in its disk's trace
                rec.install(q, [d for d in self.host.blocks.values()
                                if d.kind == "partition" and d.disk is q])
            for dev in self.host.blocks.values():
                if dev.kind == "dm":
                    rec = DmBlktraceRecorder(blktrace, self.process_name, dev)
                    self.recorders.append(rec)
                    rec.install(dev)
        if iolog is not None and cfg.stacked:
            if iolog_filename is not None:
                raise SimulationError("--iolog-filename names the one device of a run on one "
                                      "disk; a run with several devices writes each "
                                      "device's own name")
            self._log_stack(iolog)
        elif iolog is not None:
            from blksim.traces.iolog_out import IologRecorder
            rec = IologRecorder(iolog, iolog_filename)
            self.recorders.append(rec)
            rec.install(self.queue)
        if iostat is not None:
            from blksim.sim.iostat_log import IostatRecorder
            rec = IostatRecorder(*iostat)
            self.recorders.append(rec)
            rec.install(self.host.blocks, self.clock)
            if self.writeback is not None:
                import os
                from blksim.sim.vmstat_log import VmstatRecorder
                rec = VmstatRecorder(os.path.join(os.path.dirname(iostat[0]), "vmstat.csv"),
                                     iostat[1])
                self.recorders.append(rec)
                rec.install(self.writeback, self.clock)
            if self.cgroups is not None:
                import os
                from blksim.sim.cgroup_log import CgroupRecorder
                rec = CgroupRecorder(os.path.join(os.path.dirname(iostat[0]), "cgroups.csv"),
                                     iostat[1])
                self.recorders.append(rec)
                rec.install(self.cgroups, self.pressure,
                            [n for n, d in self.host.blocks.items() if d.kind in ("disk", "dm")],
                            self.clock)

    @staticmethod
    def _measure(cfg: RunConfig, host, metrics: Metrics, hooks: tuple) -> None:
        """Subscribe the metrics, then every complete hook, to ``block_bio_complete`` of
        every disk and volume. In a run with volumes only a bio a process submitted is
        measured: a device-mapper clone completes at its disk as part of its bio."""
        subscribers = [metrics.bio_completed, *(_bio_hook(h) for h in hooks)]
        if cfg.volumes:
            subscribers = [_submitted_only(fn) for fn in subscribers]
        for dev in host.blocks.values():
            if dev.kind in ("disk", "dm"):
                for fn in subscribers:
                    dev.subscribe("block_bio_complete", fn)

    @staticmethod
    def _phase_info(cfg: RunConfig) -> list[dict]:
        """What each phase ran, before the run: scheduler, tunables, the time its switch
        was asked for (results.json ``phases``; the switch fills in the rest). In a run
        with several block devices a phase also names the disk it concerns (``device``:
        the disk its switch changed; phase 0's, the disk the first switch changes) with
        that disk's scheduler and tunables, and every disk's scheduler during the phase
        (``schedulers``)."""
        active = {name: (dev.scheduler, dict(dev.iosched)) for name, dev in cfg.devices.items()}
        first = cfg.switches[0].device if cfg.switches else PRIMARY
        scheduler, iosched = active[first]
        out = [{"scheduler": scheduler, "iosched": dict(iosched), "asked_s": 0.0,
                "done_s": 0.0, "device": first}]
        for sw in cfg.switches:
            scheduler, iosched = active[sw.device]
            same = sw.scheduler == scheduler      # writing the active name: no change
            active[sw.device] = (sw.scheduler, dict(iosched if same else sw.iosched))
            out.append({"scheduler": sw.scheduler, "iosched": dict(active[sw.device][1]),
                        "asked_s": sw.at, "done_s": None, "device": sw.device})
        if not cfg.stacked:             # one disk: the phases need not say which
            for info in out:
                del info["device"]
        else:
            active = {name: dev.scheduler for name, dev in cfg.devices.items()}
            for k, info in enumerate(out):
                if k:
                    active[info["device"]] = info["scheduler"]
                info["schedulers"] = dict(active)
        return out

    def _start_replays(self, ids, horizon, placer) -> None:
        """A replay process per ``[[trace]]``: its records opened, its pids in its group,
        its time 0 placed by its ``align`` (`sim.replay.align_shifts`)."""
        from blksim.sim.replay import ReplayStats, align_shifts
        from blksim.sim.trace_process import ClosedTraceReplay
        cfg = self.cfg
        opened = []
        for spec in cfg.traces:
            stats = ReplayStats()
            target = self.host.blocks[spec.filename]
            records = open_trace(spec, target.capacity, stats, latency=spec.mode == "closed")
            opened.append((spec, stats, target, records))
        shifts = align_shifts([(spec, stats) for spec, stats, _t, _r in opened])
        owner: dict = {}            # pid -> (the trace it was first seen in, its group)
        for index, ((spec, stats, target, records), shift) in enumerate(zip(opened, shifts)):
            stats.shift = shift
            group = self.group_of("trace", index)
            register = self._trace_register(spec, group, owner)
            register(spec.pid, spec.name)
            closed = spec.mode == "closed"
            cls = ClosedTraceReplay if closed else TraceReplay
            proc = cls(self.clock, target, ids, records, spec.pid, spec.name, horizon,
                       speed=spec.speed, max_gap=spec.max_gap, start=spec.start or 0.0,
                       spec=spec, stats=stats, on_new_pid=register, cpus=placer,
                       shift=shift)
            if self.pressure is not None:
                proc.psi = self.pressure          # its processes' states (docs/cgroups.md)
            self.processes.append(proc)
            self.replays.append((spec, proc))

    def _trace_register(self, spec, group, owner: dict):
        """What a replay calls when it first sees a pid: the process is named in the
        metrics and, with a ``cgroup``, placed in the trace's group. A pid that two traces
        in different groups both carry is an error: a process is in one group."""
        metrics, tree = self.metrics, self.cgroups

        def register(pid, name):
            seen = owner.get(pid)
            if seen is None:
                owner[pid] = (spec, group)
            elif seen[1] is not group:
                def where(s, g):
                    return f"trace {s.name!r} ({s.path}, group {g.path if g else '/'!r})"
                raise SimulationError(
                    f"pid {pid} is in {where(seen[0], seen[1])} and in {where(spec, group)}: "
                    f"a process is in one group; give the traces' [[trace]] pid keys "
                    f"distinct values, or put them in one group")
            metrics.register_process(pid, name)
            if group is not None:
                tree.place(pid, group)
        return register

    def group_of(self, kind: str, index: int):
        """The `blksim.block.cgroup.Cgroup` of the ``index``-th ``[[kind]]`` table (None: the
        root, or no groups)."""
        if self.cgroups is None:
            return None
        paths = self.cfg.cgroups.placements.get(kind, [])
        path = paths[index] if index < len(paths) else None
        return None if path is None else self.cgroups.groups[path]

    def _start_app(self, app, ids, pid: int, horizon, group=None) -> int:
        """An application's processes, from pid ``pid`` on, in ``group`` (None: the root);
        the next free pid."""
        from blksim.apps import model_of
        ctx = AppContext(self, ids, pid, horizon, group)
        self.app_stats[app.name] = model_of(app).start(ctx, app)
        return ctx.next_pid

    def file_opener(self, ids, direct: bool, o_sync: bool = False, group=None):
        """What `Host.target` calls to open a file for one process (in cgroup ``group``,
        None: the root): a `hostio.fileio.OpenFile` on the run's page cache, writeback and
        journals, its calls measured by the run."""
        def make(layout, device, ra_pages, read_congested, write_congested, max_pages):
            f = OpenFile(layout, device, self.host.page_cache, self.clock, ids, direct,
                         ra_pages, self._call_done, read_congested, self.writeback,
                         write_congested, max_pages, self.cfg.copy_rate,
                         self.journals.get(device), o_sync=o_sync)
            f.cgroup = group
            return f
        return make

    def _call_done(self, call) -> None:
        """A call to a file completed: measure it, then its process goes on."""
        self.metrics.record_call(call)
        done = call.on_complete
        done(call)

    def _log_stack(self, path: str) -> None:
        """``--iolog`` in a run with several devices: every process submits through a
        recorder that writes its bios under its device's name."""
        from blksim.sim.storage_config import volume_aliases
        from blksim.traces.iolog_out import StackIologRecorder

        def path_of(target) -> str:
            if target.kind == "file":
                return target.layout.path
            if target.kind == "dm":
                return next(a for a in volume_aliases(target.label, target.name)
                            if a.startswith("/dev/mapper/"))
            return f"/dev/{target.name}"

        used = []
        for proc in self.processes:
            for t in getattr(proc.queue, "targets", [proc.queue]):
                if t not in used:
                    used.append(t)
        rec = StackIologRecorder(path, [path_of(t) for t in used])
        self.recorders.append(rec)
        for proc in self.processes:
            target = proc.queue
            if isinstance(target, FileRoundRobin):
                target.targets = [rec.proxy(t, path_of(t), self.clock) for t in target.targets]
            else:
                proc.queue = rec.proxy(target, path_of(target), self.clock)

    def _switch(self, sw, info: dict) -> None:
        """Write ``sw.scheduler`` to the disk's queue/scheduler now."""
        factory = elevator_factory(sw.scheduler, sw.iosched, self.cfg.hz, self.cfg.kernel)

        def done(result: dict) -> None:
            info["started_s"] = result["started_s"]
            info["done_s"] = result["done_s"]
            info["drained"] = result["drained"]
            info["bypassed"] = result["bypassed"]
            if result["noop"]:
                info["noop"] = True

        self.host.disks[sw.device].switch_elevator(factory, sw.scheduler, done)

    def issued_by_pid(self) -> dict:
        """Bios queued so far by every process of the run, by pid."""
        out: dict[int, int] = {}
        for proc in self.processes:
            for pid, n in proc.issued_by_pid().items():
                out[pid] = out.get(pid, 0) + n
        if self.writeback is not None:
            out[PDFLUSH_PID] = self.writeback.flusher.bios_issued
        for journal in self.journals.values():
            out[KJOURNALD_PID] = journal.submitter.bios_issued
        return out

    def process_name(self, pid: int) -> str:
        """The name of a process of this run (job clone or traced process)."""
        p = self.metrics.processes.get(pid)
        if p is not None:
            return p.name
        for _spec, proc in self.replays:
            name = proc.names.get(pid)
            if name:
                return name
        return f"pid{pid}"

    def behind_schedule(self) -> list[dict]:
        """The open-loop sources (rate_iops jobs, open-loop replays) that slept for want
        of a free request and so submitted late: how far behind their schedule they fell
        at worst and at the end (s)."""
        out = []
        for proc in self.processes:
            lag = proc.schedule_lag()
            if lag is not None and lag[0] > 0.0:
                out.append({"source": f"{proc.kind} {proc.name}", "max_lag_s": round(lag[0], 9),
                            "end_lag_s": round(lag[1], 9)})
        return out

    def replay_summaries(self) -> list[dict]:
        """One entry per replayed trace: its options and what the replay did."""
        from blksim.sim.replay import describe
        out = []
        for spec, proc in self.replays:
            proc.stats.requests = proc.issued
            proc.stats.processes = set(proc.names)
            basis = proc.think_basis() if hasattr(proc, "think_basis") else None
            entry = describe(spec, proc.stats, basis)
            if basis is not None:
                entry["completions_recorded"] = proc.think_from_completion > 0
            out.append(entry)
        return out

    def run(self) -> RunOutcome:
        """Run to the configured duration, or until every workload has finished."""
        wall0 = _time.perf_counter()
        try:
            for proc in self.processes:
                proc.start()
            env = self.env
            until = self.cfg.duration
            if self.progress is None:
                # a stop request whose exception a finaliser swallowed is raised again
                run_events(env, until, every=4096, tick=raise_if_requested)
            else:
                self._run_with_progress(until)
        except BaseException as exc:  # noqa: B036 -- discard, and a plugin's fault is one line
            for rec in self.recorders:
                rec.discard()
            # one check here, after the fact, rather than a try around every hook call
            fault = plugin_fault(exc)
            if fault is None:
                raise
            raise fault from exc
        for rec in self.recorders:
            rec.close()
        sim_time = env.now if until is None else until
        self.metrics.finish(self.issued_by_pid())
        blocks = {name: (self.samples_at_start[name], dev.stats.sample(sim_time))
                  for name, dev in self.host.blocks.items()}
        sda = blocks[self.queue.name]
        for proc in self.processes:
            files = getattr(proc.queue, "targets", [proc.queue])
            spent = sum(getattr(f, "throttled", 0.0) for f in files)
            if spent:
                self.metrics.throttled[proc.pid] = spent
        outcome = RunOutcome(self.cfg, self.metrics, self.queue, self.device, sim_time,
                          self.processes, _time.perf_counter() - wall0,
                          self.replay_summaries(), self.phase_info,
                          self.queues_at_start[self.queue.name], self.behind_schedule(), sda,
                          self.host, blocks, dict(self.queues_at_start), self.writeback,
                          {j.fs.device: j for j in self.journals.values()},
                          dict(self.app_stats))
        outcome.hctx_at_start = dict(self.hctx_at_start)
        outcome.explain = self.explain
        outcome.cgroups = self.cgroups
        outcome.pressure = self.pressure
        return outcome

    def _start_measuring(self, _event) -> None:
        """At ramp_time: the block layer's counters from here on are the measured ones."""
        now = self.clock.now
        if self.host.cpu_time is not None:
            self.host.cpu_time.mark()
        for name, q in self.host.disks.items():
            self.queues_at_start[name] = (q.requests_allocated, q.bio_merges,
                                          q.request_merges, q.waited)
            self.hctx_at_start[name] = q.hw_queue_counts()
        for name, dev in self.host.blocks.items():
            self.samples_at_start[name] = dev.stats.sample(now)

    def _run_with_progress(self, until) -> None:
        # Unlike the plain run, this one has always also processed the events due
        # exactly at `until` (it stepped while the next event was not after it).
        env = self.env
        progress = self.progress
        def tick():
            raise_if_requested()
            progress.update(env.now, self.metrics.completed)

        run_events(env, until, inclusive=True, every=2048, tick=tick)
        progress.finish(env.now, self.metrics.completed)


def _bio_hook(hook):
    """A complete hook (``hook(bio)``) as a ``block_bio_complete`` subscriber."""
    def subscriber(q, bio, now):
        hook(bio)
    subscriber.__wrapped__ = hook       # named by a fault report
    return subscriber


def _submitted_only(fn):
    """``fn`` for the bios a process submitted only, not device-mapper clones."""
    def subscriber(q, bio, now):
        if bio.origin is None:
            fn(q, bio, now)
    subscriber.__wrapped__ = fn
    return subscriber


class AppContext:
    """What an application model (`blksim.apps`) needs of the run it is part of: the
    clock, bio ids, the run's seed and end, pids, and files to open."""

    def __init__(self, sim, ids, pid: int, horizon, group=None) -> None:
        self.clock = sim.clock
        self._group = group                    # the app's cgroup (None: the root)
        self.ids = ids
        self.seed = sim.cfg.seed
        self.horizon = horizon                 # the run's duration, or None
        self.next_pid = pid
        self._sim = sim

    def new_process(self, name: str) -> int:
        """A pid for a process named ``name``, known to the reports from now on."""
        pid = self.next_pid
        self.next_pid += 1
        self._sim.metrics.register_process(pid, name)
        if self._group is not None:
            self._sim.cgroups.place(pid, self._group)
        return pid

    def add(self, proc) -> None:
        """Run ``proc`` (something with ``start()``, ``issued_by_pid()``,
        ``schedule_lag()``, ``kind``, ``name``, ``queue``) with the run's processes; in a
        run with cgroups its CPU work is reported for io.pressure (``proc.tasks``:
        `blksim.sim.pressure.AppTasks`)."""
        self._sim.processes.append(proc)
        if self._sim.app_tasks is not None:
            proc.tasks = self._sim.app_tasks

    def open_file(self, path: str, direct: bool, o_sync: bool = False, aio: bool = False):
        """A new open of file ``path`` (a `hostio.fileio.OpenFile`: its own read-ahead state
        and submitting context); its calls complete through the run's call accounting.
        ``aio``: the process submits its calls with io_submit and reaps them with
        io_getevents (for io.pressure: `hostio.fileio.OpenFile.watch`)."""
        f = self._sim.host.target((path,), self._sim.file_opener(self.ids, direct, o_sync,
                                                                 self._group))
        if self._sim.app_tasks is not None:
            f.watch(self._sim.app_tasks, aio)
        return f
