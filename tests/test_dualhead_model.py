"""The dual-head analytic system model: lor_response, build_patch_model and the seed reduction.

What is checked, and against what:

* the symmetries of docs/physics.rst 3.3 on h itself (random LOR / voxel triples near their LOR, most of
  them with h > 0): shift invariance, the head swap with the x mirror and the y and z mirrors to
  1e-9 relative (the quadrature is built so that they hold to rounding); the y-z interchange over
  every LOR class to the same 1e-9 (it needs the response compiled without floating-point
  contraction: response.py);
* the x-fill identity the patch builder uses for the planes x > 0, on h directly;
* the patches: random taps of every plane against h of the LOR of every sign that reads them
  (layout.hpp's tap_voxel), the candidate set against h = 0 outside it, the threshold rule, and the
  model's back projection of ones at one voxel against the sum of h over every LOR of the scanner;
* the seeds: seed_lookup through seed_key reproduces h for random (LOR, voxel) pairs, D = 2, 3, 4;
* the quadrature: 4 vs 8 direction nodes per axis and 2 vs 3 voxel points per axis on the central
  LOR within a few percent;
* an independent oracle: a NumPy Monte Carlo of photon pairs (isotropic pair axis, exponential free
  path walked through the crystal boxes, written here from the physics alone) for one voxel and a
  few LORs, within 4.5 standard errors plus the quadrature's 1 %;
* the sum of h over all LORs for one voxel against a second NumPy Monte Carlo of the same physics
  (both photons interact anywhere in their finite head's front layer).

Sanity number (computed once, not a test: 31 s on this 2-core machine): the full-size scanner's
central voxel (v_z, v_y, p) = (143, 207, 59) has sum_LORs h = 0.313 (front layer, angle_samples = 4,
voxel_samples = 2); a NumPy Monte Carlo of the total detection probability (4e4 pairs) gives
0.318 +- 0.0015. That is above the 10-25 % guessed for the front layer: the model counts every
first interaction in the front layer as a detection (no energy window, no escape of Compton-scattered
photons), where the paper's 28 % (both layers) is inside a 250-750 keV window.
"""

import numpy as np
import pytest

from directpet.dualhead import (DualHeadScanner, PatchModel, build_patch_model, build_seed_drf,
                                lor_response, patch_candidate_counts, seed_key, seed_lookup, storage_report)
from directpet.dualhead.response import support_pairs, voxel_sensitivity
from directpet.dualhead.symmetry import seed_candidate_entries

SMALL = DualHeadScanner.small()                    # 8 x 6 crystals, D = 2, 15 planes of 2 mm
SYMMETRY_RTOL = 1e-9


@pytest.fixture(scope="module")
def small_model():
    return build_patch_model(SMALL, backend="cpu", threshold=0.0)


def near_lor_triples(rng, s, n, spread=4):
    """Random LORs on the extended lattice and a voxel close to each LOR's axis (most have h > 0)."""
    D = s.D
    cu = rng.integers(-3, 12, (n, 2))
    cl = cu + rng.integers(-spread, spread + 1, (n, 2))
    p = rng.integers(0, s.n_planes, n)
    t = (0.5 * s.gap_mm + 0.5 * s.depth_mm - s.plane_x_mm(p)) / (s.gap_mm + s.depth_mm)
    vy = np.floor((cu[:, 0] + t * (cl[:, 0] - cu[:, 0]) + 0.5) * D + rng.integers(-1, 2, n)).astype(np.int64)
    vz = np.floor((cu[:, 1] + t * (cl[:, 1] - cu[:, 1]) + 0.5) * D + rng.integers(-1, 2, n)).astype(np.int64)
    return cu, cl, np.stack([vz, vy, p], axis=1)


def max_rel(a, b):
    scale = np.maximum(np.abs(a), np.abs(b))
    return float(np.max(np.where(scale > 0, np.abs(a - b) / np.where(scale > 0, scale, 1.0), 0.0)))


# --- symmetries of h -----------------------------------------------------------------------------------

@pytest.fixture
def triples(rng):
    cu, cl, vox = near_lor_triples(rng, SMALL, 300)
    h = lor_response(SMALL, cu, cl, vox)
    assert np.count_nonzero(h > 0) > 150           # the identities are checked on responding pairs
    return cu, cl, vox, h


def test_shift_invariance(triples, rng):
    cu, cl, vox, h = triples
    m = rng.integers(-20, 20, cu.shape)
    D = SMALL.D
    moved = vox + np.stack([D * m[:, 1], D * m[:, 0], 0 * m[:, 0]], axis=1)
    assert max_rel(h, lor_response(SMALL, cu + m, cl + m, moved)) <= SYMMETRY_RTOL


def test_head_swap_with_x_mirror(triples):
    cu, cl, vox, h = triples
    mirrored = vox.copy()
    mirrored[:, 2] = SMALL.n_planes - 1 - vox[:, 2]
    assert max_rel(h, lor_response(SMALL, cl, cu, mirrored)) <= SYMMETRY_RTOL


@pytest.mark.parametrize("axis", [0, 1])
def test_y_and_z_mirrors(triples, axis):
    """c -> -c mirrors the crystal lattice about crystal 0's centre; the voxels of cell 0 then map
    v -> D - 1 - v."""
    cu, cl, vox, h = triples
    cu2, cl2, vox2 = cu.copy(), cl.copy(), vox.copy()
    cu2[:, axis], cl2[:, axis] = -cu[:, axis], -cl[:, axis]
    vcol = 1 - axis                                 # voxel is (v_z, v_y, p)
    vox2[:, vcol] = SMALL.D - 1 - vox[:, vcol]
    assert max_rel(h, lor_response(SMALL, cu2, cl2, vox2)) <= SYMMETRY_RTOL


def test_yz_interchange_holds_to_rounding():
    """Every class's LOR (0, 0) -> (a_y, a_z) against (0, 0) -> (a_z, a_y) over the voxels of the
    cells between and around them (its whole support, every plane), y and z of the voxel swapped:
    within SYMMETRY_RTOL of the LOR's largest value (with FMA contraction it was 2.5e-3 here)."""
    s, D = SMALL, SMALL.D
    worst = 0.0
    for ay in range(s.n_y):
        for az in range(s.n_z):
            dy, dz, p = np.meshgrid(np.arange(-D, D * (ay + 2)), np.arange(-D, D * (az + 2)), np.arange(s.n_planes),
                                    indexing="ij")
            vox = np.stack([dz.ravel(), dy.ravel(), p.ravel()], axis=1)
            h = lor_response(s, (0, 0), (ay, az), vox)
            swapped = lor_response(s, (0, 0), (az, ay), vox[:, [1, 0, 2]])
            assert np.count_nonzero(h > 0) > 0
            worst = max(worst, float(np.abs(h - swapped).max() / h.max()))
    assert worst <= SYMMETRY_RTOL


def test_x_fill_identity(rng):
    """patch(k, P-1-p)(dy, dz) = patch(k, p)(D-1 + D a_y - dy, D-1 + D a_z - dz), on h directly."""
    s = DualHeadScanner.small(voxels_per_crystal=3)
    D, P = s.D, s.n_planes
    n = 200
    ay, az = rng.integers(0, 5, n), rng.integers(0, 4, n)
    dy, dz = rng.integers(0, D * (ay + 1)), rng.integers(0, D * (az + 1))
    p = rng.integers(0, P, n)
    zero = np.zeros((n, 2), np.int64)
    cl = np.stack([ay, az], axis=1)
    left = lor_response(s, zero, cl, np.stack([dz, dy, P - 1 - p], axis=1))
    right = lor_response(s, zero, cl, np.stack([D - 1 + D * az - dz, D - 1 + D * ay - dy, p], axis=1))
    assert np.count_nonzero(left > 0) > n // 4
    assert max_rel(left, right) <= SYMMETRY_RTOL


# --- patches --------------------------------------------------------------------------------------------

def test_patches_equal_lor_response_for_every_sign(small_model, rng):
    """A random tap of a random (class, plane), read by a random LOR of every sign of the class at
    the voxel layout.hpp's tap_voxel gives, equals h of that LOR and voxel."""
    s, m = SMALL, small_model
    D = s.D
    rows = np.flatnonzero(np.diff(m.tap_start) > 0)
    picked = rng.choice(rows, 60, replace=False)
    cu_all, cl_all, vox_all, want = [], [], [], []
    for r in picked:
        k, p = divmod(int(r), s.n_planes)
        dy, dz, w = m.patch(k, p)
        i = rng.integers(dy.size)
        ay, az = (int(v) for v in s.class_of(k))
        for sy, sz in s.class_signs(k):
            cuy = int(rng.integers(0, s.n_y - ay)) + (ay if sy < 0 else 0)
            cuz = int(rng.integers(0, s.n_z - az)) + (az if sz < 0 else 0)
            vy = D * cuy + (dy[i] if sy > 0 else D - 1 - dy[i])
            vz = D * cuz + (dz[i] if sz > 0 else D - 1 - dz[i])
            cu_all.append((cuy, cuz))
            cl_all.append((cuy + sy * ay, cuz + sz * az))
            vox_all.append((vz, vy, p))
            want.append(w[i])
    h = lor_response(s, cu_all, cl_all, vox_all)
    np.testing.assert_allclose(np.asarray(want, np.float64), h, rtol=1e-6)


def test_candidates_hold_the_whole_support(small_model):
    """With threshold 0 a (class, plane) has a tap wherever h > 0 in the crystal cells between c_u
    and c_l (and the cells beyond them respond nowhere): the candidate test is the exact support."""
    s = SMALL
    D = s.D
    for k in (0, 1, s.n_z, s.n_z + 1, 3 * s.n_z + 2, s.n_classes - 1):
        ay, az = (int(v) for v in s.class_of(k))
        dy, dz, p = np.meshgrid(np.arange(-D, D * (ay + 2)), np.arange(-D, D * (az + 2)), np.arange(s.n_planes),
                                indexing="ij")
        vox = np.stack([dz.ravel(), dy.ravel(), p.ravel()], axis=1)
        h = lor_response(s, (0, 0), (ay, az), vox).astype(np.float32)
        tapped = np.zeros(h.shape, bool)
        for pp in range(s.n_planes):
            ty, tz, _ = small_model.patch(k, pp)
            idx = ((ty.astype(int) + D) * (D * (az + 3)) + (tz.astype(int) + D)) * s.n_planes + pp
            tapped[idx] = True
        np.testing.assert_array_equal(tapped, h > 0)


def test_threshold_drops_taps_below_the_class_maximum(small_model):
    thr = 0.05
    cut = build_patch_model(SMALL, backend="cpu", threshold=thr)
    s = SMALL
    for k in range(s.n_classes):
        full = [small_model.patch(k, p) for p in range(s.n_planes)]
        wmax = max(float(w.max()) for _, _, w in full if w.size)
        for p in range(s.n_planes):
            dy, dz, w = full[p]
            keep = w.astype(np.float64) >= thr * wmax
            cy, cz, cw = cut.patch(k, p)
            np.testing.assert_array_equal(cy, dy[keep])
            np.testing.assert_array_equal(cz, dz[keep])
            np.testing.assert_array_equal(cw, w[keep])
    assert cut.n_taps < small_model.n_taps
    assert cut.meta["dropped_below_threshold"] > 0


def test_model_sensitivity_equals_the_sum_over_lors(small_model):
    """Back projection of ones at one voxel, from the patches and the class layout alone (NumPy),
    equals the sum of h over every LOR of the scanner (voxel_sensitivity)."""
    s, m = SMALL, small_model
    D = s.D
    vz, vy, p = 5, 9, 4
    total = 0.0
    for k in range(s.n_classes):
        ay, az = (int(v) for v in s.class_of(k))
        dy, dz, w = m.patch(k, p)
        dy, dz, w = dy.astype(np.int64), dz.astype(np.int64), w.astype(np.float64)
        for sy, sz in s.class_signs(k):
            oy = dy if sy > 0 else D - 1 - dy
            oz = dz if sz > 0 else D - 1 - dz
            cuy, ry = np.divmod(vy - oy, D)
            cuz, rz = np.divmod(vz - oz, D)
            lo_y, lo_z = (ay if sy < 0 else 0), (az if sz < 0 else 0)
            ok = (ry == 0) & (rz == 0) & (cuy >= lo_y) & (cuy < lo_y + s.n_y - ay) & (cuz >= lo_z) & \
                 (cuz < lo_z + s.n_z - az)
            total += w[ok].sum()
    assert total == pytest.approx(voxel_sensitivity(s, (vz, vy, p)), rel=1e-6)


def test_save_load_round_trip(small_model, tmp_path):
    small_model.save(tmp_path / "m.npz")
    back = PatchModel.load(tmp_path / "m.npz")
    assert back.scanner == SMALL
    for name in ("tap_start", "tap_dy", "tap_dz", "tap_w"):
        np.testing.assert_array_equal(getattr(back, name), getattr(small_model, name))
    assert back.meta["angle_samples"] == 4 and back.meta["threshold"] == 0.0
    assert back.meta["candidates"] == small_model.meta["candidates"] > 0


def test_meta_and_candidate_counts(small_model):
    ev, al = patch_candidate_counts(SMALL)
    assert small_model.meta["evaluated"] == ev.sum() and small_model.meta["candidates"] == al.sum()
    assert np.all(ev > 0) and np.all(al < 2 * ev)
    assert small_model.meta["backend"] == "cpu" and small_model.meta["seconds"] > 0


def test_classes_subset_builds_only_those(small_model):
    part = build_patch_model(SMALL, backend="cpu", threshold=0.0, classes=[3, 17])
    per = part.taps_per_row().sum(axis=1)
    assert set(np.flatnonzero(per)) == {3, 17}
    for k in (3, 17):
        for p in (0, SMALL.n_planes // 2, SMALL.n_planes - 1):
            for a, b in zip(part.patch(k, p), small_model.patch(k, p)):
                np.testing.assert_array_equal(a, b)


# --- seeds ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("D", [2, 3, 4])
def test_seed_lookup_reproduces_h(D, rng):
    s = DualHeadScanner.small(n_y=6, n_z=5, voxels_per_crystal=D, n_planes=7, plane_mm=2.0)
    seeds = build_seed_drf(s)
    m = (D + 1) // 2
    assert len(seeds.planes) == 4 and set(np.unique(seeds.seed)) == set(range(m * (m + 1) // 2))
    n = 400
    cu = np.stack([rng.integers(0, s.n_y, n), rng.integers(0, s.n_z, n)], axis=1)
    cl = np.clip(cu + rng.integers(-2, 3, (n, 2)), 0, [s.n_y - 1, s.n_z - 1])
    vox = np.stack([rng.integers(0, s.n_z * D, n), rng.integers(0, s.n_y * D, n), rng.integers(0, s.n_planes, n)],
                   axis=1)
    # half of the voxels on their LOR so that most lookups hit stored entries
    t = rng.uniform(0.3, 0.7, n // 2)
    vox[: n // 2, 1] = np.floor((cu[: n // 2, 0] + t * (cl[: n // 2, 0] - cu[: n // 2, 0]) + 0.5) * D)
    vox[: n // 2, 0] = np.floor((cu[: n // 2, 1] + t * (cl[: n // 2, 1] - cu[: n // 2, 1]) + 0.5) * D)
    h = lor_response(s, cu, cl, vox)
    assert np.count_nonzero(h > 0) > n // 4
    # the seeds fold through symmetries that hold to rounding: equal up to the seeds' float32 storage
    np.testing.assert_allclose(seed_lookup(seeds, cu, cl, vox), h, rtol=1e-6, atol=SYMMETRY_RTOL * h.max())


def test_seed_key_folds_to_the_seed_domain(rng):
    s = DualHeadScanner.small(voxels_per_crystal=4)
    n = 500
    cu = np.stack([rng.integers(0, s.n_y, n), rng.integers(0, s.n_z, n)], axis=1)
    cl = np.stack([rng.integers(0, s.n_y, n), rng.integers(0, s.n_z, n)], axis=1)
    vox = np.stack([rng.integers(0, s.n_z * 4, n), rng.integers(0, s.n_y * 4, n), rng.integers(0, s.n_planes, n)],
                   axis=1)
    folded, seed, o_u, o_l = seed_key(s, cu, cl, vox)
    assert folded.min() >= 0 and folded.max() <= (s.n_planes - 1) // 2
    assert set(np.unique(seed)) <= {0, 1, 2}
    lim = max(s.n_y, s.n_z) - 1
    assert np.abs(o_u).max() <= lim and np.abs(o_l).max() <= lim
    # the key's seed voxel responds like the original pair
    a = np.where(seed == 2, 1, 0)
    b = np.where(seed == 0, 0, 1)
    seed_vox = np.stack([b, a, (s.n_planes - 1) // 2 + folded], axis=1)
    h = lor_response(s, cu, cl, vox)
    assert np.count_nonzero(h > 0) > 0
    # the key applies shifts, mirrors and the y-z interchange, which hold to rounding
    np.testing.assert_allclose(lor_response(s, o_u, o_l, seed_vox), h, rtol=SYMMETRY_RTOL,
                               atol=SYMMETRY_RTOL * h.max())


def test_storage_report(small_model):
    seeds = build_seed_drf(SMALL, planes=[0, 3])
    rep = storage_report(small_model, seeds)
    s = SMALL
    n_vox = int(np.prod(s.grid.shape))
    assert rep["unreduced_entries"] == s.n_lors * n_vox
    assert rep["paper_unreduced_entries"] == (2 * s.n_crystals) ** 2 * n_vox
    assert rep["full_matrix_nonzeros"] == small_model.nonzeros() < rep["unreduced_entries"]
    assert rep["patch_taps"] == small_model.n_taps and rep["patch_bytes"] == small_model.nbytes
    assert rep["seed_voxels"] == 8 * 1
    assert rep["seed_entries"] == seeds.n_entries and rep["seed_bytes"] == 16 * seeds.n_entries
    assert seeds.n_entries <= seed_candidate_entries(s, planes=[0, 3]) <= rep["seed_candidate_entries"]
    with pytest.raises(ValueError, match="voxel"):
        seed_lookup(seeds, (1, 1), (1, 1), (2, 2, 8))          # folded plane 1 was not built


# --- quadrature and oracles -----------------------------------------------------------------------------

def test_quadrature_converges_on_the_central_lor():
    s = DualHeadScanner()                            # the paper's geometry (0.6 x 0.6 x 0.5 mm voxels)
    c = (51, 35)
    vox = (4 * 35 + 1, 4 * 51 + 1, 59)
    h = {(na, nv): float(lor_response(s, c, c, vox, angle_samples=na, voxel_samples=nv)[()])
         for na, nv in ((4, 2), (8, 2), (4, 3))}
    assert h[(4, 2)] > 0
    assert h[(8, 2)] == pytest.approx(h[(4, 2)], rel=0.03)
    assert h[(4, 3)] == pytest.approx(h[(4, 2)], rel=0.03)


def test_quadrature_converges_on_oblique_lors():
    """The turned slope frame keeps oblique LORs (long, thin shadows) as accurate as the normal ones."""
    s = DualHeadScanner()
    cl = np.array([(40, 30), (103, 71), (80, 10)])
    vox = np.array([(4 * 15 + 1, 4 * 20 + 2, 59), (4 * 35 + 2, 4 * 51 + 2, 59), (4 * 5 + 1, 4 * 40 + 2, 59)])
    h4 = lor_response(s, np.zeros((3, 2), int), cl, vox)
    h16 = lor_response(s, np.zeros((3, 2), int), cl, vox, angle_samples=16)
    assert np.all(h16 > 0)
    np.testing.assert_allclose(h4, h16, rtol=0.05)


def _first_interaction(s, ry, rz, dist0, ty, tz, rng):
    """Crystal (k_y, k_z) on the extended lattice where a photon first interacts in its head's front
    layer, or (-1e9, -1e9). The photon enters the front face dist0 (mm, along x) from its start and
    moves (ty, tz) sideways per mm of depth; its free path in crystal is exponential (mean 1/mu),
    consumed box by box in the order the ray enters them (a 3 x 3 window around the entry crystal
    holds the whole path while tan * depth < pitch / 2 + crystal / 2, asserted by the caller)."""
    d, hw, pitch = s.depth_mm, 0.5 * s.crystal_mm, s.pitch_mm
    y0, z0 = ry + ty * dist0, rz + tz * dist0
    oy, oz = 0.5 * (s.n_y - 1), 0.5 * (s.n_z - 1)
    off = np.arange(-1, 2)
    ky = (np.round(y0 / pitch + oy)[:, None, None] + off[None, :, None] + 0 * off[None, None, :]).reshape(y0.size, 9)
    kz = (np.round(z0 / pitch + oz)[:, None, None] + 0 * off[None, :, None] + off[None, None, :]).reshape(y0.size, 9)

    def inside(centre, q0, t):                      # depth interval inside a crystal's range on one axis
        a, b = (centre - hw - q0[:, None]) / t[:, None], (centre + hw - q0[:, None]) / t[:, None]
        return np.minimum(a, b), np.maximum(a, b)

    ya, yb = inside((ky - oy) * pitch, y0, ty)
    za, zb = inside((kz - oz) * pitch, z0, tz)
    lo, hi = np.maximum(np.maximum(ya, za), 0.0), np.minimum(np.minimum(yb, zb), d)
    path = np.maximum(hi - lo, 0.0) * np.sqrt(1 + ty ** 2 + tz ** 2)[:, None]
    order = np.argsort(np.where(path > 0, lo, np.inf), axis=1)
    cum = np.cumsum(np.take_along_axis(path, order, 1), axis=1)
    free = rng.exponential(1.0 / s.mu_per_mm, y0.size)
    j = np.argmax(cum >= free[:, None], axis=1)
    rows = np.arange(y0.size)
    hit = cum[rows, j] >= free
    return (np.where(hit, np.take_along_axis(ky, order, 1)[rows, j], -1e9),
            np.where(hit, np.take_along_axis(kz, order, 1)[rows, j], -1e9))


def monte_carlo_h(s, voxel, lors, n, rng, chunk=100_000):
    """Estimate h(c_u, c_l; voxel) for each LOR and its standard error: decays uniform in the voxel
    (absolute coordinates of geometry.py), the upward photon isotropic within the slope square
    |s_y|, |s_z| <= S (uniform slopes accepted with probability (1 + s^2)^{-3/2}; the square holds
    every direction that reaches the LORs' crystals, and its share of the hemisphere is the solid
    angle of a rectangle, 4 atan(S^2 / sqrt(1 + 2 S^2)) / (2 pi)), the other photon opposite."""
    vz, vy, p = voxel
    vs, g, hw = s.voxel_mm, 0.5 * s.gap_mm, 0.5 * s.crystal_mm
    yc, zc = (vy - 0.5 * (s.n_y * s.D - 1)) * vs, (vz - 0.5 * (s.n_z * s.D - 1)) * vs
    xc = float(s.plane_x_mm(p))
    near = g - abs(xc) - 0.5 * s.plane_mm
    S = 0.0
    for c in [c for lor in lors for c in lor]:
        Y, Z = s.crystal_y_mm(c[0]), s.crystal_z_mm(c[1])
        S = max(S, (abs(Y - yc) + hw + 0.5 * vs) / near, (abs(Z - zc) + hw + 0.5 * vs) / near)
    S *= 1.02
    assert S * s.depth_mm < 0.5 * s.pitch_mm + hw
    share = 4 * np.arctan(S * S / np.sqrt(1 + 2 * S * S)) / (2 * np.pi)
    hits, accepted = np.zeros(len(lors)), 0
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        sy, sz = rng.uniform(-S, S, m), rng.uniform(-S, S, m)
        keep = rng.uniform(0, 1, m) < (1 + sy ** 2 + sz ** 2) ** -1.5
        sy, sz = sy[keep], sz[keep]
        m = sy.size
        accepted += m
        ry, rz = yc + rng.uniform(-0.5, 0.5, m) * vs, zc + rng.uniform(-0.5, 0.5, m) * vs
        rx = xc + rng.uniform(-0.5, 0.5, m) * s.plane_mm
        uy, uz = _first_interaction(s, ry, rz, g - rx, sy, sz, rng)
        ly, lz = _first_interaction(s, ry, rz, g + rx, -sy, -sz, rng)
        for i, (cu, cl) in enumerate(lors):
            hits[i] += np.count_nonzero((uy == cu[0]) & (uz == cu[1]) & (ly == cl[0]) & (lz == cl[1]))
    frac = hits / accepted
    return share * frac, share * np.sqrt(frac * (1 - frac) / accepted)


def test_monte_carlo_oracle():
    """1e6 photon pairs (~5 s): agreement within 4.5 standard errors (~2 % each) plus 1 % for the
    quadrature, evaluated well converged (the small scanner's 2 mm planes need more voxel points)."""
    s = SMALL
    voxel = (2 * 2 + 1, 3 * 2 + 0, 7)              # cell (3, 2), sub-position (0, 1), central plane
    lors = [((3, 2), (3, 2)), ((2, 2), (3, 2)), ((3, 3), (3, 1)), ((4, 3), (2, 1)), ((3, 2), (3, 3)),
            ((3, 2), (4, 2))]
    h_mc, se = monte_carlo_h(s, voxel, lors, 1_000_000, np.random.default_rng(20261122))
    h = lor_response(s, [c for c, _ in lors], [c for _, c in lors], voxel, angle_samples=16, voxel_samples=10)
    assert h[-1] == 0 and h_mc[-1] == 0              # no line through the voxel joins these two
    assert np.all(h[:-1] > 0)
    assert np.all(np.abs(h - h_mc) <= 4.5 * se + 0.01 * h)


def test_sum_over_lors_matches_a_monte_carlo_of_the_total_detection():
    """sum_LORs h for one voxel = P(both photons interact in their finite head's front layer),
    estimated here by sampling the pair axis and integrating the crystal material along each photon's
    path by dense point sampling (no crystal walk)."""
    s = DualHeadScanner.small(n_y=24, n_z=16)
    voxel = (16, 24, 7)
    total = voxel_sensitivity(s, voxel)
    rng = np.random.default_rng(11)
    n, K = 20_000, 400
    vz, vy, p = voxel
    vs, g, d, hw, pitch = s.voxel_mm, 0.5 * s.gap_mm, s.depth_mm, 0.5 * s.crystal_mm, s.pitch_mm
    ry = (vy - 0.5 * (s.n_y * s.D - 1)) * vs + rng.uniform(-0.5, 0.5, n) * vs
    rz = (vz - 0.5 * (s.n_z * s.D - 1)) * vs + rng.uniform(-0.5, 0.5, n) * vs
    rx = float(s.plane_x_mm(p)) + rng.uniform(-0.5, 0.5, n) * s.plane_mm
    cos_t = rng.uniform(0, 1, n)                     # isotropic upward direction
    phi = rng.uniform(0, 2 * np.pi, n)
    tan_t = np.sqrt(1 - cos_t ** 2) / np.maximum(cos_t, 1e-12)
    ty, tz = tan_t * np.cos(phi), tan_t * np.sin(phi)
    u = (np.arange(K) + 0.5) / K * d

    def material(dist0, sign, sl):
        along = dist0[sl, None] + u[None, :]
        cy = (ry[sl, None] + sign * ty[sl, None] * along) / pitch + 0.5 * (s.n_y - 1)
        cz = (rz[sl, None] + sign * tz[sl, None] * along) / pitch + 0.5 * (s.n_z - 1)
        ky, kz = np.round(cy), np.round(cz)
        inside = ((np.abs(cy - ky) * pitch <= hw) & (np.abs(cz - kz) * pitch <= hw) & (ky >= 0) & (ky < s.n_y)
                  & (kz >= 0) & (kz < s.n_z))
        return inside.mean(axis=1) * d * np.sqrt(1 + ty[sl] ** 2 + tz[sl] ** 2)

    prob = np.empty(n)
    for start in range(0, n, 1000):
        sl = slice(start, start + 1000)
        pu = -np.expm1(-s.mu_per_mm * material(g - rx, 1, sl))
        pl = -np.expm1(-s.mu_per_mm * material(g + rx, -1, sl))
        prob[sl] = pu * pl
    mc, se = prob.mean(), prob.std() / np.sqrt(n)
    assert 0.05 < total < 0.5
    print(f"sum of h {total:.5f}, Monte Carlo {mc:.5f} +- {se:.5f}")
    assert abs(total - mc) <= 4.5 * se + 0.02 * total


# --- bad input ---------------------------------------------------------------------------------------------

def test_bad_input_is_rejected_naming_the_argument():
    s = SMALL
    with pytest.raises(TypeError, match="scanner"):
        lor_response("scanner", (0, 0), (0, 0), (0, 0, 0))
    with pytest.raises(TypeError, match="c_u"):
        lor_response(s, (0.5, 0), (0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="c_l"):
        lor_response(s, (0, 0), (0, 0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="voxel"):
        lor_response(s, (0, 0), (0, 0), (0, 0, s.n_planes))
    with pytest.raises(ValueError, match="c_u, c_l, voxel"):
        lor_response(s, np.zeros((3, 2), int), np.zeros((4, 2), int), (0, 0, 0))
    with pytest.raises(ValueError, match="angle_samples"):
        lor_response(s, (0, 0), (0, 0), (0, 0, 0), angle_samples=0)
    with pytest.raises(ValueError, match="voxel_samples"):
        lor_response(s, (0, 0), (0, 0), (0, 0, 0), voxel_samples=65)
    with pytest.raises(ValueError, match="backend"):
        lor_response(s, (0, 0), (0, 0), (0, 0, 0), backend="gpu")
    with pytest.raises(ValueError, match="threshold"):
        build_patch_model(s, threshold=1.5, backend="cpu")
    with pytest.raises(TypeError, match="threshold"):
        build_patch_model(s, threshold="big", backend="cpu")
    with pytest.raises(ValueError, match="classes"):
        build_patch_model(s, classes=[s.n_classes], backend="cpu")
    with pytest.raises(TypeError, match="progress"):
        build_patch_model(s, classes=[0], backend="cpu", progress="yes")
    with pytest.raises(TypeError, match="seeds"):
        seed_lookup(None, (0, 0), (0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="planes"):
        build_seed_drf(s, planes=[99])
    with pytest.raises(TypeError, match="model"):
        storage_report("model")


def test_support_pairs_cover_every_responding_lor(rng):
    """support_pairs' bounding boxes hold every LOR with h > 0 for a voxel (checked by brute force
    over a window of LORs)."""
    s = SMALL
    a, b, p = 1, 0, 3
    rng_all = ((-7, 7), (-7, 7))
    o_u, o_l = support_pairs(s, a, b, p, rng_all, rng_all)
    listed = {tuple(x) for x in np.concatenate([o_u, o_l], axis=1)}
    g = np.arange(-3, 4)
    U = np.stack(np.meshgrid(g, g, g, g, indexing="ij"), -1).reshape(-1, 4)
    h = lor_response(s, U[:, :2], U[:, 2:], (b, a, p))
    responding = {tuple(x) for x in U[h > 0]}
    assert responding and responding <= listed


# --- GPU ------------------------------------------------------------------------------------------------------

# CPU and GPU evaluate the same rule in double precision with different exp / expm1 and different
# fused multiply-adds: h agrees to ~1e-15 relative, except where a rounding difference moves one of
# the rule's decisions (a cut exactly at an interval's end, a node count ceil(n_a w / total) exactly at
# an integer); such a query differs by the quadrature's own error (a few 1e-3). Bound: 99 % of the
# queries within 1e-9, all within 5 % of the class's largest value.
@pytest.mark.gpu
def test_gpu_response_matches_cpu(rng):
    s = DualHeadScanner()
    cu, cl, vox = near_lor_triples(rng, s, 2000, spread=40)
    cpu = lor_response(s, cu, cl, vox, backend="cpu")
    gpu = lor_response(s, cu, cl, vox, backend="cuda")
    assert np.count_nonzero(cpu > 0) > 500
    rel = np.abs(gpu - cpu) / np.maximum(np.abs(cpu), 1e-300)
    assert np.quantile(rel[cpu > 0], 0.99) <= 1e-9
    assert np.max(np.abs(gpu - cpu)) <= 0.05 * cpu.max()


@pytest.mark.gpu
def test_gpu_patch_model_matches_cpu(small_model):
    gpu = build_patch_model(SMALL, backend="cuda", threshold=0.0)
    assert gpu.meta["backend"] == "cuda"

    def dense(m):
        row = np.repeat(np.arange(m.tap_start.size - 1), np.diff(m.tap_start))
        return dict(zip(zip(row.tolist(), m.tap_dy.tolist(), m.tap_dz.tolist()), m.tap_w.astype(np.float64)))

    a, b = dense(small_model), dense(gpu)
    keys = sorted(set(a) | set(b))
    wa = np.array([a.get(k, 0.0) for k in keys])
    wb = np.array([b.get(k, 0.0) for k in keys])
    rel = np.abs(wa - wb) / np.maximum(wa, 1e-30)
    assert np.quantile(rel, 0.99) <= 1e-6            # float32 taps
    assert np.max(np.abs(wa - wb)) <= 0.05 * wa.max()
