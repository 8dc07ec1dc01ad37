"""DIRECT scanner geometry: the views (azimuth / co-polar cells) and the idealised cylindrical
scanner (:ref:`conventions-direct`, :ref:`physics-direct`).

Coordinates: points and directions are ``(x, y, z)`` in mm, z the scanner axis, the origin at the
scanner centre (the image grid is centred there too). Times are in ps.

Views
-----
A view is a cell of LOR orientations with representative direction
``u(phi, theta) = (cos(theta) cos(phi), cos(theta) sin(phi), sin(theta))`` (x, y, z). Azimuths
cover [0, pi) in ``n_phi`` equal bins; co-polar tilts cover [-theta_max, +theta_max] in ``n_theta``
equal-angle bins (:class:`View`, :class:`ViewSet`).

Scanner
-------
:class:`CylindricalScanner` is a continuous detector surface (no crystals, no gaps): a cylinder of
radius ``radius_mm`` and length ``axial_length_mm``. A coincidence is accepted when both photons
reach that surface within its axial extent *and* the LOR's co-polar tilt is within
``+-theta_max_deg`` (the Penn scanner's axial acceptance).

The geometric helpers at the bottom (:func:`detector_exits`, :func:`detector_hits`, built on the
shared :func:`~directpet.sim.lines.cylinder_interval`) are written against an array namespace ``xp``
(NumPy or CuPy) and broadcast, so they serve per-event arrays (events) and per-voxel grids
(sensitivity images) alike.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from .._checks import (dataclass_from_dict, expect_instance, integer, normalise_fields, positive_int, real_number,
                       real_values, require_memory)
from ..recon.problem import spread_order
from ..sim.lines import cylinder_interval
from .model import FWHM_PER_SIGMA, SRKernel, tof_fwhm_mm

#: Bytes a ViewSet holds per view (a View object and its two floats, measured), for the memory check.
_BYTES_PER_VIEW = 160

#: Most sub-samples per view-cell edge (``n_sub``, ``n_quad``): a cell of pi / n_phi radians sampled
#: 1024 times per edge is already far finer than anything the acceptance or the map resolves.
MAX_CELL_SAMPLES = 1024


def sub_samples(name: str, value, *, dims: int = 1) -> int:
    """A count of sub-samples per view-cell edge (``n_quad``, ``n_sub``): an integer in
    ``[1, MAX_CELL_SAMPLES]``, else an error naming ``name``; ``value ** dims`` directions (2: the
    ``n_sub x n_sub`` Views of :meth:`ViewSet.cell_views`) are held at once, estimated first."""
    n = integer(name, value, lo=1, hi=MAX_CELL_SAMPLES)
    require_memory(name, float(n) ** dims * _BYTES_PER_VIEW, f"{n ** dims} directions of one view cell")
    return n


@dataclass(frozen=True)
class View:
    """One view: azimuth ``phi`` in [0, pi) and co-polar tilt ``theta`` in (-pi/2, pi/2), radians."""

    phi: float
    theta: float = 0.0

    def __post_init__(self):
        phi, theta = real_number("phi", self.phi), real_number("theta", self.theta)
        if not (0.0 <= phi < np.pi):
            raise ValueError(f"view phi: expected an azimuth in [0, pi) radians, got {self.phi!r}")
        if not (-np.pi / 2 < theta < np.pi / 2):
            raise ValueError(f"view theta: expected a tilt in (-pi/2, pi/2) radians, got {self.theta!r}")
        object.__setattr__(self, "phi", phi)
        object.__setattr__(self, "theta", theta)

    @classmethod
    def from_degrees(cls, phi_deg: float, theta_deg: float = 0.0) -> "View":
        """The View of azimuth ``phi_deg`` in [0, 180) and co-polar tilt ``theta_deg`` in (-90, 90),
        given in degrees (stored in radians)."""
        return cls(np.deg2rad(real_number("phi_deg", phi_deg)), np.deg2rad(real_number("theta_deg", theta_deg)))

    @property
    def direction(self) -> np.ndarray:
        """TOF axis e_t (x, y, z)."""
        ct = np.cos(self.theta)
        return np.array([ct * np.cos(self.phi), ct * np.sin(self.phi), np.sin(self.theta)])

    @property
    def radial_axis(self) -> np.ndarray:
        """LOR-radial axis e_r = (-sin phi, cos phi, 0): transaxial, perpendicular to the view."""
        return np.array([-np.sin(self.phi), np.cos(self.phi), 0.0])

    @property
    def axial_axis(self) -> np.ndarray:
        """LOR-axial axis e_a = e_t x e_r."""
        return np.cross(self.direction, self.radial_axis)


class ViewSet:
    """``n_phi`` x ``n_theta`` DIRECT views (default 40 x 3 over +-10 degrees, as in [HA]).

    Views are indexed ``v = k * n_theta + l`` for azimuth bin k and tilt bin l. Bin centres are
    ``phi_k = (k + 1/2) pi / n_phi`` and equal-angle tilt centres over ``[-theta_max, theta_max]``.
    """

    def __init__(self, n_phi: int = 40, n_theta: int = 3, theta_max_deg: float = 10.0):
        self.n_phi, self.n_theta = positive_int("n_phi", n_phi), positive_int("n_theta", n_theta)
        theta_max_deg = real_number("theta_max_deg", theta_max_deg)
        if not (0.0 <= theta_max_deg < 90.0):
            raise ValueError(f"theta_max_deg: expected a value in [0, 90), got {theta_max_deg!r}")
        if theta_max_deg == 0.0 and self.n_theta > 1:
            raise ValueError(f"n_theta: {self.n_theta} tilt bins need theta_max_deg > 0 (all tilts are 0)")
        require_memory("n_phi" if self.n_phi >= self.n_theta else "n_theta",
                       self.n_phi * self.n_theta * _BYTES_PER_VIEW, f"a ViewSet of {self.n_phi} x {self.n_theta} views")
        self.theta_max_deg = theta_max_deg          # as given, so that storage round-trips exactly
        self.theta_max = np.deg2rad(theta_max_deg)
        self.phi_edges = np.linspace(0.0, np.pi, self.n_phi + 1)
        self.phi_centres = 0.5 * (self.phi_edges[:-1] + self.phi_edges[1:])
        self.theta_edges = np.linspace(-self.theta_max, self.theta_max, self.n_theta + 1)
        self.theta_centres = 0.5 * (self.theta_edges[:-1] + self.theta_edges[1:])
        self.views = [View(p, t) for p in self.phi_centres for t in self.theta_centres]

    def __repr__(self) -> str:
        return f"ViewSet(n_phi={self.n_phi}, n_theta={self.n_theta}, theta_max_deg={self.theta_max_deg!r})"

    def __len__(self) -> int:
        return len(self.views)

    def __getitem__(self, v: int) -> View:
        return self.views[self.check_index(v)]

    def __iter__(self):
        return iter(self.views)

    def check_index(self, v) -> int:
        """``v`` as a view index: an integer in ``[0, len(self))``; a TypeError for a non-integer, a
        ValueError outside the range (negative indices are not wrapped around)."""
        return view_index(v, len(self.views))

    def index(self, k: int, l: int) -> int:
        """View index of azimuth bin k and tilt bin l."""
        return view_index(k, self.n_phi, "k") * self.n_theta + view_index(l, self.n_theta, "l")

    def bin_directions(self, u: np.ndarray):
        """Canonicalise directions (..., 3) and bin them.

        Returns ``(view_index, flipped)``: flipped is True where u was negated so that its azimuth
        lies in [0, pi). Directions whose tilt is outside +-theta_max get view index -1.
        See :func:`bin_canonical`. ``u`` must hold real, finite numbers (a NaN direction is corrupt
        data, not a direction outside the views): else an error naming ``u``.
        """
        u = real_values("u", u, np)
        if u.ndim < 1 or u.shape[-1] != 3:
            raise ValueError(f"u: expected directions of shape (..., 3) (x, y, z), got shape {u.shape}")
        return bin_canonical(u.astype(np.float64), self, np)

    def cell_views(self, v: int, n_sub: int) -> list:
        """Directions sampling view v's (azimuth, tilt) cell: the view itself for ``n_sub = 1``, else
        the ``n_sub x n_sub`` cell midpoints (azimuth-major) as :class:`View` objects (``n_sub`` in
        ``[1, MAX_CELL_SAMPLES]``)."""
        v, n_sub = self.check_index(v), sub_samples("n_sub", n_sub, dims=2)
        if n_sub == 1:
            return [self[v]]
        k, l = divmod(v, self.n_theta)
        pe, te = self.phi_edges, self.theta_edges
        mid = (np.arange(n_sub) + 0.5) / n_sub
        return [View(pe[k] + a * (pe[k + 1] - pe[k]), te[l] + b * (te[l + 1] - te[l])) for a in mid for b in mid]

    def geometric_order(self) -> list:
        """View visiting order: bit-reversed (van der Corput) azimuths, tilts (0, +, -) per azimuth."""
        ks = spread_order(self.n_phi)   # floor(vdc(i) * n_phi): 0, 20, 10, 30, 5, 25, ... for 40
        mid = self.n_theta // 2
        ls = sorted(range(self.n_theta), key=lambda l: (abs(l - mid), -(l - mid)))
        return [self.index(k, l) for k in ks for l in ls]


def view_index(v, n_views: int, name: str = "view") -> int:
    """v as an index in [0, n_views): a TypeError for anything but an integer (a float is never
    truncated), a ValueError outside the range (negative indices are not wrapped around)."""
    return integer(name, v, lo=0, hi=n_views - 1)


def same_viewset(a: "ViewSet", b: "ViewSet") -> bool:
    """Whether two ViewSets bin directions the same way: equal n_phi and n_theta and the same tilt
    range (theta_max_deg to 1e-9 degrees, so a value that went through radians still compares)."""
    return (a.n_phi, a.n_theta) == (b.n_phi, b.n_theta) and abs(a.theta_max_deg - b.theta_max_deg) <= 1e-9


def same_views(a, b, atol: float = 1e-9) -> bool:
    """Whether two sequences of :class:`View` are the same views in the same order (azimuths and
    tilts within ``atol`` radians: a ViewSet rebuilt from stored parameters may differ in the
    last bit)."""
    if len(a) != len(b):
        return False
    pa = np.array([(v.phi, v.theta) for v in a], dtype=np.float64).reshape(-1, 2)
    pb = np.array([(v.phi, v.theta) for v in b], dtype=np.float64).reshape(-1, 2)
    return bool(np.all(np.abs(pa - pb) <= atol))



def check_views_match(viewset: Optional[ViewSet], projector, name: str) -> None:
    """ValueError naming ``name`` when ``viewset`` (the data's views) is not the projector's: the
    same ViewSet (azimuth and tilt bins, tilt range) when the projector was made from one, else
    the same view directions in the same order (checked when the projector says which it has)."""
    theirs = getattr(projector, "viewset", None)
    views = getattr(projector, "views", None)
    if viewset is None:
        return
    if isinstance(theirs, ViewSet):
        ok, what = same_viewset(viewset, theirs), repr(theirs)
    elif views is not None:
        ok, what = same_views(viewset.views, views), f"{len(views)} views given one by one"
    else:
        return
    if not ok:
        raise ValueError(f"{name}: its views, {viewset!r}, are not the projector's ({what}): data and "
                         "projector must describe the same views in the same order")


def bin_canonical(u, viewset: "ViewSet", xp):
    """View index and flip of directions ``u`` (..., 3), written against the array namespace ``xp``.

    ``u`` is negated (``flipped``) when ``u_y < 0``, or ``u_y = 0`` and ``u_x < 0``, so that its azimuth
    lies in [0, pi); the azimuth and tilt are computed *after* the flip, so ``u`` and ``-u`` get the
    same view bit for bit (crystal-pair LORs from list-mode files often sit exactly on a view
    boundary). Tilts outside +-theta_max and zero vectors get view -1.
    """
    ux, uy, uz = u[..., 0], u[..., 1], u[..., 2]
    flipped = (uy < 0) | ((uy == 0) & (ux < 0))
    phi = xp.arctan2(xp.where(flipped, -uy, uy), xp.where(flipped, -ux, ux))    # in [0, pi)
    phi = xp.where(phi < 0, 0.0, phi)                                           # -0.0 for u_y = -0
    cz = xp.where(flipped, -uz, uz)
    norm = xp.sqrt(ux * ux + uy * uy + uz * uz)
    theta = xp.arcsin(xp.clip(cz / xp.where(norm > 0, norm, 1.0), -1.0, 1.0))
    k = xp.minimum((phi / np.pi * viewset.n_phi).astype(xp.int64), viewset.n_phi - 1)
    if viewset.theta_max > 0:
        tm = viewset.theta_max
        l = xp.floor((theta + tm) / (2 * tm) * viewset.n_theta).astype(xp.int64)
        l = xp.where(theta == tm, viewset.n_theta - 1, l)
    else:
        l = xp.zeros_like(k)
    ok = (l >= 0) & (l < viewset.n_theta) & (norm > 0)
    return xp.where(ok, k * viewset.n_theta + l, -1), flipped


# --- the scanner ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CylindricalScanner:
    """Idealised whole-body TOF scanner (defaults: the Penn LaBr3 prototype as far as it is known).

    Parameters
    ----------
    radius_mm : detector-surface radius (mm); 465 mm = 93 cm diameter.
    axial_length_mm : detector axial length (mm); 250 mm, the commonly cited but unverified value, is the default.
    theta_max_deg : axial acceptance: largest ``|co-polar tilt|`` of an accepted LOR (degrees).
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
        """Half the detector's axial length (mm); the detector spans ``|z| <= half_length_mm``."""
        return 0.5 * float(self.axial_length_mm)

    @property
    def fov_radius_mm(self) -> float:
        """Radius of the transaxial field of view (mm), half ``fov_diameter_mm``."""
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
        """Standard deviation (mm) of the intrinsic detector blur, ``intrinsic_fwhm_mm`` / 2.355."""
        return float(self.intrinsic_fwhm_mm) / FWHM_PER_SIGMA

    def viewset(self, n_phi: int = 40, n_theta: int = 3) -> ViewSet:
        """DIRECT views covering this scanner's acceptance."""
        return ViewSet(n_phi, n_theta, self.theta_max_deg)

    def kernel(self, **kw) -> SRKernel:
        """The matching invariant SR kernel (timing FWHM, intrinsic LOR FWHM radially and axially)."""
        return SRKernel.invariant(tof_fwhm_ps=self.tof_fwhm_ps, fwhm=self.intrinsic_fwhm_mm, **kw)

    def to_dict(self) -> dict:
        """Every field, as a JSON-serialisable dict (read back by :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CylindricalScanner":
        """The scanner of a :meth:`to_dict` mapping (every field, nothing else)."""
        return dataclass_from_dict(cls, d)

    def to_json(self) -> str:
        """:meth:`to_dict` as a JSON string (how data files store their scanner)."""
        return json.dumps(self.to_dict(), sort_keys=True)


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
    within its axial extent and ``|co-polar tilt| <= theta_max``. Arguments as :func:`detector_exits`."""
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


__all__ = ["CylindricalScanner", "View", "ViewSet", "check_views_match", "detector_exits", "detector_hits"]
