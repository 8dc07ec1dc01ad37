"""A SubsetProblem without any projector family, for the reconstruction layer's tests.

``DenseSubsets``: y_s = A_s x with a dense (rows_s, n_voxels) float32 block A_s per subset, data,
multiplicative factors and background per subset (NumPy or CuPy arrays, whatever the blocks are); it
counts the projections it makes, so a test can check that an argument error comes before any work.
"""

from __future__ import annotations

import numpy as np

from directpet.recon import SubsetProblem


class DenseSubsets(SubsetProblem):
    def __init__(self, blocks, data, factors=None, background=None, *, image_shape, order=None):
        self.blocks = blocks
        self.n_subsets = len(blocks)
        self.image_shape = tuple(image_shape)
        self._d, self._f, self._b = data, factors, background
        self._order = order
        self.projections = 0

    def forward(self, x, subset, out=None):
        self.projections += 1
        y = self.blocks[subset] @ x.reshape(-1)
        if out is None:
            return y
        out[...] = y
        return out

    def adjoint(self, y, subset, out=None):
        self.projections += 1
        x = (self.blocks[subset].T @ y).reshape(self.image_shape)
        if out is None:
            return x
        out[...] = x
        return out

    def data(self, subset):
        return self._d[subset]

    def factors(self, subset):
        return None if self._f is None else self._f[subset]

    def background(self, subset):
        return None if self._b is None else self._b[subset]

    def order(self):
        return list(range(self.n_subsets)) if self._order is None else list(self._order)


def random_dense(rng, image_shape, rows, *, order=None, low=0.05, background=(0.5, 2.0)) -> DenseSubsets:
    """A well-conditioned random problem: blocks uniform in [low, 1), a truth uniform in [0.5, 2),
    factors uniform in [0.5, 1.5), background uniform in ``background``, Poisson data."""
    n_vox = int(np.prod(image_shape))
    blocks = [rng.uniform(low, 1.0, (m, n_vox)).astype(np.float32) for m in rows]
    truth = rng.uniform(0.5, 2.0, n_vox)
    factors = [rng.uniform(0.5, 1.5, m).astype(np.float32) for m in rows]
    bg = [rng.uniform(*background, m).astype(np.float32) for m in rows]
    data = [rng.poisson(f * (a.astype(np.float64) @ truth) + b).astype(np.float32)
            for a, f, b in zip(blocks, factors, bg)]
    return DenseSubsets(blocks, data, factors, bg, image_shape=image_shape, order=order)
