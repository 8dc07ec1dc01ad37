"""FIRST event-level Monte Carlo: directpet.first.simulate (and trace_decays, direction_band).

The Monte Carlo is the honest data source of the FIRST family (no system model inside), so it is
checked against expectations computed here from the physics and the geometry alone:

* binning: every decay's LOR, rebuilt in NumPy from its traced detections with the world-frame
  recipe of ``directpet.first.geometry`` (endpoints rotated to world, atan2, fold to [0, pi)), lands in
  the bin the compiled code chose;
* a central point with only the crystal aperture (no positron range, no acollinearity, all photons
  interacting at the front face): the radial profile is exactly the trapezoid of two w-wide boxes,
  halved (a triangle of half-width cos(psi) w / 2), integrated over the radial bins -- chi-square;
* a central point with all physics: its radial width against a two-dimensional (in-plane) NumPy model
  of the same physics written here from the specification; the axial direction does not move s,
  except through the depth's dependence on elevation (cos(elevation) >= 0.998 here) and photons lost
  through the axial side faces, which the model leaves out: measured agreement 0.5 %, bound 2 %;
* an off-centre point: its sinogram follows s(phi) = -x0 sin(phi) + y0 cos(phi), averaged over each
  angle bin (a factor sinc of the half bin), and the axial centroid of kc = r1 + r2 follows z0;
* the detection efficiency of a central point: a quadrature over the head face of the photon pair's
  detection probability (exponential attenuation up to the back or a side face), per isotropic decay;
* n_decays counts ALL decays: the band's decays are Binomial(n_decays, band_fraction) and the
  sensitivity is per decay of the activity.

Statistical bounds are 4.5 standard errors (two-sided 7e-6), chi-square bounds the 1 - 1e-4 quantile,
so a correct implementation fails one check in 10^4 seeds (the seeds are fixed). GPU tests (``gpu``
marker) compare CUDA with the CPU decay for decay: both backends draw every decay from the same
Philox counter, so their sinograms may differ only where libm and CUDA math bin an event differently.
"""

import numpy as np
import pytest
from scipy import stats

import directpet
from directpet import _core
from directpet.first import RotatingScanner
from directpet.first import simulate as first_simulate
from directpet.first.geometry import FWHM_PER_SIGMA
from directpet.first.monte_carlo import direction_band, scanner_parameters, trace_decays
from directpet.geometry import ImageGrid

SCANNER = RotatingScanner.small()
Z_MAX = 4.5
CHI2_P = 1e-4
BINNED = 3  # outcome codes of trace_decays: 0 missed, 1 not detected, 2 outside radial, 3 binned
OUTSIDE_RADIAL = 2
# Events that CPU and CUDA may bin differently, as a fraction of the binned events: a last-ulp
# difference of log / sin / cos / atan2 or a fused multiply-add moves a value by ~1e-6 mm, rarely
# across one of a decay's bin or acceptance edges (0.4 mm to 12 mm apart). Measured on the CPU as a
# proxy (2 x 2e7 decays, small and default scanner, 1.2e6 binned): FMA contraction on / off changed
# no event; nudging every log, sin, cos and atan2 result by one ulp changed one (1e-6). CUDA's float
# functions are within 1 to 3 ulp; the bound leaves a factor of ~30.
CPU_GPU_MISMATCH = 1e-4


# --- helpers -------------------------------------------------------------------------------------------

def point_source(grid, iz, iy, ix):
    activity = np.zeros(grid.shape, np.float32)
    activity[iz, iy, ix] = 1.0
    return activity


def central_point(scanner):
    """A point at the centre of the scanner's own grid (a 0.4 x 0.4 x 0.8 mm voxel)."""
    g = scanner.grid
    return point_source(g, g.nz // 2, g.ny // 2, g.nx // 2), g


def tiny_central_point():
    """A (1 um)^3 voxel at the centre: a point source for every practical purpose."""
    return np.ones((1, 1, 1), np.float32), ImageGrid((1, 1, 1), 1e-3)


def decays_for_band(scanner, activity, grid, n_band):
    """All decays (n_decays) whose expected share in the direction band is n_band."""
    return int(round(n_band / direction_band(scanner, activity, grid=grid)["band_fraction"]))


def simulate(scanner, activity, grid, n_band, seed, **kw):
    """The CPU Monte Carlo of about ``n_band`` decays in the direction band (the statistics of the
    checks below are sized in followed decays): ``n_band / band_fraction`` decays in all."""
    return first_simulate(scanner, activity, decays_for_band(scanner, activity, grid, n_band), seed=seed,
                          backend="cpu", grid=grid, **kw)


def progress_reports(n_decays, n_in_band, chunk):
    """What simulate's progress callable sees: after each chunk of band decays, the share of all decays."""
    done = list(range(chunk, n_in_band, chunk)) + [n_in_band]
    return [n_decays if d >= n_in_band else d * n_decays // n_in_band for d in done]


def radial_moments(counts, scanner):
    """(mean, variance, standard error of the mean, standard error of the variance) of s (mm)."""
    s = scanner.radial_mm(np.arange(scanner.n_radial))
    n = counts.sum()
    m = np.sum(counts * s) / n
    d = s - m
    m2, m4 = np.sum(counts * d**2) / n, np.sum(counts * d**4) / n
    return m, m2, np.sqrt(m2 / n), np.sqrt((m4 - m2**2) / n)


def world_frame_bins(trace, scanner):
    """(angle, r1, r2, rho) of each traced coincidence by geometry.py's world-frame recipe, float64."""
    h = 0.5 * scanner.head_distance_mm + scanner.depth_moments(0.0)[0]
    g = trace["gantry"].astype(np.float64)
    c, s_ = np.cos(g), np.sin(g)
    ya, yb = trace["y_a"].astype(np.float64), trace["y_b"].astype(np.float64)
    ax, ay = -h * c - ya * s_, -h * s_ + ya * c   # A = R(g) (-h, y_a)
    bx, by = h * c - yb * s_, h * s_ + yb * c     # B = R(g) (+h, y_b)
    phi = np.arctan2(by - ay, bx - ax)
    s = -ax * np.sin(phi) + ay * np.cos(phi)
    r1, r2 = trace["row_a"].copy(), trace["row_b"].copy()
    flip = phi < 0
    phi = np.where(flip, phi + np.pi, phi)
    a = np.floor(phi / (np.pi / scanner.n_angles) + 0.5).astype(np.int64)
    wrap = a == scanner.n_angles
    a[wrap] = 0
    swap = flip ^ wrap
    s = np.where(swap, -s, s)
    r1, r2 = np.where(swap, r2, r1), np.where(swap, r1, r2)
    rho = np.floor(s / scanner.radial_bin_mm + 0.5 * (scanner.n_radial - 1) + 0.5).astype(np.int64)
    return a, r1, r2, rho


def truncated_triangle_bins(half_widths, edges):
    """Probabilities of the bins [edges[k], edges[k+1]) under a triangle of each half-width, averaged."""
    a = np.asarray(half_widths)[:, None]
    x = np.clip(np.asarray(edges)[None, :], -a, a)
    cdf = np.where(x < 0, (x + a) ** 2 / (2 * a * a), 1 - (a - x) ** 2 / (2 * a * a))
    return np.diff(cdf, axis=1).mean(axis=0)


def inplane_model_rho(scanner, grid, rng, n):
    """Radial bins of a central-voxel source from an in-plane NumPy model of the physics.

    Written from the specification, in float64, independently of the compiled code: a uniform point
    in the voxel plus the Gaussian positron range, a uniform gantry angle, photon 1 at an in-plane
    angle psi (uniform: the in-plane part of an isotropic direction), photon 2 opposite turned by a
    Gaussian in-plane angle, each entering its head's front face, interacting after an Exp(mu) path
    unless it passes the back face or leaves through a side face, intrinsic blur, the interaction
    point plus U(-w/2, w/2), and the LOR's signed distance between the two detections at depth E0.
    """
    p, nc, w = scanner.pitch_mm, scanner.n_columns, scanner.crystal_mm
    width, half = nc * p, 0.5 * scanner.head_distance_mm
    h = half + scanner.depth_moments(0.0)[0]
    sigma_range = scanner.positron_range_fwhm_mm / FWHM_PER_SIGMA
    vz, vy, vx = grid.voxel_size
    x = rng.uniform(-vx / 2, vx / 2, n) + rng.normal(0, sigma_range, n)
    y = rng.uniform(-vy / 2, vy / 2, n) + rng.normal(0, sigma_range, n)
    g = rng.uniform(0, np.pi, n)
    x0, y0 = x * np.cos(g) + y * np.sin(g), -x * np.sin(g) + y * np.cos(g)
    psi_max = np.arctan((width / 2 + 2) / (half - 2))  # wider than the face as seen from the voxel
    psi = rng.uniform(-psi_max, psi_max, n)
    alpha = rng.normal(0, np.deg2rad(scanner.acollinearity_fwhm_deg) / FWHM_PER_SIGMA, n)

    def detect(side, angle):
        dx, dy = side * np.cos(angle), side * np.sin(angle)
        y_entry = y0 + (half - side * x0) / np.abs(dx) * dy
        path = rng.exponential(1 / scanner.mu_per_mm, n)
        y_int = y_entry + path * dy
        ok = (np.abs(y_entry) <= width / 2) & (path * np.abs(dx) <= scanner.depth_mm) & (np.abs(y_int) <= width / 2)
        y_int = y_int + rng.normal(0, scanner.intrinsic_fwhm_mm / FWHM_PER_SIGMA, n)
        return ok, y_int + w * (rng.uniform(size=n) - 0.5)

    ok_b, y_b = detect(1.0, psi)
    ok_a, y_a = detect(-1.0, psi + alpha)
    ok = ok_a & ok_b
    y_a, y_b = y_a[ok], y_b[ok]
    s = h * (y_a + y_b) / np.sqrt(4 * h * h + (y_b - y_a) ** 2)
    return np.floor(s / scanner.radial_bin_mm + 0.5)  # centred bins


# --- binning and reproducibility ---------------------------------------------------------------------------

@pytest.fixture
def blob(rng):
    """A random extended activity on the scanner's grid: a box of random values, a quarter of them 0."""
    g = SCANNER.grid
    activity = np.zeros(g.shape, np.float32)
    box = (slice(2, g.nz - 2), slice(4, g.ny - 3), slice(3, g.nx - 5))
    values = rng.uniform(0.0, 1.0, activity[box].shape)
    values[rng.uniform(size=values.shape) < 0.25] = 0
    activity[box] = values
    return activity, g


def test_trace_bins_like_the_world_frame_recipe_of_geometry(blob):
    activity, grid = blob
    trace = trace_decays(SCANNER, activity, 300_000, seed=7, grid=grid)
    detected = trace["outcome"] >= OUTSIDE_RADIAL
    assert detected.sum() > 5000
    t = {k: v[detected] for k, v in trace.items()}
    a, r1, r2, rho = world_frame_bins(t, SCANNER)
    inside = (rho >= 0) & (rho < SCANNER.n_radial)
    expected = np.where(inside, np.ravel_multi_index((a, r1, r2, np.clip(rho, 0, SCANNER.n_radial - 1)),
                                                     SCANNER.sinogram_shape), -1)
    # float32 (compiled) vs float64 (here): only events within ~1e-6 mm of a bin edge may differ
    differ = expected != t["index"]
    assert differ.mean() <= 1e-4, f"{differ.sum()} of {differ.size} coincidences binned differently"
    assert np.all((t["outcome"] == BINNED) == (t["index"] >= 0))
    assert np.all(trace["index"][~detected] == -1)


def test_trace_and_sinogram_hold_the_same_decays(blob):
    activity, grid = blob
    sino, st = simulate(SCANNER, activity, grid, 200_000, seed=11)
    trace = trace_decays(SCANNER, activity, st.n_in_band, seed=st.seed, grid=grid)
    binned = trace["index"][trace["index"] >= 0]
    np.testing.assert_array_equal(sino.ravel(), np.bincount(binned, minlength=SCANNER.n_lors))
    assert st.n_binned == binned.size
    assert st.n_outside_radial == np.sum(trace["outcome"] == OUTSIDE_RADIAL)
    assert st.n_detected_both == np.sum(trace["outcome"] >= OUTSIDE_RADIAL)
    assert st.n_entered_both == np.sum(trace["outcome"] >= 1)


def test_traced_annihilations_follow_the_activity(blob):
    activity, grid = blob
    trace = trace_decays(SCANNER, activity, 400_000, seed=3, grid=grid)
    sigma = SCANNER.positron_range_fwhm_mm / FWHM_PER_SIGMA
    # Means: the activity's centroid (the range is zero-mean); variances: the activity's voxel-centre
    # variance + v^2/12 (uniform in the voxel) + sigma^2 (range), per axis.
    for axis, col in ((0, 2), (1, 1), (2, 0)):  # grid axes z, y, x; trace columns x, y, z
        c = grid.centres(axis)
        w = activity.sum(axis=tuple(k for k in range(3) if k != axis)).astype(np.float64)
        mean = np.sum(w * c) / w.sum()
        var = np.sum(w * (c - mean) ** 2) / w.sum() + grid.voxel_size[axis] ** 2 / 12 + sigma**2
        x = trace["point"][:, col].astype(np.float64)
        assert abs(x.mean() - mean) < Z_MAX * np.sqrt(var / x.size)
        assert abs(x.var() / var - 1) < Z_MAX * np.sqrt(2 / x.size) * 1.5  # kurtosis margin


def test_same_seed_same_sinogram_whatever_threads_and_chunks(blob):
    activity, grid = blob
    n = 300_000
    a, sa = simulate(SCANNER, activity, grid, n, seed=5, threads=1)
    b, sb = simulate(SCANNER, activity, grid, n, seed=5, threads=2, chunk=10_007)
    np.testing.assert_array_equal(a, b)
    assert (sa.n_binned, sa.n_detected_both, sa.n_entered_both) == (sb.n_binned, sb.n_detected_both, sb.n_entered_both)
    c, _ = simulate(SCANNER, activity, grid, n, seed=6)
    assert np.abs(a - c).sum() > 0.1 * a.sum()


def test_counts_scale_with_decays_and_are_nested(blob):
    activity, grid = blob
    n = decays_for_band(SCANNER, activity, grid, 250_000)
    small, s1 = first_simulate(SCANNER, activity, n, seed=21, backend="cpu", grid=grid)
    large, s4 = first_simulate(SCANNER, activity, 4 * n, seed=22, backend="cpu", grid=grid)
    for sino, st, decays in ((small, s1, n), (large, s4, 4 * n)):
        assert st.n_decays == decays                    # n_decays: ALL decays, as asked
        assert sino.sum() == st.n_binned
        assert st.n_binned + st.n_outside_radial == st.n_detected_both
        assert st.n_detected_both <= st.n_entered_both <= st.n_in_band <= st.n_decays
        assert 0 < st.band_fraction < 1
        assert st.sensitivity == st.n_binned / st.n_decays
    p1, p4 = s1.n_binned / n, s4.n_binned / (4 * n)
    se = np.sqrt(p1 * (1 - p1) / n + p4 * (1 - p4) / (4 * n))
    assert abs(p1 - p4) < Z_MAX * se


def test_n_decays_counts_all_decays_and_the_band_is_a_binomial_share(blob):
    # n_decays means every decay of the activity (isotropic pair axes): the followed band decays are
    # Binomial(n_decays, band_fraction), drawn from the seed -- so a user's n_decays is not a band count
    activity, grid = blob
    band = direction_band(SCANNER, activity, grid=grid)
    n = 10**9                                           # all decays; only the band's ~1 % are followed
    _, st = first_simulate(SCANNER, activity, n, seed=23, backend="cpu", grid=grid)
    assert st.n_decays == n and st.band_fraction == band["band_fraction"]
    f = st.band_fraction
    assert abs(st.n_in_band - n * f) < Z_MAX * np.sqrt(n * f * (1 - f))
    # per seed: another seed draws another band count, the same seed the same data
    _, again = first_simulate(SCANNER, activity, n, seed=23, backend="cpu", grid=grid)
    _, other = first_simulate(SCANNER, activity, n, seed=24, backend="cpu", grid=grid)
    assert again.n_in_band == st.n_in_band and again.n_binned == st.n_binned
    assert other.n_in_band != st.n_in_band
    # over many seeds the band counts have the binomial's mean and variance
    m = 10**6
    counts = np.array([first_simulate(SCANNER, activity, m, seed=k, backend="cpu", grid=grid)[1].n_in_band
                       for k in range(200)], np.float64)
    var = m * f * (1 - f)
    assert abs(counts.mean() - m * f) < Z_MAX * np.sqrt(var / counts.size)
    assert abs(counts.var(ddof=1) / var - 1) < Z_MAX * np.sqrt(2 / (counts.size - 1))


def test_seed_none_or_a_generator(blob):
    activity, grid = blob
    n = decays_for_band(SCANNER, activity, grid, 20_000)
    a, sa = first_simulate(SCANNER, activity, n, backend="cpu", grid=grid)                  # fresh entropy
    b, sb = first_simulate(SCANNER, activity, n, seed=sa.seed, backend="cpu", grid=grid)    # reproduced
    np.testing.assert_array_equal(a, b)
    assert sa.n_in_band == sb.n_in_band
    c, sc = first_simulate(SCANNER, activity, n, seed=np.random.default_rng(4), backend="cpu", grid=grid)
    d, sd = first_simulate(SCANNER, activity, n, seed=np.random.default_rng(4), backend="cpu", grid=grid)
    assert sc.seed == sd.seed
    np.testing.assert_array_equal(c, d)


def test_progress_callback_sees_every_chunk(blob):
    activity, grid = blob
    seen = []
    _, st = simulate(SCANNER, activity, grid, 50_000, seed=1, chunk=20_000, progress=seen.append)
    assert 40_000 < st.n_in_band < 60_000
    assert seen == progress_reports(st.n_decays, st.n_in_band, 20_000)     # in all decays, the last n_decays


# --- central point source: radial profile, angles, row pairs ----------------------------------------------------

def test_aperture_alone_gives_the_halved_trapezoid():
    # No positron range, no acollinearity, mu so large that every photon interacts at the front
    # face: both photons of a pair through the centre interact at mirror-image points, so s is
    # cos(psi) times the mean of two independent U(-w/2, w/2) offsets -- a triangle of half-width
    # cos(psi) w / 2.
    sc = RotatingScanner.small(positron_range_fwhm_mm=0.0, acollinearity_fwhm_deg=0.0, mu_per_mm=1000.0)
    activity, grid = tiny_central_point()
    sino, st = simulate(sc, activity, grid, 1_000_000, seed=2)
    counts = sino.sum(axis=(0, 1, 2))
    centre = (sc.n_radial - 1) // 2
    k = np.arange(-2, 3)  # the triangle (half-width 0.75 mm) lies within 2 bins of the centre
    # in-plane angles of the detected pairs: uniform over the face, |tan psi| <= (W/2) / (D/2)
    psi_face = np.arctan(sc.n_columns * sc.pitch_mm / sc.head_distance_mm)
    psi = (np.arange(4000) + 0.5) / 4000 * psi_face
    p = truncated_triangle_bins(np.cos(psi) * sc.crystal_mm / 2, np.append(k - 0.5, k[-1] + 0.5) * sc.radial_bin_mm)
    observed = counts[centre + k]
    n = observed.sum()
    # A pair straddles a crystal edge only when the two depths differ by ~1/mu: ~1e-4 of the pairs
    assert counts.sum() - n <= 1e-3 * counts.sum()
    chi2 = np.sum((observed - n * p) ** 2 / (n * p))
    assert chi2 < stats.chi2.ppf(1 - CHI2_P, k.size - 1), (observed, n * p)


@pytest.mark.parametrize("kw", [{}, {"intrinsic_fwhm_mm": 1.0}], ids=["default physics", "intrinsic blur"])
def test_central_point_radial_width_matches_the_inplane_model(kw, rng):
    sc = RotatingScanner.small(**kw)
    activity, grid = central_point(sc)
    sino, st = simulate(sc, activity, grid, 2_000_000, seed=4)
    mean, var, se_mean, se_var = radial_moments(sino.sum(axis=(0, 1, 2)), sc)
    assert abs(mean) < max(Z_MAX * se_mean, 0.02 * sc.radial_bin_mm)
    rho = inplane_model_rho(sc, grid, rng, 4_000_000) * sc.radial_bin_mm
    model_var = rho.var()
    # 2 %: the model's left-out axial effects (measured 0.5 %) plus ~4 standard errors of each variance
    assert abs(var / model_var - 1) < 0.02, (var, model_var, se_var)
    # and the width is not the aperture's alone: the other blurs add at least a third to it
    assert var > 1.33 * (sc.crystal_mm**2 / 24 + sc.radial_bin_mm**2 / 12)


def test_central_point_fills_every_angle_evenly_and_row_pairs_symmetrically():
    activity, grid = central_point(SCANNER)
    sino, _ = simulate(SCANNER, activity, grid, 2_000_000, seed=8)
    per_angle = sino.sum(axis=(1, 2, 3))
    assert np.all(per_angle > 0)
    expected = per_angle.sum() / SCANNER.n_angles  # g is uniform and the source sits on the axis
    chi2 = np.sum((per_angle - expected) ** 2 / expected)
    assert chi2 < stats.chi2.ppf(1 - CHI2_P, SCANNER.n_angles - 1)
    delta, _, _ = SCANNER.lor_rows()
    by_delta = np.array([sino.sum(axis=(0, 3))[delta == d].sum() for d in range(-(SCANNER.n_rows - 1), SCANNER.n_rows)])
    plus, minus = by_delta[SCANNER.n_rows:], by_delta[:SCANNER.n_rows - 1][::-1]
    assert plus.sum() > 0.1 * by_delta.sum()  # oblique row pairs are there
    chi2 = np.sum((plus - minus) ** 2 / (plus + minus))  # each term ~ chi2(1) when delta and -delta are alike
    assert chi2 < stats.chi2.ppf(1 - CHI2_P, plus.size)


# --- off-centre point ------------------------------------------------------------------------------------------

def test_off_centre_point_follows_the_sinusoid_and_its_slice(rng):
    # A head four times wider than the small default keeps the transaxial edge effects small (below).
    sc = RotatingScanner.small(n_columns=48)
    grid = sc.grid
    x, y = grid.centres(2), grid.centres(1)
    r = np.hypot(*np.meshgrid(y, x, indexing="ij"))
    iy, ix = rng.choice(np.argwhere((r >= 1.0) & (r <= 2.0)))  # 2 mm: the profile stays 4 sigma inside the FOV
    iz = grid.nz // 2 + rng.choice([-1, 1])
    x0, y0, z0 = x[ix], y[iy], grid.centres(0)[iz]
    sino, st = simulate(sc, point_source(grid, iz, iy, ix), grid, 3_000_000, seed=12)
    # the tails beyond the field of view (DOI parallax of a 77 mm head) are too few to move a centroid
    assert st.n_outside_radial <= 1e-3 * st.n_detected_both

    # Head edges pull centroids toward the centre: photons entering near an edge obliquely leave
    # through the side face when they interact deep, which removes events on one side of the pair
    # only, and the crystal lattice is cut where the accepted pairs end. An independent NumPy model
    # of the same physics gives the same pull (radially 1.7 % of the offset for this head; axially
    # 0.740 mm for a source at 0.8 mm in the 6-row head); the bounds allow 5 % and 10 % of the offset.
    # Each angle bin averages phi over +-pi / (2 n_angles) uniformly (g is uniform): E[sin phi] and
    # E[cos phi] carry the factor sin(h) / h of the half bin h.
    half_bin = np.pi / (2 * sc.n_angles)
    s_expected = np.sinc(half_bin / np.pi) * (-x0 * np.sin(sc.angles_rad) + y0 * np.cos(sc.angles_rad))
    for a in range(sc.n_angles):
        mean, _, se, _ = radial_moments(sino[a].sum(axis=(0, 1)), sc)
        assert abs(mean - s_expected[a]) < Z_MAX * se + 0.05 * abs(s_expected[a]) + 0.01, (a, mean, s_expected[a])

    _, _, kc = sc.lor_rows()
    z_slice = (kc - (sc.n_rows - 1)) * sc.slice_mm  # the slice through which the LOR's centre passes
    per_pair = sino.sum(axis=(0, 3))
    n = per_pair.sum()
    z_mean = np.sum(per_pair * z_slice) / n
    z_se = np.sqrt(np.sum(per_pair * (z_slice - z_mean) ** 2) / n / n)
    assert abs(z_mean - z0) < Z_MAX * z_se + 0.1 * abs(z0), (z_mean, z0)
    assert np.sign(z_mean) == np.sign(z0)


# --- detection efficiency -----------------------------------------------------------------------------------

def pair_detection_per_decay(scanner, n_y=800, n_z=400):
    """(entered both faces, detected both) per isotropic decay of a point at the centre, no blurs.

    The pair is collinear, so it enters both heads iff photon 1 hits head B's face: probability
    Omega / (2 pi) (either photon may go to B). A photon hitting the face at (y, z), distance
    r = sqrt(d^2 + y^2 + z^2) from the source (d = D/2), interacts in the crystal if its Exp(mu) path
    ends before it reaches the back face (L r / d) or a side face ((W/2 - |y|) r / |y|, likewise z);
    the two photons hit mirror points and attenuate independently, so the pair counts P(y, z)^2.
    Midpoint quadrature over the face with dOmega = d / r^3 dy dz (converged to 1e-5 here).
    """
    d = 0.5 * scanner.head_distance_mm
    w, h = scanner.n_columns * scanner.pitch_mm, scanner.n_rows * scanner.pitch_mm
    y = ((np.arange(n_y) + 0.5) / n_y - 0.5) * w
    z = ((np.arange(n_z) + 0.5) / n_z - 0.5) * h
    Y, Z = np.meshgrid(y, z, indexing="ij")
    r = np.sqrt(d * d + Y * Y + Z * Z)
    path = np.minimum.reduce([scanner.depth_mm * r / d, (w / 2 - np.abs(Y)) * r / np.abs(Y),
                              (h / 2 - np.abs(Z)) * r / np.abs(Z)])
    prob = 1 - np.exp(-scanner.mu_per_mm * path)
    d_omega = d / r**3 * (w / n_y) * (h / n_z)
    omega = 4 * np.arcsin(w * h / 4 / np.sqrt((w * w / 4 + d * d) * (h * h / 4 + d * d)))  # rectangle, exact
    return omega / (2 * np.pi), np.sum(prob**2 * d_omega) / (2 * np.pi)


def test_detection_efficiency_of_a_central_point():
    # The default head width (48 columns, tan(psi) up to 0.48) makes obliquity matter: a path of
    # L / cos(theta) to the back face, and side faces crossed by deep oblique interactions.
    sc = RotatingScanner.small(n_columns=48, positron_range_fwhm_mm=0.0, acollinearity_fwhm_deg=0.0)
    activity, grid = tiny_central_point()
    _, st = simulate(sc, activity, grid, 2_000_000, seed=13)
    n = st.n_decays
    entered, detected = pair_detection_per_decay(sc)
    # Fractions of ALL decays (binomial: the band's share is binomial, and so is each class within it),
    # compared with the expectations per isotropic decay.
    for measured, p in ((st.n_entered_both, entered), (st.n_binned, detected)):
        assert 0 < p <= st.band_fraction
        assert abs(measured / n - p) < Z_MAX * np.sqrt(p * (1 - p) / n) + 1e-4 * p, (measured / n, p)


def test_direction_band_loses_no_coincidence():
    # Photon 1's band must contain every direction that can reach head B from the source, whatever
    # the source. Widening the band (a source voxel far off-axis, zero activity, widens the bounding
    # box) must leave the sensitivity of a central point unchanged.
    sc = RotatingScanner.small(positron_range_fwhm_mm=0.0, acollinearity_fwhm_deg=0.0)
    grid = ImageGrid((3, 101, 101), (2.0, 0.5, 0.5))
    tight = point_source(grid, 1, 50, 50)
    wide = tight.copy()
    wide[0, 0, 0] = wide[2, 100, 100] = 1e-9  # ~1e-9 of the decays, but the box spans 25 mm
    _, st_tight = simulate(sc, tight, grid, 1_000_000, seed=17)
    _, st_wide = simulate(sc, wide, grid, 8_000_000, seed=18)
    assert st_wide.band_fraction > 10 * st_tight.band_fraction
    # sensitivity = binned / decays, binomial over all decays
    q1, q2 = st_tight.sensitivity, st_wide.sensitivity
    se = np.hypot(np.sqrt(q1 * (1 - q1) / st_tight.n_decays), np.sqrt(q2 * (1 - q2) / st_wide.n_decays))
    assert abs(q1 - q2) < Z_MAX * se


# --- bad input --------------------------------------------------------------------------------------------------

def _good():
    activity, grid = central_point(SCANNER)
    return dict(scanner=SCANNER, activity=activity, grid=grid, n_decays=1000)


def _with(**kw):
    d = _good()
    d.update(kw)
    return d


def _activity(mutate):
    a = _good()["activity"].copy()
    mutate(a)
    return a


@pytest.mark.parametrize("args, extra, exc, name", [
    (_with(activity=_good()["activity"].astype(np.float64)), {}, TypeError, "activity"),
    (_with(activity=[[[1.0]]]), {}, TypeError, "activity"),
    (_with(activity=np.ones((3, 4, 5), np.float32)), {}, ValueError, "activity"),
    (_with(activity=np.asfortranarray(np.ones((11, 21, 21), np.float32))), {}, ValueError, "activity"),
    (_with(activity=_activity(lambda a: a.__setitem__((0, 0, 0), -1.0))), {}, ValueError, "activity"),
    (_with(activity=_activity(lambda a: a.__setitem__((0, 0, 0), np.nan))), {}, ValueError, "activity"),
    (_with(activity=_activity(lambda a: a.__setitem__((0, 0, 0), np.inf))), {}, ValueError, "activity"),
    (_with(activity=np.zeros((11, 21, 21), np.float32)), {}, ValueError, "activity"),
    (_with(n_decays=0), {}, ValueError, "n_decays"),
    (_with(n_decays=-5), {}, ValueError, "n_decays"),
    (_with(n_decays=2.5), {}, TypeError, "n_decays"),
    (_with(n_decays=True), {}, TypeError, "n_decays"),
    (_with(n_decays=2**63), {}, ValueError, "n_decays"),
    (_with(n_decays=None), {}, TypeError, "n_decays"),
    (_with(scanner=SCANNER.to_dict()), {}, TypeError, "scanner"),
    (_with(grid=(11, 21, 21)), {}, TypeError, "grid"),
    (_good(), dict(seed=-1), ValueError, "seed"),
    (_good(), dict(seed=2**64), ValueError, "seed"),
    (_good(), dict(seed="1"), TypeError, "seed"),
    (_good(), dict(seed=1.5), TypeError, "seed"),
    (_good(), dict(backend="gpu"), ValueError, "backend"),
    (_good(), dict(backend=1), TypeError, "backend"),
    (_good(), dict(threads=0), ValueError, "threads"),
    (_good(), dict(chunk=0), ValueError, "chunk"),
    (_good(), dict(chunk=2**63), ValueError, "chunk"),
    (_good(), dict(xp="numpy"), TypeError, "xp"),
    (_good(), dict(progress="yes"), TypeError, "progress"),
])
def test_bad_input_names_the_argument(args, extra, exc, name):
    kw = dict(backend="cpu", progress=False)
    kw.update(extra)
    with pytest.raises(exc, match=name):
        first_simulate(args["scanner"], args["activity"], args["n_decays"], grid=args["grid"], **kw)


def test_activity_beyond_the_heads_is_refused():
    grid = ImageGrid((1, 1, 401), 0.5)  # x from -100 mm to 100 mm; the front faces are 80 mm away
    activity = np.zeros(grid.shape, np.float32)
    activity[0, 0, 0] = 1.0
    with pytest.raises(ValueError, match="activity"):
        first_simulate(SCANNER, activity, 1000, backend="cpu", grid=grid)


def test_binding_checks_its_arguments():
    activity, grid = central_point(SCANNER)
    params = scanner_parameters(SCANNER)
    out = np.zeros(SCANNER.sinogram_shape, np.float32)
    voxel = list(grid.voxel_size)
    with pytest.raises(ValueError, match="scanner: missing key 'mean_depth_mm'"):
        _core.first_mc_simulate_cpu({k: v for k, v in params.items() if k != "mean_depth_mm"}, activity, voxel,
                                    10, 0, out, 10)
    with pytest.raises(ValueError, match="scanner mu_per_mm"):
        _core.first_mc_simulate_cpu(dict(params, mu_per_mm=-1.0), activity, voxel, 10, 0, out, 10)
    with pytest.raises(TypeError, match="activity"):
        _core.first_mc_simulate_cpu(params, activity.astype(np.int32), voxel, 10, 0, out, 10)
    with pytest.raises(ValueError, match="out"):
        _core.first_mc_simulate_cpu(params, activity, voxel, 10, 0, out[:-1], 10)
    with pytest.raises(TypeError, match="out"):
        _core.first_mc_simulate_cpu(params, activity, voxel, 10, 0, out.astype(np.float64), 10)
    with pytest.raises(ValueError, match="n_decays"):
        _core.first_mc_simulate_cpu(params, activity, voxel, 0, 0, out, 10)
    with pytest.raises(ValueError, match="chunk_decays"):
        _core.first_mc_simulate_cpu(params, activity, voxel, 10, 0, out, 0)
    with pytest.raises(ValueError, match="n_decays"):
        _core.first_mc_trace_cpu(params, activity, voxel, 2**27, 0)


@pytest.mark.skipif(directpet.cuda_device_count() > 0, reason="a CUDA device is usable here")
def test_cuda_backend_without_a_gpu_is_an_error():
    activity, grid = central_point(SCANNER)
    with pytest.raises(RuntimeError, match="cuda"):
        first_simulate(SCANNER, activity, 1000, backend="cuda", grid=grid)


# --- GPU ---------------------------------------------------------------------------------------------------------

def _assert_same_decays(cpu, cpu_stats, gpu, gpu_stats):
    """CUDA and CPU binned the same decays, up to CPU_GPU_MISMATCH of the events."""
    allowed = max(CPU_GPU_MISMATCH * cpu_stats.n_binned, 2)
    assert gpu_stats.n_decays == cpu_stats.n_decays and gpu_stats.n_in_band == cpu_stats.n_in_band
    assert gpu_stats.band_fraction == cpu_stats.band_fraction
    for name in ("n_entered_both", "n_detected_both", "n_binned", "n_outside_radial"):
        assert abs(getattr(gpu_stats, name) - getattr(cpu_stats, name)) <= allowed, name
    moved = np.abs(np.asarray(gpu, np.float64) - cpu).sum() / 2  # a moved event changes two bins
    print(f"CPU vs CUDA: {moved:g} of {cpu_stats.n_binned} binned events differ")
    assert moved <= allowed


@pytest.mark.gpu
def test_cuda_matches_cpu_decay_for_decay(blob):
    activity, grid = blob
    cpu, cs = simulate(SCANNER, activity, grid, 3_000_000, seed=31)
    gpu, gs = first_simulate(SCANNER, activity, cs.n_decays, seed=31, backend="cuda", grid=grid, xp=np)
    assert isinstance(gpu, np.ndarray) and gs.backend == "cuda"
    _assert_same_decays(cpu, cs, gpu, gs)


@pytest.mark.gpu
def test_cuda_matches_cpu_for_a_point_with_every_blur():
    sc = RotatingScanner.small(intrinsic_fwhm_mm=0.8)
    activity, grid = central_point(sc)
    cpu, cs = simulate(sc, activity, grid, 2_000_000, seed=32)
    gpu, gs = first_simulate(sc, activity, cs.n_decays, seed=32, backend="cuda", grid=grid, xp=np)
    _assert_same_decays(cpu, cs, gpu, gs)


@pytest.mark.gpu
def test_cuda_result_does_not_depend_on_chunks(blob):
    activity, grid = blob
    n = decays_for_band(SCANNER, activity, grid, 1_000_000)
    a, sa = first_simulate(SCANNER, activity, n, seed=33, backend="cuda", grid=grid, xp=np)
    seen = []
    b, sb = first_simulate(SCANNER, activity, n, seed=33, backend="cuda", progress=seen.append, grid=grid, xp=np,
                           chunk=300_000)
    np.testing.assert_array_equal(a, b)
    assert sa.n_binned == sb.n_binned
    assert seen == progress_reports(n, sb.n_in_band, 300_000)


@pytest.mark.gpu
def test_cuda_returns_cupy_when_asked(blob):
    cupy = pytest.importorskip("cupy")
    activity, grid = blob
    n = decays_for_band(SCANNER, activity, grid, 500_000)
    on_gpu, st = first_simulate(SCANNER, cupy.asarray(activity), n, seed=34, backend="cuda", grid=grid, xp=cupy)
    assert isinstance(on_gpu, cupy.ndarray) and on_gpu.dtype == cupy.float32
    assert on_gpu.shape == SCANNER.sinogram_shape
    on_host, _ = first_simulate(SCANNER, activity, n, seed=34, backend="cuda", grid=grid, xp=np)
    np.testing.assert_array_equal(cupy.asnumpy(on_gpu), on_host)
    assert float(on_gpu.sum()) == st.n_binned
