"""cgroup v2 groups for the block layer: the hierarchy, which group a bio belongs to, and
the per-group, per-device counters ``io.stat`` prints.

**Groups.** A `Cgroup` is one directory of the cgroup v2 hierarchy: its ``path`` under
the root ("db", "tenants/a"), its ``parent`` and ``children``, and the interface files
blksim models (``io_max``: device name -> {"rbps", "wbps", "riops", "wiops"}, each a
number or None for ``max``; ``io_latency``: disk name -> target in µs; ``io_prio_class``:
the policy's name; ``io_weight``: "default" and device name -> weight, iocost reads it;
``bfq_weight``: io.bfq.weight, None or {"default": weight, "devices": {device name:
weight}}, bfq reads it; only parsed and stored here, the controllers read them). The root
(path "") always exists. A `CgroupTree` holds them all and which group each process is
in (``place``).

**A bio's group** (``Bio.cgroup``; None is the root). The kernel gives a bio the group of
the task that submits it (``bio_associate_blkg``, block/blk-cgroup.c, 5.4-6.6: the css
of ``current``, or of the kthread's ``kthread_blkcg``) unless it was given one already
(a writeback bio, ``wbc_init_bio``; a clone inherits its source's,
``bio_clone_blkg_association``). blksim's processes are pids, so `CgroupTree.associate`
looks the bio's pid up once, when the bio first enters a block device, and leaves a bio
that already carries a group alone; a device-mapper clone keeps its source's pid and so
its group. The page cache's writeback and the filesystems' journal threads are kernel
threads outside every group: their bios are the root's (docs/cgroups.md names why).

**io.stat** (``blkcg_print_one_stat``, block/blk-cgroup.c, 5.10-6.6; 5.4's
``blkcg_print_stat`` prints the same keys): per device a group has ``rbytes wbytes rios
wios dbytes dios``. The kernel counts a bio when it is submitted to a device
(``blk_cgroup_bio_start``, called from ``submit_bio_noacct``, 5.10-6.6, just before the
``block_bio_queue`` tracepoint; 5.4 counted the same in ``blkcg_bio_issue_check``), its
direction by ``blk_cgroup_io_type``: a discard is a ``d``, any other operation that
writes (``op_is_write``: a write, and an empty flush, which is a write with no data) a
``w``, the rest an ``r``. A bio split within one device counts its bytes once and an I/O
per piece (``BIO_CGROUP_ACCT``); blksim's queues never split a bio (only device-mapper
cuts one, into clones that are bios of their own on the disks below, as the kernel's
are). A group's figures include its descendants' (the kernel sums them up the tree with
rstat, ``blkcg_rstat_flush``): each group keeps its own counts, and `CgroupTree.io_stat`
adds the subtree's when it is read.

Nothing here runs unless a configuration has groups: the counting is a ``block_bio_queue``
subscriber (`CgroupTree.install`).
"""

from __future__ import annotations

from blksim.block.request import REQ_OP_DISCARD

#: io.max's four limits, in the kernel's spelling and order (``tg_set_limit``'s tokens)
IO_MAX_KEYS = ("rbps", "wbps", "riops", "wiops")
#: io.stat's six figures, in the order ``blkcg_print_one_stat`` prints them
IO_STAT_KEYS = ("rbytes", "wbytes", "rios", "wios", "dbytes", "dios")


class Cgroup:
    """One group of the hierarchy (see the module docstring). ``stat``: device name ->
    this group's own counts, ``[rbytes, wbytes, rios, wios, dbytes, dios]`` (its
    descendants' are added when read, `CgroupTree.io_stat`)."""

    __slots__ = ("path", "parent", "children", "io_max", "io_latency", "io_prio_class",
                 "io_weight", "bfq_weight", "stat")

    def __init__(self, path: str, parent: "Cgroup | None") -> None:
        self.path = path
        self.parent = parent
        self.children: list = []
        self.io_max: dict = {}
        self.io_latency: dict = {}          # disk name -> target (µs), io.latency
        self.io_prio_class = "no-change"    # io.prio.class's policy name
        self.io_weight: dict = {}           # io.weight: "default" and device name -> 1..10000
        self.bfq_weight = None              # io.bfq.weight (bfq_weight_on)
        self.stat: dict = {}
        if parent is not None:
            parent.children.append(self)

    @property
    def name(self) -> str:
        """The path for reports: "/" for the root."""
        return self.path or "/"

    def bfq_weight_on(self, device: str):
        """This group's io.bfq.weight on ``device``: its weight for that device, else
        its default (None when io.bfq.weight is not set)."""
        w = self.bfq_weight
        if w is None:
            return None
        return w["devices"].get(device, w["default"])

    def subtree(self):
        """This group and every descendant, parents before children."""
        yield self
        for child in self.children:
            yield from child.subtree()

    def __repr__(self) -> str:
        return f"Cgroup({self.name})"


class CgroupTree:
    """The groups of one run (``groups``: path -> `Cgroup`, the root under "") and the
    group of every process placed in one (``of_pid``: pid -> `Cgroup`)."""

    def __init__(self) -> None:
        self.root = Cgroup("", None)
        self.groups: dict = {"": self.root}
        self.of_pid: dict = {}
        self.next_mark = float("inf")    # sampling for cgroups.csv (see `every`)
        self._interval = 0.0
        self._on_mark = None

    def every(self, interval: float, on_mark, start: float = 0.0) -> None:
        """Call ``on_mark(t)`` at ``t = start + interval``, ``start + 2 interval``, ...
        as the run passes them: before the first change after ``t`` (a bio counted here,
        a task state in `blksim.block.psi.Pressure`, which calls `passed`), or at the
        end. No simulation event is needed: nothing a sample reads changes in between."""
        self._interval = interval
        self._on_mark = on_mark
        self.next_mark = start + interval

    def passed(self, now: float) -> None:
        """Take the samples due at or before ``now``."""
        while now >= self.next_mark:
            t = self.next_mark
            self.next_mark = t + self._interval
            self._on_mark(t)

    def add(self, path: str) -> Cgroup:
        """Make the group ``path``; its parent must exist already (mkdir(2) of a
        directory whose parent does not exist fails with ENOENT)."""
        if path in self.groups:
            raise ValueError(f"cgroup {path!r} exists already")
        parent_path = path.rpartition("/")[0]
        parent = self.groups.get(parent_path)
        if parent is None:
            raise ValueError(f"cgroup {path!r}: its parent {parent_path!r} does not exist")
        group = self.groups[path] = Cgroup(path, parent)
        return group

    def place(self, pid: int, group: Cgroup) -> None:
        """Process ``pid`` is in ``group`` (writing its pid to ``cgroup.procs``)."""
        if group is self.root:
            self.of_pid.pop(pid, None)
        else:
            self.of_pid[pid] = group

    def associate(self, bio) -> None:
        """Give ``bio`` its submitter's group unless it has one (``bio_associate_blkg``);
        the root stays None."""
        if bio.cgroup is None:
            bio.cgroup = self.of_pid.get(bio.pid)

    def bio_queued(self, q, bio, now: float) -> None:
        """Count ``bio`` on device ``q`` for its group (``blk_cgroup_bio_start``; the
        device's ``block_bio_queue`` subscriber)."""
        if now >= self.next_mark:
            self.passed(now)
        if bio.cgroup is None:
            bio.cgroup = self.of_pid.get(bio.pid)
        group = bio.cgroup or self.root
        counts = group.stat.get(q.name)
        if counts is None:
            counts = group.stat[q.name] = [0, 0, 0, 0, 0, 0]
        # blk_cgroup_io_type: discard, then op_is_write (every odd op), else read
        if bio.op == REQ_OP_DISCARD:
            counts[4] += bio.nr_sectors << 9
            counts[5] += 1
        else:
            w = bio.op & 1
            counts[w] += bio.nr_sectors << 9
            counts[2 + w] += 1

    def install(self, devices) -> None:
        """Count the bios of every device in ``devices`` (the disks and device-mapper
        volumes: each has a request queue of its own in the kernel, partitions share
        their disk's)."""
        for dev in devices:
            dev.subscribe("block_bio_queue", self.bio_queued)

    def io_stat(self, group: Cgroup) -> dict:
        """``group``'s io.stat with its descendants' counts: device name -> {key:
        value}, devices in the order first seen."""
        total: dict = {}
        for g in group.subtree():
            for dev, counts in g.stat.items():
                acc = total.setdefault(dev, [0] * 6)
                for i, v in enumerate(counts):
                    acc[i] += v
        return {dev: dict(zip(IO_STAT_KEYS, acc)) for dev, acc in total.items()}

    def io_stat_text(self, group: Cgroup, numbers: dict) -> str:
        """io.stat as the kernel prints it: a line per device, ``MAJ:MIN rbytes=..``
        (``numbers``: device name -> (major, minor))."""
        lines = []
        for dev, stat in self.io_stat(group).items():
            major, minor = numbers.get(dev, (0, 0))
            lines.append(f"{major}:{minor} " + " ".join(f"{k}={v}" for k, v in stat.items()))
        return "\n".join(lines)
