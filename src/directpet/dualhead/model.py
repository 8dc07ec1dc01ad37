"""The dual-head system model in the projectors' format: per-class, per-plane patches (:ref:`physics-dualhead`).

By shift invariance (:ref:`physics-dualhead`) the response of LOR ``(c_u, c_l)`` restricted to plane ``p`` is
one *patch* per orientation, moved by ``D c_u``; the y/z reflections give the patches of the signed
orientations of a class from the class's ``(+,+)`` patch. So the model is stored per orientation
class ``k = (a_y, a_z)`` and plane ``p`` as a list of taps ``(dy, dz, w)``: LOR ``(c_u, c_l)`` of
class k with signs ``(s_y, s_z)`` reads voxel ``[v_z, v_y, p]`` with weight ``w`` (per unit activity
in the voxel, i.e. the probability that a decay in the voxel is detected on that LOR) where

    ``v_y = D c_uy + (dy if s_y > 0 else D - 1 - dy)``,   ``v_z = D c_uz + (dz if s_z > 0 else D - 1 - dz)``.

Invariants (checked on construction): ``0 <= dy < D (a_y + 1)``, ``0 <= dz < D (a_z + 1)`` (a tap
lies in a crystal cell between ``c_u`` and ``c_l``, hence always inside the image), weights finite
and positive, taps of one (class, plane) sorted by ``(dz, dy)`` and unique.

Storage: CSR over rows ``r = k * n_planes + p``: ``tap_start`` (int64, ``n_classes * n_planes + 1``),
``tap_dy`` / ``tap_dz`` (int16), ``tap_w`` (float32): 8 bytes per tap.

File format (``.npz``, written by :meth:`PatchModel.save`, no pickles): ``format`` =
"directpet.dualhead.PatchModel", ``version`` = 1, ``scanner`` (JSON of DualHeadScanner),
``tap_start``, ``tap_dy``, ``tap_dz``, ``tap_w`` as above, ``meta`` (JSON: how it was built). A
Monte Carlo matrix (e.g. GATE) converted to this layout loads and is used as given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .. import _core
from .._checks import expect_instance, integer, integer_array, meta_dict, read_only, real_array
from .._storage import read_record, save_record
from .geometry import DualHeadScanner

_FORMAT = "directpet.dualhead.PatchModel"
_VERSION = 1


@dataclass(frozen=True)
class PatchModel:
    """Per-class, per-plane patches of the system model (see the module docstring for the layout).

    Build with :func:`directpet.dualhead.build_patch_model` (the analytic detector response), or
    :meth:`from_taps` from any list of ``(class, plane, dy, dz, w)``, or :meth:`load`.
    """

    scanner: DualHeadScanner
    tap_start: np.ndarray
    tap_dy: np.ndarray
    tap_dz: np.ndarray
    tap_w: np.ndarray
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        s = expect_instance(self.scanner, DualHeadScanner, "scanner")
        n_rows = s.n_classes * s.n_planes
        start = integer_array("tap_start", self.tap_start)
        if start.shape != (n_rows + 1,) or start[0] != 0 or np.any(np.diff(start) < 0):
            raise ValueError(f"tap_start: expected a non-decreasing int array of length {n_rows + 1} starting at 0")
        n = int(start[-1])
        arrays = {}
        for name, dtype in (("tap_dy", np.int16), ("tap_dz", np.int16), ("tap_w", np.float32)):
            a = np.asarray(getattr(self, name))
            if a.shape != (n,):
                raise ValueError(f"{name}: expected shape ({n},), got {a.shape}")
            if dtype == np.int16:
                a = integer_array(name, a)
                if a.size and (a.min() < -32768 or a.max() > 32767):
                    raise ValueError(f"{name}: offsets beyond int16")
            elif a.dtype == np.bool_ or not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
                raise TypeError(f"{name}: expected real weights, got dtype {a.dtype}")
            with np.errstate(over="ignore", invalid="ignore"):   # 1e39 becomes inf: refused just below
                arrays[name] = np.ascontiguousarray(a, dtype=dtype)
        # the remaining invariants (offsets inside the cells, weights, order) in one compiled pass over
        # the taps, which also gives the projectors their host copy (no per-tap NumPy temporaries:
        # 166 M taps at full size)
        host = _core.DualHeadModel(s.n_y, s.n_z, s.voxels_per_crystal, s.n_planes, start, arrays["tap_dy"],
                                   arrays["tap_dz"], arrays["tap_w"])
        object.__setattr__(self, "_host", host)
        # read-only views: the arrays stay what was checked (and what the host copy holds)
        object.__setattr__(self, "tap_start", read_only(start))
        for name, a in arrays.items():
            object.__setattr__(self, name, read_only(a))
        object.__setattr__(self, "meta", meta_dict(self.meta))

    @property
    def host_model(self):
        """The validated compiled copy (``_core.DualHeadModel``) the projectors read."""
        return self._host

    # --- construction ---------------------------------------------------------------------------
    @classmethod
    def from_taps(cls, scanner: DualHeadScanner, k, p, dy, dz, w, meta: Optional[dict] = None) -> "PatchModel":
        """A model from unordered taps (class k, plane p, dy, dz, w); duplicate taps are summed,
        zero weights dropped (weights must be finite and >= 0)."""
        scanner = expect_instance(scanner, DualHeadScanner, "scanner")
        k, p, dy, dz = (integer_array(name, v).ravel() for name, v in (("k", k), ("p", p), ("dy", dy), ("dz", dz)))
        w = real_array("w", w).ravel()
        if np.any(w < 0):
            raise ValueError("w: expected weights >= 0 (detection probabilities)")
        if not (k.size == p.size == dy.size == dz.size == w.size):
            raise ValueError("k, p, dy, dz, w: expected arrays of one length")
        if k.size and (k.min() < 0 or k.max() >= scanner.n_classes):
            raise ValueError(f"k: class indices must lie in [0, {scanner.n_classes})")
        if p.size and (p.min() < 0 or p.max() >= scanner.n_planes):
            raise ValueError(f"p: plane indices must lie in [0, {scanner.n_planes})")
        D = scanner.D
        row = k * scanner.n_planes + p
        key = (row * (D * (scanner.n_z + 1)) + dz) * (D * (scanner.n_y + 1)) + dy
        uniq, inv = np.unique(key, return_inverse=True)
        wsum = np.bincount(inv, weights=w, minlength=uniq.size)
        first = np.zeros(uniq.size, dtype=np.int64)
        first[inv] = np.arange(key.size)
        keep = wsum != 0
        idx = first[keep]
        n_rows = scanner.n_classes * scanner.n_planes
        counts = np.bincount(row[idx], minlength=n_rows)
        start = np.concatenate([[0], np.cumsum(counts)])
        return cls(scanner, start, dy[idx], dz[idx], wsum[keep], meta_dict(meta))

    # --- access ---------------------------------------------------------------------------------
    @property
    def n_taps(self) -> int:
        """Taps stored in the model (all classes and planes)."""
        return int(self.tap_start[-1])

    @property
    def nbytes(self) -> int:
        """Bytes of the taps and row starts (what the projectors keep on the GPU, before any
        re-layout of their own)."""
        return int(self.tap_start.nbytes + self.tap_dy.nbytes + self.tap_dz.nbytes + self.tap_w.nbytes)

    def row(self, k: int, p: int) -> int:
        """CSR row ``k * n_planes + p`` of class k in ``[0, n_classes)`` at plane p in ``[0, n_planes)``."""
        s = self.scanner
        return integer("k", k, 0, s.n_classes - 1) * s.n_planes + integer("p", p, 0, s.n_planes - 1)

    def patch(self, k: int, p: int):
        """``(dy, dz, w)`` of class k at plane p (indices as :meth:`row`; views into the model's arrays)."""
        r = self.row(k, p)
        a, b = int(self.tap_start[r]), int(self.tap_start[r + 1])
        return self.tap_dy[a:b], self.tap_dz[a:b], self.tap_w[a:b]

    def taps_per_row(self) -> np.ndarray:
        """Taps per (class, plane), shape (n_classes, n_planes)."""
        return np.diff(self.tap_start).reshape(self.scanner.n_classes, self.scanner.n_planes)

    def nonzeros(self) -> int:
        """Non-zero entries of the full (unreduced) matrix: taps times shift positions times signs."""
        per_class = self.taps_per_row().sum(axis=1)
        return int((per_class * self.scanner.class_lor_counts()).sum())

    # --- files ----------------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the ``.npz`` layout documented in the module docstring."""
        save_record(path, _FORMAT, _VERSION, self.scanner, self.meta, tap_start=self.tap_start, tap_dy=self.tap_dy,
                    tap_dz=self.tap_dz, tap_w=self.tap_w)

    @classmethod
    def load(cls, path) -> "PatchModel":
        """Read a model written by :meth:`save` (or by another tool following the same layout)."""
        def build(f, scanner, meta):
            return cls(scanner, f["tap_start"], f["tap_dy"], f["tap_dz"], f["tap_w"], meta)

        return read_record(path, "dual-head patch model", _FORMAT, _VERSION, DualHeadScanner,
                           ("tap_start", "tap_dy", "tap_dz", "tap_w"), build)


__all__ = ["PatchModel"]
