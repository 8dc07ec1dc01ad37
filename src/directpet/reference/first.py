"""float64 references of the FIRST Super-LOR projectors: the explicit matrices as ``scipy.sparse``.

For small configurations only (a few thousand LORs and voxels): every entry is enumerated in
NumPy, straight from the definitions in :mod:`directpet.first.geometry` and the Super-LOR table,
so that the compiled projectors can be checked entry by entry:

* :func:`system_matrix`: ``H`` with ``H[lor, voxel] = sum_{(i,j,k)} P_delta[i, j, k] w_tri(sample, voxel)``
  (trilinear interpolation weights, zero outside the grid). ``forward = H x`` (the ``faithful``,
  ``matched`` and ``fast`` forward projectors), ``back = H^T y`` (``matched`` and ``fast``).
* :func:`faithful_back_matrix`: ``B`` of the paper's voxel-driven back projector, which is not
  ``H^T``: for each voxel, angle and ring difference it reads the sinogram by bilinear interpolation
  at the voxel's own (radial, axial) LOR coordinates shifted by each tube offset ``(j, k)`` and weights
  it with the tube value at the voxel's (fractional) along position, linearly interpolated in i.
  The paper's sum is halved: a ring difference's LORs are two slices apart axially while the
  interpolated reads come one slice apart (k = -K..K), so without the factor ``B`` would be about
  ``2 H^T``; with it ``B`` approximates ``H^T`` (the scale cancels in OSEM either way).

Rows are sinogram bins of the selected angles in C order ``[a, r1, r2, rho]``; columns are voxels in
C order ``[z, y, x]``.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import scipy.sparse as sp

from ..first.geometry import RotatingScanner
from ..first.model import SuperLORTable


def _angles(scanner: RotatingScanner, angles: Optional[Sequence[int]]) -> np.ndarray:
    a = np.arange(scanner.n_angles) if angles is None else np.asarray(list(angles), dtype=np.int64)
    if a.ndim != 1 or a.size == 0 or a.min() < 0 or a.max() >= scanner.n_angles:
        raise ValueError(f"angles: expected indices in [0, {scanner.n_angles})")
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


def system_matrix(table: SuperLORTable, angles: Optional[Sequence[int]] = None) -> sp.csr_matrix:
    """The forward projector as a sparse matrix (n_angles_sel * n_rows^2 * n_radial, n_voxels), float64."""
    s = table.scanner
    a_sel = _angles(s, angles)
    n, nz, R, J, K = s.n_radial, s.n_slices, s.n_rows, table.J, table.K
    c = 0.5 * (n - 1)
    slope = table.slope
    rows, cols, vals = [], [], []
    r1, r2 = np.meshgrid(np.arange(R), np.arange(R), indexing="ij")
    i = np.arange(n)
    j = np.arange(-J, J + 1)
    k = np.arange(-K, K + 1)
    for ai, a in enumerate(a_sel):
        phi = a * np.pi / s.n_angles
        cp, sn = np.cos(phi), np.sin(phi)
        for q1 in range(R):
            for q2 in range(R):
                d = q2 - q1
                P = table.tube(d).astype(np.float64)                       # (n, 2J+1, 2K+1)
                rho = np.arange(n)
                # sample grid (rho, i, j, k)
                I, Jj, Kk = np.meshgrid(i, j, k, indexing="ij")               # (n, 2J+1, 2K+1)
                m = rho[:, None, None, None] + Jj[None]
                fx = c + (I[None] - c) * cp - (m - c) * sn
                fy = c + (I[None] - c) * sn + (m - c) * cp
                u = (I[None] - c) * slope[d + R - 1]
                fz = (q1 + q2) + Kk[None] + u
                w = np.broadcast_to(P[None], fx.shape)
                lor = ((ai * R + q1) * R + q2) * n + np.broadcast_to(rho[:, None, None, None], fx.shape)
                for zi, wz in _linear_taps(fz, nz):
                    for yi, wy in _linear_taps(fy, n):
                        for xi, wx in _linear_taps(fx, n):
                            ww = w * wz * wy * wx
                            ok = ww != 0
                            rows.append(lor[ok])
                            cols.append(((zi * n + yi) * n + xi)[ok])
                            vals.append(ww[ok])
    shape = (len(a_sel) * R * R * n, nz * n * n)
    return sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=shape).tocsr()


def faithful_back_matrix(table: SuperLORTable, angles: Optional[Sequence[int]] = None) -> sp.csr_matrix:
    """The paper's interpolating voxel-driven back projector as a sparse matrix (n_voxels, n_lors_sel).

    For voxel (iz, iy, ix), angle a and ring difference delta: the voxel's along coordinate
    ``i_f = c + (ix-c) cos(phi) + (iy-c) sin(phi)`` and radial coordinate
    ``rho_f = c - (ix-c) sin(phi) + (iy-c) cos(phi)``; for each tube offset (j, k) the LOR whose
    sample (j, k) passes through the voxel sits at radial ``rho_f - j`` and axial position
    ``m_f = (iz - k - (i_f - c) slope_delta - |delta|) / 2``; the sinogram is read there by bilinear
    interpolation (zero outside the valid LORs) and weighted by ``0.5 P_delta[i_f, j, k]`` (linear
    in i; the 0.5 is the axial LOR density, see the module docstring).
    """
    s = table.scanner
    a_sel = _angles(s, angles)
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


def forward(table: SuperLORTable, image, angles: Optional[Sequence[int]] = None) -> np.ndarray:
    """H x for the selected angles: (n_angles_sel, n_rows, n_rows, n_radial) float64."""
    s = table.scanner
    a_sel = _angles(s, angles)
    H = system_matrix(table, a_sel)
    return (H @ np.asarray(image, dtype=np.float64).ravel()).reshape((len(a_sel),) + s.sinogram_shape[1:])


def back(table: SuperLORTable, sinogram, angles: Optional[Sequence[int]] = None) -> np.ndarray:
    """H^T y (the exact transpose): (nz, ny, nx) float64."""
    s = table.scanner
    H = system_matrix(table, _angles(s, angles))
    return (H.T @ np.asarray(sinogram, dtype=np.float64).ravel()).reshape(s.grid.shape)


def faithful_back(table: SuperLORTable, sinogram, angles: Optional[Sequence[int]] = None) -> np.ndarray:
    """B y, the paper's interpolating back projection: (nz, ny, nx) float64."""
    s = table.scanner
    B = faithful_back_matrix(table, _angles(s, angles))
    return (B @ np.asarray(sinogram, dtype=np.float64).ravel()).reshape(s.grid.shape)


__all__ = ["back", "faithful_back", "faithful_back_matrix", "forward", "system_matrix"]
