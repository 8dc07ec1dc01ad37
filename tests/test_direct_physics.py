"""Point-source behaviour of the DIRECT projectors, as in [HA] Fig. 5-7 (docs/physics.rst 1.7, 1.11).

Setup: 600 ps TOF, radial FWHM ('linear', 10, 80) mm with s_max = 288 mm (the 57.6 cm transaxial
FOV radius of the Penn scanner, docs/physics.rst 1.10) or an invariant 50 mm, axial 10 mm, 4 mm voxels,
and untilted views at phi = 0 (e_t = x, e_r = y) or phi = 90 deg (e_t = y, e_r = -x). For these
views the kernel is separable in the lattice axes, so the radial (s) profile of a blob does not
depend on how much of the long TOF tail the grid keeps: the grid is long along e_r (201 voxels,
+-400 mm, so blobs of sources at |s| <= 148 mm stay inside) and short along e_t and z (21 and 5
voxels) to keep the test fast.

Expected behaviour, derived from the operator definitions (docs/physics.rst 1.4, 1.7):
* forward of a point at r0 is K_{a(r0)}(r - r0): the source's own kernel, so symmetric about the
  source for a symmetric kernel, with radial variance sigma_r(s0)^2;
* back projection of a point is r' -> K_{a(r')}(r0 - r'): every voxel uses its own kernel, so
  voxels further out (wider kernels) reach the source more: lopsided towards the edge;
* asymmetric kernels put their wide Gaussian towards the centre: forward blobs are stretched
  (centroid shifted) towards the centre, back blobs towards the edge.
"""

from __future__ import annotations

import numpy as np
import pytest

from directpet import ImageGrid
from directpet.direct import HistoImageProjector, SRKernel, View

FWHM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(2.0))
S_MAX = 288.0
VARIANT = SRKernel(tof_fwhm_ps=600.0, radial_fwhm=("linear", 10.0, 80.0), axial_fwhm=10.0, s_max=S_MAX)
ASYM_VARIANT = SRKernel(tof_fwhm_ps=600.0, radial_fwhm=("linear", 10.0, 80.0), axial_fwhm=10.0,
                        s_max=S_MAX, asymmetric=True)
ASYM_INVARIANT = SRKernel(tof_fwhm_ps=600.0, radial_fwhm=50.0, axial_fwhm=10.0, asymmetric=True)
INVARIANT = SRKernel(tof_fwhm_ps=600.0, radial_fwhm=50.0, axial_fwhm=10.0)

N_LONG, N_TOF, N_Z = 201, 21, 5
GEOMETRIES = {
    # name: (view, grid shape); e_r along the long axis
    "phi0": (View(0.0), (N_Z, N_LONG, N_TOF)),
    "phi90": (View(np.pi / 2), (N_Z, N_TOF, N_LONG)),
}
_CACHE = {}


def projector(geometry, kernel):
    key = (geometry, id(kernel))
    if key not in _CACHE:
        view, shape = GEOMETRIES[geometry]
        _CACHE[key] = HistoImageProjector(ImageGrid(shape, 4.0), [view], kernel, backend="cpu")
    return _CACHE[key]


def s_map(op):
    """Signed LOR distance s = -x sin(phi) + y cos(phi) of every voxel centre, broadcast to 3D."""
    g, view = op.grid, op.views[0]
    y, x = g.centres(1)[:, None], g.centres(2)[None, :]
    return np.broadcast_to(-x * np.sin(view.phi) + y * np.cos(view.phi), g.shape)


def point_source(op, s0, rng):
    """A point source of random amplitude at the central z and TOF position, at LOR distance s0."""
    s = s_map(op)
    idx = np.argwhere(np.isclose(s, s0, atol=1e-9))
    centre = np.array(op.grid.shape) // 2
    iz, iy, ix = min(idx, key=lambda i: np.abs(i - centre).sum())
    x = np.zeros(op.grid.shape, dtype=np.float32)
    x[iz, iy, ix] = rng.uniform(0.5, 2.0)
    return x, (iz, iy, ix)


def radial_stats(op, blob, s0):
    """Moments of the blob along e_r about the source: centroid offset, sd, and the mass and
    second moment on the centre side (sgn(s - s0) = -sgn(s0)) and the edge side."""
    b = np.asarray(blob, dtype=np.float64)
    d = s_map(op) - s0
    m = b.sum()
    centroid = (b * d).sum() / m
    sd = np.sqrt((b * (d - centroid) ** 2).sum() / m)
    out = np.sign(s0) if s0 != 0 else 1.0
    edge, centre = d * out > 0, d * out < 0
    return dict(centroid=centroid, sd=sd, outward=centroid * out,
                mass_edge=b[edge].sum() / m, mass_centre=b[centre].sum() / m,
                m2_edge=(b[edge] * d[edge] ** 2).sum() / m, m2_centre=(b[centre] * d[centre] ** 2).sum() / m)


def sigma_at(s0, eps=2.0):
    """Radial sigma (mm) of the identifier containing s0: the model at its bin centre."""
    sc = (np.floor(s0 / eps) + 0.5) * eps
    return (10.0 + 70.0 * min(abs(sc) / S_MAX, 1.0)) / FWHM_PER_SIGMA


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_variant_forward_blobs_are_symmetric_and_widen_with_radius(geometry, rng):
    """Fig. 6 forward: a symmetric variant kernel gives blobs mirror-symmetric about the source
    along e_r (to float rounding, 1e-6 of the peak) whose radial sd is the model's sigma at the
    source's LOR distance (3%: lattice sampling and ellipsoidal truncation) and so grows with |s|."""
    op = projector(geometry, VARIANT)
    axis = 1 if geometry == "phi0" else 2
    sds = []
    for s0 in (0.0, 60.0, -60.0, 148.0, -148.0):
        x, src = point_source(op, s0, rng)
        blob = op.forward(x, 0)[0].astype(np.float64)
        i0 = src[axis]
        w = min(i0, blob.shape[axis] - 1 - i0)
        win = np.take(blob, np.arange(i0 - w, i0 + w + 1), axis=axis)
        np.testing.assert_allclose(win, np.flip(win, axis=axis), rtol=0, atol=1e-6 * blob.max())
        st = radial_stats(op, blob, s0)
        assert abs(st["centroid"]) < 1e-3 * st["sd"]
        assert st["sd"] == pytest.approx(sigma_at(s0), rel=0.03)
        sds.append((abs(s0), st["sd"]))
    by_radius = [sd for _, sd in sorted(sds)]
    assert by_radius[0] < min(by_radius[1:3]) and max(by_radius[1:3]) < min(by_radius[3:])


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
@pytest.mark.parametrize("s0", [60.0, 148.0, -148.0])
def test_variant_back_blobs_are_lopsided_towards_the_edge(geometry, s0, rng):
    """Fig. 6 backward: a symmetric variant kernel back-projects a point into a blob with more
    mass and a larger second moment on the side towards the FOV edge, a centroid pushed outwards,
    and more spread than the forward blob. Margins seen: mass 0.34 vs 0.28 and second moments
    2-3x, so strict inequalities are robust."""
    op = projector(geometry, VARIANT)
    x, _ = point_source(op, s0, rng)
    back = radial_stats(op, op.adjoint(x[None], 0), s0)
    fwd = radial_stats(op, op.forward(x, 0)[0], s0)
    assert back["mass_edge"] > back["mass_centre"]
    assert back["m2_edge"] > 1.5 * back["m2_centre"]
    assert back["outward"] > 0.1 * fwd["sd"]
    assert back["sd"] > fwd["sd"]


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_asymmetric_variant_blobs_stretch_centre_forward_and_edge_backward(geometry, rng):
    """Fig. 7: asymmetric kernels (wide Gaussian shifted by -sgn(s) sigma, w = 1/2) give forward
    blobs whose centroid moves towards the centre by (1 - w) sigma(s0) (the mean of the double
    Gaussian; 5% for sampling and truncation) and back blobs moved towards the edge; both
    stretches grow with radius."""
    op = projector(geometry, ASYM_VARIANT)
    fwd_shift, back_shift = {}, {}
    for s0 in (60.0, -60.0, 148.0, -148.0):
        x, _ = point_source(op, s0, rng)
        fwd = radial_stats(op, op.forward(x, 0)[0], s0)
        back = radial_stats(op, op.adjoint(x[None], 0), s0)
        assert fwd["outward"] < 0 and fwd["mass_centre"] > fwd["mass_edge"]
        assert -fwd["outward"] == pytest.approx(0.5 * sigma_at(s0), rel=0.05)
        assert back["outward"] > 0 and back["mass_edge"] > back["mass_centre"]
        fwd_shift[s0], back_shift[s0] = -fwd["outward"], back["outward"]
    for sign in (1, -1):
        assert fwd_shift[148.0 * sign] > fwd_shift[60.0 * sign]
        assert back_shift[148.0 * sign] > back_shift[60.0 * sign]


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
@pytest.mark.parametrize("s0", [148.0, -148.0])
def test_asymmetric_invariant_blobs(geometry, s0, rng):
    """Fig. 7 with an invariant 50 mm radial width: only the direction of the asymmetry depends
    on the voxel (sgn s). Far from the axis (|s0| = 148 mm, 3 wide-sigmas from s = 0) every voxel
    that reaches the source has the same kernel, so the forward centroid moves (1 - w) sigma
    inwards and the back centroid the same amount outwards (5%)."""
    op = projector(geometry, ASYM_INVARIANT)
    x, _ = point_source(op, s0, rng)
    sigma = 50.0 / FWHM_PER_SIGMA
    fwd = radial_stats(op, op.forward(x, 0)[0], s0)
    back = radial_stats(op, op.adjoint(x[None], 0), s0)
    assert fwd["outward"] == pytest.approx(-0.5 * sigma, rel=0.05)
    assert back["outward"] == pytest.approx(0.5 * sigma, rel=0.05)


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_invariant_symmetric_forward_equals_back(geometry, volume):
    """Symmetric invariant kernel: forward and back projection are the same operator (Fig. 5;
    docs/physics.rst 1.4). Same weights in the same order up to the flip, so 1e-6 relative."""
    op = projector(geometry, INVARIANT)
    x = volume(op.grid.shape)
    f, b = op.forward(x, 0)[0].astype(np.float64), op.adjoint(x[None], 0).astype(np.float64)
    assert np.linalg.norm(f - b) / np.linalg.norm(f) < 1e-6
