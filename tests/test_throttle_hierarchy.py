"""blk-throttle's hierarchy (block/mq/throttle.py): a parent's limit over its children's
bios together, round-robin between children, and every bio released once."""

from hypothesis import given, settings, strategies as st

from blksim.block.mq.throttle import throtl_slice
from tests.test_throttle import HZ, Group, Ids, make, submit_at, window_bound

limit_st = st.one_of(st.none(), st.integers(2, 400))      # 6.6 refuses 1
arrivals = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 1),
                              st.sampled_from([1, 8, 64, 256])), min_size=1, max_size=60)


@settings(max_examples=100, deadline=None)
@given(arrivals, st.integers(20, 400), st.one_of(st.none(), st.integers(50_000, 2_000_000)),
       limit_st, limit_st, st.booleans(), st.sampled_from(["5.4", "6.6"]))
def test_a_parents_limit_holds_over_its_childrens_bios_together(evs, piops, pbps, c0, c1,
                                                                 low, kernel):
    env, tq = make(kernel=kernel, rotational=False, low=low)
    ids, done = Ids(), []
    parent = Group("p", riops=piops, rbps=pbps)
    kids = [Group("a", parent, riops=c0), Group("b", parent, riops=c1)]
    bios = [(ms / 1000.0, ids.bio(kids[k], sectors=n, done=done)) for ms, k, n in evs]
    submit_at(env, tq, bios)
    env.run()
    assert sorted(b.id for b in done) == sorted(b.id for _, b in bios)
    assert tq.idle()
    W = throtl_slice(HZ, False, low)
    disp = sorted((int(b.t_queue * HZ + 1e-9), b.nr_sectors * 512) for _, b in bios)
    biggest = max(s for _, s in disp)
    for i, (j0, _) in enumerate(disp):
        window = [s for j, s in disp[i:] if j < j0 + W]
        assert len(window) <= window_bound(piops, W, 1)
        if pbps is not None:
            assert sum(window) <= window_bound(pbps, W, biggest)
    # per child, FIFO
    for kid in kids:
        mine = [b for _, b in sorted(bios, key=lambda p: (p[0], p[1].id)) if b.cgroup is kid]
        assert [b.t_queue for b in mine] == sorted(b.t_queue for b in mine)


def test_children_share_a_parent_round_robin():
    """A parent with riops=100 (10 per HD slice), children without limits: of a's 15
    bios and then b's 5, all at 0, a's first 10 pass; the other 10 wait in the parent,
    a's on a's qnode and b's on b's. At the slice's end (jiffy 25) the parent releases
    them round-robin by child (``throtl_pop_queued`` moves a qnode with more bios to
    the tail): a, b, a, b, ..."""
    env, tq = make()
    ids = Ids()
    parent = Group("p", riops=100)
    a, b = Group("a", parent), Group("b", parent)
    log = []
    issue = tq.throttle.issue
    tq.throttle.issue = lambda bios, now: (log.extend(bios), issue(bios, now))
    xs = [ids.bio(a) for _ in range(15)] + [ids.bio(b) for _ in range(5)]
    for x in xs:
        tq.submit_bio(x, 0.0)
    env.run()
    assert [x.t_queue for x in xs[:10]] == [0.0] * 10
    assert all(abs(x.t_queue - 0.1) < 1e-9 for x in xs[10:])
    assert [x.cgroup.name for x in log] == ["a", "b"] * 5
    fig = tq.figures()
    assert fig[a]["throttled_bios"] == 5 and fig[b]["throttled_bios"] == 5
    assert abs(fig[b]["held_s"] - 0.5) < 1e-9
