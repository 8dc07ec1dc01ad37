"""float64 reference of the pairwise priors of :mod:`directpet.recon.priors`, written straight from
their sums: a loop over every voxel ``j`` and every neighbour ``k`` of it inside the image, the ordered
double sum with the factor 1/2, and the pair function's derivatives by hand. Slow; for small images.

    ``R(x) = beta / 2 sum_j sum_{k in N(j)} w_jk kappa_j kappa_k f(x_j, x_k)``
    ``dR/dx_j = beta sum_{k in N(j)} w_jk kappa_j kappa_k df/da(x_j, x_k)``      (f symmetric)
    ``d2R/dx_j2 = beta sum_{k in N(j)} w_jk kappa_j kappa_k d2f/da2(x_j, x_k)``

with ``w_jk = min(voxel) / |r_j - r_k|`` over the 26 (or 6) nearest voxels.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def rdp_pair(a: float, b: float, gamma: float, epsilon: float):
    """``(f, df/da, d2f/da2)`` of the relative difference prior's pair function at one pair."""
    d = a - b
    s = a + b + gamma * abs(d) + epsilon
    f = d * d / s
    # quotient rule on f = d^2 / s with ds/da = 1 + gamma sgn(d)
    ds = 1.0 + gamma * math.copysign(1.0, d) if d != 0 else 1.0
    df = (2 * d * s - d * d * ds) / s ** 2
    # and once more: df = u / v with u = 2 d s - d^2 ds, v = s^2 (d2s/da2 = 0 away from d = 0)
    du = 2 * s + 2 * d * ds - 2 * d * ds
    dv = 2 * s * ds
    d2f = (du * s ** 2 - (2 * d * s - d * d * ds) * dv) / s ** 4
    return f, df, d2f


def quadratic_pair(a: float, b: float):
    """``(f, df/da, d2f/da2)`` of the quadratic prior's pair function ``(a - b)^2 / 2``."""
    return 0.5 * (a - b) ** 2, a - b, 1.0


def logcosh_pair(a: float, b: float, delta: float):
    """``(f, df/da, d2f/da2)`` of the log-cosh prior's pair function ``delta^2 log cosh((a - b) / delta)``."""
    t = (a - b) / delta
    at = abs(t)
    # log cosh written to neither overflow (large |t|) nor cancel (small |t|)
    log_cosh = math.log1p(2 * math.sinh(t / 2) ** 2) if at < 1 else at + math.log1p(math.exp(-2 * at)) - math.log(2)
    return delta ** 2 * log_cosh, delta * math.tanh(t), 1.0 / math.cosh(min(at, 350.0)) ** 2


def _neighbours(neighbourhood: int):
    if neighbourhood == 6:
        return [o for o in itertools.product((-1, 0, 1), repeat=3) if sum(map(abs, o)) == 1]
    return [o for o in itertools.product((-1, 0, 1), repeat=3) if any(o)]


def pairwise_prior(x, pair, beta: float, voxel_size=(1.0, 1.0, 1.0), neighbourhood: int = 26, kappa=None):
    """``(value, gradient, hessian_diagonal)`` of ``R`` at the (nz, ny, nx) image ``x`` in float64;
    ``pair(a, b) -> (f, df/da, d2f/da2)``."""
    x = np.asarray(x, dtype=np.float64)
    kappa = np.ones_like(x) if kappa is None else np.asarray(kappa, dtype=np.float64)
    sizes = np.asarray(voxel_size, dtype=np.float64)
    value, grad, hess = 0.0, np.zeros_like(x), np.zeros_like(x)
    for j in np.ndindex(*x.shape):
        for o in _neighbours(neighbourhood):
            k = tuple(int(c + d) for c, d in zip(j, o))
            if not all(0 <= c < n for c, n in zip(k, x.shape)):
                continue
            w = sizes.min() / np.linalg.norm(np.asarray(o) * sizes) * kappa[j] * kappa[k]
            f, df, d2f = pair(x[j], x[k])
            value += 0.5 * w * f
            grad[j] += w * df
            hess[j] += w * d2f
    return beta * value, beta * grad, beta * hess


__all__ = ["logcosh_pair", "pairwise_prior", "quadratic_pair", "rdp_pair"]
