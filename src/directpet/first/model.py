"""Analytic tube-of-response model and Super-LOR tables (:ref:`physics-first`; [FIRST-GPU] Fig. 1).

The model builder is separate from the projectors: it produces a :class:`SuperLORTable`, which the
projectors read and which can be saved and loaded (``.npz``, layout below), so that a measured or
Monte Carlo table (GATE, PeneloPET) can replace the analytic one.

Tube of response
----------------
A LOR's tube is sampled at ``(i, j, k)`` in the LOR's frame (see :mod:`directpet.first.geometry`):
``n_radial`` samples along, ``2J + 1`` radially (one radial bin apart), ``2K + 1`` axially (one slice
apart). For a LOR of ring difference delta (``T = tan(alpha_delta)``), the value at sample
``(i, j, k)`` is the probability, up to one global constant, that a decay in the voxel-sized cell
around the sample is detected in that LOR::

    P = eps(T) * [Phi((j + 1/2) dr / s_u) - Phi((j - 1/2) dr / s_u)]
               * [Phi((k + 1/2) dz / s_w) - Phi((k - 1/2) dz / s_w)]

(each Gaussian integrated over the cell with erf), with ``t`` the fractional position of the
sample between the mean interaction points (``t = 0`` at head A), ``L`` their distance and

* ``s_u^2 = ((1-t)^2 + t^2) (w^2/12 + s_int^2) + (t (1-t) L s_nc)^2 + s_pr^2`` in-plane: the crystal
  apertures of the two ends (boxes of the crystal width w, projected through the point),
  intrinsic blur, photon acollinearity (``s_nc`` in rad) and positron range;
* ``s_w^2 = ((1-t)^2 + t^2) (p^2/12 + s_int^2 + T^2 Var(d)) + (t (1-t) L s_nc)^2 + s_pr^2`` axially:
  the row apertures (pitch p) and the depth-of-interaction parallax of oblique LORs;
* ``eps(T) = (det(T) / det(0))^2 cos^3(alpha)``: detection in both crystals along an oblique path
  (``det = 1 - exp(-mu L_c / cos alpha)``) and the solid angle per unit slope.

The LOR axis joins the mean interaction points, so the depth-of-interaction shift is in the
geometry (``tan(alpha)``), not in the tube. This refines the brief's ``mu_w(t)``, which shifted both
ends the same way; drawing the axis between the mean interaction points shifts them oppositely.
The acollinearity blur grows as ``t (1 - t) L`` (zero at the detectors, largest at the centre,
0.0022 D FWHM there for 0.5 degrees), refining the brief's constant ``sigma_nc``.

Symmetries and Super-LORs
-------------------------
In the virtual geometry every LOR is normal to its heads in-plane, so the tube in the LOR frame
does not depend on the angle (rotational symmetry, exact for a rotating gantry), on the radial
position (translation along the heads), or on ``m`` (axial translation ``(r1, r2) -> (r1+1, r2+1)``);
``delta -> -delta`` mirrors it in k (reflection). The exact classes are therefore ``|delta|``.
The quasi-symmetry of [FIRST-GPU] Fig. 1c — LORs whose angles to the crystal faces are almost the
same have almost the same tube — groups neighbouring ``|delta|`` classes (their axial incidence
angles differ by 0.6 degrees) into one Super-LOR, the group member whose tube is closest to all
of them, as long as every member's tube differs from it by at most ``quasi_tolerance`` of the
member's peak. ``SuperLORTable.quasi_error`` records the error each class incurs.

``.npz`` layout (version 1)
---------------------------
``format`` = "directpet.first.SuperLORTable", ``version`` = 1, ``values`` float32
``(n_super, n_along, 2J+1, 2K+1)`` indexed ``[S, i, j + J, k + K]``, ``super_of_delta`` int32
``(2 n_rows - 1,)`` (Super-LOR of ``delta = -(n_rows-1) .. n_rows-1``), ``flip_k`` bool
``(2 n_rows - 1,)`` (read the table at ``-k``: the z mirror), ``tan_alpha`` float64
``(2 n_rows - 1,)`` (the LOR axes the samples follow), ``quasi_error`` float64 ``(2 n_rows - 1,)``,
``scanner`` (JSON of :class:`RotatingScanner`), ``meta`` (JSON). A Monte Carlo table must be
sampled on the same lattice (along: the image's transaxial voxels; radial: radial bins; axial:
slices, along the axes given by ``tan_alpha``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr

from .._checks import (expect_instance, integer, meta_dict, read_only, real_array, real_number,
                       require_memory)
from .._storage import read_record, save_record
from .geometry import FWHM_PER_SIGMA, RotatingScanner

_FORMAT = "directpet.first.SuperLORTable"
_VERSION = 1


# --- the analytic tube ----------------------------------------------------------------------------------

def _blur_variances(scanner: RotatingScanner, t, tan_alpha, L3):
    """In-plane and axial variances (mm^2) at fractional positions t of a LOR with slope tan_alpha."""
    s = scanner
    ends = (1.0 - t) ** 2 + t**2
    sig_int2 = (s.intrinsic_fwhm_mm / FWHM_PER_SIGMA) ** 2
    sig_pr2 = (s.positron_range_fwhm_mm / FWHM_PER_SIGMA) ** 2
    sig_nc = np.deg2rad(s.acollinearity_fwhm_deg) / FWHM_PER_SIGMA
    nc2 = (t * (1.0 - t) * L3 * sig_nc) ** 2
    _, var_depth = s.depth_moments(tan_alpha)
    var_u = ends * (s.crystal_mm**2 / 12.0 + sig_int2) + nc2 + sig_pr2
    var_w = ends * (s.pitch_mm**2 / 12.0 + sig_int2 + tan_alpha**2 * var_depth) + nc2 + sig_pr2
    return var_u, var_w


def _tube_size(scanner, J, K, n_tubes: int, temporaries: int):
    """Checked tube half-widths ``(J, K)``: non-negative integers whose tubes (``n_tubes`` of them kept,
    plus ``temporaries`` float64 arrays of one tube while computing) fit in memory."""
    expect_instance(scanner, RotatingScanner, "scanner")
    J, K = integer("J", J, lo=0), integer("K", K, lo=0)
    per_tube = float(scanner.n_radial) * (2 * J + 1) * (2 * K + 1)
    require_memory("J, K", 8.0 * per_tube * (n_tubes + temporaries),
                   f"{n_tubes} float64 tube(s) of {scanner.n_radial} x {2 * J + 1} x {2 * K + 1} samples")
    return J, K


def efficiency(scanner: RotatingScanner, tan_alpha):
    """Relative LOR efficiency ``(det(T)/det(0))^2 cos^3(alpha)`` (1 for delta = 0)."""
    expect_instance(scanner, RotatingScanner, "scanner")
    t = real_array("tan_alpha", tan_alpha)
    det = scanner.detection_probability(t) / scanner.detection_probability(0.0)
    return det**2 * (1.0 + t * t) ** -1.5


def _cell_integral(centre, half_width, sigma):
    """Integral of N(0, sigma^2) over [centre - half_width, centre + half_width] (erf differences)."""
    return ndtr((centre + half_width) / sigma) - ndtr((centre - half_width) / sigma)


def tube_at(scanner: RotatingScanner, tan_alpha: float, along_mm, radial_off_mm, axial_off_mm):
    """Tube value for sample cells at along positions / radial and axial offsets (mm, broadcast).

    ``along_mm`` is the in-plane position along the LOR (0 at the midpoint of the two heads);
    the offsets are measured from the LOR axis (in-plane perpendicular, and vertically).
    """
    expect_instance(scanner, RotatingScanner, "scanner")
    tan_alpha = real_number("tan_alpha", tan_alpha)
    along_mm, radial_off_mm, axial_off_mm = (real_array(n, v) for n, v in (
        ("along_mm", along_mm), ("radial_off_mm", radial_off_mm), ("axial_off_mm", axial_off_mm)))
    mean_depth, _ = scanner.depth_moments(tan_alpha)
    L = scanner.head_distance_mm + 2.0 * mean_depth          # in-plane distance of the mean interaction points
    L3 = L * np.sqrt(1.0 + tan_alpha**2)
    t = (np.asarray(along_mm, dtype=float) + 0.5 * L) / L
    var_u, var_w = _blur_variances(scanner, t, tan_alpha, L3)
    pu = _cell_integral(np.asarray(radial_off_mm, dtype=float), 0.5 * scanner.radial_bin_mm, np.sqrt(var_u))
    pw = _cell_integral(np.asarray(axial_off_mm, dtype=float), 0.5 * scanner.slice_mm, np.sqrt(var_w))
    return efficiency(scanner, tan_alpha) * pu * pw


def analytic_tube(scanner: RotatingScanner, delta: int, J: int = 2, K: int = 1) -> np.ndarray:
    """Tube of a LOR of ring difference delta in its own frame: (n_radial, 2J+1, 2K+1) float64."""
    J, K = _tube_size(scanner, J, K, 1, 8)
    delta = integer("delta", delta, -(scanner.n_rows - 1), scanner.n_rows - 1)
    T = float(scanner.tan_alpha[delta + scanner.n_rows - 1])
    i = np.arange(scanner.n_radial)[:, None, None]
    j = np.arange(-J, J + 1)[None, :, None]
    k = np.arange(-K, K + 1)[None, None, :]
    return tube_at(scanner, T, scanner.along_mm(i), j * scanner.radial_bin_mm, k * scanner.slice_mm)


def lor_tube(scanner: RotatingScanner, a: int, r1: int, r2: int, rho: int, J: int = 2, K: int = 1) -> np.ndarray:
    """The tube of one sinogram LOR computed from its world geometry (the unreduced, per-LOR model).

    The LOR's endpoints (the mean interaction points on the two heads) and its tube samples are
    placed in scanner coordinates, and each sample's fractional position, in-plane offset and axial
    offset are measured from that line. Used to show that every LOR of a symmetry class gets the
    Super-LOR's probabilities, and as the per-LOR table the storage is compared with.
    Returns (n_radial, 2J+1, 2K+1) float64 indexed ``[i, j + J, k + K]``.
    """
    J, K = _tube_size(scanner, J, K, 1, 16)
    s = scanner
    a = integer("a", a, 0, s.n_angles - 1)
    r1, r2 = integer("r1", r1, 0, s.n_rows - 1), integer("r2", r2, 0, s.n_rows - 1)
    rho = integer("rho", rho, 0, s.n_radial - 1)
    phi = a * np.pi / s.n_angles
    e_a = np.array([np.cos(phi), np.sin(phi)])
    e_s = np.array([-np.sin(phi), np.cos(phi)])
    T = float(s.tan_alpha[r2 - r1 + s.n_rows - 1])
    mean_depth, _ = s.depth_moments(T)
    half = 0.5 * s.head_distance_mm + mean_depth
    radial = float(s.radial_mm(rho))
    A = np.r_[-half * e_a + radial * e_s, s.row_z_mm(r1)]
    B = np.r_[half * e_a + radial * e_s, s.row_z_mm(r2)]
    # tube sample positions in scanner coordinates (geometry.py's lattice)
    i = np.arange(s.n_radial)[:, None, None]
    j = np.arange(-J, J + 1)[None, :, None]
    k = np.arange(-K, K + 1)[None, None, :]
    along = s.along_mm(i)
    rad = radial + j * s.radial_bin_mm
    qx = along * e_a[0] + rad * e_s[0]
    qy = along * e_a[1] + rad * e_s[1]
    z_c = 0.5 * (A[2] + B[2])
    qz = z_c + along * T + k * s.slice_mm
    # measure the samples from the line A -> B
    dxy = B[:2] - A[:2]
    L = float(np.hypot(*dxy))
    uxy = dxy / L
    rel_x, rel_y = qx - A[0], qy - A[1]
    along_from_A = rel_x * uxy[0] + rel_y * uxy[1]
    perp = -rel_x * uxy[1] + rel_y * uxy[0]
    z_line = A[2] + (B[2] - A[2]) * along_from_A / L
    T_line = (B[2] - A[2]) / L
    along_mid = along_from_A - 0.5 * L
    shape = np.broadcast_shapes(along_mid.shape, perp.shape, (qz - z_line).shape)
    return np.broadcast_to(tube_at(s, T_line, along_mid, perp, qz - z_line), shape).copy()


# --- Super-LOR tables -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SuperLORTable:
    """Super-LOR tube tables and the map from ring difference to Super-LOR.

    Attributes
    ----------
    scanner : the RotatingScanner whose lattice the tables are sampled on.
    values : (n_super, n_radial, 2J+1, 2K+1) float32, ``[S, i, j + J, k + K]``.
    super_of_delta : (2 n_rows - 1,) int32, Super-LOR of ring difference ``delta`` at index
        ``delta + n_rows - 1``.
    flip_k : (2 n_rows - 1,) bool, read the table at ``-k`` (the z mirror of a negative delta).
    tan_alpha : (2 n_rows - 1,) float64, the LOR axes' slopes the samples follow.
    quasi_error : (2 n_rows - 1,) float64, ``max abs(tube(delta) - tube(Super-LOR)) / max tube(delta)``
        introduced by the quasi-symmetry (0 for the representatives themselves).
    meta : provenance (model, tolerance, ...).

    Checked on construction (and so on :meth:`load`): shapes, finite non-negative values, indices in
    range. The table is frozen and its arrays are read-only views, so the checked values are the ones
    the projectors read.
    """

    scanner: RotatingScanner
    values: np.ndarray
    super_of_delta: np.ndarray
    flip_k: np.ndarray
    tan_alpha: np.ndarray
    quasi_error: np.ndarray
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        s = self.scanner
        if not isinstance(s, RotatingScanner):
            raise TypeError(f"scanner: expected a RotatingScanner, got {type(s).__name__}")
        v = np.asarray(self.values)
        if v.dtype == object or not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
            raise TypeError(f"values: expected a real (float) array, got dtype {v.dtype}")
        if v.ndim != 4 or v.shape[0] < 1 or v.shape[1] != s.n_radial or v.shape[2] % 2 != 1 or v.shape[3] % 2 != 1:
            raise ValueError(f"values: expected (n_super, {s.n_radial}, 2J+1, 2K+1), got {v.shape}")
        with np.errstate(over="ignore", invalid="ignore"):   # checked after the cast: 1e39 becomes inf
            v = np.ascontiguousarray(v, dtype=np.float32)
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise ValueError("values: expected finite, non-negative float32 probabilities")
        nd = s.n_deltas
        sod = np.asarray(self.super_of_delta).reshape(-1)
        if not np.issubdtype(sod.dtype, np.integer):
            raise TypeError(f"super_of_delta: expected integer indices, got dtype {sod.dtype}")
        if sod.shape != (nd,) or sod.min() < 0 or sod.max() >= v.shape[0]:
            raise ValueError(f"super_of_delta: expected {nd} indices in [0, {v.shape[0]})")
        flip = np.asarray(self.flip_k)
        zero_one = np.issubdtype(flip.dtype, np.integer) and np.all((flip == 0) | (flip == 1))
        if not (flip.dtype == np.bool_ or zero_one):
            raise TypeError(f"flip_k: expected a bool array (or integers 0 / 1), got dtype {flip.dtype}")
        arrays = {"values": v, "super_of_delta": sod.astype(np.int32), "flip_k": flip.astype(bool).reshape(-1),
                  "tan_alpha": real_array("tan_alpha", self.tan_alpha).reshape(-1),
                  "quasi_error": real_array("quasi_error", self.quasi_error).reshape(-1)}
        for name in ("flip_k", "tan_alpha", "quasi_error"):
            if arrays[name].shape != (nd,):
                raise ValueError(f"{name}: expected shape ({nd},), got {arrays[name].shape}")
        # |tan alpha| < 10 (84 degrees) keeps every axial sample offset within a few thousand slices
        if np.any(np.abs(arrays["tan_alpha"]) >= 10.0):
            raise ValueError("tan_alpha: expected finite LOR slopes with |tan(alpha)| < 10")
        if np.any(arrays["quasi_error"] < 0):
            raise ValueError("quasi_error: expected finite values >= 0")
        for name, a in arrays.items():
            object.__setattr__(self, name, read_only(np.ascontiguousarray(a)))
        object.__setattr__(self, "meta", meta_dict(self.meta))

    # --- shape ----------------------------------------------------------------------------------
    @property
    def n_super(self) -> int:
        """Super-LORs (distinct tubes) in the table."""
        return int(self.values.shape[0])

    @property
    def J(self) -> int:
        """Radial half-width of the tubes in radial bins (``2 J + 1`` samples)."""
        return (self.values.shape[2] - 1) // 2

    @property
    def K(self) -> int:
        """Axial half-width of the tubes in slices (``2 K + 1`` samples)."""
        return (self.values.shape[3] - 1) // 2

    @property
    def slope(self) -> np.ndarray:
        """Axial slope per along-sample in slices: ``tan_alpha * radial_bin / slice`` (float64)."""
        return self.tan_alpha * (self.scanner.radial_bin_mm / self.scanner.slice_mm)

    def tube(self, delta: int) -> np.ndarray:
        """The tube used for ring difference delta (an integer in ``+-(n_rows - 1)``):
        (n_radial, 2J+1, 2K+1) float32 (flip applied)."""
        n = self.scanner.n_rows - 1
        d = integer("delta", delta, -n, n) + n
        t = self.values[self.super_of_delta[d]]
        return t[:, :, ::-1] if self.flip_k[d] else t

    # --- storage ----------------------------------------------------------------------------------
    def storage_report(self) -> dict:
        """Table entries at each reduction step, against a per-LOR table of the same model.

        Keys: ``per_lor`` (every sinogram LOR its own tube), ``rotation_translation`` (one per row
        pair: rotation and radial translation), ``axial_translation`` (one per ring difference),
        ``reflection`` (one per ``abs(delta)``), ``super_lor`` (after the quasi-symmetry), each an entry
        count; ``bytes_*`` in float32; ``reduction`` = per_lor / super_lor; ``quasi_reduction`` =
        reflection / super_lor (the quasi-symmetry's own factor; the paper's "> 20" counts from a
        crystal-pair geometry with many more exact classes, so the two are not comparable);
        ``max_quasi_error``.
        """
        s = self.scanner
        tube = int(np.prod(self.values.shape[1:]))
        counts = {"per_lor": s.n_lors * tube, "rotation_translation": s.n_rows**2 * tube,
                  "axial_translation": s.n_deltas * tube, "reflection": s.n_rows * tube,
                  "super_lor": self.n_super * tube}
        rep = dict(counts)
        rep.update({f"bytes_{k}": 4 * v for k, v in counts.items()})
        rep["reduction"] = counts["per_lor"] / counts["super_lor"]
        rep["quasi_reduction"] = counts["reflection"] / counts["super_lor"]
        rep["n_super"] = self.n_super
        rep["max_quasi_error"] = float(self.quasi_error.max())
        return rep

    # --- storage on disk ---------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the ``.npz`` layout documented in the module docstring."""
        save_record(path, _FORMAT, _VERSION, self.scanner, self.meta, values=self.values,
                    super_of_delta=self.super_of_delta, flip_k=self.flip_k, tan_alpha=self.tan_alpha,
                    quasi_error=self.quasi_error)

    @classmethod
    def load(cls, path) -> "SuperLORTable":
        """Read a table written by :meth:`save` (or by another tool following the same layout)."""
        def build(f, scanner, meta):
            qe = f["quasi_error"] if "quasi_error" in f.files else np.zeros(scanner.n_deltas)
            return cls(scanner, f["values"], f["super_of_delta"], f["flip_k"], f["tan_alpha"], qe, meta)

        return read_record(path, "Super-LOR table", _FORMAT, _VERSION, RotatingScanner,
                           ("values", "super_of_delta", "flip_k", "tan_alpha"), build)


def build_super_lor_table(scanner: RotatingScanner, J: int = 2, K: int = 1,
                          quasi_tolerance: float = 0.05) -> SuperLORTable:
    """The analytic model reduced to Super-LOR tables (exact symmetries plus the quasi-symmetry).

    Parameters
    ----------
    scanner : the RotatingScanner.
    J, K : tube half-widths in radial bins / slices (the paper's 5 x 3 tube: J = 2, K = 1).
    quasi_tolerance : largest allowed max|tube - Super-LOR tube| / max tube for any ring difference
        that borrows another's tube (0: one Super-LOR per ``abs(delta)``, no quasi-symmetry).
    """
    expect_instance(scanner, RotatingScanner, "scanner")
    # peak: the n_rows float64 tubes, their float64 stack and its float32 copy (<= 1.5 n_rows tubes
    # more), the tube temporaries
    J, K = _tube_size(scanner, J, K, 3 * scanner.n_rows, 8)
    quasi_tolerance = real_number("quasi_tolerance", quasi_tolerance)
    if not 0.0 <= quasi_tolerance < 1.0:
        raise ValueError(f"quasi_tolerance: expected a value in [0, 1), got {quasi_tolerance!r}")
    n = scanner.n_rows
    tubes = [analytic_tube(scanner, d, J, K) for d in range(n)]           # exact classes |delta|
    peaks = [float(t.max()) for t in tubes]

    def group_error(members, rep):
        return max(float(np.abs(tubes[m] - tubes[rep]).max()) / peaks[m] for m in members)

    groups = []                                                           # (members, representative)
    start = 0
    while start < n:
        best = (list(range(start, start + 1)), start)
        for end in range(start + 1, n):
            members = list(range(start, end + 1))
            rep = min(members, key=lambda r: group_error(members, r))
            if group_error(members, rep) > quasi_tolerance:
                break
            best = (members, rep)
        groups.append(best)
        start = best[0][-1] + 1
    values = np.stack([tubes[rep] for _, rep in groups]).astype(np.float32)
    super_of_abs = np.empty(n, dtype=np.int32)
    err_of_abs = np.empty(n)
    for g, (members, rep) in enumerate(groups):
        for m in members:
            super_of_abs[m] = g
            err_of_abs[m] = float(np.abs(tubes[m] - tubes[rep]).max()) / peaks[m]
    deltas = np.arange(-(n - 1), n)
    meta = {"model": "analytic tube of response (directpet docs: Physics, FIRST)", "J": J, "K": K,
            "quasi_tolerance": quasi_tolerance,
            "representatives": [int(rep) for _, rep in groups],
            "groups": [[int(m) for m in members] for members, _ in groups]}
    return SuperLORTable(scanner, values, super_of_abs[np.abs(deltas)], deltas < 0, scanner.tan_alpha,
                         err_of_abs[np.abs(deltas)], meta)


__all__ = ["SuperLORTable", "analytic_tube", "build_super_lor_table", "efficiency", "lor_tube", "tube_at"]
