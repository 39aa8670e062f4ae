"""Per-task plugging in the multi-queue layer (``blk_start_plug``, ``blk_add_rq_to_plug``,
``blk_mq_flush_plug_list``; block/blk-core.c and blk-mq.c of 5.4 to 6.6). A base of
`blksim.block.mq.queue.MqQueue`. A task's plug here is per queue: the kernel's plug spans
every queue the task submits to, and from 5.15 doubles its limit when it does (not
modelled, docs/blk-mq.md).
"""

from __future__ import annotations

from blksim.block.tracepoints import fire

#: A plugged request this large flushes the plug before the next one (BLK_PLUG_FLUSH_SIZE).
PLUG_FLUSH_SECTORS = 128 * 1024 // 512


class _Plug:
    """A task's plug on this queue (``struct blk_plug``): its requests, oldest first."""

    __slots__ = ("pid", "rqs", "depth")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rqs: list = []
        self.depth = 1          # nested blk_start_plug calls are ignored; counted here



class MqPlugging:
    """The plugging steps of `MqQueue` (see the module docstring)."""

    def run_backing_dev(self) -> None:
        """The multi-queue layer has no queue plug (only per-task plugs, flushed by
        `finish_plug`): a waiter has nothing to run."""

    def start_plug(self, pid: int, now: float) -> None:
        """``blk_start_plug`` for task ``pid`` (a nested one is ignored)."""
        plug = self._plugs.get(pid)
        if plug is None:
            self._plugs[pid] = _Plug(pid)
        else:
            plug.depth += 1

    def finish_plug(self, pid: int, now: float) -> None:
        """``blk_finish_plug``: the plug's requests go on, and the plug is gone."""
        plug = self._plugs.get(pid)
        if plug is None:
            return
        plug.depth -= 1
        if plug.depth > 0:
            return
        del self._plugs[pid]
        if plug.rqs:
            self._flush_plug(plug, now, explicit=True)

    def _add_to_plug(self, plug, rq, now: float) -> None:
        """``blk_add_rq_to_plug``: flush first if the plug is full or its newest
        request is large; trace P when the plug starts holding requests."""
        rqs = plug.rqs
        if rqs and (len(rqs) >= self.variant.plug_limit or
                    (self._nomerges == 0 and rqs[-1].nr_sectors >= PLUG_FLUSH_SECTORS)):
            self._flush_plug(plug, now, explicit=True)
            rqs = plug.rqs
        if not rqs and self._tp_block_plug is not None:
            fire(self._tp_block_plug, "block_plug", self, now)
        rqs.append(rq)

    def _flush_plug(self, plug, now: float, explicit: bool) -> None:
        """``blk_mq_flush_plug_list``: trace U (UT when the task slept), then insert
        the requests hctx by hctx: into the elevator, or (without one) issued directly
        while the hctx is not busy, else into the software queues."""
        rqs = plug.rqs
        plug.rqs = []
        if self._tp_block_unplug is not None:
            fire(self._tp_block_unplug, "block_unplug", self, len(rqs), explicit, now)
        by_hctx: dict = {}
        for rq in rqs:
            by_hctx.setdefault(rq.hctx.index, []).append(rq)
        for index in sorted(by_hctx):
            batch = by_hctx[index]
            hctx = self.hctxs[index]
            if self.elevator is not None:
                self._insert(batch, False, now)
                if explicit:
                    self.run_hw_queue(hctx, now)
                else:
                    self._run_async(hctx, now)
            elif (explicit or not self.variant.direct_issue_6x) and not hctx.dispatch_busy:
                # blk_mq_try_issue_list_directly (5.x: also when the task slept)
                for rq in batch:
                    self._issue_directly(rq, hctx, now)
            else:
                self._insert(batch, False, now)
                if explicit:
                    self.run_hw_queue(hctx, now)
                else:
                    self._run_async(hctx, now)

