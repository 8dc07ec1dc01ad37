"""Pairwise smoothing priors for penalised-likelihood reconstruction (NumPy and CuPy, one code path).

Every prior here is a sum over the unordered pairs ``{j, k}`` of neighbouring voxels of a 3D
``(nz, ny, nx)`` image,

    ``R(x) = beta * sum_{pairs {j,k}} w_jk kappa_j kappa_k f(x_j, x_k)``,

with a symmetric pair function ``f(a, b) = f(b, a)`` (so the sum over ordered pairs with a factor 1/2,
STIR's and SIRF's convention, is the same number). The neighbourhood is the 26 (or 6) nearest
voxels; a pair is left out where the neighbour lies outside the image. ``w_jk`` is the inverse
distance between the voxel centres in mm, scaled so that the nearest neighbour along the smallest
voxel edge has weight 1 (1, 1/sqrt 2, 1/sqrt 3 on isotropic voxels). ``kappa`` (default 1) is an
optional spatially varying weight per voxel, e.g. the "uniform resolution" weights
``kappa_j ~ sqrt(sum_i a_ij^2 / ybar_i)`` of Fessler and Rogers that STIR and SIRF use.

Pair functions (``d = a - b``):

* :class:`RelativeDifferencePrior` (Nuyts et al. 2002): ``f = d^2 / (a + b + gamma |d| + epsilon)``;
  ``gamma`` sets edge preservation (0: no edge preservation beyond the relative scaling; 2 is the
  usual clinical choice), ``epsilon > 0`` (activity units) keeps it smooth where the image is near
  zero. The image must be non-negative.
* :class:`QuadraticPrior`: ``f = d^2 / 2``.
* :class:`LogCoshPrior`: ``f = delta^2 log cosh(d / delta)``: quadratic for ``|d| << delta``, linear
  (edge preserving, like Huber but smooth) beyond.

Each prior gives its value, its gradient and the diagonal of its Hessian (``sum_k w kappa kappa
d^2 f / da^2``, what the preconditioners of BSREM and of preconditioned stochastic gradient methods
use). The arrays may be NumPy or CuPy. A float32 C-contiguous image goes through one compiled pass
(``csrc/recon/pair_prior.hpp``, the per-voxel sums written once for OpenMP on the CPU and one thread
per voxel on the GPU); float64 and strided images through 13 (26-neighbourhood) or 3
(6-neighbourhood) vectorised passes over shifted views of the image in its own namespace and dtype.
The value is accumulated in float64. The float64 reference written straight from the sums is
:mod:`directpet.reference.priors`.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from typing import Sequence, Tuple

import numpy as np

from .. import _core
from .._backend import cuda_loaded, cuda_module
from .._checks import array_module, integer, real_number

#: the pair offsets (dz, dy, dx) of each neighbourhood, one per unordered pair (first nonzero > 0)
_HALF_OFFSETS = {
    6: ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
    26: tuple(o for o in itertools.product((-1, 0, 1), repeat=3)
              if any(o) and next(c for c in o if c) > 0),
}


def neighbour_offsets(neighbourhood: int, voxel_size: Sequence[float]) -> Tuple[Tuple[tuple, float], ...]:
    """``((offset (dz, dy, dx), weight), ...)``: one entry per unordered neighbour pair direction of the
    6- or 26-neighbourhood, with the inverse-distance weight ``min(voxel_size) / |offset in mm|``."""
    neighbourhood = integer("neighbourhood", neighbourhood)
    if neighbourhood not in _HALF_OFFSETS:
        raise ValueError(f"neighbourhood: expected 6 or 26, got {neighbourhood}")
    sizes = np.asarray([real_number("voxel_size", v, positive=True) for v in voxel_size], dtype=np.float64)
    if sizes.shape != (3,):
        raise ValueError(f"voxel_size: expected (vz, vy, vx) in mm, got {tuple(voxel_size)!r}")
    return tuple((o, float(sizes.min() / np.linalg.norm(np.asarray(o) * sizes))) for o in _HALF_OFFSETS[neighbourhood])


#: log 2 as a Python float (a NumPy float64 scalar would promote float32 images)
_LOG2 = float(np.log(2.0))


def _pair_slices(offset, shape):
    """(slices of j, slices of k = j + offset) over the voxels whose neighbour is inside the image."""
    sj, sk = [], []
    for o, n in zip(offset, shape):
        sj.append(slice(0, n - o) if o > 0 else slice(-o, n) if o < 0 else slice(0, n))
        sk.append(slice(o, n) if o > 0 else slice(0, n + o) if o < 0 else slice(0, n))
    return tuple(sj), tuple(sk)


def _weight_table(offsets) -> np.ndarray:
    """The 3 x 3 x 3 neighbour weights, flattened (``w[(dz + 1) * 9 + (dy + 1) * 3 + (dx + 1)]``), of
    the compiled kernels: each pair direction's weight at its offset and the opposite one, 0 elsewhere."""
    table = np.zeros((3, 3, 3), np.float32)
    for o, w in offsets:
        table[tuple(c + 1 for c in o)] = table[tuple(1 - c for c in o)] = w
    return table.ravel()


class PairwisePrior(ABC):
    """``R(x) = beta sum_{pairs} w_jk kappa_j kappa_k f(x_j, x_k)`` (see the module docstring).

    Parameters
    ----------
    beta : the prior's strength (>= 0; 0 switches it off).
    voxel_size : (vz, vy, vx) in mm, or an :class:`~directpet.geometry.ImageGrid` (its voxel sizes).
    neighbourhood : 26 (default) or 6.
    kappa : optional (nz, ny, nx) non-negative finite weights per voxel (NumPy or CuPy, converted to
        the image's namespace and dtype when used).

    Subclasses define the pair function by :meth:`_pair` (``f`` and ``df/da``) and
    :meth:`_pair_curvature` (``d^2 f / da^2``); both take the values ``a = x_j``, ``b = x_k`` of a
    block of pairs and the array namespace. The compiled kernels (``csrc/recon/pair_prior.hpp``: one
    pass per call, OpenMP on the CPU, one thread per voxel on the GPU) compute float32 C-contiguous
    images, NumPy and CuPy; float64 and strided images take the vectorised path written here.
    """

    #: the pair function's name in messages
    name = "pairwise prior"
    #: the compiled kernels' pair kind (pair_prior.hpp's PairKind; None: vectorised path only)
    _kind = None
    #: the names of the kernel parameters (p0, p1) in messages
    _parameter_names = ()

    def _kernel_parameters(self):
        """(p0, p1) of the compiled kernels' pair function."""
        return 0.0, 0.0

    def __init__(self, beta: float, voxel_size=(1.0, 1.0, 1.0), *, neighbourhood: int = 26, kappa=None):
        self.beta = real_number("beta", beta, nonnegative=True)
        voxel_size = getattr(voxel_size, "voxel_size", voxel_size)          # an ImageGrid
        if isinstance(voxel_size, (str, bytes)) or not hasattr(voxel_size, "__len__"):
            raise TypeError(f"voxel_size: expected (vz, vy, vx) in mm or an ImageGrid, got {type(voxel_size).__name__}")
        self.offsets = neighbour_offsets(neighbourhood, voxel_size)         # checks both
        self.voxel_size = tuple(float(v) for v in voxel_size)
        self.neighbourhood = int(neighbourhood)
        self.kappa = None
        if kappa is not None:
            xp = array_module(kappa)
            if not hasattr(kappa, "dtype") or kappa.ndim != 3 or kappa.dtype.kind not in "iuf":
                raise TypeError(f"kappa: expected a real (nz, ny, nx) array, got {type(kappa).__name__} "
                                f"{getattr(kappa, 'shape', '')}")
            if not bool(xp.isfinite(kappa).all()) or bool((kappa < 0).any()):
                raise ValueError("kappa: expected finite values >= 0")
            self.kappa = kappa

    # --- the pair function: subclasses ------------------------------------------------------------------

    @abstractmethod
    def _pair(self, a, b, xp):
        """``(f(a, b), df/da(a, b))`` element-wise."""

    @abstractmethod
    def _pair_curvature(self, a, b, xp):
        """``d^2 f / da^2 (a, b)`` element-wise."""

    def _check_values(self, x, xp) -> None:
        """A subclass's requirement on the image values (the RDP: non-negative)."""

    # --- sums over the pairs ----------------------------------------------------------------------------

    def _image(self, x, check: bool = True, name="x"):
        xp = array_module(x)
        if not hasattr(x, "dtype") or x.dtype.kind != "f":
            raise TypeError(f"{name}: expected a float32 or float64 NumPy / CuPy array, got {type(x).__name__} "
                            f"{getattr(x, 'dtype', '')} [{type(self).__name__}]")
        if x.ndim != 3:
            raise ValueError(f"{name}: expected an (nz, ny, nx) image, got shape {tuple(x.shape)} [{type(self).__name__}]")
        if check:       # two reductions: the algorithms, which keep x finite and >= 0, skip them
            if not bool(xp.isfinite(x).all()):
                raise ValueError(f"{name}: contains NaN or inf [{type(self).__name__}]")
            self._check_values(x, xp)
        kappa = None
        if self.kappa is not None:
            if tuple(self.kappa.shape) != tuple(x.shape):
                raise ValueError(f"kappa: its shape {tuple(self.kappa.shape)} differs from the image's "
                                 f"{tuple(x.shape)} [{type(self).__name__}]")
            key = (xp.__name__, x.dtype.str)
            if getattr(self, "_kappa_key", None) != key:      # convert once per namespace and dtype
                if array_module(self.kappa) is not np and xp is np:
                    raise TypeError(f"kappa: a CuPy array, and the image is NumPy [{type(self).__name__}]")
                self._kappa_cached, self._kappa_key = xp.asarray(self.kappa, dtype=x.dtype), key
            kappa = self._kappa_cached
        return xp, kappa

    def _weights(self, w, kappa, sj, sk):
        return w if kappa is None else w * kappa[sj] * kappa[sk]

    def _fused(self, x, xp):
        """Whether a compiled kernel computes this call: a non-empty C-contiguous float32 image, NumPy,
        or CuPy where the CUDA backend loads (32-bit indices and grid limits on the GPU)."""
        if self._kind is None or x.dtype != np.float32 or not x.flags.c_contiguous or x.size == 0:
            return False
        if xp is np:
            return True
        return cuda_loaded() and x.size < 2**31 and max(x.shape[:2]) < 65536

    def _launch(self, x, kappa, xp, grad=None, hess=None, value=None, factor: float = 1.0, accumulate=False):
        """The compiled kernel: ``grad = beta factor sum w df`` (``accumulate``: added to grad),
        ``hess``, ``value`` partials; each only when given (float32 C-contiguous, x's namespace)."""
        if not hasattr(self, "_table"):
            self._table = _weight_table(self.offsets)
        p0, p1 = self._kernel_parameters()
        scale = self.beta * factor
        with np.errstate(over="ignore"):
            for name, v in (("beta", scale),) + tuple(zip(self._parameter_names, (p0, p1))):
                if not np.isfinite(np.float32(v)):
                    raise ValueError(f"{name}: {v:g} overflows the float32 arithmetic of a float32 image "
                                     f"[{type(self).__name__}]")
        kap = None if kappa is None else xp.ascontiguousarray(kappa, dtype=xp.float32)
        if xp is np:
            _core.pair_prior_cpu(self._kind, x, kap, self._table, scale, p0, p1, grad, bool(accumulate), hess, value)
            return
        device = xp.cuda.Device().id
        for name, a in (("x", x), ("kappa", kap), ("out", grad), ("out", hess)):
            if a is not None and a.device.id != device:
                raise ValueError(f"{name}: on GPU {a.device.id}, and the current device is GPU {device} "
                                 f"[{type(self).__name__}]")
        nz, ny, nx = x.shape
        cuda_module().pair_prior_cuda(self._kind, x.data.ptr, 0 if kap is None else kap.data.ptr, self._table, nz, ny, nx,
                              scale, p0, p1, 0 if grad is None else grad.data.ptr, bool(accumulate),
                              0 if hess is None else hess.data.ptr, 0 if value is None else value.data.ptr,
                              xp.cuda.get_current_stream().ptr)

    def add_gradient(self, x, out, factor: float = 1.0):
        """``out += factor * grad R(x)`` in place (the algorithms' step, one fused pass on the GPU);
        x and out as for :meth:`gradient`, x not checked (the caller keeps it finite and >= 0)."""
        xp, kappa = self._image(x, check=False)
        if not self.beta or not factor:
            return out
        if (not hasattr(out, "shape") or array_module(out) is not xp or tuple(out.shape) != tuple(x.shape)
                or out.dtype != x.dtype):
            raise ValueError(f"out: expected a {xp.__name__} {x.dtype} array of shape {tuple(x.shape)}, got "
                             f"{type(out).__name__} {getattr(out, 'dtype', '')} {tuple(getattr(out, 'shape', ()))} "
                             f"[{type(self).__name__}.add_gradient]")
        if xp is np and not out.flags.writeable:
            raise ValueError(f"out: the array is read-only [{type(self).__name__}.add_gradient]")
        if self._fused(x, xp) and out.flags.c_contiguous:
            self._launch(x, kappa, xp, grad=out, factor=factor, accumulate=True)
            return out
        out += x.dtype.type(factor) * self.gradient(x, check=False)
        return out

    def value(self, x, *, check: bool = True) -> float:
        """``R(x)`` (a Python float, accumulated in float64). ``check=False`` skips the finite and
        value checks of x (for callers that guarantee them)."""
        xp, kappa = self._image(x, check)
        if self.beta == 0.0:
            return 0.0
        if self._fused(x, xp):
            partial = xp.empty_like(x)
            self._launch(x, kappa, xp, value=partial)
            return self.beta * float(partial.sum(dtype=xp.float64))
        total = 0.0
        for offset, w in self.offsets:
            sj, sk = _pair_slices(offset, x.shape)
            f, _ = self._pair(x[sj], x[sk], xp)
            total += float((self._weights(w, kappa, sj, sk) * f).sum(dtype=xp.float64))
        return self.beta * total

    __call__ = value

    def gradient(self, x, out=None, *, check: bool = True):
        """``dR/dx`` (the image's shape, namespace and dtype); written into ``out`` when given."""
        return self._accumulate(x, out, curvature=False, check=check)

    def hessian_diagonal(self, x, out=None, *, check: bool = True):
        """The diagonal of the Hessian of ``R`` at ``x``: ``beta sum_k w kappa kappa d^2f/da^2 (x_j, x_k)``."""
        return self._accumulate(x, out, curvature=True, check=check)

    def _accumulate(self, x, out, curvature: bool, check: bool):
        xp, kappa = self._image(x, check)
        if out is None:
            out = xp.zeros_like(x)
        else:
            if (not hasattr(out, "shape") or array_module(out) is not xp or tuple(out.shape) != tuple(x.shape)
                    or out.dtype != x.dtype):
                raise ValueError(f"out: expected a {xp.__name__} {x.dtype} array of shape {tuple(x.shape)} "
                                 f"[{type(self).__name__}]")
            if xp is np and not out.flags.writeable:
                raise ValueError(f"out: the array is read-only [{type(self).__name__}]")
            out[...] = 0
        if self.beta == 0.0:
            return out
        if self._fused(x, xp) and out.flags.c_contiguous:
            self._launch(x, kappa, xp, **{"hess" if curvature else "grad": out})
            return out
        beta = x.dtype.type(self.beta)
        for offset, w in self.offsets:
            sj, sk = _pair_slices(offset, x.shape)
            a, b = x[sj], x[sk]
            weight = self._weights(x.dtype.type(w), kappa, sj, sk) * beta
            if curvature:
                out[sj] += weight * self._pair_curvature(a, b, xp)
                out[sk] += weight * self._pair_curvature(b, a, xp)
            else:                            # f symmetric: df/db (a, b) = df/da (b, a)
                out[sj] += weight * self._pair(a, b, xp)[1]
                out[sk] += weight * self._pair(b, a, xp)[1]
        return out

    def __repr__(self):
        return (f"{type(self).__name__}(beta={self.beta:g}, voxel_size={self.voxel_size}, "
                f"neighbourhood={self.neighbourhood}{', kappa' if self.kappa is not None else ''})")


class RelativeDifferencePrior(PairwisePrior):
    """The relative difference prior (Nuyts et al. 2002), ``f(a, b) = (a - b)^2 / (a + b + gamma |a - b|
    + epsilon)`` on non-negative images.

    Parameters
    ----------
    beta, voxel_size, neighbourhood, kappa : as for :class:`PairwisePrior`.
    gamma : edge preservation, >= 0 (default 2).
    epsilon : > 0, in the image's units: keeps the prior and its derivatives finite where
        neighbouring values are both near zero. It has no default because it must match the image's
        scale: about 1e-3 of the expected activity is usual (the curvature grows as 1 / epsilon at zero).
    """

    name = "relative difference prior"
    _kind = 0
    _parameter_names = ("gamma", "epsilon")

    def _kernel_parameters(self):
        return self.gamma, self.epsilon

    def __init__(self, beta: float, voxel_size=(1.0, 1.0, 1.0), *, gamma: float = 2.0, epsilon: float,
                 neighbourhood: int = 26, kappa=None):
        super().__init__(beta, voxel_size, neighbourhood=neighbourhood, kappa=kappa)
        self.gamma = real_number("gamma", gamma, nonnegative=True)
        self.epsilon = real_number("epsilon", epsilon, positive=True)

    def _check_values(self, x, xp) -> None:
        if bool((x < 0).any()):
            raise ValueError(f"x: the relative difference prior needs an image >= 0, got min {float(x.min()):g}")

    def _pair(self, a, b, xp):
        d = a - b
        s = a + b + self.gamma * xp.abs(d) + self.epsilon
        return d * d / s, d * (a + 3 * b + self.gamma * xp.abs(d) + 2 * self.epsilon) / (s * s)

    def _pair_curvature(self, a, b, xp):
        # d/da of d N / s^2 with N = a + 3b + gamma|d| + 2 eps, ds/da = dN/da = sigma = 1 + gamma sgn(d):
        # ((N + d sigma) s - 2 d N sigma) / s^3; with gamma = 0 it is 2 (2b + eps)^2 / s^3
        d = a - b
        ad = xp.abs(d)
        s = a + b + self.gamma * ad + self.epsilon
        n = a + 3 * b + self.gamma * ad + 2 * self.epsilon
        sigma = 1 + self.gamma * xp.sign(d)
        return ((n + d + self.gamma * ad) * s - 2 * d * n * sigma) / (s * s * s)

    def __repr__(self):
        return super().__repr__()[:-1] + f", gamma={self.gamma:g}, epsilon={self.epsilon:g})"


class QuadraticPrior(PairwisePrior):
    """``f(a, b) = (a - b)^2 / 2`` (see :class:`PairwisePrior`): the gradient is ``beta sum_k w kappa
    kappa (x_j - x_k)`` and the Hessian is constant."""

    name = "quadratic prior"
    _kind = 1

    def _pair(self, a, b, xp):
        d = a - b
        return 0.5 * d * d, d

    def _pair_curvature(self, a, b, xp):
        return xp.ones_like(a)


class LogCoshPrior(PairwisePrior):
    """``f(a, b) = delta^2 log cosh((a - b) / delta)`` (see :class:`PairwisePrior`): quadratic for
    differences well below ``delta`` (image units, > 0), linear beyond: an edge-preserving smooth
    alternative to the Huber prior."""

    name = "log-cosh prior"
    _kind = 2
    _parameter_names = ("delta",)

    def _kernel_parameters(self):
        return self.delta, 0.0

    def __init__(self, beta: float, voxel_size=(1.0, 1.0, 1.0), *, delta: float, neighbourhood: int = 26,
                 kappa=None):
        super().__init__(beta, voxel_size, neighbourhood=neighbourhood, kappa=kappa)
        self.delta = real_number("delta", delta, positive=True)

    def _pair(self, a, b, xp):
        t = (a - b) / self.delta
        at = xp.abs(t)
        # log cosh t = log1p(2 sinh^2(t / 2)) for |t| < 1 (the other form cancels in float32 there) and
        # |t| + log1p(exp(-2|t|)) - log 2 beyond (no overflow for large |t|)
        sh = xp.sinh(0.5 * xp.minimum(at, 1.0))
        small = xp.log1p(2 * sh * sh)
        large = at + xp.log1p(xp.exp(-2 * at)) - _LOG2
        return self.delta ** 2 * xp.where(at < 1.0, small, large), self.delta * xp.tanh(t)

    def _pair_curvature(self, a, b, xp):
        c = xp.cosh(xp.minimum(xp.abs(a - b) / self.delta, 40))
        return 1 / (c * c)

    def __repr__(self):
        return super().__repr__()[:-1] + f", delta={self.delta:g})"


__all__ = ["LogCoshPrior", "PairwisePrior", "QuadraticPrior", "RelativeDifferencePrior", "neighbour_offsets"]
