"""disk_models.first_draw: numpy's first uniform draw for an integer seed, without numpy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.disk_models.first_draw import first_random


@pytest.mark.parametrize("seed", [0, 1, 42, 2**32 - 1, 2**32, 2**64 - 1, 2**64, 2**128 + 3])
def test_equals_numpys_first_draw_at_word_boundaries(seed):
    # 1, 2, 3 and 5 32-bit words: the pool of four is filled, padded and overflowed
    assert first_random(seed) == np.random.default_rng(seed).random()


@given(st.integers(min_value=0, max_value=2**300))
@settings(max_examples=300, deadline=None)
def test_equals_numpys_first_draw(seed):
    assert first_random(seed) == np.random.default_rng(seed).random()


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_only_non_negative_integers(bad):
    with pytest.raises(ValueError, match="non-negative integer"):
        first_random(bad)


def test_a_drive_seeded_by_int_or_by_generator_starts_at_the_same_angle():
    from blksim.disk_models.drive import make_drive
    from blksim.disk_models.presets import load_drive
    spec = load_drive("cheetah9LP")
    by_int = make_drive(spec, seed=7, queue_depth=1)
    by_rng = make_drive(spec, seed=np.random.default_rng(7), queue_depth=1)
    assert by_int.angle0 == by_rng.angle0
