"""Queue merging (placeholder, filled in below)."""

from __future__ import annotations


class Merging:
    """Queue merging of cooperating processes."""

    def __init__(self, bfqd) -> None:
        self.bfqd = bfqd

    def do_or_sched_stable_merge(self, bfqq, bic):
        return bfqq

    def split(self, bic, bfqq):
        return bfqq

    def reassign_last_created(self, bfqq, new):
        pass

    def put_cooperator(self, bfqq):
        pass

    def setup_cooperator(self, bfqq, io, request, bic):
        return None

    def redirect_request(self, rq, bfqq, new_bfqq):
        return bfqq

    def merge_bfqqs(self, bic, bfqq, new_bfqq):
        pass

    def pos_tree_add_move(self, bfqq):
        pass

    def pos_tree_remove(self, bfqq):
        pass
