"""2.6.18's anticipatory elevator in front of a tagged queue: the kernel's write-batch
quirk (docs/anticipatory.md, "Kernel versions") starves writes while readers are busy,
and 2.6.32's fix lets them through. Checked against block/as-iosched.c of both kernels:
as_completed_request clears changed_batch without restarting an async batch's clock in
2.6.18, and restarts it in 2.6.32."""

import pytest

import blksim

CONFIG = {
    "run": {"duration": "5s", "seed": 1},
    "device": {"drive": "cheetah15k4", "queue_depth": 4},
    "queue": {"scheduler": "anticipatory"},
    "job": [{"name": "reader", "rw": "randread", "numjobs": 16},
            # async writes, as writeback sends them (sync = false: a direct write would be
            # WRITE_SYNC, which AS serves in its read batches: rq_is_sync)
            {"name": "writer", "rw": "randwrite", "iodepth": 16, "sync": False}],
}


def _writes(kernel: str, queue_depth: int) -> int:
    r = blksim.run(CONFIG, set={"run/kernel": kernel, "device/queue_depth": queue_depth},
                   per_request=False)
    return r.write.ios


def test_2_6_18_starves_writes_behind_a_tagged_queue():
    assert _writes("2.6.18", 4) == 0


@pytest.mark.parametrize("kernel, queue_depth", [("2.6.32", 4), ("2.6.18", 1)])
def test_writes_get_their_batches_with_the_fix_or_without_tcq(kernel, queue_depth):
    # a write batch every read batch (500 ms): tens of writes a second
    assert _writes(kernel, queue_depth) > 50
