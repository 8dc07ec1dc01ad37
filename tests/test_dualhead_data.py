"""Dual-head data side: the event Monte Carlo (simulate, trace_events), DualHeadData / model_consistent_data,
orientation subsets and DualHeadSubsets.

The Monte Carlo is the honest data source of the family (no system model inside), so it is checked
against models written here in NumPy from the physics and the geometry alone:

* an independent expected-value model (:func:`ray_model`): rays from the source voxel (uniform point
  plus the Gaussian positron range), photon 1 uniform over a band of directions chosen here (wider than
  anything that can reach the heads, independent of the simulation's own band), photon 2 opposite,
  turned by an exact Gaussian rotation; each photon's probability to be first absorbed in each crystal
  from ray-box intersections with every crystal of its head, ``exp(-mu l_before) (1 - exp(-mu l_c))``.
  Per decay, LOR (c_u, c_l) gets ``band share x mean over rays of P_u(c_u) P_l(c_l)``: the per-LOR
  histogram must pass a chi-square test (the model's own sampling variance included), the detected
  fraction (sensitivity) a z-test, and a width statistic of the LOR distribution must follow the model
  when the positron range or the acollinearity are switched on -- and grow;
* traced photons, one by one: the crystal path along each photon's line up to its interaction point
  (from the same ray-box code) equals the exponential path it drew, the interaction lies inside the
  detecting crystal, photons that passed crossed less crystal than they drew, missed ones none;
* near-normal photons that stay inside one crystal over the whole depth: detected with probability
  ``1 - exp(-mu L)`` and at depths following the exponential truncated to the depth (KS test);
* positron range (Gaussian per axis) and acollinearity (``tan`` of the deviation Rayleigh) from traces.

Statistical bounds are 4.5 standard errors, chi-square / KS bounds at p = 1e-4: a correct
implementation fails one check in 10^4 seeds (the seeds are fixed). The GPU test (``gpu`` marker)
requires CUDA and CPU histograms to be identical: both run the same decays with bit-reproducible
arithmetic.
"""

import numpy as np
import pytest
from scipy import sparse, stats

import directpet
from directpet import _core
from directpet.dualhead import (DEFAULT_SUBSET_SEED, DualHeadData, DualHeadScanner, DualHeadSubsets,
                                MonteCarloStats, model_consistent_data, orientation_subsets, trace_events)
from directpet.dualhead import simulate as dualhead_simulate
from directpet.dualhead.monte_carlo import FATES, OUTCOMES, _Driver, direction_band, scanner_parameters
from directpet.dualhead.subsets import _lor_indices
from directpet.operators import LinearOperator

SMALL = DualHeadScanner.small()
NO_BLUR = DualHeadScanner.small(positron_range_fwhm_mm=0.0, acollinearity_fwhm_deg=0.0)
FWHM_PER_SIGMA = 2.3548200450309493
Z_MAX = 4.5
P_MIN = 1e-4
TRUE, MISSED, OUT_OF_BAND = OUTCOMES.index("true"), OUTCOMES.index("missed"), OUTCOMES.index("out_of_band")
NO_CRYSTAL, PASSED, INTERACTED = FATES.index("no_crystal"), FATES.index("passed"), FATES.index("interacted")


# --- independent NumPy models ------------------------------------------------------------------------------

def crystal_segments(sc, o, d):
    """Entry / exit t (n, C) of the lines o + t d (o, d: (n, 3) x, y, z) through the upper head's crystal
    boxes, crystal c = c_y n_z + c_z, and the length inside each (0 where the line misses it)."""
    cy, cz = np.meshgrid(np.arange(sc.n_y), np.arange(sc.n_z), indexing="ij")
    Y = sc.crystal_y_mm(cy.ravel())[None, :]
    Z = sc.crystal_z_mm(cz.ravel())[None, :]
    h = 0.5 * sc.crystal_mm
    front, back = 0.5 * sc.gap_mm, 0.5 * sc.gap_mm + sc.depth_mm
    o, d = np.asarray(o, np.float64), np.asarray(d, np.float64)
    ox, oy, oz = (o[:, k:k + 1] for k in range(3))
    dx, dy, dz = (d[:, k:k + 1] for k in range(3))
    with np.errstate(divide="ignore", invalid="ignore"):
        ix, iy, iz = 1 / dx, 1 / dy, 1 / dz
        ax, bx = (front - ox) * ix, (back - ox) * ix
        ay, by = (Y - h - oy) * iy, (Y + h - oy) * iy
        az, bz = (Z - h - oz) * iz, (Z + h - oz) * iz
        t_in = np.maximum(np.maximum(np.minimum(ax, bx), np.minimum(ay, by)), np.minimum(az, bz))
        t_out = np.minimum(np.minimum(np.maximum(ax, bx), np.maximum(ay, by)), np.maximum(az, bz))
    ell = np.where((dx > 0) & (t_out > t_in) & (t_in >= 0), t_out - t_in, 0.0)
    return t_in, t_out, ell


def head_probabilities(sc, o, d):
    """Sparse (n, C): probability that a photon from o along unit d is first absorbed in crystal c of the
    upper head, exp(-mu * crystal path before c) * (1 - exp(-mu * path in c))."""
    t_in, _, ell = crystal_segments(sc, o, d)
    r, c = np.nonzero(ell)
    order = np.lexsort((t_in[r, c], r))  # each ray's crossings in the order it crosses them
    r, c = r[order], c[order]
    e = ell[r, c]
    csum = np.cumsum(e)
    first = np.searchsorted(r, r, side="left")
    before = csum - e - (csum[first] - e[first])
    mu = sc.mu_per_mm
    return sparse.csr_matrix((np.exp(-mu * before) * -np.expm1(-mu * e), (r, c)), shape=ell.shape)


def mirror_x(a):
    return np.asarray(a) * np.array([-1.0, 1.0, 1.0])


def ray_model(sc, voxel, n_rays, rng, stat=None, chunk=20000):
    """The expected-value model of a uniform source in voxel [iz, iy, p] of sc.grid (module docstring).

    Returns (q, var_q, total, var_total[, stat_mean, stat_se]): per decay, the (n_lors,) probabilities
    of each LOR and the variance of their estimates, the detected fraction and its variance, and, for a
    (C, C) matrix ``stat`` over (c_u, c_l), its mean over detected coincidences with a standard error.
    """
    g = sc.grid
    iz, iy, ip = voxel
    vz, vy, vx = g.voxel_size
    centre = np.array([sc.plane_x_mm(ip), (iy - (g.shape[1] - 1) / 2) * vy, (iz - (g.shape[0] - 1) / 2) * vz])
    half = 0.5 * np.array([vx, vy, vz])
    sig_r = sc.positron_range_fwhm_mm / FWHM_PER_SIGMA
    sig_a = np.deg2rad(sc.acollinearity_fwhm_deg) / FWHM_PER_SIGMA
    # photon 1's directions: uniform in (sin elevation, psi) over a box 10 % wider than any direction
    # from the blurred voxel to the upper head's front layer
    reach = 0.5 * sc.gap_mm - (centre[0] + half[0] + 6 * sig_r)
    b = min(np.pi / 2, 1.1 * np.arctan((0.5 * sc.n_y * sc.pitch_mm + abs(centre[1]) + half[1] + 6 * sig_r) / reach))
    a = min(1.0, 1.1 * np.sin(np.arctan((0.5 * sc.n_z * sc.pitch_mm + abs(centre[2]) + half[2] + 6 * sig_r)
                                        / reach)))
    share = 2 * a * b / np.pi  # of the +x hemisphere, over which photon 1's direction is uniform
    C = sc.n_crystals
    s1, s2 = np.zeros((C, C)), np.zeros((C, C))
    tot1 = tot2 = 0.0
    sx, sw = [], []
    done = 0
    while done < n_rays:
        r = min(chunk, n_rays - done)
        o = centre + rng.uniform(-1, 1, (r, 3)) * half + sig_r * rng.standard_normal((r, 3))
        sin_el, psi = rng.uniform(-a, a, r), rng.uniform(-b, b, r)
        cos_el = np.sqrt(1 - sin_el**2)
        u = np.stack([cos_el * np.cos(psi), cos_el * np.sin(psi), sin_el], axis=1)
        # photon 2: -u rotated by a Gaussian angle about a uniformly oriented axis perpendicular to u
        ref = np.where(np.abs(u[:, 1:2]) < 0.9, np.array([[0, 1.0, 0]]), np.array([[0, 0, 1.0]]))
        e1 = np.cross(u, ref)
        e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
        e2 = np.cross(u, e1)
        ang = sig_a * rng.standard_normal((r, 2))
        th = np.hypot(ang[:, 0], ang[:, 1])[:, None]
        ph = np.arctan2(ang[:, 1], ang[:, 0])[:, None]
        w = -(np.cos(th) * u + np.sin(th) * (np.cos(ph) * e1 + np.sin(ph) * e2))
        pu = head_probabilities(sc, o, u)
        keep = np.diff(pu.indptr) > 0
        pu, o, w = pu[keep], o[keep], w[keep]
        pl = head_probabilities(sc, mirror_x(o), mirror_x(w))
        s1 += (pu.T @ pl).toarray()
        s2 += (pu.power(2).T @ pl.power(2)).toarray()
        pt = np.asarray(pu.sum(1)).ravel() * np.asarray(pl.sum(1)).ravel()
        tot1 += pt.sum()
        tot2 += (pt**2).sum()
        if stat is not None:
            sx.append(np.asarray(pl.multiply(pu @ stat).sum(1)).ravel())
            sw.append(pt)
        done += r
    n = n_rays
    q = share * s1 / n
    var = share**2 * (s2 / n - (s1 / n) ** 2) / n
    cuy, cuz = np.divmod(np.arange(C), sc.n_z)
    CU, CL = np.meshgrid(np.arange(C), np.arange(C), indexing="ij")
    idx = sc.lor_index(cuy[CU], cuz[CU], cuy[CL], cuz[CL])
    q_lor, var_lor = np.zeros(sc.n_lors), np.zeros(sc.n_lors)
    q_lor[idx], var_lor[idx] = q, var
    out = (q_lor, var_lor, share * tot1 / n, share**2 * (tot2 / n - (tot1 / n) ** 2) / n)
    if stat is not None:
        x, wt = np.concatenate(sx), np.concatenate(sw)
        mean = x.sum() / wt.sum()
        se = np.sqrt(((x - mean * wt) ** 2).sum()) / wt.sum()  # ratio estimator (delta method)
        out += (mean, se)
    return out


def point_activity(sc, voxel):
    a = np.zeros(sc.grid.shape, np.float32)
    a[voxel] = 1.0
    return a


def crystal_pairs(sc):
    """(c_u, c_l) flat crystal indices (c_y n_z + c_z) of every LOR, in layout order."""
    uy, uz, ly, lz = sc.lor_crystals()
    return uy * sc.n_z + uz, ly * sc.n_z + lz


def simulate(sc, activity, n, seed, **kw):
    return dualhead_simulate(sc, activity, n, seed=seed, backend="cpu", **kw)


@pytest.fixture
def blob(rng):
    """A random extended activity on the small scanner's grid: a box of random values, a quarter 0."""
    g = SMALL.grid
    a = np.zeros(g.shape, np.float32)
    box = (slice(2, g.shape[0] - 3), slice(3, g.shape[1] - 2), slice(2, g.shape[2] - 4))
    v = rng.uniform(0.0, 1.0, a[box].shape)
    v[rng.uniform(size=v.shape) < 0.25] = 0
    a[box] = v
    return a


# --- the Monte Carlo against the independent model -------------------------------------------------------

@pytest.mark.parametrize("scanner, voxel, seed", [
    (NO_BLUR, (6, 8, 7), 1),                 # next to the centre: geometry, attenuation, penetration
    (NO_BLUR, (4, 9, 10), 2),                # off centre in every direction, nearer the upper head
    (DualHeadScanner.small(positron_range_fwhm_mm=2.0, acollinearity_fwhm_deg=5.0), (4, 9, 10), 3),
], ids=["centre", "off-centre", "blurred"])
def test_point_source_lors_and_sensitivity_follow_the_ray_model(scanner, voxel, seed):
    n = 3_000_000
    counts, st = simulate(scanner, point_activity(scanner, voxel), n, seed)
    q, var, total, var_total = ray_model(scanner, voxel, 300_000, np.random.default_rng(seed))
    # the detected fraction: solid angle x interaction probabilities, integrated by the model
    z = (st.n_trues - n * total) / np.sqrt(n * total * (1 - total) + n**2 * var_total)
    print(f"trues {st.n_trues}, model {n * total:.1f} (z = {z:.2f})")
    assert abs(z) < Z_MAX
    assert st.sensitivity == st.n_trues / n
    # per LOR: chi-square over the LORs expecting >= 10 counts, the rest pooled
    e, ve = n * q, n * q * (1 - q) + n**2 * var
    big = e >= 10
    chi2 = np.sum((counts[big] - e[big]) ** 2 / ve[big])
    chi2 += (counts[~big].sum() - e[~big].sum()) ** 2 / ve[~big].sum()
    dof = int(big.sum()) + 1
    p = stats.chi2.sf(chi2, dof)
    print(f"chi2 {chi2:.1f} over {dof} bins (p = {p:.3g})")
    assert big.sum() > 100 and p > P_MIN


@pytest.mark.parametrize("blur", [dict(positron_range_fwhm_mm=3.0), dict(acollinearity_fwhm_deg=6.0)],
                         ids=["positron-range", "acollinearity"])
def test_blurs_widen_the_lor_distribution_as_the_model_predicts(blur):
    """Width statistic: the mean of (c_uy + c_ly - (n_y - 1))^2 + (same in z) over the trues of a point
    next to the centre (0 for a LOR through the centre's mirror pair)."""
    voxel, n = (6, 8, 7), 3_000_000
    results = []
    blurred = DualHeadScanner.small(**{**dict(positron_range_fwhm_mm=0.0, acollinearity_fwhm_deg=0.0), **blur})
    for k, sc in enumerate((NO_BLUR, blurred)):
        cu, cl = np.divmod(np.arange(sc.n_crystals), sc.n_z)
        CU, CL = np.meshgrid(np.arange(sc.n_crystals), np.arange(sc.n_crystals), indexing="ij")
        stat = ((cu[CU] + cu[CL] - (sc.n_y - 1)) ** 2 + (cl[CU] + cl[CL] - (sc.n_z - 1)) ** 2).astype(float)
        counts, st = simulate(sc, point_activity(sc, voxel), n, 10 + k)
        pu, pl = crystal_pairs(sc)
        f = stat[pu, pl]
        mc = np.sum(counts * f) / counts.sum()
        mc_se = np.sqrt(np.sum(counts * (f - mc) ** 2)) / counts.sum()
        *_, model, model_se = ray_model(sc, voxel, 300_000, np.random.default_rng(20 + k), stat=stat)
        z = (mc - model) / np.hypot(mc_se, model_se)
        print(f"{blur if k else 'no blur'}: Monte Carlo {mc:.4f} +- {mc_se:.4f}, model {model:.4f} +- "
              f"{model_se:.4f} (z = {z:.2f})")
        assert abs(z) < Z_MAX
        results.append((mc, mc_se))
    (m0, s0), (m1, s1) = results
    assert m1 - m0 > 10 * np.hypot(s0, s1)  # clearly wider


def test_traced_photons_drew_the_crystal_path_they_crossed(rng):
    """Photon by photon: the crystal path along the line up to the interaction equals the drawn
    exponential path; the interaction point lies in the detecting crystal; passed photons crossed less
    crystal than drawn, missed ones none (all physics on, an extended random source). The trues' LORs
    are at DualHeadScanner.lor_index of their crystals."""
    sc = DualHeadScanner.small(positron_range_fwhm_mm=1.0, acollinearity_fwhm_deg=2.0)
    g = sc.grid
    a = np.zeros(g.shape, np.float32)
    a[1:-1, 1:-1, 1:-1] = rng.uniform(0.1, 1.0, a[1:-1, 1:-1, 1:-1].shape)
    tr = trace_events(sc, a, 400_000, seed=5)
    t = tr["outcome"] == TRUE
    c1, c2 = tr["crystal1"][t], tr["crystal2"][t]
    np.testing.assert_array_equal(tr["index"][t], sc.lor_index(c1[:, 0], c1[:, 1], c2[:, 0], c2[:, 1]))
    point = tr["point"].astype(np.float64)
    inside = np.abs(point[:, 0]) < 0.5 * sc.gap_mm
    tracked1 = (tr["outcome"] != OUT_OF_BAND) & inside
    tracked2 = tracked1 & (tr["fate"][:, 0] != NO_CRYSTAL)
    tol = 2e-3  # mm: float32 arithmetic along paths of a few cm
    checked = 0
    for k, (tracked, o, d, hit, crystal) in enumerate((
            (tracked1, point, tr["direction1"], tr["hit1"], tr["crystal1"]),
            (tracked2, mirror_x(point), mirror_x(tr["direction2"]), mirror_x(tr["hit2"]), tr["crystal2"]))):
        o, d, hit = o[tracked], np.asarray(d, np.float64)[tracked], np.asarray(hit, np.float64)[tracked]
        fate, path, crystal = tr["fate"][tracked, k], tr["path"][tracked, k].astype(np.float64), crystal[tracked]
        t_in, t_out, ell = crystal_segments(sc, o, d)
        total = ell.sum(axis=1)
        assert np.all(total[fate == NO_CRYSTAL] < tol)
        passed = fate == PASSED
        assert np.all(total[passed] < path[passed] + tol)
        det = fate == INTERACTED
        t_hit = np.einsum("ij,ij->i", hit[det] - o[det], d[det])
        np.testing.assert_allclose(np.linalg.norm(hit[det] - o[det], axis=1), t_hit, atol=tol)
        up_to_hit = np.clip(np.minimum(t_out[det], t_hit[:, None]) - t_in[det], 0, None) * (ell[det] > 0)
        np.testing.assert_allclose(up_to_hit.sum(axis=1), path[det], atol=tol)
        c = crystal[det, 0] * sc.n_z + crystal[det, 1]
        rows = np.arange(c.size)
        assert np.all((t_in[det][rows, c] <= t_hit + tol) & (t_hit <= t_out[det][rows, c] + tol))
        assert np.all(crystal[~det] == -1)
        checked += det.sum()
    assert checked > 5000


def test_depth_of_interaction_along_normal_paths_is_the_truncated_exponential():
    """Photons whose line stays inside one crystal over the whole depth (wide crystals make many):
    detected there with probability 1 - exp(-mu L), L = depth / cos, at a path s along the line
    distributed as mu exp(-mu s) / (1 - exp(-mu L)) on [0, L]."""
    sc = DualHeadScanner.small(pitch_mm=6.0, crystal_mm=5.0, gap_mm=40.0, positron_range_fwhm_mm=0.0,
                               acollinearity_fwhm_deg=0.0)
    voxel = (5, 7, 7)
    tr = trace_events(sc, point_activity(sc, voxel), 400_000, seed=6)
    sel = tr["outcome"] != OUT_OF_BAND
    o, d = tr["point"][sel].astype(np.float64), tr["direction1"][sel].astype(np.float64)
    t_in, t_out, ell = crystal_segments(sc, o, d)
    L = sc.depth_mm / d[:, 0]
    full = np.isclose(ell, L[:, None], rtol=0, atol=1e-9)  # the whole slab crossing inside one crystal
    one = full.any(axis=1)
    c = np.argmax(full, axis=1)[one]
    L, fate = L[one], tr["fate"][sel, 0][one]
    crystal = tr["crystal1"][sel][one]
    hit, o, d = tr["hit1"][sel][one].astype(np.float64), o[one], d[one]
    assert one.sum() > 3000
    det = fate == INTERACTED
    assert np.all(fate[~det] == PASSED)
    assert np.all(crystal[det, 0] * sc.n_z + crystal[det, 1] == c[det])
    p = -np.expm1(-sc.mu_per_mm * L)
    z = (det.sum() - p.sum()) / np.sqrt(np.sum(p * (1 - p)))
    print(f"{one.sum()} normal photons, {det.sum()} detected, expected {p.sum():.1f} (z = {z:.2f})")
    assert abs(z) < Z_MAX
    s = (hit[det, 0] - 0.5 * sc.gap_mm) / d[det, 0]  # path from the front face to the interaction
    u = -np.expm1(-sc.mu_per_mm * s) / p[det]
    ks = stats.kstest(u, "uniform")
    print(f"KS of the depth distribution: p = {ks.pvalue:.3g}")
    assert ks.pvalue > P_MIN


def test_positron_range_and_acollinearity_have_their_distributions():
    sc = DualHeadScanner.small(positron_range_fwhm_mm=2.0, acollinearity_fwhm_deg=5.0)
    voxel = (6, 8, 7)
    tr = trace_events(sc, point_activity(sc, voxel), 200_000, seed=7)
    sel = tr["outcome"] != OUT_OF_BAND
    src, pt = tr["source"][sel].astype(np.float64), tr["point"][sel].astype(np.float64)
    # uniform inside the voxel
    g = sc.grid
    lo = np.array([sc.plane_x_mm(voxel[2]), (voxel[1] - (g.shape[1] - 1) / 2) * g.voxel_size[1],
                   (voxel[0] - (g.shape[0] - 1) / 2) * g.voxel_size[0]]) - 0.5 * np.array(g.voxel_size[::-1])
    for k, size in enumerate(g.voxel_size[::-1]):
        assert stats.kstest((src[:, k] - lo[k]) / size, "uniform").pvalue > P_MIN
    sigma = sc.positron_range_fwhm_mm / FWHM_PER_SIGMA
    for k in range(3):
        assert stats.kstest((pt[:, k] - src[:, k]) / sigma, "norm").pvalue > P_MIN
    u, w = tr["direction1"][sel].astype(np.float64), -tr["direction2"][sel].astype(np.float64)
    cos = np.clip(np.einsum("ij,ij->i", u, w), -1, 1)
    tan = np.sqrt(1 - cos**2) / cos
    sigma_a = np.deg2rad(sc.acollinearity_fwhm_deg) / FWHM_PER_SIGMA
    assert stats.kstest(tan / sigma_a, "rayleigh").pvalue > P_MIN
    np.testing.assert_allclose(np.linalg.norm(w, axis=1), 1, atol=1e-6)


def test_decays_follow_the_activity(rng):
    sc = SMALL
    a = np.zeros(sc.grid.shape, np.float32)
    a[3, 4, 5], a[8, 11, 9] = 1.0, 3.0
    tr = trace_events(sc, a, 100_000, seed=8)
    sel = tr["outcome"] != OUT_OF_BAND
    src = tr["source"][sel]
    in_second = src[:, 0] > sc.plane_x_mm(7)
    n = sel.sum()
    z = (in_second.sum() - 0.75 * n) / np.sqrt(n * 0.75 * 0.25)
    assert abs(z) < Z_MAX


# --- binning, bookkeeping, reproducibility -----------------------------------------------------------------

def test_histogram_is_the_traced_trues_binned_with_the_python_layout(rng):
    """Every LOR of a 4 x 3 head pair 20 mm apart, from a uniform source: the compiled lor_index
    (layout.hpp) against DualHeadScanner.lor_index, and the histogram against the traced decays."""
    sc = DualHeadScanner(n_y=4, n_z=3, voxels_per_crystal=1, n_planes=9, plane_mm=2.0, gap_mm=20.0)
    a = rng.uniform(0.5, 1.0, sc.grid.shape).astype(np.float32)
    n = 1_500_000
    tr = trace_events(sc, a, n, seed=9)
    counts, st = simulate(sc, a, n, 9)
    t = tr["outcome"] == TRUE
    c1, c2 = tr["crystal1"][t], tr["crystal2"][t]
    np.testing.assert_array_equal(tr["index"][t], sc.lor_index(c1[:, 0], c1[:, 1], c2[:, 0], c2[:, 1]))
    assert np.all(tr["index"][~t] == -1)
    hist = np.bincount(tr["index"][t], minlength=sc.n_lors)
    np.testing.assert_array_equal(counts, hist)
    assert np.all(hist > 0)  # every LOR, every class and sign of the layout was reached
    assert st.n_trues == t.sum() == counts.sum()
    assert st.n_crossed == np.sum(tr["outcome"] >= OUTCOMES.index("not_detected"))
    assert st.n_in_band == np.sum(tr["outcome"] >= MISSED)
    assert st.n_decays == n and counts.dtype == np.float32 and counts.shape == (sc.n_lors,)


def test_counts_are_nested_and_sum_to_the_trues(blob):
    counts, st = simulate(SMALL, blob, 2_000_000, 11)
    assert isinstance(st, MonteCarloStats) and st.backend == "cpu" and st.seed == 11
    assert 0 < st.n_trues < st.n_crossed < st.n_in_band < st.n_decays
    assert counts.sum() == st.n_trues
    assert np.all(counts >= 0) and np.all(counts == np.round(counts))
    assert 0 < st.band_fraction < 1
    assert abs(st.n_in_band - st.band_fraction * st.n_decays) < Z_MAX * np.sqrt(st.n_decays * st.band_fraction)
    assert st.decays_per_second > 0


def test_same_seed_same_counts_whatever_threads_and_chunks(blob):
    n = 1_000_000
    a, sa = simulate(SMALL, blob, n, 21, threads=1)
    b, sb = simulate(SMALL, blob, n, 21, threads=2, chunk=99_999)
    c, _ = simulate(SMALL, blob, n, 22)
    np.testing.assert_array_equal(a, b)
    assert (sa.n_trues, sa.n_crossed, sa.n_in_band) == (sb.n_trues, sb.n_crossed, sb.n_in_band)
    assert not np.array_equal(a, c)
    # a prefix of the decays is a prefix of the stream
    head, _ = simulate(SMALL, blob, n // 2, 21)
    tail = trace_events(SMALL, blob, n - n // 2, seed=21, first=n // 2)
    t = tail["outcome"] == TRUE
    np.testing.assert_array_equal(a, head + np.bincount(tail["index"][t], minlength=SMALL.n_lors))


@pytest.mark.parametrize("n_trues, chunk", [(1, None), (37, None), (5000, None), (5000, 40_000)])
def test_n_trues_stops_exactly_at_the_requested_true(blob, n_trues, chunk):
    counts, st = dualhead_simulate(SMALL, blob, n_trues=n_trues, seed=31, backend="cpu", chunk=chunk)
    assert st.n_trues == n_trues == counts.sum()
    again, st2 = simulate(SMALL, blob, st.n_decays, 31)
    np.testing.assert_array_equal(counts, again)
    assert (st.n_in_band, st.n_crossed) == (st2.n_in_band, st2.n_crossed)
    # the last decay gave the last true
    last = trace_events(SMALL, blob, 1, seed=31, first=st.n_decays - 1)
    assert last["outcome"][0] == TRUE


def test_driver_stops_at_the_exact_decay_whatever_the_steps():
    """_Driver.run_to_trues on a synthetic stream (a true at every decay d with hash(d) < rate): exact stop
    through the margin steps, the overshooting last step, bisection and take-back."""
    rng = np.random.default_rng(3)
    is_true = rng.uniform(size=3_000_000) < 0.013
    hist = np.zeros(1, np.int64)
    calls = []

    def runner(first, count, weight, histogram):
        t = int(is_true[first:first + count].sum())
        calls.append((first, count, weight, histogram))
        if histogram:
            hist[0] += weight * t
        return {"n_decays": count, "n_in_band": count, "n_crossed": t, "n_trues": t}

    took_back = False
    for target, chunk in ((1, 1 << 20), (250, 1 << 20), (20_000, 7_777)):
        hist[:] = 0
        calls.clear()
        d = _Driver(runner, chunk, None, counting_trues=True)
        tot = d.run_to_trues(target)
        end = int(np.flatnonzero(is_true)[target - 1]) + 1
        assert tot["n_trues"] == target == hist[0] and tot["n_decays"] == end
        assert all(c[1] <= chunk for c in calls)
        took_back |= any(w < 0 for _, _, w, _ in calls)
    assert took_back  # the overshoot path ran


def test_progress_reports_every_chunk(blob):
    seen = []
    simulate(SMALL, blob, 250_000, 41, chunk=100_000, progress=seen.append)
    assert seen == [100_000, 200_000, 250_000]


def test_direction_band_widens_to_the_hemisphere_at_a_front_face():
    sc = DualHeadScanner.small(n_planes=15, plane_mm=4.0)  # planes up to the front faces
    a = np.zeros(sc.grid.shape, np.float32)
    a[5, 7, 7] = 1.0
    inner = direction_band(sc, a)
    assert not inner["full_hemisphere"] and 0 < inner["band_fraction"] < 1
    a[5, 7, -1] = 1.0   # the outermost plane, with the positron range, reaches the upper face
    outer = direction_band(sc, a)
    assert outer["full_hemisphere"] and outer["band_fraction"] == 1.0
    _, st = simulate(sc, a, 200_000, 12)
    assert st.n_in_band == st.n_decays


# --- bad input -------------------------------------------------------------------------------------------

def _activity(change=None, shape=None, dtype=np.float32):
    a = np.zeros(shape or SMALL.grid.shape, dtype)
    a[5, 7, 7] = 1
    if change is not None:
        change(a)
    return a


@pytest.mark.parametrize("activity, kw, exc, name", [
    (_activity(lambda a: a.__setitem__((1, 1, 1), -1.0)), {}, ValueError, "activity"),
    (_activity(lambda a: a.__setitem__((1, 1, 1), np.nan)), {}, ValueError, "activity"),
    (_activity(lambda a: a.__setitem__((1, 1, 1), np.inf)), {}, ValueError, "activity"),
    (np.zeros(SMALL.grid.shape, np.float32), {}, ValueError, "activity"),
    (_activity(shape=(12, 16, 14)), {}, ValueError, "activity"),
    (_activity(dtype=np.float64), {}, TypeError, "activity"),
    (_activity().tolist(), {}, TypeError, "activity"),
    (_activity(), dict(n_decays=0), ValueError, "n_decays"),
    (_activity(), dict(n_decays=-3), ValueError, "n_decays"),
    (_activity(), dict(n_decays=2.5), TypeError, "n_decays"),
    (_activity(), dict(n_decays=True), TypeError, "n_decays"),
    (_activity(), dict(n_decays=2**63), ValueError, "n_decays"),
    (_activity(), dict(n_decays=None), ValueError, "n_trues"),
    (_activity(), dict(n_trues=10), ValueError, "n_trues"),
    (_activity(), dict(n_decays=None, n_trues=0), ValueError, "n_trues"),
    (_activity(), dict(seed=-1), ValueError, "seed"),
    (_activity(), dict(seed=2**64), ValueError, "seed"),
    (_activity(), dict(seed=1.5), TypeError, "seed"),
    (_activity(), dict(seed="1"), TypeError, "seed"),
    (_activity(), dict(backend="gpu"), ValueError, "backend"),
    (_activity(), dict(backend=1), TypeError, "backend"),
    (_activity(), dict(threads=0), ValueError, "threads"),
    (_activity(), dict(chunk=0), ValueError, "chunk"),
    (_activity(), dict(xp="numpy"), TypeError, "xp"),
    (_activity(), dict(progress="yes"), TypeError, "progress"),
])
def test_bad_input_names_the_argument(activity, kw, exc, name):
    args = dict(n_decays=1000, seed=0, backend="cpu")
    args.update(kw)
    n = args.pop("n_decays")
    with pytest.raises(exc, match=name):
        dualhead_simulate(SMALL, activity, n, **args)


def test_seed_none_or_a_generator(blob):
    a, sa = dualhead_simulate(SMALL, blob, 100_000, backend="cpu")                      # fresh entropy
    b, sb = dualhead_simulate(SMALL, blob, 100_000, seed=sa.seed, backend="cpu")        # reproduced
    np.testing.assert_array_equal(a, b)
    c, sc = dualhead_simulate(SMALL, blob, 100_000, seed=np.random.default_rng(5), backend="cpu")
    d, sd = dualhead_simulate(SMALL, blob, 100_000, seed=np.random.default_rng(5), backend="cpu")
    assert sc.seed == sd.seed
    np.testing.assert_array_equal(c, d)
    tr = trace_events(SMALL, blob, 1000, seed=np.random.default_rng(5))
    np.testing.assert_array_equal(tr["index"], trace_events(SMALL, blob, 1000, seed=sc.seed)["index"])


def test_bad_scanner_and_binding_arguments():
    with pytest.raises(TypeError, match="scanner"):
        dualhead_simulate(SMALL.to_dict(), _activity(), 10, seed=0, backend="cpu")
    params = scanner_parameters(SMALL)
    with pytest.raises(ValueError, match="scanner: missing key 'mu_per_mm'"):
        _core.DualHeadMonteCarlo({k: v for k, v in params.items() if k != "mu_per_mm"}, _activity())
    with pytest.raises(ValueError, match="scanner mu_per_mm"):
        _core.DualHeadMonteCarlo(dict(params, mu_per_mm=-1.0), _activity())
    engine = _core.DualHeadMonteCarlo(params, _activity())
    out = np.zeros(SMALL.n_lors, np.float32)
    with pytest.raises(ValueError, match="out"):
        engine.run_cpu(0, 0, 10, 1.0, out[:-1])
    with pytest.raises(TypeError, match="out"):
        engine.run_cpu(0, 0, 10, 1.0, out.astype(np.float64))
    with pytest.raises(ValueError, match="count"):
        engine.run_cpu(0, 0, 0, 1.0, out)
    with pytest.raises(ValueError, match="first"):
        engine.run_cpu(0, -1, 10, 1.0, out)
    with pytest.raises(ValueError, match="weight"):
        engine.run_cpu(0, 0, 10, 2.0, out)
    with pytest.raises(ValueError, match="count"):
        engine.trace(0, 0, 2**25)
    with pytest.raises(ValueError, match="n_decays"):
        trace_events(SMALL, _activity(), 0, seed=0)
    with pytest.raises(ValueError, match="first"):
        trace_events(SMALL, _activity(), 10, seed=0, first=-1)


@pytest.mark.skipif(directpet.cuda_device_count() > 0, reason="a CUDA device is usable here")
def test_cuda_backend_without_a_gpu_is_an_error():
    with pytest.raises(RuntimeError, match="cuda"):
        dualhead_simulate(SMALL, _activity(), 1000, seed=0, backend="cuda")


# --- GPU -----------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("scanner", [SMALL, DualHeadScanner.small(positron_range_fwhm_mm=2.0,
                                                                 acollinearity_fwhm_deg=5.0)],
                         ids=["default-physics", "strong-blur"])
def test_cuda_histogram_is_identical_to_the_cpu_one(blob, scanner):
    n = 4_000_000
    cpu, cs = simulate(scanner, blob, n, 51)
    gpu, gs = dualhead_simulate(scanner, blob, n, seed=51, backend="cuda", xp=np)
    assert isinstance(gpu, np.ndarray) and gs.backend == "cuda"
    assert (gs.n_decays, gs.n_in_band, gs.n_crossed, gs.n_trues) == (cs.n_decays, cs.n_in_band, cs.n_crossed,
                                                                     cs.n_trues)
    np.testing.assert_array_equal(gpu, cpu)
    # chunks do not matter on the GPU either, nor does stopping at a number of trues
    split, _ = dualhead_simulate(scanner, blob, n, seed=51, backend="cuda", xp=np, chunk=333_333)
    np.testing.assert_array_equal(split, cpu)
    by_trues, ts = dualhead_simulate(scanner, blob, n_trues=cs.n_trues // 2, seed=51, backend="cuda", xp=np)
    cpu_trues, cts = dualhead_simulate(scanner, blob, n_trues=cs.n_trues // 2, seed=51, backend="cpu")
    assert ts.n_decays == cts.n_decays
    np.testing.assert_array_equal(by_trues, cpu_trues)


@pytest.mark.gpu
def test_cuda_returns_cupy_when_asked(blob):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the CuPy output path cannot be checked")
    n = 500_000
    on_gpu, st = dualhead_simulate(SMALL, cupy.asarray(blob), n, seed=52, backend="cuda", xp=cupy)
    assert isinstance(on_gpu, cupy.ndarray) and on_gpu.dtype == cupy.float32 and on_gpu.shape == (SMALL.n_lors,)
    on_host, _ = simulate(SMALL, blob, n, 52)
    np.testing.assert_array_equal(cupy.asnumpy(on_gpu), on_host)
    assert float(on_gpu.sum()) == st.n_trues


# --- DualHeadData and model-consistent data ------------------------------------------------------------

class FakeProjector(LinearOperator):
    """A stand-in for DualHeadProjector: a random sparse non-negative matrix (n_lors x n_voxels) with the
    projector's calling conventions (a LinearOperator whose units are the classes); records its calls
    with the subset objects it was given."""

    unit_name = "class"

    def __init__(self, scanner, rng):
        self.scanner = scanner
        self.in_shape, self.out_shape, self.n_units = scanner.grid.shape, (scanner.n_lors,), scanner.n_classes
        n_vox = int(np.prod(scanner.grid.shape))
        self.A = sparse.random(scanner.n_lors, n_vox, density=0.01, random_state=np.random.RandomState(
            int(rng.integers(2**31))), format="csr", dtype=np.float64)
        self.calls = []
        self.method = "fake"

    def forward(self, x, subset=None, out=None, skip_zero=None):
        self.calls.append(("forward", subset, out, skip_zero))
        y = (self.A @ np.asarray(x, np.float64).ravel()).astype(np.float32)
        if subset is not None:
            y = y[_lor_indices(self.scanner.class_offsets(), self.scanner.class_list(subset))]
        if skip_zero is not None:
            y = np.where(skip_zero != 0, y, np.float32(0))
        return y

    def adjoint(self, y, subset=None, out=None):
        self.calls.append(("adjoint", subset, out))
        full = np.zeros(self.scanner.n_lors)
        idx = slice(None) if subset is None else _lor_indices(self.scanner.class_offsets(),
                                                              self.scanner.class_list(subset))
        full[idx] = y
        return (self.A.T @ full).reshape(self.scanner.grid.shape).astype(np.float32)

    def _forward(self, x, units, out, **kwargs):      # the public forward / adjoint above are overridden
        out[...] = self.forward(x, units, **kwargs)
        return out

    def _adjoint(self, y, units, out):
        out[...] = self.adjoint(y, units)
        return out


def test_dualhead_data_checks_and_converts(rng, tmp_path):
    n = SMALL.n_lors
    prompts = rng.poisson(3.0, n).astype(np.float32)
    factors = rng.uniform(0.5, 1.5, n).astype(np.float32)
    bg = rng.uniform(0.1, 0.3, n).astype(np.float32)
    d = DualHeadData(SMALL, prompts, factors, bg, meta={"source": "test"})
    assert d.xp is np
    for xp in (None, np, "numpy"):
        e = d.to(xp)
        np.testing.assert_array_equal(e.prompts, prompts)
        np.testing.assert_array_equal(e.factors, factors)
    path = tmp_path / "dh.npz"
    d.save(path)
    for xp in (None, np, "numpy"):
        back = DualHeadData.load(path, xp=xp)
        assert back.scanner == SMALL and back.meta == {"source": "test"}
        np.testing.assert_array_equal(back.background, bg)
    with pytest.raises(TypeError):
        DualHeadData.load(path, np)                 # xp is keyword-only
    with pytest.raises(TypeError, match="xp"):
        DualHeadData.load(path, xp="cpu")           # the array module or its name, not a backend
    with pytest.raises(ValueError, match="prompts"):
        DualHeadData(SMALL, prompts[:-1])
    with pytest.raises(ValueError, match="prompts"):
        DualHeadData(SMALL, -prompts - 1)
    with pytest.raises(TypeError, match="prompts"):
        DualHeadData(SMALL, prompts.astype(np.float64))
    with pytest.raises(TypeError, match=r"prompts.*\.astype\(np\.float32\)"):
        DualHeadData(SMALL, rng.poisson(3.0, n))       # an int64 Poisson draw: the message says what to do
    with pytest.raises(TypeError, match="prompts"):
        DualHeadData(SMALL, list(prompts))
    with pytest.raises(ValueError, match="factors"):
        DualHeadData(SMALL, prompts, np.full(n, np.nan, np.float32))
    with pytest.raises(ValueError, match="background"):
        DualHeadData(SMALL, prompts, None, bg[:10])
    with pytest.raises(TypeError, match="scanner"):
        DualHeadData(SMALL.to_dict(), prompts)
    with pytest.raises(TypeError, match="xp"):
        d.to("gpu")


def test_model_consistent_data_has_the_forward_projection_as_mean(rng, volume):
    proj = FakeProjector(SMALL, rng)
    image = volume(SMALL.grid.shape)
    ybar = proj.forward(image).astype(np.float64)
    exact = model_consistent_data(proj, image, noise=False)
    np.testing.assert_allclose(exact.prompts, ybar, rtol=1e-6)
    assert exact.meta["image_scale"] == 1.0 and exact.meta["method"] == "fake"
    k = 200
    draws = np.stack([model_consistent_data(proj, image, seed=s).prompts for s in range(k)])
    assert draws.dtype == np.float32 and np.all(draws == np.round(draws))
    pos = ybar > 0
    chi2 = np.sum((draws.mean(0)[pos] - ybar[pos]) ** 2 / (ybar[pos] / k))
    assert stats.chi2.sf(chi2, pos.sum()) > P_MIN
    assert np.all(draws[:, ~pos] == 0)
    np.testing.assert_array_equal(model_consistent_data(proj, image, seed=7).prompts,
                                  model_consistent_data(proj, image, seed=7).prompts)
    scaled = model_consistent_data(proj, image, seed=2, counts=1e5)
    t = scaled.meta["expected_counts"]
    assert abs(t - 1e5) < 1e-6 * 1e5
    assert abs(float(scaled.prompts.sum(dtype=np.float64)) - 1e5) < Z_MAX * np.sqrt(1e5)
    fresh = model_consistent_data(proj, image)                       # seed None: fresh entropy
    assert fresh.prompts.dtype == np.float32 and fresh.meta["noise"]
    bg = rng.uniform(0.1, 0.2, SMALL.n_lors).astype(np.float32)
    with_bg = model_consistent_data(proj, image, seed=3, background=bg, noise=False)
    np.testing.assert_allclose(with_bg.prompts, ybar + bg, rtol=1e-6)
    with pytest.raises(ValueError, match="counts"):
        model_consistent_data(proj, image, seed=1, counts=-5)
    with pytest.raises(TypeError):
        model_consistent_data(proj, image, 1)                          # everything after the image is a keyword
    with pytest.raises(ValueError, match="seed"):
        model_consistent_data(proj, image, seed=-1)
    with pytest.raises(ValueError, match="image"):
        model_consistent_data(proj, np.zeros(SMALL.grid.shape, np.float32), seed=1)
    with pytest.raises(TypeError, match="projector"):
        model_consistent_data(object(), image, seed=1)


# --- orientation subsets -----------------------------------------------------------------------------------

def test_orientation_subsets_partition_the_classes():
    """Independent properties of the split: every class in exactly one subset, the documented sizes,
    increasing class lists, the same split for the same seed and a different one for another seed,
    and a split that is really random (not consecutive runs of classes)."""
    full = DualHeadScanner()
    subsets = orientation_subsets(full)
    assert len(subsets) == 72 and {len(s) for s in subsets} == {104}
    assert all(s.dtype == np.int32 and np.all(np.diff(s) > 0) for s in subsets)
    np.testing.assert_array_equal(np.sort(np.concatenate(subsets)), np.arange(full.n_classes))
    again = orientation_subsets(full, 72, DEFAULT_SUBSET_SEED)
    assert all(np.array_equal(a, b) for a, b in zip(subsets, again))
    other = orientation_subsets(full, 72, DEFAULT_SUBSET_SEED + 1)
    assert sum(np.array_equal(a, b) for a, b in zip(subsets, other)) == 0
    # random membership: every subset spans most of the class range, and its mean class index lies
    # within 5 standard errors of the overall mean (a uniform draw of 104 of 7488 classes)
    n = full.n_classes
    sd_mean = np.sqrt((n**2 - 1) / 12.0 / 104 * (n - 104) / (n - 1))
    for s in subsets:
        assert s[-1] - s[0] > n // 2
        assert abs(s.mean() - (n - 1) / 2) < 5 * sd_mean
    for n_sub in (1, 5, 7, 48):
        parts = orientation_subsets(SMALL, n_sub)
        sizes = [len(p) for p in parts]
        assert len(parts) == n_sub and max(sizes) - min(sizes) <= (0 if SMALL.n_classes % n_sub == 0 else 1)
        # the larger subsets come first (the documented rule: one extra class for the first ones)
        assert sizes == sorted(sizes, reverse=True)
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(SMALL.n_classes))


def test_orientation_subsets_reproducibility_pin():
    """A reproducibility pin, not a correctness check: the values below were taken from this code (and
    printed in orientation_subsets' docstring). It fails when the default split changes (for example if
    NumPy's PCG64 raw stream ever changed), which would change every reconstruction run with the
    default subsets."""
    subsets = orientation_subsets(DualHeadScanner())
    np.testing.assert_array_equal(subsets[0][:5], [80, 81, 94, 97, 98])
    np.testing.assert_array_equal(subsets[71][:5], [55, 153, 160, 217, 229])


@pytest.mark.parametrize("n, exc", [(0, ValueError), (49, ValueError), (2.0, TypeError), (True, TypeError)])
def test_orientation_subsets_refuse_bad_counts(n, exc):
    with pytest.raises(exc, match="n_subsets"):
        orientation_subsets(SMALL, n)


def test_orientation_subsets_refuse_bad_seeds_and_scanners():
    with pytest.raises(ValueError, match="seed"):
        orientation_subsets(SMALL, 4, seed=-1)
    with pytest.raises(TypeError, match="scanner"):
        orientation_subsets(SMALL.to_dict(), 4)


def test_lor_indices_concatenate_the_class_blocks(rng):
    offsets = SMALL.class_offsets()
    classes = rng.permutation(SMALL.n_classes)[:13].astype(np.int32)
    expected = np.concatenate([np.arange(offsets[k], offsets[k + 1]) for k in classes])
    np.testing.assert_array_equal(_lor_indices(offsets, classes), expected)


def test_dualhead_subsets_slice_the_data_by_class_blocks(rng, volume):
    proj = FakeProjector(SMALL, rng)
    n = SMALL.n_lors
    prompts = rng.poisson(2.0, n).astype(np.float32)
    factors = rng.uniform(0.5, 1.5, n).astype(np.float32)
    bg = rng.uniform(0.1, 0.3, n).astype(np.float32)
    data = DualHeadData(SMALL, prompts, factors, bg)
    problem = DualHeadSubsets(proj, data, 5)
    assert problem.n_subsets == 5 and problem.image_shape == SMALL.grid.shape
    assert problem.order() == [0, 1, 2, 3, 4]
    offsets = SMALL.class_offsets()
    for s, classes in enumerate(problem.classes):
        np.testing.assert_array_equal(classes, orientation_subsets(SMALL, 5)[s])
        blocks = lambda a: np.concatenate([a[offsets[k]:offsets[k + 1]] for k in classes])  # noqa: E731
        np.testing.assert_array_equal(problem.data(s), blocks(prompts))
        np.testing.assert_array_equal(problem.factors(s), blocks(factors))
        np.testing.assert_array_equal(problem.background(s), blocks(bg))
    assert problem.totals() == (float(prompts.sum(dtype=np.float64)), float(bg.sum(dtype=np.float64)), n)
    problem.check()
    # forward / adjoint go to the projector with the subset's classes (and no skip by default)
    x = volume(SMALL.grid.shape)
    y = problem.forward(x, 2)
    np.testing.assert_allclose(y, proj.forward(x)[_lor_indices(offsets, problem.classes[2])], rtol=1e-6)
    kind, classes, _, skip = proj.calls[-2]
    assert kind == "forward" and classes is problem.classes[2] and skip is None
    back = problem.adjoint(y, 2)
    assert back.shape == SMALL.grid.shape and proj.calls[-1][1] is problem.classes[2]


def test_dualhead_subsets_skip_zero_counts_passes_the_subset_data(rng, volume):
    proj = FakeProjector(SMALL, rng)
    prompts = rng.poisson(0.7, SMALL.n_lors).astype(np.float32)
    assert np.any(prompts == 0)
    problem = DualHeadSubsets(proj, DualHeadData(SMALL, prompts), 4, skip_zero_counts=True)
    x = volume(SMALL.grid.shape)
    y = problem.forward(x, 1)
    assert proj.calls[-1][3] is problem.data(1)
    d = problem.data(1)
    assert np.all(y[d == 0] == 0)
    full = proj.forward(x)[_lor_indices(SMALL.class_offsets(), problem.classes[1])]
    np.testing.assert_allclose(y[d > 0], full[d > 0], rtol=1e-6)


def test_dualhead_subsets_with_explicit_subsets_and_bad_input(rng):
    proj = FakeProjector(SMALL, rng)
    data = DualHeadData(SMALL, rng.poisson(2.0, SMALL.n_lors).astype(np.float32))
    classes = rng.permutation(SMALL.n_classes)
    explicit = [classes[:20], classes[20:]]
    problem = DualHeadSubsets(proj, data, explicit)
    assert problem.n_subsets == 2
    np.testing.assert_array_equal(problem.classes[0], explicit[0])  # the given order is kept
    with pytest.raises(ValueError, match="subsets"):
        DualHeadSubsets(proj, data, [classes[:20], classes[21:]])
    with pytest.raises(ValueError, match="subsets"):
        DualHeadSubsets(proj, data, [classes, classes[:1]])
    with pytest.raises(ValueError, match="subsets"):
        DualHeadSubsets(proj, data, [classes[:20], np.append(classes[20:], SMALL.n_classes)])
    with pytest.raises(ValueError, match="subsets"):
        DualHeadSubsets(proj, data, SMALL.n_classes + 1)
    with pytest.raises(ValueError, match="subsets"):
        DualHeadSubsets(proj, data, [])
    with pytest.raises(TypeError, match="subsets"):
        DualHeadSubsets(proj, data, 4.0)
    with pytest.raises(ValueError, match=r"subsets: expected an integer in \[1, 48\], got 72"):
        DualHeadSubsets(proj, data)                          # the default, the paper's 72, needs 72 classes

    with pytest.raises(TypeError, match="data"):
        DualHeadSubsets(proj, data.prompts, 4)
    with pytest.raises(ValueError, match="data"):
        DualHeadSubsets(proj, DualHeadData(DualHeadScanner.small(n_y=6, n_z=8),
                                           np.ones(48 * 48, np.float32)), 4)
    with pytest.raises(TypeError, match="projector"):
        DualHeadSubsets(object(), data, 4)
    with pytest.raises(TypeError, match="skip_zero_counts"):
        DualHeadSubsets(proj, data, 4, skip_zero_counts="yes")
