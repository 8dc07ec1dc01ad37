"""float64 references of the FIRST Super-LOR projectors: the explicit matrices as ``scipy.sparse``.

For small configurations only (a few thousand LORs and voxels): every entry is enumerated in
NumPy, straight from the definitions in :mod:`directpet.first.geometry` and the Super-LOR table,
so that the compiled projectors can be checked entry by entry:

* :func:`system_matrix`: ``H`` with
  ``H[lor, voxel] = sum_{(i,j,k)} P_delta[i, j, k] A(cell(i, rho + j), voxel_xy) w_lin(z_sample, voxel_z)``:
  in-plane the overlap area ``A`` of the sample's lattice cell (the unit square around the lattice
  point, turned by the angle) with the voxel's unit square (:func:`cell_voxel_overlap`), axially
  linear interpolation, zero outside the grid. ``forward = H x`` (the ``faithful``, ``matched``
  and ``fast`` forward projectors), ``back = H^T y`` (``matched`` and ``fast``).
* :func:`faithful_back_matrix`: ``B`` of the paper's voxel-driven back projector, which is not
  ``H^T``: for each voxel, angle and ring difference it reads the sinogram by bilinear interpolation
  at the voxel's own (radial, axial) LOR coordinates shifted by each tube offset ``(j, k)`` and weights
  it with the tube value at the voxel's (fractional) along position, linearly interpolated in i.
  The paper's sum is halved: a ring difference's LORs are two slices apart axially while the
  interpolated reads come one slice apart (k = -K..K), so without the factor ``B`` would be about
  ``2 H^T``; with it ``B`` approximates ``H^T`` (the scale cancels in OSEM either way).

Every function takes ``subset`` as the projectors do (None: every angle; one angle index; or a
sequence of them): rows are the sinogram bins of its angles, in the listed order, in C order
``[a, r1, r2, rho]``; columns are voxels in C order ``[z, y, x]``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._checks import expect_instance, integer, integer_array, real_array, require_memory
from ..first.geometry import RotatingScanner
from ..first.model import SuperLORTable
from ._arrays import real_input


def _angles(scanner: RotatingScanner, subset) -> np.ndarray:
    """``subset`` as the projectors take it: None (every angle), one angle index, or a non-empty
    sequence of them in ``[0, n_angles)``; else an error naming ``subset``."""
    if subset is None:
        return np.arange(scanner.n_angles)
    a = np.atleast_1d(integer_array("subset", subset))
    if a.ndim != 1 or a.size == 0 or a.min() < 0 or a.max() >= scanner.n_angles:
        raise ValueError(f"subset: expected angle indices in [0, {scanner.n_angles})")
    return a


def _linear_taps(f, n):
    """Two-tap linear interpolation of continuous index f on [0, n): (index, weight) pairs, zero outside."""
    f0 = np.floor(f)
    w1 = f - f0
    out = []
    for idx, w in ((f0, 1.0 - w1), (f0 + 1, w1)):
        idx = idx.astype(np.int64)
        out.append((idx, np.where((idx >= 0) & (idx < n), w, 0.0)))
    return out


def _clip_polygons(px, py, count, along_y, bound, sign):
    """One Sutherland-Hodgman step on a batch of convex polygons: keep ``sign * (coord - bound) >= 0``.

    px, py: (N, M) vertices (the first ``count[k]`` of row k are used); returns (qx, qy, new_count)
    with M + 1 columns.
    """
    N, M = px.shape
    qx, qy = np.zeros((N, M + 1)), np.zeros((N, M + 1))
    out = np.zeros(N, dtype=np.int64)
    rows = np.arange(N)
    for k in range(M):
        valid = k < count
        prev = np.where(k == 0, count - 1, k - 1).clip(0, M - 1)
        xa, ya, xb, yb = px[rows, prev], py[rows, prev], px[:, k], py[:, k]
        ea = sign * ((ya if along_y else xa) - bound)
        eb = sign * ((yb if along_y else xb) - bound)
        cross = valid & ((ea >= 0) != (eb >= 0))
        t = ea / np.where(cross, ea - eb, 1.0)
        r = rows[cross]
        qx[r, out[cross]] = (xa + t * (xb - xa))[cross]
        qy[r, out[cross]] = (ya + t * (yb - ya))[cross]
        out += cross
        keep = valid & (eb >= 0)
        r = rows[keep]
        qx[r, out[keep]] = xb[keep]
        qy[r, out[keep]] = yb[keep]
        out += keep
    return qx, qy, out


def cell_voxel_overlap(dx, dy, phi) -> np.ndarray:
    """Overlap area of the unit square centred at ``(dx, dy)`` (axis-aligned: a voxel) with the unit
    square centred at 0 turned by ``phi`` (a lattice cell), float64, broadcast over the arguments.

    The cell is clipped by the voxel's four sides and its area taken by the shoelace formula.
    Real, finite arguments (else a TypeError / ValueError naming the argument).
    """
    dx, dy, phi = np.broadcast_arrays(*(real_array(n, v) for n, v in (("dx", dx), ("dy", dy), ("phi", phi))))
    shape = dx.shape
    dx, dy, phi = dx.ravel(), dy.ravel(), phi.ravel()
    u = np.array([0.5, 0.5, -0.5, -0.5])          # the cell's corners, counter-clockwise
    v = np.array([-0.5, 0.5, 0.5, -0.5])
    c, s = np.cos(phi)[:, None], np.sin(phi)[:, None]
    px, py = u * c - v * s, u * s + v * c
    count = np.full(dx.size, 4)
    for along_y, centre in ((False, dx), (True, dy)):
        for sign in (1.0, -1.0):
            px, py, count = _clip_polygons(px, py, count, along_y, centre - 0.5 * sign, sign)
    idx = np.arange(px.shape[1])
    nxt = np.where(idx[None, :] + 1 < count[:, None], idx[None, :] + 1, 0)
    used = idx[None, :] < count[:, None]
    rows = np.arange(dx.size)[:, None]
    cross = px * py[rows, nxt] - px[rows, nxt] * py
    return (0.5 * np.abs(np.where(used, cross, 0.0).sum(axis=1))).reshape(shape)


def lattice_footprints(scanner: RotatingScanner, J: int, angle: int):
    """In-plane weights of one angle's lattice: every (lattice point, voxel) pair with a non-zero overlap.

    ``J`` >= 0 is the tube's radial half-width, ``angle`` an angle index in ``[0, n_angles)``.
    Returns ``(i, row, ix, iy, w)`` flat arrays: along sample i in [0, n), radial lattice row in
    [-J, n + J), voxel (ix, iy) inside the grid, overlap area w (float64).
    """
    expect_instance(scanner, RotatingScanner, "scanner")
    J = integer("J", J, lo=0)
    angle = integer("angle", angle, 0, scanner.n_angles - 1)
    n = scanner.n_radial
    # 25 candidate voxels per lattice point, about 40 float64 / int64 temporaries each
    require_memory("J", 8.0 * 40 * 25 * n * (n + 2.0 * J), f"the footprints of {n} x {n + 2 * J} lattice points")
    c = 0.5 * (n - 1)
    phi = angle * np.pi / scanner.n_angles
    cp, sn = np.cos(phi), np.sin(phi)
    i, row = np.meshgrid(np.arange(n), np.arange(-J, n + J), indexing="ij")
    fx = c + (i - c) * cp - (row - c) * sn
    fy = c + (i - c) * sn + (row - c) * cp
    # every voxel within 2 of the lattice point along both axes (a superset of the overlapping ones)
    off = np.arange(-2, 3)
    ix = np.rint(fx)[..., None, None] + off[None, None, None, :]
    iy = np.rint(fy)[..., None, None] + off[None, None, :, None]
    shape = np.broadcast_shapes(ix.shape, iy.shape)
    ix, iy = np.broadcast_to(ix, shape), np.broadcast_to(iy, shape)
    w = cell_voxel_overlap(ix - fx[..., None, None], iy - fy[..., None, None], phi)
    ok = (w > 1e-12) & (ix >= 0) & (ix < n) & (iy >= 0) & (iy < n)
    ii = np.broadcast_to(i[..., None, None], shape)
    rr = np.broadcast_to(row[..., None, None], shape)
    return ii[ok], rr[ok], ix[ok].astype(np.int64), iy[ok].astype(np.int64), w[ok]


def system_matrix(table: SuperLORTable, subset=None) -> sp.csr_matrix:
    """The forward projector as a sparse matrix (len(subset) * n_rows^2 * n_radial, n_voxels), float64."""
    s = expect_instance(table, SuperLORTable, "table").scanner
    a_sel = _angles(s, subset)
    n, nz, R, J, K = s.n_radial, s.n_slices, s.n_rows, table.J, table.K
    c = 0.5 * (n - 1)
    slope = table.slope
    rows, cols, vals = [], [], []
    k = np.arange(-K, K + 1)
    for ai, a in enumerate(a_sel):
        fi, frow, fx, fy, fw = lattice_footprints(s, J, a)
        for q1 in range(R):
            for q2 in range(R):
                d = q2 - q1
                P = table.tube(d).astype(np.float64)                       # (n, 2J+1, 2K+1)
                # every (footprint entry, radial offset j, axial offset k): LOR rho = row - j
                for jj in range(-J, J + 1):
                    rho = frow - jj
                    inside = (rho >= 0) & (rho < n)
                    e_i, e_rho = fi[inside], rho[inside]
                    e_w = fw[inside][:, None] * P[e_i, jj + J, :]              # (entries, 2K+1)
                    vox_xy = (fy[inside] * n + fx[inside])[:, None]
                    fz = (q1 + q2) + k[None, :] + (e_i[:, None] - c) * slope[d + R - 1]
                    lor = np.broadcast_to((((ai * R + q1) * R + q2) * n + e_rho)[:, None], fz.shape)
                    for zi, wz in _linear_taps(fz, nz):
                        ww = e_w * wz
                        ok = ww != 0
                        rows.append(lor[ok])
                        cols.append((zi * n * n + vox_xy)[ok])
                        vals.append(ww[ok])
    shape = (len(a_sel) * R * R * n, nz * n * n)
    return sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=shape).tocsr()


def faithful_back_matrix(table: SuperLORTable, subset=None) -> sp.csr_matrix:
    """The paper's interpolating voxel-driven back projector as a sparse matrix (n_voxels, n_lors of subset).

    For voxel (iz, iy, ix), angle a and ring difference delta: the voxel's along coordinate
    ``i_f = c + (ix-c) cos(phi) + (iy-c) sin(phi)`` and radial coordinate
    ``rho_f = c - (ix-c) sin(phi) + (iy-c) cos(phi)``; for each tube offset (j, k) the LOR whose
    sample (j, k) passes through the voxel sits at radial ``rho_f - j`` and axial position
    ``m_f = (iz - k - (i_f - c) slope_delta - |delta|) / 2``; the sinogram is read there by bilinear
    interpolation (zero outside the valid LORs) and weighted by ``0.5 P_delta[i_f, j, k]`` (linear
    in i; the 0.5 is the axial LOR density, see the module docstring).
    """
    s = expect_instance(table, SuperLORTable, "table").scanner
    a_sel = _angles(s, subset)
    n, nz, R, J, K = s.n_radial, s.n_slices, s.n_rows, table.J, table.K
    c = 0.5 * (n - 1)
    slope = table.slope
    iz, iy, ix = np.meshgrid(np.arange(nz), np.arange(n), np.arange(n), indexing="ij")
    vox = ((iz * n + iy) * n + ix).ravel()
    rows, cols, vals = [], [], []
    for ai, a in enumerate(a_sel):
        phi = a * np.pi / s.n_angles
        cp, sn = np.cos(phi), np.sin(phi)
        i_f = (c + (ix - c) * cp + (iy - c) * sn).ravel()
        rho_f = (c - (ix - c) * sn + (iy - c) * cp).ravel()
        z = iz.ravel().astype(np.float64)
        for d in range(-(R - 1), R):
            P = table.tube(d).astype(np.float64)
            M = R - abs(d)
            for jj in range(-J, J + 1):
                for kk in range(-K, K + 1):
                    p = sum(np.where(w > 0, P[np.clip(idx, 0, n - 1), jj + J, kk + K], 0.0) * w
                            for idx, w in _linear_taps(i_f, n))
                    m_f = (z - kk - (i_f - c) * slope[d + R - 1] - abs(d)) / 2.0
                    for mi, wm in _linear_taps(m_f, M):
                        for ri, wr in _linear_taps(rho_f - jj, n):
                            ww = 0.5 * p * wm * wr
                            ok = ww != 0
                            q1 = np.where(d >= 0, mi, mi + abs(d))
                            q2 = np.where(d >= 0, mi + d, mi)
                            lor = ((ai * R + q1) * R + q2) * n + ri
                            rows.append(vox[ok])
                            cols.append(lor[ok])
                            vals.append(ww[ok])
    shape = (nz * n * n, len(a_sel) * R * R * n)
    return sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=shape).tocsr()


def forward(table: SuperLORTable, image, subset=None) -> np.ndarray:
    """H x for the angles of ``subset`` (None: all): (len(subset), n_rows, n_rows, n_radial) float64."""
    s = expect_instance(table, SuperLORTable, "table").scanner
    a_sel = _angles(s, subset)
    x = real_input(image, "image", s.grid.shape)
    return (system_matrix(table, a_sel) @ x.ravel()).reshape((len(a_sel),) + s.sinogram_shape[1:])


def back(table: SuperLORTable, sinogram, subset=None) -> np.ndarray:
    """H^T y (the exact transpose) of a sinogram of the angles of ``subset``: (nz, ny, nx) float64."""
    s = expect_instance(table, SuperLORTable, "table").scanner
    a_sel = _angles(s, subset)
    y = real_input(sinogram, "sinogram", (len(a_sel),) + s.sinogram_shape[1:])
    return (system_matrix(table, a_sel).T @ y.ravel()).reshape(s.grid.shape)


def faithful_back(table: SuperLORTable, sinogram, subset=None) -> np.ndarray:
    """B y, the paper's interpolating back projection of ``subset``'s sinogram: (nz, ny, nx) float64."""
    s = expect_instance(table, SuperLORTable, "table").scanner
    a_sel = _angles(s, subset)
    y = real_input(sinogram, "sinogram", (len(a_sel),) + s.sinogram_shape[1:])
    return (faithful_back_matrix(table, a_sel) @ y.ravel()).reshape(s.grid.shape)


__all__ = ["back", "cell_voxel_overlap", "faithful_back", "faithful_back_matrix", "forward", "lattice_footprints",
           "system_matrix"]
