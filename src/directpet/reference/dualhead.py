"""float64 reference of the dual-head patch projectors: the explicit system matrix as ``scipy.sparse``.

For small scanners only: every (LOR, tap) pair is enumerated in NumPy, from the LOR list of
:meth:`DualHeadScanner.lor_crystals` (so independently of the compiled layout arithmetic) and the
patch rule of :mod:`directpet.dualhead.model`: LOR ``(c_u, c_l)`` of class ``k`` with signs
``s = sign(c_l - c_u)`` (``+`` for a zero component) reads, for each tap ``(dy, dz, w)`` of class ``k``
at plane ``p``, voxel ``[D c_uz + (dz if s_z > 0 else D - 1 - dz), D c_uy + (dy if s_y > 0 else D - 1 - dy), p]``
with weight ``w``.

Rows are the LORs of the listed classes (``subset``: None for all, one class index, or a sequence of
them; the projector's units) in layout order (class blocks in list order, as the projectors'
vectors); columns are voxels in C order ``[v_z, v_y, p]``.

:func:`random_model` makes a PatchModel of random taps that respect the model's invariants (for tests
of any projector of this family).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import scipy.sparse as sp

from .._checks import expect_instance, integer, require_memory
from ..sim.random import make_rng
from ..dualhead.geometry import DualHeadScanner
from ..dualhead.model import PatchModel
from ._arrays import real_input


def system_matrix(model: PatchModel, subset: Optional[Sequence[int]] = None) -> sp.csr_matrix:
    """H for the listed classes (all by default): (n_lors of the classes, n_voxels) float64 CSR."""
    model = expect_instance(model, PatchModel, "model")
    s = model.scanner
    D, P = s.D, s.n_planes
    ny_img = s.n_y * D
    rows, cols, vals = [], [], []
    first = 0
    for k in s.class_list(subset, "subset"):
        c_uy, c_uz, c_ly, c_lz = (v.astype(np.int64)[:, None] for v in s.lor_crystals([k]))
        lo, hi = model.tap_start[k * P], model.tap_start[(k + 1) * P]
        p = np.repeat(np.arange(P), np.diff(model.tap_start[k * P:(k + 1) * P + 1]))[None, :]
        dy = model.tap_dy[lo:hi].astype(np.int64)[None, :]
        dz = model.tap_dz[lo:hi].astype(np.int64)[None, :]
        w = model.tap_w[lo:hi].astype(np.float64)[None, :]
        v_y = D * c_uy + np.where(c_ly >= c_uy, dy, D - 1 - dy)
        v_z = D * c_uz + np.where(c_lz >= c_uz, dz, D - 1 - dz)
        n = c_uy.shape[0]
        rows.append(np.broadcast_to(first + np.arange(n)[:, None], v_y.shape).ravel())
        cols.append(((v_z * ny_img + v_y) * P + p).ravel())
        vals.append(np.broadcast_to(w, v_y.shape).ravel())
        first += n
    return sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(first, s.grid.n_voxels)).tocsr()


def forward(model: PatchModel, image, subset: Optional[Sequence[int]] = None) -> np.ndarray:
    """H x for the listed classes: (n_lors of the classes,) float64. image: a real, finite NumPy
    array of the scanner grid's shape (any float or integer dtype)."""
    model = expect_instance(model, PatchModel, "model")
    x = real_input(image, "image", model.scanner.grid.shape)
    return system_matrix(model, subset) @ x.ravel()


def adjoint(model: PatchModel, y, subset: Optional[Sequence[int]] = None) -> np.ndarray:
    """H^T y for the listed classes' LOR vector y ((n_lors of the classes,), real, finite): image
    (n_z D, n_y D, n_planes) float64."""
    model = expect_instance(model, PatchModel, "model")
    subset = model.scanner.class_list(subset, "subset")
    y = real_input(y, "y", (model.scanner.lor_count(subset),))
    return (system_matrix(model, subset).T @ y).reshape(model.scanner.grid.shape)


def random_model(scanner: DualHeadScanner, rng, taps=(0, 12)) -> PatchModel:
    """A PatchModel of random taps: per (class, plane) a uniform number in ``[taps[0], taps[1]]`` of
    offsets drawn uniformly in the class's crystal cells (``0 <= dy < D (a_y + 1)``, likewise dz;
    duplicates merge) with weights uniform in [0.1, 1)."""
    scanner = expect_instance(scanner, DualHeadScanner, "scanner")
    if isinstance(taps, (str, bytes)) or not hasattr(taps, "__len__") or len(taps) != 2:
        raise TypeError(f"taps: expected (min, max) taps per (class, plane), got {taps!r}")
    taps = (integer("taps[0]", taps[0], lo=0), integer("taps[1]", taps[1], lo=0))
    if taps[1] < taps[0]:
        raise ValueError(f"taps: expected min <= max, got {taps}")
    rng = make_rng(rng)
    n_rows = scanner.n_classes * scanner.n_planes
    # up to n_rows * taps[1] taps, each a few int64 / float64 entries here and in PatchModel.from_taps
    require_memory("taps", 160.0 * n_rows * taps[1], f"a random model of up to {taps[1]} taps per (class, plane)")
    counts = rng.integers(taps[0], taps[1] + 1, size=n_rows)
    row = np.repeat(np.arange(n_rows), counts)
    k, p = row // scanner.n_planes, row % scanner.n_planes
    a_y, a_z = scanner.class_of(k)
    D = scanner.D
    dy = np.floor(rng.random(row.size) * D * (a_y + 1)).astype(np.int64)
    dz = np.floor(rng.random(row.size) * D * (a_z + 1)).astype(np.int64)
    w = rng.uniform(0.1, 1.0, size=row.size)
    return PatchModel.from_taps(scanner, k, p, dy, dz, w, meta={"kind": "random", "taps": list(taps)})


__all__ = ["adjoint", "forward", "random_model", "system_matrix"]
