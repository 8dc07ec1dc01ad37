"""Geometry and LOR layout of a stationary dual-head planar PET scanner (:ref:`conventions-dualhead`).

Scanner
-------
Two planar heads face each other across the plane ``x = 0``. Each has ``n_y x n_z`` crystals
(104 x 72) at ``pitch_mm`` (2.4 mm); a crystal's front layer is ``crystal_mm`` wide (2.1 mm, the gaps
are not attenuating) and ``depth_mm`` deep (10 mm). The *upper* head's front layer fills
``x in [gap/2, gap/2 + depth]``, the *lower* head's ``x in [-gap/2 - depth, -gap/2]``
(``gap_mm`` = 60 mm between the front faces). Crystal ``c = (c_y, c_z)`` has its centre at
``Y = (c_y - (n_y - 1)/2) * pitch``, ``Z = (c_z - (n_z - 1)/2) * pitch`` on both heads.
x is perpendicular to the heads, y runs along the 104-crystal side, z along the 72-crystal side.

Image
-----
``ImageGrid((n_z D, n_y D, n_planes), (pitch/D, pitch/D, plane_mm))``, indexed ``[v_z, v_y, p]``:
``D = voxels_per_crystal`` (4) voxels per crystal pitch in y and z, so that crystal cell ``c_y``
holds voxels ``v_y = D c_y .. D c_y + D - 1``, and ``n_planes`` (119, odd) planes ``p`` parallel to
the heads, ``x_p = (p - (n_planes - 1)/2) * plane_mm`` (0.5 mm). Default 288 x 416 x 119 =
14.26 M voxels of 0.6 x 0.6 x 0.5 mm.

LORs, orientation classes and the data layout
---------------------------------------------
A LOR joins upper crystal ``c_u`` and lower crystal ``c_l``; its orientation is
``delta = c_l - c_u`` (signed). The *orientation class* ``k = a_y * n_z + a_z`` collects the signed
orientations ``(s_y a_y, s_z a_z)`` with ``a = |delta|`` (``n_y n_z`` = 7488 classes): 4 signs, 2 when
one of ``a_y, a_z`` is 0, 1 when both are. Signs are taken in the order ``(+,+), (-,+), (+,-), (-,-)``
skipping repeats.

LOR data are flat float32 vectors, class-major: class ``k``'s block holds its signs in that order,
each sign ``(n_y - a_y) * (n_z - a_z)`` shift positions ``(i, j)`` row-major, with
``c_u = (i + [s_y < 0] a_y, j + [s_z < 0] a_z)`` and ``c_l = c_u + (s_y a_y, s_z a_z)``. So within
class ``k`` the LOR ``(sign s, i, j)`` sits at ``(s * (n_y - a_y) + i) * (n_z - a_z) + j``. The full
vector holds the classes in index order (``n_lors = (n_y n_z)^2`` = 56.07 M); a subset's vector
holds its classes' blocks in the order the subset lists them. ``csrc/dualhead/layout.hpp`` is the
same arithmetic for the compiled code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from .._checks import DictRecord, integer, integer_array, normalise_head_fields, require_memory
from ..geometry import ImageGrid, centred_coordinate

#: the compiled code's voxel offsets and indices along y and z are int16
INT16_MAX = 32767

#: sign order within a class; repeats (a zero component) are skipped
SIGNS = ((1, 1), (-1, 1), (1, -1), (-1, -1))


@dataclass(frozen=True)
class DualHeadScanner(DictRecord):
    """A stationary pair of planar heads (defaults: the paper's HRRT-head small-animal scanner).

    Parameters
    ----------
    n_y, n_z : crystals per head along y and z (104, 72).
    pitch_mm : crystal pitch (2.4 mm) in y and z.
    crystal_mm : crystal cross-section (2.1 mm); the gaps do not attenuate.
    depth_mm : front-layer depth (10 mm; only front-layer coincidences are used).
    gap_mm : distance between the two front faces (60 mm).
    voxels_per_crystal : D, voxels per pitch in y and z (4: 0.6 mm voxels).
    n_planes : planes parallel to the heads (119, odd: the central plane is x = 0).
    plane_mm : plane spacing t (0.5 mm).
    mu_per_mm : linear attenuation of the crystal at 511 keV (LSO/LYSO 0.087 / mm).
    positron_range_fwhm_mm : positron range blur of the Monte Carlo (FWHM per component, F-18 0.5 mm).
    acollinearity_fwhm_deg : FWHM of the photon pair's deviation from 180 degrees (0.5).
    """

    n_y: int = 104
    n_z: int = 72
    pitch_mm: float = 2.4
    crystal_mm: float = 2.1
    depth_mm: float = 10.0
    gap_mm: float = 60.0
    voxels_per_crystal: int = 4
    n_planes: int = 119
    plane_mm: float = 0.5
    mu_per_mm: float = 0.087
    positron_range_fwhm_mm: float = 0.5
    acollinearity_fwhm_deg: float = 0.5

    def __post_init__(self):
        normalise_head_fields(self, counts=("n_y", "n_z", "voxels_per_crystal", "n_planes"),
                              positive=("gap_mm", "plane_mm"))
        if self.n_planes % 2 == 0:
            raise ValueError(f"n_planes: expected an odd number (a central plane at x = 0), got {self.n_planes}")
        if self.n_planes * self.plane_mm > self.gap_mm + 1e-9:
            raise ValueError(f"n_planes: {self.n_planes} planes of {self.plane_mm:g} mm do not fit between "
                             f"heads {self.gap_mm:g} mm apart")
        D = self.voxels_per_crystal
        for name in ("n_y", "n_z"):
            if getattr(self, name) * D > INT16_MAX:
                raise ValueError(f"{name}, voxels_per_crystal: {getattr(self, name)} crystals of {D} voxels exceed "
                                 f"the compiled code's int16 voxel indices (at most {INT16_MAX} voxels)")
        if self.n_planes > INT16_MAX:
            raise ValueError(f"n_planes: expected at most {INT16_MAX} (the compiled code's int16 planes), "
                             f"got {self.n_planes}")
        # every use of the scanner (projections, data, the Monte Carlo) holds a float32 LOR vector and
        # an image: refuse sizes whose arrays cannot exist here, before anything is allocated
        image = float(self.n_z * D) * self.n_y * D * self.n_planes
        require_memory("n_y, n_z, voxels_per_crystal, n_planes", 4.0 * (float(self.n_crystals) ** 2 + image),
                       f"a float32 LOR vector ({self.n_lors},) and image {self.grid.shape}")

    # --- sizes ----------------------------------------------------------------------------------
    @property
    def D(self) -> int:
        """Voxels per crystal pitch along y and z (``voxels_per_crystal``)."""
        return self.voxels_per_crystal

    @property
    def voxel_mm(self) -> float:
        """Voxel size in y and z: pitch / D."""
        return self.pitch_mm / self.voxels_per_crystal

    @property
    def grid(self) -> ImageGrid:
        """The image lattice ``(n_z D, n_y D, n_planes)`` indexed ``[v_z, v_y, p]``."""
        D = self.voxels_per_crystal
        return ImageGrid((self.n_z * D, self.n_y * D, self.n_planes), (self.voxel_mm, self.voxel_mm, self.plane_mm))

    @property
    def n_crystals(self) -> int:
        """Crystals of one head's front layer: ``n_y * n_z``."""
        return self.n_y * self.n_z

    @property
    def n_classes(self) -> int:
        """Orientation classes ``(|delta_y|, |delta_z|)``: ``n_y * n_z``."""
        return self.n_y * self.n_z

    @property
    def n_lors(self) -> int:
        """Front-layer LORs: ``(n_y n_z)^2``."""
        return self.n_crystals ** 2

    @property
    def upper_front_mm(self) -> float:
        """x (mm) of the upper head's front face (the lower one's is at minus this): ``gap_mm / 2``."""
        return 0.5 * self.gap_mm

    # --- coordinates ----------------------------------------------------------------------------
    # coordinate helpers (directpet.geometry.centred_coordinate): real, possibly fractional or
    # out-of-range indices, arrays allowed; None, strings and NaN are errors naming the argument
    crystal_y_mm = centred_coordinate("c", "n_y", "pitch_mm", "y (mm) of crystal column(s) c_y.")
    crystal_z_mm = centred_coordinate("c", "n_z", "pitch_mm", "z (mm) of crystal row(s) c_z.")
    plane_x_mm = centred_coordinate("p", "n_planes", "plane_mm", "x (mm) of image plane(s) p.")

    # --- classes and layout ---------------------------------------------------------------------
    def class_of(self, k) -> Tuple[np.ndarray, np.ndarray]:
        """``(a_y, a_z)`` (int64) of class index k in ``[0, n_classes)`` (arrays allowed)."""
        k = self._indices("k", k, self.n_classes)
        return k // self.n_z, k % self.n_z

    def class_signs(self, k: int) -> Tuple[Tuple[int, int], ...]:
        """The signed orientations ``(s_y, s_z)`` of class k (an integer in ``[0, n_classes)``), in
        layout order."""
        ay, az = divmod(integer("k", k, 0, self.n_classes - 1), self.n_z)
        return tuple((sy, sz) for sy, sz in SIGNS if (sy > 0 or ay > 0) and (sz > 0 or az > 0))

    def class_lor_counts(self, classes=None) -> np.ndarray:
        """LORs per class (int64), for the listed classes (all by default)."""
        k = self.class_list(classes)
        ay, az = self.class_of(k)
        n_signs = (1 + (ay > 0)) * (1 + (az > 0))
        return (n_signs * (self.n_y - ay) * (self.n_z - az)).astype(np.int64)

    def class_offsets(self, classes=None) -> np.ndarray:
        """Start of each listed class's block in the concatenated vector, plus the total (int64)."""
        return np.concatenate([[0], np.cumsum(self.class_lor_counts(classes))]).astype(np.int64)

    def lor_count(self, classes=None) -> int:
        """LORs of the listed classes together (all classes: ``n_lors``)."""
        return int(self.class_lor_counts(classes).sum())

    def class_list(self, classes=None, name: str = "classes") -> np.ndarray:
        """Validated int32 class indices (all classes, in index order, for None); errors name ``name``."""
        if classes is None:
            return np.arange(self.n_classes, dtype=np.int32)
        a = np.asarray(classes)
        if a.ndim == 0:
            a = a[None]
        if a.ndim != 1 or a.size == 0 or not (np.issubdtype(a.dtype, np.integer)):
            raise TypeError(f"{name}: expected a non-empty sequence of integer class indices, got {classes!r}")
        if a.min() < 0 or a.max() >= self.n_classes:
            raise ValueError(f"{name}: indices must lie in [0, {self.n_classes}), got {a.min()}..{a.max()}")
        return np.ascontiguousarray(a, dtype=np.int32)

    def lor_crystals(self, classes=None):
        """``(c_uy, c_uz, c_ly, c_lz)`` int32 arrays for every LOR of the listed classes, in layout order."""
        k_list = self.class_list(classes)
        n = self.lor_count(k_list)
        # int64 parts (32 B per LOR), their int32 concatenation (16 B) and the meshgrid temporaries
        require_memory("classes", 64.0 * n, f"the crystals of {n} LORs")
        parts = []
        for k in k_list:
            ay, az = (int(v) for v in self.class_of(k))
            i, j = np.meshgrid(np.arange(self.n_y - ay), np.arange(self.n_z - az), indexing="ij")
            i, j = i.ravel(), j.ravel()
            for sy, sz in self.class_signs(k):
                uy = i + (ay if sy < 0 else 0)
                uz = j + (az if sz < 0 else 0)
                parts.append(np.stack([uy, uz, uy + sy * ay, uz + sz * az]))
        out = np.concatenate(parts, axis=1).astype(np.int32)
        return out[0], out[1], out[2], out[3]

    def lor_index(self, c_uy, c_uz, c_ly, c_lz) -> np.ndarray:
        """Index in the full (all classes) vector of the LORs ``(c_u, c_l)`` (int64 arrays): crystal
        indices ``c_*y`` in ``[0, n_y)``, ``c_*z`` in ``[0, n_z)`` (integer arrays, broadcast)."""
        c_uy, c_ly = (self._indices(n, v, self.n_y) for n, v in (("c_uy", c_uy), ("c_ly", c_ly)))
        c_uz, c_lz = (self._indices(n, v, self.n_z) for n, v in (("c_uz", c_uz), ("c_lz", c_lz)))
        dy, dz = c_ly - c_uy, c_lz - c_uz
        ay, az = np.abs(dy), np.abs(dz)
        k = ay * self.n_z + az
        # sign index: (+,+)=0, (-,+)=1, (+,-)=1 or 2 (2 when a_y > 0), (-,-)=3
        s = (dy < 0).astype(np.int64) + (dz < 0) * (1 + (ay > 0))
        i = np.minimum(c_uy, c_ly)
        j = np.minimum(c_uz, c_lz)
        return self.class_offsets()[k] + (s * (self.n_y - ay) + i) * (self.n_z - az) + j

    @staticmethod
    def _indices(name: str, v, n: int) -> np.ndarray:
        """v as int64 indices in ``[0, n)`` (any shape), else a TypeError / ValueError naming it."""
        a = integer_array(name, v).reshape(np.shape(v))       # a scalar stays a 0-d array
        if a.size and (int(a.min()) < 0 or int(a.max()) >= n):
            raise ValueError(f"{name}: expected indices in [0, {n}), got values in [{int(a.min())}, {int(a.max())}]")
        return a

    # --- a configuration for tests -------------------------------------------------------------
    @classmethod
    def small(cls, **kw) -> "DualHeadScanner":
        """A small configuration for tests and CI (every physical parameter as the default):
        8 x 6 crystals, 2 voxels per crystal, 15 planes of 2 mm (image 12 x 16 x 15)."""
        base = dict(n_y=8, n_z=6, voxels_per_crystal=2, n_planes=15, plane_mm=2.0)
        base.update(kw)
        return cls(**base)


__all__ = ["DualHeadScanner", "SIGNS"]
