"""System-response (SR) kernel models for DIRECT (:ref:`physics-direct`).

The kernel of a voxel is a 3D Gaussian in the view's local axes: TOF (e_t), LOR-radial (e_r) and
LOR-axial (e_a). Only the radial width varies in space, as a function of the voxel's signed LOR
distance ``s = -x sin(phi) + y cos(phi)`` (mm). Asymmetric kernels use the double Gaussian
``w N(rho; 0, sigma) + (1 - w) N(rho; -sgn(s) delta, 2 sigma)``, wider on the side facing the centre.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

import numpy as np

from .._checks import flag, real_number, real_values
from ..geometry import FWHM_PER_SIGMA

#: Speed of light in mm/ps.
C_MM_PER_PS = 0.299792458


def tof_fwhm_mm(tof_fwhm_ps: float) -> float:
    """Spatial FWHM (mm) along the LOR of a coincidence-timing FWHM (ps): c * dt / 2 (a positive
    finite number of ps, else an error naming ``tof_fwhm_ps``)."""
    return C_MM_PER_PS * real_number("tof_fwhm_ps", tof_fwhm_ps, positive=True) / 2.0


def sigma_from_fwhm(fwhm):
    """Gaussian standard deviation(s) of FWHM value(s), as float64: ``fwhm / (2 sqrt(2 ln 2))``
    (same units as ``fwhm``)."""
    return np.asarray(fwhm, dtype=np.float64) / FWHM_PER_SIGMA


# Radial FWHM models: f(|s| or s in mm, s_max in mm) -> FWHM in mm.
def _variant1(s, s_max):
    return 4.8 + 5.2 * np.abs(s) / s_max


def _variant2(s, s_max):
    return 5.8 + 6.2 * np.abs(s) / s_max


def _variant3(s, s_max):
    return np.sqrt(5.8**2 + (0.0236 * np.abs(s)) ** 2)


NAMED_RADIAL_MODELS = {"variant1": _variant1, "variant2": _variant2, "variant3": _variant3}

RadialSpec = Union[float, str, tuple, Callable]


@dataclass(frozen=True)
class SRKernel:
    """A DIRECT SR kernel model.

    Parameters
    ----------
    tof_fwhm_ps : coincidence timing resolution (ps); spatial FWHM is c * dt / 2.
    radial_fwhm : LOR-radial FWHM (mm) as a function of the signed LOR distance s: a number
        (invariant); ``"variant1" | "variant2" | "variant3"`` (the LOR-width models of [HA] section 6, :ref:`physics-direct`); ``("linear", centre,
        edge)`` for ``centre + (edge - centre) |s| / s_max`` clamped at s_max; or any callable ``f(s)``
        taking an array of signed distances (mm) and returning FWHMs (mm).
    axial_fwhm : LOR-axial FWHM (mm), invariant.
    truncation : k; the support mSR is the ellipsoid ``sum_dir (dist_dir / (k sigma_dir,max))^2 <= 1``.
    epsilon : LOR-distance bin (mm) of the kernel identifiers (LORmap).
    asymmetric : use the double-Gaussian radial profile.
    narrow_weight, wide_shift : w and delta of that profile; ``wide_shift=None`` means delta = sigma.
    image_kernel : add the variance of the voxel box (deposition blur) along each axis.
    s_max : distance (mm) at which named/linear models reach their edge width; None = the largest
        LOR distance of the grid's voxel centres (404.5 mm for 144 x 144 voxels of 4 mm).
    values : optional callable ``f(dist_tof, dist_radial, dist_axial, s)`` returning kernel values
        for offsets (mm, shape (N,)) and identifier-centre distances s (shape (n_kernels, 1));
        overrides the Gaussian values (normalised to unit sum per identifier). The support is
        still taken from the Gaussian widths.
    """

    tof_fwhm_ps: float = 400.0
    radial_fwhm: RadialSpec = 5.8
    axial_fwhm: float = 5.8
    truncation: float = 3.0
    epsilon: float = 2.0
    asymmetric: bool = False
    narrow_weight: float = 0.5
    wide_shift: Optional[float] = None
    image_kernel: bool = False
    s_max: Optional[float] = None
    values: Optional[Callable] = None

    def __post_init__(self):
        for name in ("tof_fwhm_ps", "axial_fwhm", "truncation", "epsilon"):
            object.__setattr__(self, name, real_number(name, getattr(self, name), positive=True))
        w = real_number("narrow_weight", self.narrow_weight)
        if not (0.0 < w <= 1.0):
            raise ValueError(f"narrow_weight: expected a value in (0, 1], got {self.narrow_weight!r}")
        object.__setattr__(self, "narrow_weight", w)
        if self.wide_shift is not None:
            object.__setattr__(self, "wide_shift", real_number("wide_shift", self.wide_shift, nonnegative=True))
        if self.s_max is not None:
            object.__setattr__(self, "s_max", real_number("s_max", self.s_max, positive=True))
        for name in ("asymmetric", "image_kernel"):
            object.__setattr__(self, name, flag(name, getattr(self, name)))
        if self.values is not None and not callable(self.values):
            raise TypeError("values: expected a callable f(dist_tof, dist_radial, dist_axial, s)")
        r = self.radial_fwhm
        if isinstance(r, str):
            if r not in NAMED_RADIAL_MODELS:
                raise ValueError(f"radial_fwhm: unknown model {r!r}; expected one of {sorted(NAMED_RADIAL_MODELS)}")
        elif isinstance(r, tuple):
            if len(r) != 3 or r[0] != "linear":
                raise ValueError(f"radial_fwhm: expected ('linear', centre_mm, edge_mm), got {r!r}")
            object.__setattr__(self, "radial_fwhm", ("linear", real_number("radial_fwhm centre", r[1], positive=True),
                                                     real_number("radial_fwhm edge", r[2], positive=True)))
        elif not callable(r):
            object.__setattr__(self, "radial_fwhm", real_number("radial_fwhm", r, positive=True))

    # Named configurations used throughout the papers.
    @classmethod
    def invariant(cls, tof_fwhm_ps=400.0, fwhm=5.8, **kw) -> "SRKernel":
        """Invariant symmetric kernel (400 ps, 5.8 mm LOR widths by default)."""
        return cls(tof_fwhm_ps=tof_fwhm_ps, radial_fwhm=fwhm, axial_fwhm=fwhm, **kw)

    @classmethod
    def clinical(cls, model="variant1", tof_fwhm_ps=400.0, axial_fwhm=5.8, **kw) -> "SRKernel":
        """400 ps, radial ``variant1`` (4.8 -> 10 mm), axial 5.8 mm: the [HA] reconstruction kernel."""
        return cls(tof_fwhm_ps=tof_fwhm_ps, radial_fwhm=model, axial_fwhm=axial_fwhm, **kw)

    @classmethod
    def stress(cls, **kw) -> "SRKernel":
        """The [HA] Table II stress kernel: 900 ps, radial 10 -> 100 mm (linear in ``|s|``), axial 10 mm."""
        return cls(tof_fwhm_ps=900.0, radial_fwhm=("linear", 10.0, 100.0), axial_fwhm=10.0, **kw)

    @property
    def is_invariant(self) -> bool:
        """True when the LOR-radial FWHM is one number, not a model of the LOR distance ``s`` (a
        named model, ``('linear', ...)`` or a callable); a custom ``values`` function is not checked."""
        return not callable(self.radial_fwhm) and not isinstance(self.radial_fwhm, (str, tuple))

    @property
    def is_symmetric_invariant(self) -> bool:
        """True when forward and back projection are the same convolution (FFT applies)."""
        return self.is_invariant and not self.asymmetric and self.values is None

    def radial_fwhm_at(self, s, s_max: float) -> np.ndarray:
        """LOR-radial FWHM (mm) at signed LOR distances s (mm, real and finite) for the model's
        edge distance ``s_max`` (mm, positive)."""
        s = real_values("s", s, np).astype(np.float64)
        s_max = real_number("s_max", s_max, positive=True)
        r = self.radial_fwhm
        if isinstance(r, str):
            out = NAMED_RADIAL_MODELS[r](s, s_max)
        elif isinstance(r, tuple):
            out = r[1] + (r[2] - r[1]) * np.minimum(np.abs(s) / s_max, 1.0)
        elif callable(r):
            try:
                out = np.broadcast_to(np.asarray(r(s), dtype=np.float64), s.shape)
            except (TypeError, ValueError) as err:
                raise ValueError(f"radial_fwhm: the model must return FWHMs (mm) broadcastable to {s.shape} "
                                 f"({type(err).__name__}: {err})") from None
        else:
            out = np.full(s.shape, float(r))
        out = np.broadcast_to(out, s.shape).astype(np.float64)
        if not np.all(np.isfinite(out)) or np.any(out <= 0):
            raise ValueError("radial_fwhm: the model gave a non-positive or non-finite FWHM")
        return out

    def box_variance(self, axis: np.ndarray, voxel_size) -> float:
        """Variance (mm^2) that a uniform voxel box adds along a unit axis (x, y, z components)."""
        if not self.image_kernel:
            return 0.0
        vz, vy, vx = voxel_size
        return float(axis[0] ** 2 * vx**2 + axis[1] ** 2 * vy**2 + axis[2] ** 2 * vz**2) / 12.0


