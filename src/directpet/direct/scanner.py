"""DIRECT's idealised cylindrical TOF-PET scanner for event simulation (science.md 1.10, 1.12, Q11).

Coordinates: points and directions are ``(x, y, z)`` in mm, z the scanner axis, the origin at the
scanner centre (the image grid is centred there too). Times are in ps.

The scanner is a continuous detector surface (no crystals, no gaps): a cylinder of radius
``radius_mm`` and length ``axial_length_mm``. A coincidence is accepted when both photons reach that
surface within its axial extent *and* the LOR's co-polar tilt is within ``+-theta_max_deg`` (the
Penn scanner's axial acceptance).

The geometric helpers at the bottom (:func:`detector_exits`, :func:`detector_hits`, built on the
shared :func:`~directpet.sim.lines.cylinder_interval`) are written against an array namespace ``xp``
(NumPy or CuPy) and broadcast, so they serve per-event arrays (events) and per-voxel grids
(sensitivity images) alike.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .._checks import expect_instance, normalise_fields, real_values
from ..sim.lines import cylinder_interval
from .kernels import FWHM_PER_SIGMA, SRKernel, tof_fwhm_mm
from .views import ViewSet


@dataclass(frozen=True)
class CylindricalScanner:
    """Idealised whole-body TOF scanner (defaults: the Penn LaBr3 prototype as far as it is known).

    Parameters
    ----------
    radius_mm : detector-surface radius (mm); 465 mm = 93 cm diameter.
    axial_length_mm : detector axial length (mm); 250 mm is the commonly cited, unverified value (Q11).
    theta_max_deg : axial acceptance: largest |co-polar tilt| of an accepted LOR (degrees).
    tof_fwhm_ps : coincidence timing resolution (FWHM of t1 - t2, ps).
    intrinsic_fwhm_mm : detector (LOR) resolution, applied as a 2D Gaussian perpendicular shift of
        the whole LOR (mm FWHM).
    fov_diameter_mm : transaxial field of view (mm); randoms are spread along the LOR segment
        inside it.
    coincidence_window_ps : coincidence window (ps); only used to reject randoms whose in-FOV
        time difference would fall outside it (never the case for the defaults).
    """

    radius_mm: float = 465.0
    axial_length_mm: float = 250.0
    theta_max_deg: float = 10.0
    tof_fwhm_ps: float = 400.0
    intrinsic_fwhm_mm: float = 5.8
    fov_diameter_mm: float = 576.0
    coincidence_window_ps: float = 4000.0

    def __post_init__(self):
        normalise_fields(self, positive=("radius_mm", "axial_length_mm", "theta_max_deg", "tof_fwhm_ps",
                                         "fov_diameter_mm", "coincidence_window_ps"),
                         nonnegative=("intrinsic_fwhm_mm",))
        if not self.theta_max_deg < 90.0:
            raise ValueError(f"theta_max_deg: expected a value in (0, 90), got {self.theta_max_deg!r}")
        if self.fov_diameter_mm > 2 * self.radius_mm:
            raise ValueError(f"fov_diameter_mm: {self.fov_diameter_mm} exceeds the detector diameter "
                             f"{2 * self.radius_mm}")

    # --- derived quantities ------------------------------------------------------------------------
    @property
    def half_length_mm(self) -> float:
        return 0.5 * float(self.axial_length_mm)

    @property
    def fov_radius_mm(self) -> float:
        return 0.5 * float(self.fov_diameter_mm)

    @property
    def theta_max(self) -> float:
        """Axial acceptance in radians."""
        return float(np.deg2rad(self.theta_max_deg))

    @property
    def tof_sigma_ps(self) -> float:
        """Standard deviation of t1 - t2 (ps)."""
        return float(self.tof_fwhm_ps) / FWHM_PER_SIGMA

    @property
    def tof_sigma_mm(self) -> float:
        """Standard deviation of the most-likely point along the LOR (mm): c * sigma_t / 2."""
        return tof_fwhm_mm(self.tof_fwhm_ps) / FWHM_PER_SIGMA

    @property
    def intrinsic_sigma_mm(self) -> float:
        return float(self.intrinsic_fwhm_mm) / FWHM_PER_SIGMA

    def viewset(self, n_phi: int = 40, n_theta: int = 3) -> ViewSet:
        """DIRECT views covering this scanner's acceptance."""
        return ViewSet(n_phi, n_theta, self.theta_max_deg)

    def kernel(self, **kw) -> SRKernel:
        """The matching invariant SR kernel (timing FWHM, intrinsic LOR FWHM radially and axially)."""
        return SRKernel.invariant(tof_fwhm_ps=self.tof_fwhm_ps, fwhm=self.intrinsic_fwhm_mm, **kw)

    def to_dict(self) -> dict:
        return asdict(self)


# --- geometry helpers (xp-generic, broadcasting) ---------------------------------------------------

def detector_exits(x, y, z, ux, uy, uz, scanner: CylindricalScanner, xp=np):
    """Distances (mm) from interior points r to the detector surface along +u and -u.

    Returns ``(t_plus, t_minus, hit)``: the photon travelling along +u reaches the surface at
    ``r + t_plus u``, the one along -u at ``r - t_minus u``; ``hit`` is True where both reach it
    within the axial extent. Points (x, y, z) in mm and directions (ux, uy, uz) are broadcastable
    arrays or numbers, real and finite; r must lie inside the detector cylinder (radially) and u
    must be a unit vector: else an error naming the argument.
    """
    return _exits(*_checked_lines(x, y, z, ux, uy, uz, scanner, xp), scanner, xp)


def detector_hits(x, y, z, ux, uy, uz, scanner: CylindricalScanner, xp=np):
    """True where the LOR through r with unit direction u is accepted: both ends on the detector
    within its axial extent and |co-polar tilt| <= theta_max. Arguments as :func:`detector_exits`."""
    return _hits(*_checked_lines(x, y, z, ux, uy, uz, scanner, xp), scanner, xp)


def _checked_lines(x, y, z, ux, uy, uz, scanner, xp):
    """The public helpers' arguments checked (the simulation and the correction images call the
    unchecked :func:`_exits` / :func:`_hits` on arrays they built themselves)."""
    expect_instance(scanner, CylindricalScanner, "scanner")
    x, y, z, ux, uy, uz = (real_values(n, a, xp) for n, a in
                           zip(("x", "y", "z", "ux", "uy", "uz"), (x, y, z, ux, uy, uz)))
    norm = xp.sqrt(ux * ux + uy * uy + uz * uz)
    if bool(xp.any(xp.abs(norm - 1.0) > 1e-5)):
        raise ValueError(f"ux, uy, uz: expected unit directions u (|u| = 1), got |u| in "
                         f"[{float(norm.min()):g}, {float(norm.max()):g}]")
    rho = xp.sqrt(x * x + y * y)
    if bool(xp.any(rho > scanner.radius_mm * (1 + 1e-9))):
        raise ValueError(f"x, y: expected points inside the detector cylinder (radius {scanner.radius_mm:g} mm), "
                         f"got one {float(rho.max()):g} mm from the axis")
    return x, y, z, ux, uy, uz


def _exits(x, y, z, ux, uy, uz, scanner: CylindricalScanner, xp=np):
    """:func:`detector_exits` without the argument checks."""
    t0, t1 = cylinder_interval(x, y, z, ux, uy, uz, scanner.radius_mm, None, xp)
    h = scanner.half_length_mm
    hit = (xp.abs(z + t1 * uz) <= h) & (xp.abs(z + t0 * uz) <= h)
    return t1, -t0, hit


def _hits(x, y, z, ux, uy, uz, scanner: CylindricalScanner, xp=np):
    """:func:`detector_hits` without the argument checks."""
    _, _, hit = _exits(x, y, z, ux, uy, uz, scanner, xp)
    return hit & (xp.abs(uz) <= np.sin(scanner.theta_max) + 1e-12)


__all__ = ["CylindricalScanner", "detector_exits", "detector_hits"]
