"""DIRECT look-up tables (docs/physics.rst 1.4-1.6): LORmap, mSR (+flip) and mSRval.

Every expected value here is recomputed in NumPy from the formulas of docs/physics.rst (or taken from
its quoted numbers), never from the library: identifiers from ``floor(s / eps) + a0``, widths from
the FWHM models and TOF conversion, the support from an independent lattice enumeration of the
truncation ellipsoid, and kernel values from ``directpet.reference.direct.gaussian_kernel_values``.
"""

from __future__ import annotations

import numpy as np
import pytest

from directpet import ImageGrid
from directpet.direct import DirectLUT, SRKernel, View, build_lut, tof_fwhm_mm
from directpet.reference.direct import gaussian_kernel_values

C_MM_PER_PS = 0.299792458                 # speed of light, mm/ps (docs/physics.rst 0: 299.792458 mm/ns)
FWHM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(2.0))  # 2.35482

GRIDS = [ImageGrid((11, 20, 17), 4.0), ImageGrid((9, 16, 21), (2.0, 4.0, 3.0))]
VIEWS = [View(0.0), View.from_degrees(32.0), View.from_degrees(101.25, 20 / 3),
         View.from_degrees(157.5, -20 / 3), View.from_degrees(90.0)]
VIEW_IDS = ["phi0", "phi32", "phi101_tilt+", "phi157_tilt-", "phi90"]
KERNELS = {
    "invariant": SRKernel.invariant(),
    "variant1": SRKernel.clinical("variant1"),
    "variant2": SRKernel.clinical("variant2"),
    "variant3": SRKernel.clinical("variant3"),
    "linear": SRKernel(tof_fwhm_ps=300.0, radial_fwhm=("linear", 10.0, 30.0), axial_fwhm=7.0),
    "callable_radial": SRKernel(radial_fwhm=lambda s: 6.0 + 0.05 * np.abs(s) + 0.01 * s),
    "asym_variant": SRKernel.clinical("variant2", asymmetric=True),
    "asym_invariant": SRKernel.invariant(fwhm=7.0, asymmetric=True),
    "asym_custom": SRKernel(radial_fwhm="variant1", asymmetric=True, narrow_weight=0.7, wide_shift=3.0),
    "image_kernel": SRKernel.clinical("variant1", image_kernel=True),
    "eps_1mm_k2.5": SRKernel.clinical("variant3", epsilon=1.0, truncation=2.5),
}


# --- independent formulas ----------------------------------------------------------------------
def signed_lor_distance(grid, phi):
    """s = -x sin(phi) + y cos(phi) at the voxel centres (ny, nx), centres (i - (n-1)/2) * v."""
    y = (np.arange(grid.ny) - 0.5 * (grid.ny - 1)) * grid.voxel_size[1]
    x = (np.arange(grid.nx) - 0.5 * (grid.nx - 1)) * grid.voxel_size[2]
    return -x[None, :] * np.sin(phi) + y[:, None] * np.cos(phi)


def expected_identifiers(grid, phi, eps):
    """(lormap, a0, s_centres, ambiguous): floor(s/eps) + a0 with a0 making the minimum 0, the bin
    centres (a - a0 + 1/2) eps of every identifier, and a mask of voxels whose s/eps lies within
    1e-9 of an integer (where rounding may put them in either bin)."""
    q = signed_lor_distance(grid, phi) / eps
    b = np.floor(q).astype(np.int64)
    a0 = -int(b.min())
    centres = (np.arange(b.min(), b.max() + 1) + 0.5) * eps
    ambiguous = np.abs(q - np.round(q)) < 1e-9
    return b + a0, a0, centres, ambiguous


def radial_fwhm(kernel, s, s_max):
    """docs/physics.rst 1.10 / 1.11 radial FWHM models (mm) at signed distance s (mm)."""
    r, a = kernel.radial_fwhm, np.abs(s)
    if isinstance(r, str):
        return {"variant1": 4.8 + 5.2 * a / s_max, "variant2": 5.8 + 6.2 * a / s_max,
                "variant3": np.sqrt(5.8**2 + (0.0236 * a) ** 2)}[r]
    if isinstance(r, tuple):
        return r[1] + (r[2] - r[1]) * np.minimum(a / s_max, 1.0)
    if callable(r):
        return np.asarray(r(s), dtype=float)
    return np.full_like(s, float(r))


def box_variance(kernel, grid, axis):
    """Nearest-voxel deposition blur: variance of the voxel box along a unit axis (x, y, z)."""
    if not kernel.image_kernel:
        return 0.0
    vz, vy, vx = grid.voxel_size
    return (axis[0] ** 2 * vx**2 + axis[1] ** 2 * vy**2 + axis[2] ** 2 * vz**2) / 12.0


def expected_params(grid, view, kernel):
    """Sigmas (tof, axial, radial per identifier), asymmetric weights/shifts and semi-axes."""
    _, _, s_c, _ = expected_identifiers(grid, view.phi, kernel.epsilon)
    x_max = 0.5 * (grid.nx - 1) * grid.voxel_size[2]
    y_max = 0.5 * (grid.ny - 1) * grid.voxel_size[1]
    s_max = kernel.s_max if kernel.s_max is not None else np.hypot(x_max, y_max)
    sig_t = np.sqrt((C_MM_PER_PS * kernel.tof_fwhm_ps / 2 / FWHM_PER_SIGMA) ** 2
                    + box_variance(kernel, grid, view.direction))
    sig_a = np.sqrt((kernel.axial_fwhm / FWHM_PER_SIGMA) ** 2 + box_variance(kernel, grid, view.axial_axis))
    sig_r = np.sqrt((radial_fwhm(kernel, s_c, s_max) / FWHM_PER_SIGMA) ** 2
                    + box_variance(kernel, grid, view.radial_axis))
    k = kernel.truncation
    if kernel.asymmetric:
        delta = sig_r if kernel.wide_shift is None else np.full_like(sig_r, kernel.wide_shift)
        w = np.full_like(sig_r, kernel.narrow_weight)
        shift = -np.sign(s_c) * delta
        semi_r = np.max(k * 2 * sig_r + delta)
    else:
        w, shift, semi_r = None, None, k * sig_r.max()
    return dict(s_centres=s_c, sig_t=sig_t, sig_a=sig_a, sig_r=sig_r, w=w, shift=shift,
                semi=(k * sig_t, semi_r, k * sig_a))


def local_mm(grid, view, offsets):
    """Offsets (dz, dy, dx) in voxels -> (tof, radial, axial) coordinates in mm."""
    vz, vy, vx = grid.voxel_size
    o = np.asarray(offsets, dtype=float)
    d = np.stack([o[:, 2] * vx, o[:, 1] * vy, o[:, 0] * vz], axis=1)
    return d @ view.direction, d @ view.radial_axis, d @ view.axial_axis


def ellipsoid_lattice(grid, view, semi):
    """All lattice offsets of a box that contains the ellipsoid, with their ellipsoid 'radius'
    q = sum (dist_dir / R_dir)^2 (q <= 1 inside)."""
    h = [int(np.floor(max(semi) / v)) + 1 for v in grid.voxel_size]
    axes = [np.arange(-n, n + 1) for n in h]
    dz, dy, dx = (a.ravel() for a in np.meshgrid(*axes, indexing="ij"))
    o = np.stack([dz, dy, dx], axis=1)
    t, r, a = local_mm(grid, view, o)
    q = (t / semi[0]) ** 2 + (r / semi[1]) ** 2 + (a / semi[2]) ** 2
    return o, q


def as_set(offsets):
    return {tuple(int(c) for c in row) for row in np.asarray(offsets)}


# --- LORmap --------------------------------------------------------------------------------------
@pytest.mark.parametrize("grid", GRIDS, ids=["iso", "aniso"])
@pytest.mark.parametrize("view", VIEWS, ids=VIEW_IDS)
@pytest.mark.parametrize("eps", [2.0, 1.3])
def test_lormap_is_floor_s_over_eps_plus_a0(grid, view, eps):
    """LORmap(y, x) = floor(s / eps) + a0 with s the signed LOR distance of the voxel centre
    (docs/physics.rst 1.5-1.6); exact integer equality except on bin edges (|s/eps - n| < 1e-9), where
    float rounding may legitimately choose either side."""
    lut = build_lut(grid, view, SRKernel.invariant(epsilon=eps))
    ids, a0, s_c, amb = expected_identifiers(grid, view.phi, eps)
    assert lut.lormap.shape == (grid.ny, grid.nx) and lut.lormap.dtype == np.int32
    assert lut.a0 == a0
    diff = lut.lormap.astype(np.int64) - ids
    assert np.all(diff[~amb] == 0)
    assert np.all(np.abs(diff[amb]) <= 1)
    assert lut.n_kernels == s_c.size
    np.testing.assert_allclose(lut.s_centres, s_c, rtol=0, atol=1e-12)
    assert lut.lormap.min() == 0 and lut.lormap.max() == lut.n_kernels - 1


def test_tilted_views_share_the_lormap_of_their_azimuth():
    """sigma_lorr depends on s only, which does not depend on theta: one 2D map per azimuth."""
    grid = GRIDS[0]
    k = SRKernel.clinical("variant2")
    flat = build_lut(grid, View.from_degrees(40.5), k)
    for tilt in (-20 / 3, 20 / 3):
        tilted = build_lut(grid, View.from_degrees(40.5, tilt), k)
        np.testing.assert_array_equal(tilted.lormap, flat.lormap)
        np.testing.assert_array_equal(tilted.sigma_radial, flat.sigma_radial)


# --- mSR -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("grid", GRIDS, ids=["iso", "aniso"])
@pytest.mark.parametrize("view", VIEWS, ids=VIEW_IDS)
@pytest.mark.parametrize("name", list(KERNELS))
def test_support_is_point_symmetric_truncation_ellipsoid(grid, view, name):
    """mSR is exactly the lattice inside the ellipsoid sum_dir (dist_dir / (k sigma_dir,max))^2 <= 1
    with the semi-axes of docs/physics.rst 1.5-1.6 (asymmetric: radial 3 * 2 sigma + delta), stored in
    point-symmetric order with flip = N - 1 - i. Lattice points within 1e-9 of the surface are
    not judged (rounding); semi-axes are compared to 1e-9 relative (float64 formulas)."""
    kernel = KERNELS[name]
    lut = build_lut(grid, view, kernel)
    p = expected_params(grid, view, kernel)
    np.testing.assert_allclose(lut.semi_axes, p["semi"], rtol=1e-9)

    o = lut.offsets
    n = lut.n_offsets
    assert o.dtype == np.int32 and o.shape == (n, 3) and lut.flip.dtype == np.int32
    np.testing.assert_array_equal(lut.flip, n - 1 - np.arange(n))
    np.testing.assert_array_equal(o[lut.flip], -o)
    assert len(as_set(o)) == n, "duplicate offsets in mSR"

    t, r, a = local_mm(grid, view, o)
    q_lut = (t / p["semi"][0]) ** 2 + (r / p["semi"][1]) ** 2 + (a / p["semi"][2]) ** 2
    assert q_lut.max() <= 1 + 1e-9
    cand, q = ellipsoid_lattice(grid, view, p["semi"])
    inside = as_set(cand[q < 1 - 1e-9])
    missing = inside - as_set(o)
    assert not missing, f"{len(missing)} lattice points inside the ellipsoid are missing, e.g. {sorted(missing)[:3]}"


@pytest.mark.parametrize("name,expected", [("invariant", 271), ("variant1", 461), ("variant2", 565),
                                           ("stress", 18200)])
def test_support_sizes_match_the_paper(name, expected):
    """docs/physics.rst 1.6 quotes |mSR| at 4 mm voxels: ~271 (400 ps / 5.8 / 5.8), 461 (variant 1),
    565 (variant 2), ~18,200 (900 ps / 100 mm / 10 mm stress kernel). The count depends on the
    view: mSR uses the largest radial width *of the view's identifiers*, and only a diagonal view
    (phi = 45 deg) of the 144 x 144 grid reaches s_max = 404.5 mm; lattice alignment also changes
    the count by a few per cent between azimuths. So: untilted 45 deg view, +-5%."""
    kernel = {"invariant": SRKernel.invariant(), "variant1": SRKernel.clinical("variant1"),
              "variant2": SRKernel.clinical("variant2"), "stress": SRKernel.stress()}[name]
    grid = ImageGrid((48, 144, 144), 4.0)
    lut = build_lut(grid, View.from_degrees(45.0), kernel)
    assert abs(lut.n_offsets - expected) <= 0.05 * expected, lut.n_offsets
    # docs/physics.rst 1.6: about 405 signed identifiers for 144 x 144 voxels of 4 mm with eps = 2 mm.
    assert abs(lut.n_kernels - 405) <= 2


# --- mSRval --------------------------------------------------------------------------------------
@pytest.mark.parametrize("grid", GRIDS, ids=["iso", "aniso"])
@pytest.mark.parametrize("view", VIEWS, ids=VIEW_IDS)
@pytest.mark.parametrize("name", list(KERNELS))
def test_values_match_float64_formula(grid, view, name):
    """mSRval equals the float64 (double-)Gaussian of docs/physics.rst 1.4-1.5 evaluated on mSR at the
    independently computed widths, normalised per identifier. rtol 1e-6: the library computes in
    double and stores float32 (relative rounding 6e-8); atol 1e-12 covers values that underflow."""
    kernel = KERNELS[name]
    lut = build_lut(grid, view, kernel)
    p = expected_params(grid, view, kernel)
    np.testing.assert_allclose(lut.sigma_radial, p["sig_r"], rtol=1e-12)
    ref = gaussian_kernel_values(grid, view, lut.offsets, p["sig_t"], p["sig_a"], p["sig_r"],
                                 narrow_weight=p["w"], wide_shift=p["shift"])
    assert lut.values.dtype == np.float32 and lut.values.shape == (lut.n_kernels, lut.n_offsets)
    np.testing.assert_allclose(lut.values.sum(axis=1), 1.0, rtol=0, atol=1e-5)
    assert np.all(lut.values >= 0)
    np.testing.assert_allclose(lut.values, ref, rtol=1e-6, atol=1e-12)


def test_asymmetric_kernel_is_wider_towards_the_centre():
    """Asymmetric identifiers put their wide Gaussian at -sgn(s) delta (docs/physics.rst 1.5), so the
    radial mean of every kernel row lies on the centre side, at (1 - w) * (-sgn(s) delta) for the
    untruncated profile. mSR is an ellipsoid: away from the TOF centre its radial extent shrinks
    below 3 * 2 sigma + delta and clips the wide component's far tail, which pulls the mean in by a
    few per cent (about 5% here). Hence: correct side, and magnitude within [0.85, 1.02] of the
    untruncated value."""
    grid = ImageGrid((9, 24, 24), 2.0)
    kernel = SRKernel.invariant(fwhm=8.0, asymmetric=True, narrow_weight=0.6)
    view = View.from_degrees(0.0)
    lut = build_lut(grid, view, kernel)
    _, r, _ = local_mm(grid, view, lut.offsets)
    mean_r = lut.values.astype(float) @ r
    sigma = 8.0 / FWHM_PER_SIGMA
    ratio = mean_r / (-np.sign(lut.s_centres) * 0.4 * sigma)
    assert np.all(ratio > 0.85) and np.all(ratio < 1.02), ratio


def test_custom_values_callable_is_used_and_normalised():
    """A ``values`` callable f(tof, radial, axial, s) replaces the Gaussian: each row equals f at
    the mSR offsets' local coordinates and the identifier's centre s, normalised to unit sum.
    The support still comes from the Gaussian widths. rtol 1e-6: float32 storage."""
    grid = GRIDS[1]
    view = View.from_degrees(61.0, 20 / 3)

    def f(t, r, a, s):
        return np.exp(-np.abs(t) / 25.0 - np.abs(r) / (2.0 + 0.1 * np.abs(s)) - 0.5 * (a / 3.0) ** 2)

    base = SRKernel.clinical("variant2")
    custom = SRKernel.clinical("variant2", values=f)
    lut, gauss = build_lut(grid, view, custom), build_lut(grid, view, base)
    np.testing.assert_array_equal(lut.offsets, gauss.offsets)
    t, r, a = local_mm(grid, view, lut.offsets)
    want = f(t[None], r[None], a[None], lut.s_centres[:, None])
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(lut.values, want, rtol=1e-6, atol=1e-12)
    assert not np.allclose(lut.values[0], lut.values[lut.n_kernels // 2])  # rows depend on |s|


def test_with_values_normalises_and_keeps_tables(rng):
    """with_values stores arbitrary positive kernels (normalised per row by default, or verbatim
    with normalize=False) and leaves LORmap / mSR / flip and the original LUT untouched."""
    lut = build_lut(GRIDS[0], VIEWS[1], SRKernel.clinical("variant1"))
    before = lut.values.copy()
    v = rng.uniform(0.1, 1.0, lut.values.shape)
    new = lut.with_values(v)
    assert isinstance(new, DirectLUT) and new.values.dtype == np.float32
    np.testing.assert_allclose(new.values, v / v.sum(axis=1, keepdims=True), rtol=1e-6)
    raw = lut.with_values(v, normalize=False)
    np.testing.assert_allclose(raw.values, v, rtol=1e-7)
    for field in ("lormap", "offsets", "flip"):
        np.testing.assert_array_equal(getattr(new, field), getattr(lut, field))
    np.testing.assert_array_equal(lut.values, before)


def test_kernel_volume_lays_out_values_on_the_lattice():
    """kernel_volume(a)[h + d_i] = values[a][i], zero elsewhere; a symmetric kernel's volume is
    point-symmetric (the premise of the convolution oracle)."""
    lut = build_lut(GRIDS[0], VIEWS[2], SRKernel.clinical("variant3"))
    h = np.array(lut.half_extent)
    for a in (0, lut.n_kernels // 2, lut.n_kernels - 1):
        vol = lut.kernel_volume(a)
        assert vol.shape == tuple(2 * h + 1)
        idx = tuple((lut.offsets + h).T)
        np.testing.assert_array_equal(vol[idx], lut.values[a].astype(np.float64))
        assert vol.sum() == pytest.approx(float(lut.values[a].astype(np.float64).sum()), rel=1e-12)
        np.testing.assert_array_equal(vol, vol[::-1, ::-1, ::-1])


# --- widths and conventions -----------------------------------------------------------------------
@pytest.mark.parametrize("ps,fwhm,sigma", [(300, 44.97, 19.10), (375, 56.21, 23.87), (400, 59.96, 25.46),
                                           (600, 89.94, 38.19), (900, 134.91, 57.29),
                                           (1200, 179.88, 76.39)])
def test_tof_fwhm_conversion_matches_the_paper(ps, fwhm, sigma):
    """Spatial TOF FWHM = c dt / 2, sigma = FWHM / 2.35482 (docs/physics.rst 0 table, two decimals)."""
    assert tof_fwhm_mm(ps) == pytest.approx(fwhm, abs=0.005)
    lut = build_lut(GRIDS[0], View(0.0), SRKernel(tof_fwhm_ps=ps))
    assert lut.semi_axes[0] == pytest.approx(3 * sigma, abs=3 * 0.005)


def test_image_kernel_widens_every_axis():
    """image_kernel adds the voxel box variance v^2/12 along each axis (docs/physics.rst 1.5): every
    semi-axis grows to k sqrt(sigma^2 + v^2/12) (untilted phi = 0: e_t = x, e_r = y, e_a = z), the
    support is a superset and each kernel's second moment along TOF grows."""
    grid = ImageGrid((11, 20, 17), (3.0, 4.0, 5.0))
    view = View(0.0)
    plain = build_lut(grid, view, SRKernel.clinical("variant1"))
    wide = build_lut(grid, view, SRKernel.clinical("variant1", image_kernel=True))
    for plain_semi, wide_semi, v in zip(plain.semi_axes, wide.semi_axes, (5.0, 4.0, 3.0)):
        assert wide_semi == pytest.approx(np.sqrt(plain_semi**2 + 9 * v**2 / 12), rel=1e-12)
    assert as_set(plain.offsets) <= as_set(wide.offsets)
    assert wide.n_offsets > plain.n_offsets
    np.testing.assert_allclose(wide.sigma_radial**2, plain.sigma_radial**2 + 16.0 / 12, rtol=1e-12)

    def tof_var(lut):
        t, _, _ = local_mm(grid, view, lut.offsets)
        return lut.values.astype(float) @ t**2

    assert np.all(tof_var(wide) > tof_var(plain))


def test_s_max_sets_the_edge_width():
    """('linear', c, e) reaches e at |s| = s_max and is clamped beyond (docs/physics.rst 1.11)."""
    grid = ImageGrid((5, 40, 40), 4.0)
    k = SRKernel(radial_fwhm=("linear", 6.0, 12.0), s_max=40.0)
    lut = build_lut(grid, View(0.0), k)
    fwhm = lut.sigma_radial * FWHM_PER_SIGMA
    s = lut.s_centres
    np.testing.assert_allclose(fwhm, np.where(np.abs(s) >= 40.0, 12.0, 6.0 + 6.0 * np.abs(s) / 40.0),
                               rtol=1e-12)
    assert (np.abs(s) > 40.0).any()
