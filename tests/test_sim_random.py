"""Shared random streams: the compiled Philox4x32-10 generator, NumPy / CuPy Generators and seeds."""

import numpy as np
import pytest

from directpet import _core
from directpet.sim import check_seed, make_rng, seed_from_rng


@pytest.mark.parametrize("counter, key, expect", [   # Random123's known-answer vectors
    ([0, 0, 0, 0], [0, 0], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
    ([0xffffffff] * 4, [0xffffffff] * 2, [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
    ([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0],
     [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]),
])
def test_philox4x32_10_known_answers(counter, key, expect):
    assert list(_core.philox4x32_10(counter, key)) == expect


def test_make_rng_is_reproducible_and_passes_generators_through(rng):
    seed = int(rng.integers(2**32))
    a, b = make_rng(seed).random(5), make_rng(seed).random(5)
    np.testing.assert_array_equal(a, b)
    gen = np.random.default_rng(seed)
    assert make_rng(gen) is gen


def test_seed_from_rng(rng):
    seed = int(rng.integers(2**63))
    assert seed_from_rng(seed) == seed
    assert seed_from_rng(np.random.default_rng(seed)) == seed_from_rng(np.random.default_rng(seed))
    assert 0 <= seed_from_rng(None) < 2**63
    with pytest.raises(TypeError, match="rng"):
        seed_from_rng("seed")


@pytest.mark.parametrize("bad", [-1, 2**64, 1.5, True])
def test_check_seed_names_the_argument(bad):
    with pytest.raises(ValueError, match="my_seed"):
        check_seed("my_seed", bad)


def test_draw_counts_takes_round_off_below_zero_but_not_negative_data(rng):
    """An FFT projector's float32 round-off leaves values ~1e-7 of the maximum below zero: they are
    zeros (drawn as 0); values clearly below zero (a kernel with negative weights) are refused."""
    from directpet.sim.random import NEGATIVE_ROUNDOFF, draw_counts

    expected = rng.uniform(0.5, 2.0, 1000).astype(np.float32)
    expected[:10] = -0.1 * NEGATIVE_ROUNDOFF * expected.max()
    data, _, alpha, _ = draw_counts(expected, counts=1e4, rng=rng)
    assert np.all(data[:10] == 0) and data.sum() > 0 and alpha > 0
    expected[0] = -10 * NEGATIVE_ROUNDOFF * expected.max()
    with pytest.raises(ValueError, match="^projector: the expected data have negative values"):
        draw_counts(expected, rng=rng)
    with pytest.raises(ValueError, match="^counts:"):
        draw_counts(np.abs(expected), counts=1e30, rng=rng)
