"""Geometry of a rotating pair of planar detectors in coincidence (FIRST, :ref:`conventions-first`, :ref:`physics-first`).

Scanner and sinogram
--------------------
Two planar heads face each other across the scanner axis z, their front faces ``head_distance_mm``
apart, and rotate together about z in ``n_angles`` steps over 180 degrees. Each head has
``n_rows`` axial crystal rows at ``pitch_mm``. The sinogram follows the brief's *virtual*
geometry: in-plane, every sinogram LOR is normal to its (virtual) heads, so one angle's LORs are
parallel, ``radial_bin_mm`` apart.

A sinogram bin (LOR) is ``(a, r1, r2, rho)``:

* ``a`` in ``[0, n_angles)``: the LOR direction in-plane is ``e_a = (cos phi, sin phi)``,
  ``phi = a * pi / n_angles``, pointing from head A to head B;
* ``r1`` / ``r2`` in ``[0, n_rows)``: the crystal row hit on head A / head B, at
  ``z_r = (r - (n_rows - 1) / 2) * pitch_mm``;
* ``rho`` in ``[0, n_radial)``: the signed distance of the LOR from the axis along
  ``e_s = (-sin phi, cos phi)``, ``s = (rho - (n_radial - 1) / 2) * radial_bin_mm``.

Sinogram arrays have shape ``(n_angles, n_rows, n_rows, n_radial)`` and are indexed
``[a, r1, r2, rho]`` (30 x 30 = 900 "oblique sinograms" per angle by default).

Ring difference and axial position: ``delta = r2 - r1`` in ``[-(n_rows - 1), n_rows - 1]``,
``m = min(r1, r2)`` in ``[0, n_rows - |delta|)``, and ``kc = r1 + r2 = 2 m + |delta|`` is the
image slice through which the LOR's centre passes (slices are half a pitch thick, so there are
``2 n_rows - 1`` of them).

Image
-----
``ImageGrid((2 n_rows - 1, n_radial, n_radial), (pitch / 2, radial_bin, radial_bin))``: the
transaxial voxel equals the radial bin, and the field of view is the cylinder of diameter
``n_radial * radial_bin_mm`` (70 mm by default) inscribed in the square.

Tube samples (the frame of the Super-LOR tables)
------------------------------------------------
A LOR's tube of response is sampled on a lattice in the LOR's frame: sample ``(i, j, k)`` with
``i`` in ``[0, n_radial)`` along the LOR (one voxel apart), ``j`` in ``[-J, J]`` radially (one radial
bin apart) and ``k`` in ``[-K, K]`` axially (one slice apart), at

* along ``a_i = (i - c) * radial_bin``, radial ``s_rho + j * radial_bin``, ``c = (n_radial - 1) / 2``;
* ``z = z_c + a_i * tan(alpha_delta) + k * slice``, ``z_c = (z_r1 + z_r2) / 2``.

The axial sample positions follow the LOR's slope (a shear, not a rotation), so that every LOR of
one angle samples the image on the same in-plane lattice (rows ``rho + j``). The LOR axis joins
the *mean interaction points* in the two crystals (depth ``E(alpha)`` behind each front face), so
``tan(alpha_delta) = delta * pitch / (head_distance + 2 E(alpha_delta))``. In continuous voxel
coordinates (voxel centres at integers) sample ``(i, j, k)`` of LOR ``(a, r1, r2, rho)`` is at

* ``fx = c + (i - c) cos(phi) - (rho + j - c) sin(phi)``,
* ``fy = c + (i - c) sin(phi) + (rho + j - c) cos(phi)``,
* ``fz = kc + k + (i - c) * slope_delta``, ``slope_delta = tan(alpha_delta) * radial_bin / slice``,

and the image is read there through the in-plane footprint: the sample's lattice cell (the unit
square around ``(i, rho + j)``, turned by phi) takes from each voxel the area it overlaps of the
voxel's square; axially the two slices around ``fz`` by linear interpolation; zero outside the grid.
(See :mod:`directpet.first.projector`: the cells tile the plane, so every angle sees a voxel whole.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import DictRecord, normalise_head_fields, real_array, require_memory
from ..geometry import FWHM_PER_SIGMA, ImageGrid, centred_coordinate

#: the largest count the compiled code's int arguments hold
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class RotatingScanner(DictRecord):
    """A rotating dual-head small-animal scanner (defaults: rPET-like, :ref:`physics-first`).

    Parameters
    ----------
    n_rows : axial crystal rows per head (30).
    pitch_mm : crystal pitch (1.6 mm), axially and transaxially.
    crystal_mm : crystal width (1.5 mm): the transaxial aperture of a LOR end.
    depth_mm : crystal length (12 mm LYSO).
    mu_per_mm : linear attenuation of the crystal at 511 keV (LYSO 0.087 / mm).
    head_distance_mm : distance between the two front faces (160 mm).
    n_angles : gantry angles over 180 degrees (130).
    n_radial : radial bins, also the image width in voxels (175).
    radial_bin_mm : radial bin = transaxial voxel (default pitch / 4 = 0.4 mm).
    n_columns : transaxial crystals per head (56, 89.6 mm: the event Monte Carlo and the geometric
        normalisation use it, the model's virtual heads do not; with 56 the edge of the 70 mm
        field of view is still seen over a quarter of the rotation that sees its centre).
    positron_range_fwhm_mm : positron range blur (FWHM of each Cartesian component, 0.5 mm for F-18).
    acollinearity_fwhm_deg : FWHM of the deviation of the two photons from 180 degrees (0.5).
    intrinsic_fwhm_mm : extra crystal-identification blur (0).
    """

    n_rows: int = 30
    pitch_mm: float = 1.6
    crystal_mm: float = 1.5
    depth_mm: float = 12.0
    mu_per_mm: float = 0.087
    head_distance_mm: float = 160.0
    n_angles: int = 130
    n_radial: int = 175
    radial_bin_mm: float = 0.4
    n_columns: int = 56
    positron_range_fwhm_mm: float = 0.5
    acollinearity_fwhm_deg: float = 0.5
    intrinsic_fwhm_mm: float = 0.0

    def __post_init__(self):
        normalise_head_fields(self, counts=("n_rows", "n_angles", "n_radial", "n_columns"),
                              positive=("head_distance_mm", "radial_bin_mm"), nonnegative=("intrinsic_fwhm_mm",))
        for name in ("n_rows", "n_angles", "n_radial", "n_columns"):     # the compiled code's int counts
            if getattr(self, name) > INT32_MAX:
                raise ValueError(f"{name}: expected at most 2**31 - 1 (an int of the compiled code), "
                                 f"got {getattr(self, name)}")
        half_fov = 0.5 * self.n_radial * self.radial_bin_mm
        if half_fov >= 0.5 * self.head_distance_mm:
            raise ValueError(f"n_radial: a {2 * half_fov:g} mm field of view does not fit between heads "
                             f"{self.head_distance_mm:g} mm apart")
        # every use of the scanner (projections, data, the Monte Carlo) holds a float32 sinogram and
        # an image: refuse sizes whose arrays cannot exist here, before anything is allocated
        # (the image's shape is written out: self.grid would refuse it first, naming only its shape)
        sino = float(self.n_angles) * self.n_rows * self.n_rows * self.n_radial
        image = float(2 * self.n_rows - 1) * self.n_radial * self.n_radial
        require_memory("n_angles, n_rows, n_radial", 4.0 * (sino + image),
                       f"a float32 sinogram {self.sinogram_shape} and image "
                       f"{(2 * self.n_rows - 1, self.n_radial, self.n_radial)}")

    # --- sizes ----------------------------------------------------------------------------------
    @property
    def n_slices(self) -> int:
        """Image slices: ``2 n_rows - 1`` (half the crystal pitch apart)."""
        return 2 * self.n_rows - 1

    @property
    def slice_mm(self) -> float:
        """Slice thickness (mm): half the crystal pitch."""
        return 0.5 * self.pitch_mm

    @property
    def grid(self) -> ImageGrid:
        """The image lattice ``(2 n_rows - 1, n_radial, n_radial)`` (z, y, x)."""
        return ImageGrid((self.n_slices, self.n_radial, self.n_radial),
                         (self.slice_mm, self.radial_bin_mm, self.radial_bin_mm))

    @property
    def sinogram_shape(self) -> tuple:
        """``(n_angles, n_rows, n_rows, n_radial)``, indexed ``[a, r1, r2, rho]``."""
        return (self.n_angles, self.n_rows, self.n_rows, self.n_radial)

    @property
    def n_lors(self) -> int:
        """Sinogram bins (LORs): ``n_angles * n_rows**2 * n_radial``."""
        return self.n_angles * self.n_rows * self.n_rows * self.n_radial

    @property
    def n_deltas(self) -> int:
        """Ring differences ``delta`` in ``[-(n_rows - 1), n_rows - 1]``."""
        return 2 * self.n_rows - 1

    # --- coordinates ----------------------------------------------------------------------------
    @property
    def angles_rad(self) -> np.ndarray:
        """The sinogram angles (rad): ``a pi / n_angles`` for ``a`` in ``[0, n_angles)``."""
        return np.arange(self.n_angles) * (np.pi / self.n_angles)

    # coordinate helpers (directpet.geometry.centred_coordinate): real, possibly fractional or
    # out-of-range indices, arrays allowed; None, strings and NaN are errors naming the argument
    row_z_mm = centred_coordinate("r", "n_rows", "pitch_mm", "Axial position (mm) of crystal row(s) r.")
    radial_mm = centred_coordinate("rho", "n_radial", "radial_bin_mm",
                                   "Signed radial position (mm) of radial bin(s) rho.")
    along_mm = centred_coordinate("i", "n_radial", "radial_bin_mm",
                                  "Along-LOR position (mm) of tube sample i (the image's transaxial voxel centres).")

    # --- depth of interaction -------------------------------------------------------------------
    def depth_moments(self, tan_alpha) -> tuple:
        """Mean and variance (mm, mm^2) of the interaction depth along the crystal axis.

        A photon entering a crystal at angle alpha to its axis interacts at path length ~ Exp(mu);
        its depth is path * cos(alpha), exponential with rate ``mu / cos(alpha)``, truncated to
        the crystal ``[0, depth_mm]`` (photons that pass through are not detected).
        """
        t = real_array("tan_alpha", tan_alpha)
        lam = self.mu_per_mm * np.sqrt(1.0 + t * t)     # mu / cos(alpha)
        L = self.depth_mm
        e = np.exp(-lam * L)
        q = 1.0 - e
        mean = 1.0 / lam - L * e / q
        var = 1.0 / lam**2 - L * L * e / q**2
        return mean, var

    def detection_probability(self, tan_alpha) -> np.ndarray:
        """Probability that a photon at angle alpha to the crystal axis interacts in the crystal."""
        t = real_array("tan_alpha", tan_alpha)
        return 1.0 - np.exp(-self.mu_per_mm * self.depth_mm * np.sqrt(1.0 + t * t))

    @property
    def tan_alpha(self) -> np.ndarray:
        """``tan(alpha_delta)`` for ``delta = -(n_rows - 1) .. n_rows - 1`` (index ``delta + n_rows - 1``).

        The LOR axis joins the mean interaction points, ``E(alpha)`` behind each front face:
        ``tan(alpha) = delta * pitch / (head_distance + 2 E(alpha))``, solved by fixed point.
        """
        delta = np.arange(-(self.n_rows - 1), self.n_rows)
        t = delta * self.pitch_mm / self.head_distance_mm
        for _ in range(8):
            mean, _ = self.depth_moments(t)
            t = delta * self.pitch_mm / (self.head_distance_mm + 2.0 * mean)
        return t

    @property
    def slope(self) -> np.ndarray:
        """Axial slope of each ring difference in slices per along-sample: ``tan(alpha) * radial_bin / slice``."""
        return self.tan_alpha * (self.radial_bin_mm / self.slice_mm)

    # --- sinogram bookkeeping -------------------------------------------------------------------
    def lor_rows(self):
        """``(delta, m, kc)`` arrays of shape (n_rows, n_rows) for every row pair ``[r1, r2]``."""
        r1, r2 = np.meshgrid(np.arange(self.n_rows), np.arange(self.n_rows), indexing="ij")
        return r2 - r1, np.minimum(r1, r2), r1 + r2

    @classmethod
    def small(cls, **kw) -> "RotatingScanner":
        """A small configuration for tests and CI (every physical parameter as the default)."""
        base = dict(n_rows=6, n_angles=12, n_radial=21, n_columns=12)
        base.update(kw)
        return cls(**base)


__all__ = ["FWHM_PER_SIGMA", "RotatingScanner"]
