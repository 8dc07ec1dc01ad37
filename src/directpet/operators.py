"""A small LinearOperator base: forward / adjoint, shapes, and a reusable adjointness check."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class LinearOperator(ABC):
    """Base class: subclasses set ``in_shape`` / ``out_shape`` and implement ``forward`` / ``adjoint``."""

    in_shape: tuple
    out_shape: tuple

    @abstractmethod
    def forward(self, x):
        """A x."""

    @abstractmethod
    def adjoint(self, y):
        """A^T y."""

    def _set_runtime(self, backend: str, threads, check_finite: bool):
        """The projectors' common run settings: ``backend`` (the one actually used, 'cpu' or
        'cuda'), ``threads`` (CPU threads; 0 = the OpenMP default) and ``check_finite``."""
        from ._backend import resolve_backend
        from ._checks import check_threads, flag

        self.threads = check_threads(threads)
        self.check_finite = flag("check_finite", check_finite)
        if not isinstance(backend, str):
            raise TypeError(f"backend: expected 'auto', 'cpu' or 'cuda', got {type(backend).__name__}")
        self.backend = resolve_backend(backend)

    def back(self, y, *args, **kwargs):
        """Alias of :meth:`adjoint` (back projection); extra arguments are passed through."""
        return self.adjoint(y, *args, **kwargs)

    def __call__(self, x, *args, **kwargs):
        return self.forward(x, *args, **kwargs)

    def adjointness_test(self, rng=None, dtype=np.float32) -> float:
        """Relative mismatch ``|<y, A x> - <A^T y, x>| / |<y, A x>|`` on fresh random inputs.

        Inner products are accumulated in float64. For a float32 operator a value well under 1e-5
        means the pair is an exact transpose up to rounding.
        """
        from .sim.random import make_rng       # the checked seed / Generator (errors name rng)

        rng = make_rng(rng)
        x = rng.random(self.in_shape).astype(dtype)
        y = rng.random(self.out_shape).astype(dtype)
        ax = np.asarray(self.forward(x), dtype=np.float64)
        aty = np.asarray(self.adjoint(y), dtype=np.float64)
        lhs = float(np.vdot(y.astype(np.float64), ax))
        rhs = float(np.vdot(aty, x.astype(np.float64)))
        return abs(lhs - rhs) / abs(lhs)
