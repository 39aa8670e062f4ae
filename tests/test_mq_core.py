"""The multi-queue core's pieces, hand-worked: tag maps (sbitmap words, shallow depths,
batched wake-ups), the CPU -> hardware queue map, the per-line switches."""

import pytest

from blksim.block.mq.cpumap import map_queues
from blksim.block.mq.tags import TagMap, bits_per_word, shallow_limit, wake_batch
from blksim.block.mq.versions import variant


@pytest.mark.parametrize("depth, bits", [(256, 64), (128, 32), (64, 16), (62, 8), (32, 8),
                                          (4, 1), (1, 1), (1024, 64)])
def test_bits_per_word_follow_sbitmap_calculate_shift(depth, bits):
    # 64 bits, halved while four words would hold more than the depth
    assert bits_per_word(depth) == bits


def test_a_shallow_depth_caps_each_word():
    # 256 tags in 4 words of 64: a cap of 48 per word lets 192 be used
    assert shallow_limit(256, 48) == 192
    # a cap larger than a word caps nothing (mq-deadline 5.15/6.1's 3/4 of nr_requests)
    assert shallow_limit(256, 192) == 256
    # 62 tags in words of 8 (7 full words and one of 6): a cap of 6 per word
    assert shallow_limit(62, 6) == 7 * 6 + 6
    assert shallow_limit(62, 7) == 7 * 7 + 6


def test_wake_batch_is_an_eighth_of_the_usable_depth_between_1_and_8():
    assert wake_batch(256) == 8
    assert wake_batch(32) == 4
    assert wake_batch(4) == 1
    assert wake_batch(256, 8) == 4       # 4 words x 8 = 32 usable -> 4


def test_sleepers_wake_in_batches_after_enough_frees():
    tags = TagMap(32)                    # wake_batch 4
    held = [tags.get() for _ in range(32)]
    assert tags.get() == -1
    woken = []
    for k in range(6):
        tags.sleep(lambda k=k: woken.append(k))
    out = []
    for t in held[:3]:
        out += tags.put(t)
    assert out == []                     # three frees: not yet a batch
    out += tags.put(held[3])
    assert len(out) == 4                 # the fourth wakes four, oldest first
    for w in out:
        w()
    assert woken == [0, 1, 2, 3]
    assert tags.sleeping == 2


def test_the_last_freed_tag_is_handed_out_first_and_a_shallow_cap_refuses():
    # sbitmap_queue_clear points the CPU's allocation hint at the freed bit, and the next
    # sbitmap_get starts there
    tags = TagMap(8)                     # 8 words of one bit
    assert [tags.get() for _ in range(3)] == [0, 1, 2]
    tags.put(1)
    assert tags.get() == 1
    tags.put(0)
    tags.put(2)
    assert [tags.get(), tags.get(), tags.get()] == [2, 0, 3]
    assert tags.in_use == 4
    assert tags.get(shallow=0) == -1


@pytest.mark.parametrize("cpus, queues, groups, expected", [
    (8, 1, False, (0,) * 8),
    (8, 8, True, tuple(range(8))),
    (6, 4, False, (0, 1, 2, 3, 0, 1)),       # 5.4-6.1: round the ring
    (6, 4, True, (0, 0, 1, 1, 2, 3)),        # 6.6: even groups, the first ones larger
    (2, 4, True, (0, 1)),
])
def test_cpus_map_to_hardware_queues_as_blk_mq_map_queues(cpus, queues, groups, expected):
    assert map_queues(cpus, queues, groups) == expected


def test_each_line_has_its_switches():
    assert variant("5.4").plug_limit == 16 and variant("5.15").plug_limit == 32
    assert not variant("5.15").direct_issue_6x and variant("6.1").direct_issue_6x
    assert not variant("5.4").rq_merge_tracepoint and variant("5.10").rq_merge_tracepoint
    assert not variant("6.1").cpumap_groups and variant("6.6").cpumap_groups
    assert variant("6.8").kernel == "6.6"
    with pytest.raises(ValueError, match="from Linux 5.4"):
        variant("4.19")
