"""Tags: the numbered slots a multi-queue request holds, and the sleep when none is free.

A `TagMap` is one ``sbitmap_queue`` (lib/sbitmap.c; block/blk-mq-tag.c): ``depth``
tags; a request takes one (``blk_mq_get_tag``) and gives it back when freed
(``blk_mq_put_tag``). A hardware queue has one map of driver tags (the tag set's
depth) and, with an elevator, one map of scheduler tags (``nr_requests``).

What the model keeps of sbitmap:

* **Words.** The bits are spread over words: a word holds 64 bits, halved while four
  words would be more than the depth (``sbitmap_calculate_shift``, 5.4-6.6). It
  matters for *shallow depths*: a scheduler's ``limit_depth`` caps the bits a request
  may take *in each word* (``sbitmap_get_shallow``, 5.4-6.6), so a cap of ``s`` lets
  ``sum(min(s, bits in word))`` tags be used in all (`shallow_limit`).
* **Sleeping and waking in batches.** A submitter that finds no tag sleeps
  (``blk_mq_get_tag``'s ``io_schedule`` loop); freed tags wake sleepers ``wake_batch``
  at a time, after ``wake_batch`` tags have been freed while someone slept
  (``sbq_calc_wake_batch``: an eighth of the depth usable under the smallest shallow
  depth, between 1 and 8). A woken submitter tries again and sleeps again, at the
  back, if the tag went to someone else.

* **Which tag.** A freed tag is handed out first: ``sbitmap_queue_clear`` sets the
  freeing CPU's allocation hint to it (``sbitmap_update_cpu_hint`` from 5.13), and the
  next allocation there starts its search at the hint (``sbitmap_get``, 5.4-6.6), so
  the tags in use stay the ones last freed. blksim keeps the free tags as a stack (the
  most recently freed on top; at first ascending from 0): one push and one pop per
  request, where a heap of the lowest free tags cost a sift through its depth.

Simplifications (docs/blk-mq.md): the kernel spreads sleepers over 8 wait queues and
(up to 5.15) counts down per wait queue; blksim keeps one FIFO of sleepers and one
count of frees, as 6.1's ``sbitmap_queue_wake_up`` counts (the two differ only in
which sleeper wakes first). One allocation hint for the whole map, not one per CPU;
several allocations in a row take the tags freed before, newest first, where the
kernel goes on to the bits after its hint. Which tag number a request gets has no
effect on timing.
"""

from __future__ import annotations

from collections import deque

#: Most sleepers woken per batch, and the wait queues (``SBQ_WAKE_BATCH``,
#: ``SBQ_WAIT_QUEUES``, include/linux/sbitmap.h).
SBQ_WAKE_BATCH = 8
SBQ_WAIT_QUEUES = 8


def bits_per_word(depth: int) -> int:
    """``1 << sbitmap_calculate_shift(depth)``: 64, halved while 4 words would exceed depth."""
    bits = 64
    while bits > 1 and 4 * bits > depth:
        bits //= 2
    return bits


def shallow_limit(depth: int, shallow: int) -> int:
    """How many tags of a ``depth`` map can be in use under a per-word cap ``shallow``."""
    bits = bits_per_word(depth)
    full, rest = divmod(depth, bits)
    return full * min(shallow, bits) + min(shallow, rest)


def wake_batch(depth: int, min_shallow: int | None = None) -> int:
    """``sbq_calc_wake_batch``: sleepers woken together."""
    usable = depth if min_shallow is None else shallow_limit(depth, min_shallow)
    return max(1, min(SBQ_WAKE_BATCH, usable // SBQ_WAIT_QUEUES))


class TagMap:
    """``depth`` tags with their sleepers (see the module docstring)."""

    __slots__ = ("depth", "in_use", "_free", "_sleepers", "_freed", "wake_batch",
                 "min_shallow", "sleeps", "_limits")

    def __init__(self, depth: int, min_shallow: int | None = None) -> None:
        if depth < 1:
            raise ValueError(f"a tag map needs at least one tag, got depth {depth}")
        self.depth = depth
        self.in_use = 0
        self._free = list(range(depth - 1, -1, -1))   # a stack: the next tag on top
        self._sleepers: deque = deque()
        self._freed = 0                          # tags freed since the last wake-up
        self.min_shallow = min_shallow
        self.wake_batch = wake_batch(depth, min_shallow)
        self.sleeps = 0                          # submitters that had to sleep
        self._limits: dict = {}                  # shallow cap -> tags usable under it

    def set_min_shallow(self, min_shallow: int | None) -> None:
        """``sbitmap_queue_min_shallow_depth``: an elevator's smallest cap (for wake_batch)."""
        self.min_shallow = min_shallow
        self.wake_batch = wake_batch(self.depth, min_shallow)

    def get(self, shallow: int | None = None) -> int:
        """A free tag, or -1 when none may be taken (all used, or ``shallow``'s share)."""
        if shallow is None:
            limit = self.depth
        else:
            limit = self._limits.get(shallow)
            if limit is None:
                limit = self._limits[shallow] = shallow_limit(self.depth, shallow)
        if self.in_use >= limit:
            return -1
        self.in_use += 1
        return self._free.pop()

    def put(self, tag: int) -> list:
        """Give ``tag`` back; returns the sleepers to wake (their callbacks), in order."""
        self.in_use -= 1
        self._free.append(tag)      # sbitmap_update_cpu_hint: handed out next
        if not self._sleepers:
            return []
        self._freed += 1
        if self._freed < self.wake_batch:
            return []
        self._freed = 0
        woken = []
        for _ in range(min(self.wake_batch, len(self._sleepers))):
            woken.append(self._sleepers.popleft())
        return woken

    def sleep(self, wake) -> None:
        """A submitter found no tag: ``wake()`` is returned by a later `put`."""
        if not self._sleepers:
            self._freed = 0
        self._sleepers.append(wake)
        self.sleeps += 1

    @property
    def sleeping(self) -> int:
        """Submitters asleep on this map."""
        return len(self._sleepers)
