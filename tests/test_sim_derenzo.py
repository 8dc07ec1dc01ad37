"""Rod sources, the micro Derenzo phantom and point-source sets (directpet.sim.derenzo).

Tolerances
----------
* Voxelisation. A rod's disc is sampled at sub-pixels of size ``h_u x h_v``. Every sub-pixel
  whose centre is within ``r`` of the rod's centre counts, so the counted area covers the disc of
  radius ``r - delta`` and lies inside the disc of radius ``r + delta``, ``delta`` the sub-pixel's
  half-diagonal: ``pi (r - delta)^2 <= counted area <= pi (r + delta)^2`` exactly. Along the axis
  the overlap is exact. The activity tests use these bounds (no fitted tolerance).
* Orientation. A rod along x (or y) must be the same array as a rod along z on the permuted grid,
  and a brute-force 3D sub-sampling of ``inside`` agrees exactly when the rod's ends lie on voxel
  faces (then the axial sub-samples are exact too); both compare to 1e-12.
* Sampling moments are compared with 5 standard errors of the mean.
"""

from __future__ import annotations

import numpy as np
import pytest

from directpet.geometry import ImageGrid
from directpet.sim import (AnalyticPhantom, CylinderSource, DerenzoInfo, RodSource, derenzo_phantom,
                           point_sources, radial_point_positions)
from directpet.sim.derenzo import MICRO_DERENZO_DIAMETERS_MM, PLANE_AXES

FIRST_LIKE = ImageGrid((3, 91, 91), (0.8, 0.4, 0.4))        # FIRST voxels, a 36 mm square, 3 slices
_IDX = {"x": 0, "y": 1, "z": 2}


def _delta(grid, axis, ss):
    """Half-diagonal (mm) of a sub-pixel in the plane perpendicular to ``axis``."""
    u, v = (grid.voxel_size[2 - _IDX[a]] / ss for a in PLANE_AXES[axis])
    return 0.5 * np.hypot(u, v)


# --- RodSource -------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", ["x", "y", "z"])
def test_rod_voxelise_matches_brute_force_inside(rng, axis):
    grid = ImageGrid((14, 16, 18), (0.8, 0.5, 0.4))
    ss = 3
    ax = 2 - _IDX[axis]                                     # image axis of the rod axis
    n_ax, v_ax = grid.shape[ax], grid.voxel_size[ax]
    # Ends on voxel faces: faces are at (k - n/2) * v.
    k0 = int(rng.integers(1, n_ax // 2))
    k1 = int(rng.integers(n_ax // 2 + 1, n_ax))
    a0, a1 = (k0 - 0.5 * n_ax) * v_ax, (k1 - 0.5 * n_ax) * v_ax
    centre = rng.uniform(-1.0, 1.0, 3)
    centre[_IDX[axis]] = 0.5 * (a0 + a1)
    rod = RodSource(tuple(centre), rng.uniform(0.6, 2.0), a1 - a0, rng.uniform(0.5, 2.0), axis)
    got = rod.voxelise(grid, ss)

    sub = (np.arange(ss) + 0.5) / ss - 0.5
    zyx = [(grid.centres(a)[:, None] + sub[None, :] * grid.voxel_size[a]).ravel() for a in range(3)]
    z, y, x = np.meshgrid(*zyx, indexing="ij")
    ins = rod.inside(x, y, z).astype(float)
    want = rod.concentration * ins.reshape(grid.nz, ss, grid.ny, ss, grid.nx, ss).mean(axis=(1, 3, 5))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert got.sum() > 0


@pytest.mark.parametrize("axis", ["x", "y", "z"])
def test_rod_activity_within_supersampling_bounds_and_axial_overlap_exact(rng, axis):
    grid = ImageGrid((20, 22, 24), (0.8, 0.4, 0.5))
    ss = int(rng.integers(2, 6))
    r = rng.uniform(0.3, 2.0)
    length = rng.uniform(2.0, 6.0)
    centre = tuple(rng.uniform(-1.5, 1.5, 3))
    c = rng.uniform(0.5, 3.0)
    rod = RodSource(centre, r, length, c, axis)
    img = rod.voxelise(grid, ss)
    vol = float(np.prod(grid.voxel_size))
    d = _delta(grid, axis, ss)
    lo, hi = (c * np.pi * (r + s * d) ** 2 * length for s in (-1, 1))
    assert lo <= img.sum() * vol <= hi
    assert abs(rod.activity - np.pi * r * r * length * c) < 1e-12 * rod.activity
    # Along the axis each slice holds (disc area) x (exact overlap of the slice with the rod).
    ax = 2 - _IDX[axis]
    per_slice = img.sum(axis=tuple(a for a in range(3) if a != ax))
    faces = grid.centres(ax) - 0.5 * grid.voxel_size[ax]
    a0, a1 = centre[_IDX[axis]] - 0.5 * length, centre[_IDX[axis]] + 0.5 * length
    overlap = np.clip(np.minimum(faces + grid.voxel_size[ax], a1) - np.maximum(faces, a0), 0, None)
    full = per_slice[overlap >= grid.voxel_size[ax] - 1e-12][0]
    np.testing.assert_allclose(per_slice, full * overlap / grid.voxel_size[ax], rtol=1e-12, atol=1e-12)
    assert np.count_nonzero((overlap > 0) & (overlap < grid.voxel_size[ax] - 1e-12)) == 2   # two partial end slices


def test_rod_along_x_is_rod_along_z_on_permuted_grid(rng):
    """(u, v) = (y, z) for x rods and (x, y) for z rods: x rods on grid' = z rods on grid, transposed."""
    g = ImageGrid((12, 17, 15), (0.8, 0.4, 0.5))
    gx = ImageGrid((g.ny, g.nx, g.nz), (g.voxel_size[1], g.voxel_size[2], g.voxel_size[0]))
    c = rng.uniform(-1.5, 1.5, 3)
    r, length, conc = rng.uniform(0.5, 2), rng.uniform(2, 5), rng.uniform(0.5, 2)
    along_z = RodSource(tuple(c), r, length, conc, "z").voxelise(g, 4)
    along_x = RodSource((c[2], c[0], c[1]), r, length, conc, "x").voxelise(gx, 4)
    np.testing.assert_allclose(along_x, along_z.transpose(1, 2, 0), rtol=0, atol=1e-12)


@pytest.mark.parametrize("axis", ["x", "y", "z"])
def test_rod_sampling_is_uniform_and_inside(rng, axis):
    c = rng.uniform(-5, 5, 3)
    r, length = rng.uniform(0.5, 3), rng.uniform(2, 10)
    rod = RodSource(tuple(c), r, length, 1.0, axis)
    n = 20000
    pts = rod.sample(n, rng)
    assert pts.shape == (n, 3) and pts.dtype == np.float64
    assert np.all(rod.inside(pts[:, 0], pts[:, 1], pts[:, 2]))
    a = _IDX[axis]
    u, v = (_IDX[p] for p in PLANE_AXES[axis])
    along = pts[:, a] - c[a]
    rho2 = (pts[:, u] - c[u]) ** 2 + (pts[:, v] - c[v]) ** 2
    # Uniform along the axis: mean 0, variance L^2 / 12; uniform disc: E[rho^2] = R^2 / 2,
    # Var[rho^2] = R^4 / 12; in-plane mean 0 with variance R^2 / 4.
    assert abs(along.mean()) < 5 * length / np.sqrt(12 * n)
    assert abs(along.var() / (length**2 / 12) - 1) < 5 * np.sqrt(0.8 / n)
    assert abs(rho2.mean() - r * r / 2) < 5 * r * r / np.sqrt(12 * n)
    for p in (u, v):
        assert abs(pts[:, p].mean() - c[p]) < 5 * 0.5 * r / np.sqrt(n)


def test_analytic_phantom_accepts_rods_hot_and_cold(rng):
    hot = RodSource((1.0, -2.0, 0.5), 3.0, 8.0, 2.0, "x")
    cold = RodSource((1.0, -2.0, 0.5), 1.0, 4.0, -1.0, "x")       # a cold core: total 1.0 there
    ph = AnalyticPhantom([CylinderSource(10.0, 20.0, 0.5), hot, cold])
    grid = ImageGrid((12, 30, 30), (2.0, 0.8, 0.8))
    np.testing.assert_allclose(ph.image(grid), np.maximum(sum(s.voxelise(grid, 4) for s in ph.sources), 0),
                               rtol=1e-6)
    pts = ph.sample(30000, rng)
    in_cold = cold.inside(*pts.T)
    in_hot_only = hot.inside(*pts.T) & ~in_cold
    # Densities: cold core 0.5 + 2 - 1 = 1.5, hot shell 2.5 per mm^3; the point fractions follow.
    expect = np.array([1.5 * cold.volume, 2.5 * (hot.volume - cold.volume)]) / ph.total_activity
    got = np.array([in_cold.mean(), in_hot_only.mean()])
    assert np.all(np.abs(got - expect) < 5 * np.sqrt(expect / pts.shape[0]))


def test_rod_rejects_bad_arguments():
    with pytest.raises(ValueError, match="axis"):
        RodSource((0, 0, 0), 1.0, 2.0, 1.0, "w")
    with pytest.raises(ValueError, match="radius_mm"):
        RodSource((0, 0, 0), -1.0, 2.0)
    with pytest.raises(ValueError, match="length_mm"):
        RodSource((0, 0, 0), 1.0, 0.0)
    with pytest.raises(ValueError, match="centre_mm"):
        RodSource((0, 0), 1.0, 2.0)
    with pytest.raises(ValueError, match="concentration"):
        RodSource((0, 0, 0), 1.0, 2.0, float("nan"))
    with pytest.raises(TypeError, match="sources"):
        AnalyticPhantom([object()])


# --- Derenzo phantom -------------------------------------------------------------------------------

@pytest.fixture
def derenzo(rng):
    centre = (rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), 0.0)
    img, info = derenzo_phantom(FIRST_LIKE, centre_mm=centre, first_sector_deg=rng.uniform(0, 360))
    return img, info


def test_derenzo_geometry_spacing_disc_and_sectors(derenzo):
    _, info = derenzo
    assert isinstance(info, DerenzoInfo)
    assert [g.diameter_mm for g in info.groups] == list(MICRO_DERENZO_DIAMETERS_MM)
    centre_uv = np.array(info.centre_mm[:2])                     # axis z: (u, v) = (x, y)
    for g in info.groups:
        d, c = g.diameter_mm, g.centres_mm - centre_uv
        assert g.spacing_mm == 2 * d and g.n_rods >= 3
        # Spacing 2 d: every rod's nearest neighbour is exactly 2 d away.
        dist = np.hypot(*(c[:, None, :] - c[None, :, :]).transpose(2, 0, 1))
        np.fill_diagonal(dist, np.inf)
        np.testing.assert_allclose(dist.min(axis=1), 2 * d, rtol=1e-12)
        # Wholly inside the disc.
        assert np.all(np.hypot(c[:, 0], c[:, 1]) + d / 2 <= info.radius_mm + 1e-12)
        # Wholly inside the sector: angle within +-30 deg of the bisector and each rod's disc clear
        # of both edge lines (by d / 2, the documented margin).
        b = np.deg2rad(g.sector_centre_deg)
        for edge in (b - np.pi / 6, b + np.pi / 6):
            normal_dist = np.abs(c[:, 0] * np.sin(edge) - c[:, 1] * np.cos(edge))
            assert np.all(normal_dist >= d / 2 + d / 2 - 1e-9)
        rel = np.angle(np.exp(1j * (np.arctan2(c[:, 1], c[:, 0]) - b)))
        assert np.all(np.abs(rel) < np.pi / 6)
    # Sectors 60 degrees apart, in order.
    bis = np.array([g.sector_centre_deg for g in info.groups])
    np.testing.assert_allclose(np.mod(np.diff(bis), 360.0), 60.0)


def test_derenzo_rods_never_overlap(derenzo):
    _, info = derenzo
    c = np.concatenate([g.centres_mm for g in info.groups])
    r = np.concatenate([np.full(g.n_rods, g.diameter_mm / 2) for g in info.groups])
    dist = np.hypot(*(c[:, None, :] - c[None, :, :]).transpose(2, 0, 1))
    gap = dist - r[:, None] - r[None, :]
    np.fill_diagonal(gap, np.inf)
    assert gap.min() > 0.3          # edge to edge; the smallest in-group gap is 0.75 mm


def test_derenzo_activity_and_rods_where_info_says(derenzo):
    img, info = derenzo
    grid = FIRST_LIKE
    vol = float(np.prod(grid.voxel_size))
    delta = _delta(grid, "z", 4)
    z_len = grid.nz * grid.voxel_size[0]                         # rods (20 mm) cover every slice
    x, y = np.meshgrid(grid.centres(2), grid.centres(1))
    claimed = np.zeros(x.shape, bool)
    lo_all = hi_all = 0.0
    for g in info.groups:
        r = g.diameter_mm / 2
        lo, hi = (np.pi * (r + s * delta) ** 2 * z_len for s in (-1, 1))
        lo_all, hi_all = lo_all + lo * g.n_rods, hi_all + hi * g.n_rods
        for cu, cv in g.centres_mm:
            near = np.hypot(x - cu, y - cv) <= r + np.hypot(*grid.voxel_size[1:]) / 2
            claimed |= near
            assert lo <= img[:, near].sum() * vol <= hi          # the rod is there, with its activity
    assert lo_all <= img.sum() * vol <= hi_all
    assert np.all(img[:, ~claimed] == 0)                           # and nothing elsewhere (cold)
    assert img.dtype == np.float32 and img.shape == grid.shape
    assert img.max() == pytest.approx(info.concentration)


def test_derenzo_profile_rows_are_collinear_and_longest(derenzo):
    _, info = derenzo
    for g in info.groups:
        rods = g.centres_mm[g.profile_rods]
        e = g.profile_direction
        off = (rods - g.profile_start_mm) @ np.array([-e[1], e[0]])
        np.testing.assert_allclose(off, 0.0, atol=1e-9)           # on the line
        t = (rods - g.profile_start_mm) @ e
        np.testing.assert_allclose(np.diff(t), g.spacing_mm, rtol=1e-9)   # neighbours, in order
        assert t[0] == pytest.approx(g.diameter_mm) and t[-1] + g.diameter_mm == pytest.approx(
            np.hypot(*(g.profile_end_mm - g.profile_start_mm)))
        # No other rod of the group is on the line, and no line in the row direction holds more.
        others = np.delete(g.centres_mm, g.profile_rods, axis=0)
        assert np.all(np.abs((others - g.profile_start_mm) @ np.array([-e[1], e[0]])) > 1e-6)
        _, counts = np.unique(np.round((g.centres_mm - g.profile_start_mm) @ np.array([-e[1], e[0]]), 6),
                              return_counts=True)
        assert counts.max() == len(g.profile_rods)


def test_derenzo_background_and_axis_x_is_transposed_axis_z(rng):
    g = ImageGrid((9, 91, 91), (0.8, 0.4, 0.4))
    gx = ImageGrid((g.ny, g.nx, g.nz), (g.voxel_size[1], g.voxel_size[2], g.voxel_size[0]))
    c = rng.uniform(-0.5, 0.5, 3)
    conc, bg = rng.uniform(2, 5), rng.uniform(0.2, 1.0)
    kw = dict(radius_mm=16.0, length_mm=5.0, concentration=conc, background=bg)
    img_z, info_z = derenzo_phantom(g, centre_mm=tuple(c), axis="z", **kw)
    img_x, info_x = derenzo_phantom(gx, centre_mm=(c[2], c[0], c[1]), axis="x", **kw)
    np.testing.assert_allclose(img_x, img_z.transpose(1, 2, 0), rtol=1e-6, atol=1e-6)
    for a, b in zip(info_z.groups, info_x.groups):
        np.testing.assert_allclose(a.centres_mm, b.centres_mm)
    np.testing.assert_allclose(info_x.to_xyz(info_x.groups[0].centres_mm)[:, [1, 2, 0]],
                               info_z.to_xyz(info_z.groups[0].centres_mm))
    # Background disc between the rods, rods at the rod concentration, nothing outside the disc.
    x, y = np.meshgrid(g.centres(2), g.centres(1))
    rho = np.hypot(x - c[0], y - c[1])
    mid = img_z[g.nz // 2]
    assert mid.max() == pytest.approx(conc, rel=1e-6)
    assert np.all(mid[rho > 16.0 + 0.3] == 0)
    inner_bg = mid[(rho < 15.0) & (np.abs(mid - bg) < 1e-6)]
    assert inner_bg.size > 100
    total = info_z.analytic.total_activity
    assert total == pytest.approx(bg * np.pi * 16**2 * 5 + (conc - bg) * sum(
        np.pi * (gr.diameter_mm / 2) ** 2 * 5 * gr.n_rods for gr in info_z.groups))


def test_derenzo_rejects_bad_arguments():
    with pytest.raises(ValueError, match="diameters_mm"):
        derenzo_phantom(FIRST_LIKE, (2.0, 1.0))
    with pytest.raises(ValueError, match="diameters_mm"):
        derenzo_phantom(FIRST_LIKE, (2.4, 2.0, 1.7, 1.35, 1.0, -0.75))
    with pytest.raises(ValueError, match="radius_mm"):
        derenzo_phantom(FIRST_LIKE, radius_mm=4.0)
    with pytest.raises(ValueError, match="axis"):
        derenzo_phantom(FIRST_LIKE, axis="r")
    with pytest.raises(ValueError, match="background"):
        derenzo_phantom(FIRST_LIKE, concentration=1.0, background=1.5)
    with pytest.raises(ValueError, match="supersample"):
        derenzo_phantom(FIRST_LIKE, supersample=0)
    with pytest.raises(TypeError, match="grid"):
        derenzo_phantom((3, 91, 91))


# --- point sources ----------------------------------------------------------------------------------

def test_radial_positions_and_point_sources(rng):
    rmax, n, z = rng.uniform(5, 15), int(rng.integers(3, 8)), rng.uniform(-3, 3)
    ang = rng.uniform(0, 360)
    pos = radial_point_positions(rmax, n, z, angle_deg=ang)
    assert pos.shape == (n, 3)
    np.testing.assert_allclose(np.hypot(pos[:, 0], pos[:, 1]), np.linspace(0, rmax, n), atol=1e-12)
    np.testing.assert_allclose(pos[:, 2], z)
    np.testing.assert_allclose(np.rad2deg(np.arctan2(pos[1:, 1], pos[1:, 0])) % 360, ang % 360, atol=1e-9)
    grid = ImageGrid((11, 81, 81), (0.8, 0.4, 0.4))
    acts = rng.uniform(0.5, 2.0, n)
    img, info = point_sources(grid, pos, acts)
    assert img.sum() * np.prod(grid.voxel_size) == pytest.approx(acts.sum(), rel=1e-6)
    iz, iy, ix = grid.index_of(pos[:, 2], pos[:, 1], pos[:, 0])
    np.testing.assert_allclose(img[iz, iy, ix] * np.prod(grid.voxel_size), acts, rtol=1e-6)
    assert info.analytic.total_activity == pytest.approx(acts.sum())
    with pytest.raises(ValueError, match="positions_mm"):
        point_sources(grid, [(0.0, 0.0, 30.0)])
    with pytest.raises(ValueError, match="activity"):
        point_sources(grid, pos, -1.0)
    with pytest.raises(ValueError, match="n"):
        radial_point_positions(10.0, 1)


@pytest.mark.gpu
def test_rod_sampling_with_cupy_matches_numpy_statistics():
    cupy = pytest.importorskip("cupy", reason="CuPy not installed")
    rod = RodSource((0.5, -1.0, 2.0), 1.5, 6.0, 1.0, "x")
    cold = RodSource((0.5, -1.0, 2.0), 0.5, 6.0, -0.5, "x")
    ph = AnalyticPhantom([rod, cold])
    n = 20000
    pts = ph.sample(n, cupy.random.default_rng(7), cupy)
    assert isinstance(pts, cupy.ndarray) and pts.shape == (n, 3)
    p = cupy.asnumpy(pts)
    assert np.all(rod.inside(*p.T))
    # Density 0.5 in the core and 1 outside it: the core holds 0.5 * 1/9 / (1 - 0.5 / 9) of the points.
    frac = 0.5 * (1 / 9) / (1 - 0.5 / 9)
    assert abs(cold.inside(*p.T).mean() - frac) < 5 * np.sqrt(frac / n)
    assert abs(p[:, 0].mean() - 0.5) < 5 * 6.0 / np.sqrt(12 * n)
