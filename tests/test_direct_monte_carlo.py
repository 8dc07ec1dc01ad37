"""Compiled (C++/OpenMP, CUDA) event simulation fused with deposition: directpet.direct.simulate.

The compiled path draws its events from other random streams than the NumPy path, so the two are
compared **in distribution**:

* Counts in categories that partition the events (views, slices, radial rings, phantom regions,
  each plus "outside the grid") are compared with the two-sample chi-square test for multinomial
  counts, ``sum_k (a_k/N_a - b_k/N_b)^2 / (p_k (1/N_a + 1/N_b))`` with the pooled ``p_k``, which
  is chi-square with K - 1 degrees of freedom when both samples come from the same distribution.
  The bound is its 1 - 1e-4 quantile: a correct implementation fails one such check in 10^4
  seeds (the seeds are fixed, so a passing test keeps passing).
* Means and spreads are compared by z-scores against |z| < 4.5 (two-sided 7e-6), with standard
  errors estimated from the data (for a variance: sqrt((m4 - m2^2) / N)).
* The point-source test checks the MLP covariance against its closed form: the MLP is the blurred
  annihilation point minus (c/2) n sigma_t u, so ``Cov = sigma_tof_mm^2 E[u u^T] + sigma_blur^2
  E[I - u u^T] + diag(v^2/12)`` (the last term is the nearest-voxel rounding), with u isotropic in
  the tilt band: ``E[u_z^2] = sin^2(theta_max)/3``, ``E[u_x^2] = E[u_y^2] = (1 - E[u_z^2]) / 2``.

GPU tests (``gpu`` marker) repeat the checks CUDA vs CPU.
"""

import numpy as np
import pytest
from scipy import stats

import directpet
from directpet import _core
from types import SimpleNamespace

from directpet.direct import (CylindricalScanner, MonteCarloStats, ViewSet, deposit, simulate, simulate_events,
                              simulate_histo_images, to_numpy)
from directpet.direct.monte_carlo import phantom_components, scanner_parameters
from directpet.geometry import ImageGrid
from directpet.sim import AnalyticPhantom, CylinderSource, PointSource, SphereSource, point_source_phantom, sphere_phantom

SCANNER = CylindricalScanner()
GRID = ImageGrid((16, 48, 48), 8.0)
VIEWS = ViewSet(8, 3)
N_COMPILED = 3_000_000
N_PYTHON = 800_000
CHI2_P = 1e-4
Z_MAX = 4.5


# --- helpers -------------------------------------------------------------------------------------------

def _chi2_two_sample(a, b):
    """(statistic, bound) of the two-sample multinomial chi-square test over categories a, b."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    keep = (a + b) > 0
    a, b = a[keep], b[keep]
    na, nb = a.sum(), b.sum()
    p = (a + b) / (na + nb)
    stat = float(np.sum((a / na - b / nb) ** 2 / (p * (1 / na + 1 / nb))))
    return stat, float(stats.chi2.ppf(1 - CHI2_P, keep.sum() - 1))


def _assert_same_distribution(a, b, what):
    stat, bound = _chi2_two_sample(a, b)
    assert stat < bound, f"{what}: chi2 {stat:.1f} >= bound {bound:.1f} ({len(a)} categories)"


def _with_outside(counts, n_outside):
    return np.append(np.asarray(counts, np.float64), n_outside)


def _voxel_coords(grid):
    z, y, x = (grid.centres(a) for a in range(3))
    return np.meshgrid(z, y, x, indexing="ij")


def _weighted_moments(values, weights):
    """(mean, variance, standard error of the mean, standard error of the variance)."""
    n = weights.sum()
    m = np.sum(values * weights) / n
    d = values - m
    m2, m4 = np.sum(d**2 * weights) / n, np.sum(d**4 * weights) / n
    return m, m2, np.sqrt(m2 / n), np.sqrt(max(m4 - m2**2, 0.0) / n)


def _along_view_moments(histos, grid, viewset):
    """Moments of the MLP coordinate along each count's view direction, over all views."""
    z, y, x = _voxel_coords(grid)
    vals, wts = [], []
    for v, view in enumerate(viewset):
        u = view.direction
        vals.append((x * u[0] + y * u[1] + z * u[2]).ravel())
        wts.append(np.asarray(histos[v], np.float64).ravel())
    return _weighted_moments(np.concatenate(vals), np.concatenate(wts))


def _z(a, b, se_a, se_b):
    return (a - b) / np.hypot(se_a, se_b)


def _compare_histos(ha, sa, hb, sb, grid, viewset):
    """Distribution checks of two deposited samples (histos, stats) of the same phantom."""
    ha, hb = np.asarray(ha, np.float64), np.asarray(hb, np.float64)
    # Per-view totals (the tilt-bin acceptance), per-slice totals, radial profile.
    _assert_same_distribution(_with_outside(ha.sum(axis=(1, 2, 3)), sa.n_outside_grid),
                              _with_outside(hb.sum(axis=(1, 2, 3)), sb.n_outside_grid), "per-view totals")
    _assert_same_distribution(_with_outside(ha.sum(axis=(0, 2, 3)), sa.n_outside_grid),
                              _with_outside(hb.sum(axis=(0, 2, 3)), sb.n_outside_grid), "per-slice totals")
    z, y, x = _voxel_coords(grid)
    ring = np.minimum((np.hypot(x, y) / 20.0).astype(int), 12)
    prof_a = np.bincount(ring.ravel(), ha.sum(axis=0).ravel(), minlength=13)
    prof_b = np.bincount(ring.ravel(), hb.sum(axis=0).ravel(), minlength=13)
    _assert_same_distribution(_with_outside(prof_a, sa.n_outside_grid),
                              _with_outside(prof_b, sb.n_outside_grid), "radial profile")
    # The MLP spread along the view direction (activity extent convolved with the TOF blur).
    ma, va, sma, sva = _along_view_moments(ha, grid, viewset)
    mb, vb, smb, svb = _along_view_moments(hb, grid, viewset)
    assert abs(_z(ma, mb, sma, smb)) < Z_MAX, (ma, mb)
    assert abs(_z(va, vb, sva, svb)) < Z_MAX, (np.sqrt(va), np.sqrt(vb))
    # Acceptance: accepted trues per decay drawn in the band.
    pa, pb = sa.n_trues / sa.n_in_band, sb.n_trues / sb.n_in_band
    p = (sa.n_trues + sb.n_trues) / (sa.n_in_band + sb.n_in_band)
    se = np.sqrt(p * (1 - p) * (1 / sa.n_in_band + 1 / sb.n_in_band))
    assert abs(pa - pb) <= Z_MAX * se, (pa, pb)


def _python_reference(info, scanner, grid, viewset, n, seed, **kw):
    """The NumPy path: simulate_events streamed through deposit -> (histos, stats)."""
    stream = simulate_events(scanner, info, n, seed=seed, progress=False, chunk_size=4_000_000, **kw)
    histos, st = deposit(stream, grid, viewset, return_stats=True)
    return histos, SimpleNamespace(n_trues=st.n_events, n_in_band=st.n_in_band, n_deposited=st.n_deposited,
                                   n_outside_grid=st.n_outside_grid, n_outside_views=st.n_outside_views)


def _engine_stats(tally):
    """The binding's tally (its ``n_decays`` are the decays drawn in the band) as stats."""
    return SimpleNamespace(n_in_band=tally["n_decays"], **{k: v for k, v in tally.items() if k != "n_decays"})


@pytest.fixture(scope="module")
def sphere_info():
    return sphere_phantom(GRID)[1]


@pytest.fixture(scope="module")
def sphere_compiled(sphere_info):
    return simulate(SCANNER, sphere_info, n_trues=N_COMPILED, grid=GRID, viewset=VIEWS, backend="cpu", seed=11)


@pytest.fixture(scope="module")
def sphere_python(sphere_info):
    return _python_reference(sphere_info, SCANNER, GRID, VIEWS, N_PYTHON, seed=12)


# --- agreement with the NumPy path ---------------------------------------------------------------------

def test_cpu_matches_python_path_on_sphere_phantom(sphere_compiled, sphere_python):
    (hc, sc), (hp, sp) = sphere_compiled, sphere_python
    assert isinstance(hc, np.ndarray) and hc.dtype == np.float32 and hc.shape == (len(VIEWS),) + GRID.shape
    assert sc.backend == "cpu" and sc.n_trues == N_COMPILED
    _compare_histos(hc, sc, hp, sp, GRID, VIEWS)


def test_cpu_counts_are_exact(sphere_compiled):
    h, s = sphere_compiled
    assert s.n_trues == N_COMPILED
    assert h.sum(dtype=np.float64) == s.n_deposited
    assert s.n_deposited + s.n_outside_views + s.n_outside_grid == N_COMPILED
    assert s.n_outside_views == 0          # the views cover the scanner's whole tilt band
    assert np.all(h == np.round(h)) and h.min() >= 0


def test_narrow_views_drop_outside_tilts(sphere_info):
    """Views over +-5 degrees of a +-10 degree scanner: the outer tilts are counted as outside, in
    the same proportion as for the NumPy path's events."""
    vs = ViewSet(4, 2, 5.0)
    n = 200_000
    h, s = simulate(SCANNER, sphere_info, n_trues=n, grid=GRID, viewset=vs, backend="cpu", seed=3)
    assert h.sum() + s.n_outside_views + s.n_outside_grid == n
    events = next(simulate_events(SCANNER, sphere_info, n, seed=4, progress=False))
    d = (events.p2 - events.p1).astype(np.float64)
    outside_py = np.mean(np.abs(d[:, 2]) / np.linalg.norm(d, axis=1) > np.sin(np.deg2rad(5.0)))
    outside = s.n_outside_views / n
    p = 0.5 * (outside + outside_py)
    assert 0.3 < p < 0.7 and abs(outside - outside_py) < Z_MAX * np.sqrt(2 * p * (1 - p) / n)


def test_point_source_mlp_covariance():
    """MLP of a point source: centred on it, TOF sigma (c/2 sigma_t) along the LOR, blur across."""
    grid = ImageGrid((32, 64, 64), 4.0)
    src = np.array([13.1, -6.9, 3.1])
    _, info = point_source_phantom(grid, [src])
    n = 1_000_000
    h, s = simulate(SCANNER, info, n_trues=n, grid=grid, viewset=VIEWS, backend="cpu", seed=5)
    assert s.n_in_band == n                  # a central point source: every band direction hits
    assert s.band_fraction == pytest.approx(np.sin(SCANNER.theta_max))
    f = s.band_fraction                          # all decays: a fraction f of them in the band
    assert abs(s.n_in_band / s.n_decays - f) < Z_MAX * np.sqrt(f * (1 - f) / s.n_decays)
    assert s.n_outside_grid < 1e-4 * n
    w = h.sum(axis=0, dtype=np.float64).ravel()
    z, y, x = (c.ravel() for c in _voxel_coords(grid))
    e_uz2 = np.sin(SCANNER.theta_max) ** 2 / 3
    e_u2 = np.array([(1 - e_uz2) / 2, (1 - e_uz2) / 2, e_uz2])
    st, sb = SCANNER.tof_sigma_mm, SCANNER.intrinsic_sigma_mm
    vox = np.array(grid.voxel_size)[::-1]                   # (vx, vy, vz)
    expect_var = st**2 * e_u2 + sb**2 * (1 - e_u2) + vox**2 / 12
    for axis, c in enumerate((x, y, z)):
        m, var, se_m, se_v = _weighted_moments(c, w)
        assert abs(m - src[axis]) < Z_MAX * se_m, (axis, m, src[axis])
        assert abs(var - expect_var[axis]) < Z_MAX * se_v, (axis, np.sqrt(var), np.sqrt(expect_var[axis]))
    mx, my = np.sum(x * w) / w.sum(), np.sum(y * w) / w.sum()
    cov_xy = np.sum((x - mx) * (y - my) * w) / w.sum()
    assert abs(cov_xy) < Z_MAX * expect_var[0] / np.sqrt(w.sum()) * 1.5


def test_point_source_without_tof_or_blur_lands_in_its_voxel():
    grid = ImageGrid((32, 64, 64), 4.0)
    src = (13.1, -6.9, 3.1)
    _, info = point_source_phantom(grid, [src])
    h, s = simulate(SCANNER, info, n_trues=20_000, grid=grid, viewset=VIEWS, backend="cpu", seed=6, tof=False, blur=False)
    total = h.sum(axis=0)
    iz, iy, ix = grid.index_of(src[2], src[1], src[0])
    assert total[iz, iy, ix] == 20_000 and total.sum() == 20_000


def test_point_source_matches_python_path():
    grid = ImageGrid((32, 64, 64), 4.0)
    _, info = point_source_phantom(grid, [(13.1, -6.9, 3.1)])
    hc, sc = simulate(SCANNER, info, n_trues=1_000_000, grid=grid, viewset=VIEWS, backend="cpu", seed=7)
    hp, sp = _python_reference(info, SCANNER, grid, VIEWS, 300_000, seed=8)
    _compare_histos(hc, sc, hp, sp, grid, VIEWS)


def test_mixed_components_and_cold_insert_match_python_path():
    """Cylinder + hot sphere + cold sphere + point source, no attenuation / TOF / blur: the MLP is
    the annihilation point, so counts per region follow the activity (times the acceptance)."""
    grid = ImageGrid((16, 40, 40), 5.0)
    hot, cold, point = (40.0, 0.0, 0.0), (-40.0, 0.0, 0.0), (2.0, 41.0, 6.0)
    ph = AnalyticPhantom([CylinderSource(90, 80, 1.0), SphereSource(hot, 15, 3.0),
                          SphereSource(cold, 15, -1.0), PointSource(point, 5e4)])
    kw = dict(attenuation=False, blur=False, tof=False)
    hc, sc = simulate(SCANNER, ph, n_trues=1_000_000, grid=grid, viewset=VIEWS, backend="cpu", seed=9, **kw)
    hp, sp = _python_reference(ph, SCANNER, grid, VIEWS, 300_000, seed=10, **kw)
    z, y, x = _voxel_coords(grid)
    # Region of each voxel: 0 background, 1 hot sphere, 2 cold sphere (voxels lying wholly inside
    # it: centre within 15 - 4.33 mm, the half-diagonal, so it is exactly empty), 3 the point's voxel.
    region = np.zeros(grid.shape, int)
    region[(x - hot[0]) ** 2 + (y - hot[1]) ** 2 + (z - hot[2]) ** 2 <= 15**2] = 1
    region[(x - cold[0]) ** 2 + (y - cold[1]) ** 2 + (z - cold[2]) ** 2 <= 10.5**2] = 2
    region[grid.index_of(point[2], point[1], point[0])] = 3
    rc = np.bincount(region.ravel(), hc.sum(axis=0).ravel(), minlength=4)
    rp = np.bincount(region.ravel(), hp.sum(axis=0).ravel(), minlength=4)
    assert rc[2] == 0 and rp[2] == 0
    _assert_same_distribution(_with_outside(rc, sc.n_outside_grid), _with_outside(rp, sp.n_outside_grid),
                              "phantom regions")
    _compare_histos(hc, sc, hp, sp, grid, VIEWS)


def test_gpu_code_path_on_the_cpu_matches_python_path(sphere_info, sphere_python):
    """The CUDA kernel chains the per-decay stages through simulate_decay, which the batched CPU
    path does not call: run that path on the CPU (batched=False) against the NumPy path."""
    n = 1_000_000
    out = np.zeros((len(VIEWS),) + GRID.shape, np.float32)
    st = _core.direct_simulate_deposit_cpu(phantom_components(sphere_info), scanner_parameters(SCANNER, sphere_info),
                                        list(GRID.shape), list(GRID.voxel_size), VIEWS.n_phi, VIEWS.n_theta,
                                        float(VIEWS.theta_max), n, 17, out, batched=False)
    assert st["n_trues"] == n and out.sum() == st["n_deposited"]
    _compare_histos(out, _engine_stats(st), *sphere_python, GRID, VIEWS)


def test_gpu_code_path_on_the_cpu_with_cold_inserts():
    grid = ImageGrid((16, 40, 40), 5.0)
    ph = AnalyticPhantom([CylinderSource(90, 80, 1.0), SphereSource((40.0, 0.0, 0.0), 15, 3.0),
                          SphereSource((-40.0, 0.0, 0.0), 15, -1.0), PointSource((2.0, 41.0, 6.0), 5e4)])
    kw = dict(attenuation=False, blur=False, tof=False)
    out = np.zeros((len(VIEWS),) + grid.shape, np.float32)
    st = _core.direct_simulate_deposit_cpu(phantom_components(ph), scanner_parameters(SCANNER, ph, **kw),
                                        list(grid.shape), list(grid.voxel_size), VIEWS.n_phi, VIEWS.n_theta,
                                        float(VIEWS.theta_max), 500_000, 18, out, batched=False)
    hb, sb = simulate(SCANNER, ph, n_trues=500_000, grid=grid, viewset=VIEWS, backend="cpu", seed=19, **kw)
    _compare_histos(out, _engine_stats(st), hb, sb, grid, VIEWS)
    z, y, x = _voxel_coords(grid)
    cold = (x + 40.0) ** 2 + y**2 + z**2 <= 10.5**2
    assert out.sum(axis=0)[cold].sum() == 0


def test_compiled_deposition_equals_python_deposition():
    """The compiled per-event deposition (view binning, MLP, nearest voxel) against deposit() on the
    same list-mode events. Float32 vs float64 arithmetic may move an event lying within ~1e-5 mm
    of a voxel face or ~1e-7 rad of a view edge: allow two such events in 40 000."""
    _, info = sphere_phantom(GRID)
    events = next(simulate_events(SCANNER, info, 40_000, seed=13, progress=False))
    for vs in (VIEWS, ViewSet(5, 4, 8.0), ViewSet(3, 1, 0.0)):
        ref, st = deposit(events, GRID, vs, return_stats=True)
        out = np.zeros_like(ref)
        got = _core.direct_deposit_events_cpu(events.p1, events.p2, events.dt_ps, list(GRID.shape),
                                           list(GRID.voxel_size), vs.n_phi, vs.n_theta, float(vs.theta_max),
                                           out)
        assert np.abs(out - ref).sum() <= 4
        assert abs(got["n_deposited"] - st.n_deposited) <= 2
        assert abs(got["n_outside_views"] - st.n_outside_views) <= 2
        assert got["n_deposited"] + got["n_outside_views"] + got["n_outside_grid"] == len(events)


# --- exactness, determinism, accumulation -----------------------------------------------------------------

def test_deterministic_for_a_seed_and_independent_of_threads(sphere_info):
    a, sa = simulate(SCANNER, sphere_info, n_trues=50_000, grid=GRID, viewset=VIEWS, backend="cpu", seed=21, threads=1)
    b, sb = simulate(SCANNER, sphere_info, n_trues=50_000, grid=GRID, viewset=VIEWS, backend="cpu", seed=21, threads=2)
    c, _ = simulate(SCANNER, sphere_info, n_trues=50_000, grid=GRID, viewset=VIEWS, backend="cpu", seed=22)
    np.testing.assert_array_equal(a, b)
    assert (sa.n_in_band, sa.n_decays) == (sb.n_in_band, sb.n_decays)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("n", [1, 7, 255, 257, 1000])
def test_exact_count_for_small_n(sphere_info, n):
    h, s = simulate(SCANNER, sphere_info, n_trues=n, grid=GRID, viewset=VIEWS, backend="cpu", seed=n)
    assert s.n_trues == n and s.n_streams == min(n, _core.DIRECT_SIM_CPU_STREAMS)
    assert h.sum() + s.n_outside_views + s.n_outside_grid == n
    assert s.n_decays >= s.n_in_band >= n and isinstance(s, MonteCarloStats)


def test_out_accumulates(sphere_info):
    out = np.ones((len(VIEWS),) + GRID.shape, np.float32)
    h, s = simulate(SCANNER, sphere_info, n_trues=30_000, grid=GRID, viewset=VIEWS, backend="cpu", seed=2, out=out)
    fresh, _ = simulate(SCANNER, sphere_info, n_trues=30_000, grid=GRID, viewset=VIEWS, backend="cpu", seed=2)
    assert h is out
    np.testing.assert_array_equal(out, fresh + 1)


def test_progress_callback_sees_the_final_count(sphere_info):
    seen = []
    simulate(SCANNER, sphere_info, n_trues=10_000, grid=GRID, viewset=VIEWS, backend="cpu", progress=seen.append)
    assert seen and seen[-1] == 10_000 and seen == sorted(seen)


def test_phantom_components_table(sphere_info):
    t = phantom_components(sphere_info)
    assert t.shape == (7, 8) and t.dtype == np.float64
    np.testing.assert_array_equal(t[:, 0], [0, 1, 1, 1, 1, 1, 1])
    np.testing.assert_allclose(t[:, 7], [s.activity for s in sphere_info.analytic.sources])


# --- simulate_histo_images uses the compiled engine by default --------------------------------------------

def test_simulate_histo_images_engines(sphere_info):
    d = simulate_histo_images(SCANNER, sphere_info, 20_000, grid=GRID, viewset=VIEWS, seed=3, progress=False,
                              with_corrections=False)
    assert d.meta["engine"] == "compiled" and d.meta["seed"] == 3
    assert d.prompts.sum() == d.meta["n_deposited"]
    assert d.meta["n_deposited"] + d.meta["n_outside_grid"] + d.meta["n_outside_views"] == 20_000
    p = simulate_histo_images(SCANNER, sphere_info, 20_000, grid=GRID, viewset=VIEWS, seed=3, progress=False,
                              with_corrections=False, engine="python")
    assert p.meta["engine"] == "python" and p.prompts.sum() == p.meta["n_deposited"]
    t = simulate_histo_images(SCANNER, sphere_info, 2_000, grid=GRID, viewset=VIEWS, seed=3, progress=False,
                              with_corrections=False, mode="trilinear")
    assert t.meta["engine"] == "python"
    with pytest.raises(ValueError, match="engine"):
        simulate_histo_images(SCANNER, sphere_info, 2_000, grid=GRID, viewset=VIEWS, progress=False, mode="trilinear",
                              engine="compiled")
    with pytest.raises(ValueError, match="engine"):
        simulate_histo_images(SCANNER, sphere_info, 2_000, grid=GRID, viewset=VIEWS, progress=False, engine="fast")


def test_simulate_histo_images_compiled_with_randoms(sphere_info):
    d = simulate_histo_images(SCANNER, sphere_info, 40_000, grid=GRID, viewset=VIEWS, randoms_fraction=0.3, seed=4,
                              progress=False, n_quad=1)
    m = d.meta
    assert m["engine"] == "compiled" and m["n_events"] == 40_000
    assert d.prompts.sum() == m["n_deposited"] and 0 < m["n_randoms_deposited"] < m["n_deposited"]
    assert d.background is not None
    assert d.background.sum() == pytest.approx(m["n_randoms_deposited"], rel=1e-4)


# --- bad input --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw, exc, match", [
    (dict(n_trues=0), ValueError, "n_trues"),
    (dict(n_trues=-5), ValueError, "n_trues"),
    (dict(n_trues=1.5), TypeError, "n_trues"),
    (dict(n_trues=True), TypeError, "n_trues"),
    (dict(n_trues=None), ValueError, "n_trues"),
    (dict(n_decays=1000), ValueError, "n_decays: DIRECT.*counts detected true coincidences.*pass n_trues"),
    (dict(n_decays=1000, n_trues=None), ValueError, "n_decays: .*pass n_trues"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(seed=2**64), ValueError, "seed"),
    (dict(seed=1.0), TypeError, "seed"),
    (dict(seed="x"), TypeError, "seed"),
    (dict(backend="gpu"), ValueError, "backend"),
    (dict(backend=None), TypeError, "backend"),
    (dict(threads=0), ValueError, "threads"),
    (dict(out=np.zeros((24, 16, 48, 47), np.float32)), ValueError, "out"),
    (dict(out=np.zeros((24, 16, 48, 48), np.float64)), TypeError, "out"),
    (dict(out=np.zeros((24, 16, 48, 48), np.float32)[..., ::-1]), ValueError, "out"),
    (dict(out=[0.0]), TypeError, "out"),
    (dict(progress="yes"), TypeError, "progress"),
])
def test_bad_arguments(sphere_info, kw, exc, match):
    args = dict(n_trues=10, backend="cpu")
    args.update(kw)
    with pytest.raises(exc, match=match):
        simulate(SCANNER, sphere_info, grid=GRID, viewset=VIEWS, **args)


def test_bad_objects(sphere_info):
    with pytest.raises(TypeError, match="activity"):
        simulate(SCANNER, object(), n_trues=10, grid=GRID, viewset=VIEWS)
    with pytest.raises(TypeError, match="scanner"):
        simulate("scanner", sphere_info, n_trues=10, grid=GRID, viewset=VIEWS)
    with pytest.raises(TypeError, match="grid"):
        simulate(SCANNER, sphere_info, n_trues=10, grid=(16, 48, 48), viewset=VIEWS)
    with pytest.raises(TypeError, match="viewset"):
        simulate(SCANNER, sphere_info, n_trues=10, grid=GRID, viewset=24)
    many = AnalyticPhantom([PointSource((float(i), 0.0, 0.0)) for i in range(65)])
    with pytest.raises(ValueError, match="64"):
        simulate(SCANNER, many, n_trues=10, grid=GRID, viewset=VIEWS, backend="cpu")


def test_binding_rejects_bad_tables():
    args = (dict(radius_mm=465.0, half_length_mm=125.0, sin_theta_max=0.17, blur_sigma_mm=0.0,
                 tof_sigma_ps=0.0, water_radius_mm=0.0, water_half_length_mm=0.0, mu_per_mm=0.0),
            [4, 4, 4], [4.0, 4.0, 4.0], 2, 1, 0.1, 10, 0, np.zeros((2, 4, 4, 4), np.float32))
    good = np.array([[0, 0, 0, 0, 10, 10, 1, 100]], np.float64)
    _core.direct_simulate_deposit_cpu(good, *args)
    for table, match in [(good.astype(np.float32), "float64"), (good[:, :7].copy(), "components"),
                         (np.array([[3, 0, 0, 0, 10, 10, 1, 100.0]]), "kind"),
                         (np.array([[0, 0, 0, 0, -1, 10, 1, 100.0]]), "radius"),
                         (np.array([[0, 0, 0, 0, 10, 10, 1, -100.0]]), "total activity"),
                         (np.array([[0, 0, 0, 0, 10, 10, 1, 100.0], [1, 0, 0, 0, 9, 0, -1, -200.0]]),
                          "total activity"),
                         (np.array([[0, 0, 0, np.nan, 10, 10, 1, 100.0]]), "finite")]:
        with pytest.raises((ValueError, TypeError), match=match):
            _core.direct_simulate_deposit_cpu(table, *args)
    bad_scanner = dict(args[0], sin_theta_max=1.5)
    with pytest.raises(ValueError, match="sin_theta_max"):
        _core.direct_simulate_deposit_cpu(good, bad_scanner, *args[1:])


def test_no_acceptance_is_an_error_not_a_hang():
    far = AnalyticPhantom([PointSource((0.0, 0.0, 1000.0))])      # outside the detector's axial extent
    with pytest.raises(RuntimeError, match="accepted"):
        simulate(SCANNER, far, n_trues=10, grid=GRID, viewset=VIEWS, backend="cpu")


def _cancelled_phantom():
    """A weak hot sphere inside a cold one of the same magnitude, and a point source (the net
    activity) inside both: every draw is rejected (the Python sampler would loop for ever)."""
    return AnalyticPhantom([SphereSource((0.0, 0.0, 0.0), 20, 1e-6), SphereSource((0.0, 0.0, 0.0), 25, -1e-6),
                            PointSource((1.0, 0.0, 0.0), 1.0)])


@pytest.mark.parametrize("batched", [True, False])
def test_cancelled_activity_is_an_error_not_a_hang(batched):
    ph = _cancelled_phantom()
    out = np.zeros((len(VIEWS),) + GRID.shape, np.float32)
    with pytest.raises(RuntimeError, match="cold"):
        _core.direct_simulate_deposit_cpu(phantom_components(ph), scanner_parameters(SCANNER, ph), list(GRID.shape),
                                       list(GRID.voxel_size), VIEWS.n_phi, VIEWS.n_theta, float(VIEWS.theta_max),
                                       10, 0, out, batched=batched)


@pytest.mark.skipif(directpet.cuda_device_count() > 0, reason="a CUDA device is present")
def test_cuda_backend_without_a_gpu_is_an_error(sphere_info):
    with pytest.raises(RuntimeError, match="cuda"):
        simulate(SCANNER, sphere_info, n_trues=10, grid=GRID, viewset=VIEWS, backend="cuda")


# --- GPU ---------------------------------------------------------------------------------------------------

def _cupy():
    return pytest.importorskip("cupy")


@pytest.mark.gpu
def test_cuda_matches_cpu_on_sphere_phantom(sphere_info, sphere_compiled):
    hc, sc = sphere_compiled
    hg, sg = simulate(SCANNER, sphere_info, n_trues=10_000_000, grid=GRID, viewset=VIEWS, backend="cuda", seed=31)
    assert sg.backend == "cuda" and sg.n_trues == 10_000_000
    hg = to_numpy(hg)
    assert hg.sum(dtype=np.float64) == sg.n_deposited
    assert sg.n_deposited + sg.n_outside_views + sg.n_outside_grid == 10_000_000
    _compare_histos(hg, sg, hc, sc, GRID, VIEWS)


@pytest.mark.gpu
def test_cuda_point_source_mlp_and_cpu_agreement():
    grid = ImageGrid((32, 64, 64), 4.0)
    _, info = point_source_phantom(grid, [(13.1, -6.9, 3.1)])
    hg, sg = simulate(SCANNER, info, n_trues=2_000_000, grid=grid, viewset=VIEWS, backend="cuda", seed=32)
    hc, sc = simulate(SCANNER, info, n_trues=1_000_000, grid=grid, viewset=VIEWS, backend="cpu", seed=33)
    _compare_histos(to_numpy(hg), sg, hc, sc, grid, VIEWS)
    h0, _ = simulate(SCANNER, info, n_trues=5_000, grid=grid, viewset=VIEWS, backend="cuda", seed=1, tof=False, blur=False)
    total = to_numpy(h0).sum(axis=0)
    assert total[grid.index_of(3.1, -6.9, 13.1)] == 5_000


@pytest.mark.gpu
def test_cuda_cold_insert_and_mixed_components_match_cpu():
    grid = ImageGrid((16, 40, 40), 5.0)
    ph = AnalyticPhantom([CylinderSource(90, 80, 1.0), SphereSource((40.0, 0.0, 0.0), 15, 3.0),
                          SphereSource((-40.0, 0.0, 0.0), 15, -1.0), PointSource((2.0, 41.0, 6.0), 5e4)])
    kw = dict(attenuation=False, blur=False, tof=False)
    hg, sg = simulate(SCANNER, ph, n_trues=3_000_000, grid=grid, viewset=VIEWS, backend="cuda", seed=34, **kw)
    hc, sc = simulate(SCANNER, ph, n_trues=1_000_000, grid=grid, viewset=VIEWS, backend="cpu", seed=35, **kw)
    _compare_histos(to_numpy(hg), sg, hc, sc, grid, VIEWS)


@pytest.mark.gpu
def test_cuda_output_types_accumulation_and_determinism(sphere_info):
    cp = _cupy()
    shape = (len(VIEWS),) + GRID.shape
    h1, s1 = simulate(SCANNER, sphere_info, n_trues=300_000, grid=GRID, viewset=VIEWS, backend="cuda", seed=41)
    assert isinstance(h1, cp.ndarray) and h1.dtype == cp.float32 and h1.shape == shape
    h2, s2 = simulate(SCANNER, sphere_info, n_trues=300_000, grid=GRID, viewset=VIEWS, seed=41)    # auto -> cuda
    assert s2.backend == "cuda" and (s1.n_in_band, s1.n_decays) == (s2.n_in_band, s2.n_decays)
    cp.testing.assert_array_equal(h1, h2)
    out = cp.ones(shape, cp.float32)
    h3, _ = simulate(SCANNER, sphere_info, n_trues=300_000, grid=GRID, viewset=VIEWS, seed=41, out=out)
    assert h3 is out
    cp.testing.assert_array_equal(out, h1 + 1)
    host = np.ones(shape, np.float32)
    h4, s4 = simulate(SCANNER, sphere_info, n_trues=300_000, grid=GRID, viewset=VIEWS, backend="cuda", seed=41, out=host)
    assert h4 is host and s4.backend == "cuda"
    np.testing.assert_array_equal(host, cp.asnumpy(h1) + 1)
    for n in (1, 5, 1000):
        h, s = simulate(SCANNER, sphere_info, n_trues=n, grid=GRID, viewset=VIEWS, backend="cuda", seed=n)
        assert s.n_trues == n and float(h.sum()) + s.n_outside_views + s.n_outside_grid == n
    with pytest.raises(TypeError, match="out"):
        simulate(SCANNER, sphere_info, n_trues=10, grid=GRID, viewset=VIEWS, backend="cpu", out=cp.zeros(shape, cp.float32))


@pytest.mark.gpu
def test_cuda_simulate_histo_images_with_cupy(sphere_info):
    cp = _cupy()
    d = simulate_histo_images(SCANNER, sphere_info, 100_000, grid=GRID, viewset=VIEWS, randoms_fraction=0.1, seed=5,
                              progress=False, xp=cp, n_quad=1)
    assert d.meta["engine"] == "compiled" and isinstance(d.prompts, cp.ndarray)
    assert float(d.prompts.sum()) == d.meta["n_deposited"]


@pytest.mark.gpu
def test_cuda_no_acceptance_or_cancelled_activity_is_an_error():
    far = AnalyticPhantom([PointSource((0.0, 0.0, 1000.0))])
    with pytest.raises(RuntimeError, match="accepted"):
        simulate(SCANNER, far, n_trues=10, grid=GRID, viewset=VIEWS, backend="cuda")
    with pytest.raises(RuntimeError, match="cold"):
        simulate(SCANNER, _cancelled_phantom(), n_trues=10, grid=GRID, viewset=VIEWS, backend="cuda")
