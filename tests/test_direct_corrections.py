"""Corrections from measurements: attenuation histo-images from a 3D attenuation map (against the
analytic water cylinder, against brute-force line integrals of an off-centre two-material map,
view-cell averaging, CPU vs GPU, bad input) and randoms from delayed coincidences (against the
expected randoms)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

import directpet
from directpet.direct import View, ViewSet, attenuation_histo_images, sensitivity_attenuation
from directpet.geometry import ImageGrid
from directpet.sim import lines
from directpet.sim.phantoms import WaterCylinder


def test_water_cylinder_matches_the_analytic_chords():
    """Away from the voxelised map's blurred surfaces (lines at least 20 mm inside the side wall,
    central slices whose lines stay clear of the end faces) the factors are exp(-mu chord)."""
    grid, views = ImageGrid((6, 24, 24), 8.0), ViewSet(6, 3)
    water = WaterCylinder(70.0, 40.0, 0.0096)
    mu_grid = ImageGrid((40, 80, 80), 2.0)
    a = attenuation_histo_images(water.mu_map(mu_grid, 8), mu_grid, grid, views)
    assert a.shape == (len(views),) + grid.shape and a.dtype == np.float32
    z, y, x = np.meshgrid(*[grid.centres(i) for i in range(3)], indexing="ij")
    checked = 0
    for v, view in enumerate(views):
        ref = np.exp(-0.0096 * lines.chord_length(x, y, z, *view.direction, 70.0, 20.0))
        inside = (np.abs(z) <= 4) & (np.abs(x * np.sin(view.phi) - y * np.cos(view.phi)) < 50)
        li, lr = -np.log(a[v][inside]), -np.log(ref[inside])
        assert np.all(np.abs(li - lr) <= 0.03 * lr), v
        checked += inside.sum()
        outside = np.abs(x * np.sin(view.phi) - y * np.cos(view.phi)) > 75     # lines that miss the map
        np.testing.assert_array_equal(a[v][outside], 1.0)
    assert checked > 200


def _two_material_map():
    g = ImageGrid((12, 30, 26), (3.0, 2.0, 2.5))
    z, y, x = np.meshgrid(*[g.centres(i) for i in range(3)], indexing="ij")
    mu = np.zeros(g.shape, np.float32)
    mu[((x - 8) ** 2 + (y + 5) ** 2 < 18 ** 2) & (np.abs(z) < 12)] = 0.0096      # off-centre water
    mu[((x + 3) ** 2 + (y - 6) ** 2 + z ** 2) < 7 ** 2] = 0.02                    # a denser insert
    return mu, g


def _brute_force(mu, g, r, u, step=0.02, half=150.0):
    """int mu along r + t u by fine sampling of the map's trilinear interpolant (0 outside)."""
    f = RegularGridInterpolator(tuple(g.centres(i) for i in range(3)), mu.astype(np.float64), bounds_error=False,
                                fill_value=0.0)
    t = np.arange(-half, half, step) + step / 2
    return float(f((r[None] + t[:, None] * u[None])[:, ::-1]).sum() * step)


@pytest.mark.parametrize("plane_mm, tol", [(None, 0.01), (0.5, 0.003)])
def test_off_centre_two_material_map_matches_brute_force_line_integrals(rng, plane_mm, tol):
    mu, g = _two_material_map()
    grid, views = ImageGrid((5, 12, 12), 4.0), ViewSet(4, 3, theta_max_deg=20.0)
    a = attenuation_histo_images(mu, g, grid, views, plane_mm=plane_mm)
    for _ in range(40):
        v, iz, iy, ix = (int(rng.integers(n)) for n in (len(views),) + grid.shape)
        r = np.array([grid.centres(2)[ix], grid.centres(1)[iy], grid.centres(0)[iz]])
        assert abs(-np.log(a[v, iz, iy, ix]) - _brute_force(mu, g, r, views[v].direction)) < tol


def test_view_cell_average_is_the_mean_over_its_sub_directions(rng):
    mu, g = _two_material_map()
    grid, views = ImageGrid((5, 12, 12), 4.0), ViewSet(4, 3, theta_max_deg=20.0)
    a = attenuation_histo_images(mu, g, grid, views, n_sub=2, plane_mm=0.5)
    pe, te = views.phi_edges, views.theta_edges
    for _ in range(12):
        v, iz, iy, ix = (int(rng.integers(n)) for n in (len(views),) + grid.shape)
        k, l = divmod(v, views.n_theta)
        r = np.array([grid.centres(2)[ix], grid.centres(1)[iy], grid.centres(0)[iz]])
        subs = [View(pe[k] + p * (pe[k + 1] - pe[k]), te[l] + q * (te[l + 1] - te[l]))
                for p in (0.25, 0.75) for q in (0.25, 0.75)]
        ref = np.mean([np.exp(-_brute_force(mu, g, r, s.direction)) for s in subs])
        assert abs(a[v, iz, iy, ix] - ref) < 0.003


@pytest.mark.parametrize("shape,voxel", [((9, 30, 26), (4.0, 2.0, 2.5)), ((2, 20, 20), (3.0, 2.0, 2.0)),
                                         ((6, 2, 17), (2.0, 5.0, 1.5)), ((1, 20, 20), (3.0, 2.0, 2.0))])
def test_compiled_projection_is_the_map_coordinates_projection(rng, shape, voxel):
    """The compiled line integrals (csrc/direct/attenuation.hpp) give the map_coordinates sums of the
    same lattice and steps, on random maps with anisotropic voxels, thin maps and a one-slice map
    (a box of zero thickness: both give 0 unless a step lands on its plane)."""
    from directpet.direct import attenuation as A

    g = ImageGrid(shape, voxel)
    mu = rng.uniform(0.0, 0.02, shape).astype(np.float32)
    corners = A._box_corners(g)
    nd = A._ndimage(np)
    for view in (View.from_degrees(31.5, 6.67), View.from_degrees(0.0, 0.0), View.from_degrees(97.0, -9.0)):
        u, e1 = view.direction, view.radial_axis
        e2 = np.cross(u, e1)
        want, lo1, lo2 = A._projection(mu, g, corners, u, e1, e2, 0.9, 0.7, 16, np, nd, compiled=False)
        got, lo1_c, lo2_c = A._projection(mu, g, corners, u, e1, e2, 0.9, 0.7, 16, np, nd, compiled=True)
        assert (lo1_c, lo2_c) == (lo1, lo2) and got.shape == want.shape
        assert want.max() > 0 or shape[0] == 1
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7 * max(want.max(), 1e-30))


def test_compiled_projection_bad_input_is_named():
    from directpet import _core

    mu = np.ones((4, 5, 6), np.float32)
    ok = dict(u=(0, 0, 1.0), e1=(1.0, 0, 0), e2=(0, 1.0, 0), lo1=-5.0, lo2=-5.0, h=1.0, n1=10, n2=10, t0=-5.0,
              dt=1.0, n_t=10)
    assert _core.direct_attenuation_projection_cpu(mu, (1.0, 1.0, 1.0), **ok).shape == (10, 10)
    with pytest.raises(TypeError, match="mu"):
        _core.direct_attenuation_projection_cpu(mu.astype(np.float64), (1.0, 1.0, 1.0), **ok)
    with pytest.raises(ValueError, match="voxel_size"):
        _core.direct_attenuation_projection_cpu(mu, (1.0, 0.0, 1.0), **ok)
    with pytest.raises(ValueError, match="h"):
        _core.direct_attenuation_projection_cpu(mu, (1.0, 1.0, 1.0), **dict(ok, h=-1.0))
    with pytest.raises(ValueError, match="n1"):
        _core.direct_attenuation_projection_cpu(mu, (1.0, 1.0, 1.0), **dict(ok, n1=0))
    with pytest.raises(ValueError, match="u"):
        _core.direct_attenuation_projection_cpu(mu, (1.0, 1.0, 1.0), **dict(ok, u=(np.nan, 0, 1.0)))


def test_bad_input_is_named():
    mu, g = _two_material_map()
    grid, views = ImageGrid((5, 12, 12), 4.0), ViewSet(4, 3)
    with pytest.raises(ValueError, match="mu: expected shape"):
        attenuation_histo_images(mu[:, :, :5], g, grid, views)
    bad = mu.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="mu: contains NaN"):
        attenuation_histo_images(bad, g, grid, views)
    with pytest.raises(ValueError, match="mu: contains negative"):
        attenuation_histo_images(-mu - 0.01, g, grid, views)
    with pytest.raises(ValueError, match="n_sub"):
        attenuation_histo_images(mu, g, grid, views, n_sub=0)
    with pytest.raises(ValueError, match="step_mm"):
        attenuation_histo_images(mu, g, grid, views, step_mm=-1.0)
    with pytest.raises(TypeError, match="mu_grid"):
        attenuation_histo_images(mu, (12, 30, 26), grid, views)
    with pytest.raises(ValueError, match="engine"):
        attenuation_histo_images(mu, g, grid, views, engine="fast")


@pytest.mark.gpu
def test_gpu_matches_cpu():
    if directpet.cuda_device_count() == 0:
        pytest.skip("needs a CUDA device")
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    mu, g = _two_material_map()
    grid, views = ImageGrid((5, 12, 12), 4.0), ViewSet(4, 3)
    a_cpu = attenuation_histo_images(mu, g, grid, views, n_sub=2)
    a_gpu = attenuation_histo_images(cp.asarray(mu), g, grid, views, n_sub=2)
    assert isinstance(a_gpu, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(a_gpu), a_cpu, rtol=1e-5, atol=1e-6)


# --- randoms from delayed coincidences ------------------------------------------------------------------

def test_randoms_from_delayeds_estimate_the_expected_randoms():
    """Delayeds simulated as uniform randoms, deposited and smoothed: every view keeps its count,
    and the estimate approaches the analytic expected randoms far better than the raw deposit."""
    from directpet.direct import CylindricalScanner, randoms_background, randoms_from_delayeds, simulate_randoms

    grid, views, scanner = ImageGrid((8, 32, 32), 12.0), ViewSet(8, 3), CylindricalScanner()
    delayeds = simulate_randoms(scanner, 1_000_000, seed=7)
    raw = randoms_from_delayeds(delayeds, grid, views)
    smooth = randoms_from_delayeds(delayeds, grid, views, smooth_fwhm_mm=40.0)
    np.testing.assert_allclose(smooth.sum(axis=(1, 2, 3)), raw.sum(axis=(1, 2, 3)), rtol=1e-5)
    expected = randoms_background(grid, views, scanner, total=float(raw.sum()))
    m = expected > 0.3 * expected.max()

    def rms(b):
        return float(np.sqrt(np.mean(((b - expected)[m] / expected[m]) ** 2)))

    assert rms(smooth) < 0.12 and rms(smooth) < rms(raw) / 3
    np.testing.assert_allclose(randoms_from_delayeds(delayeds, grid, views, scale=0.5), 0.5 * raw, rtol=1e-6)
    with pytest.raises(ValueError, match="smooth_fwhm_mm"):
        randoms_from_delayeds(delayeds, grid, views, smooth_fwhm_mm=-1.0)
    with pytest.raises(ValueError, match="scale"):
        randoms_from_delayeds(delayeds, grid, views, scale=float("nan"))


@pytest.mark.gpu
def test_randoms_from_delayeds_on_the_gpu_match_the_cpu():
    if directpet.cuda_device_count() == 0:
        pytest.skip("needs a CUDA device")
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    from directpet.direct import CylindricalScanner, EventBatch, randoms_from_delayeds, simulate_randoms

    grid, views = ImageGrid((8, 32, 32), 12.0), ViewSet(8, 3)
    ev = simulate_randoms(CylindricalScanner(), 200_000, seed=3)
    ev_gpu = EventBatch(cp.asarray(ev.p1), cp.asarray(ev.p2), cp.asarray(ev.dt_ps))
    raw_cpu, raw_gpu = randoms_from_delayeds(ev, grid, views), randoms_from_delayeds(ev_gpu, grid, views)
    # the same events in the same voxels (a point exactly on a voxel face may round either way)
    assert float(np.abs(cp.asnumpy(raw_gpu) - raw_cpu).sum()) <= 2e-4 * len(ev)
    cpu = randoms_from_delayeds(ev, grid, views, smooth_fwhm_mm=30.0)
    gpu = randoms_from_delayeds(ev_gpu, grid, views, smooth_fwhm_mm=30.0)
    assert isinstance(gpu, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(gpu), cpu, rtol=1e-3, atol=1e-2 * float(cpu.max()))


# --- external scatter as weighted list-mode events -----------------------------------------------------

@pytest.mark.parametrize("mode", ["nearest", "trilinear"])
def test_weighted_events_deposit_their_weights(rng, mode):
    """An external scatter estimate given as weighted events: the deposit equals the unweighted
    deposit of each event scaled by its weight, summed (checked event by event), and its total is
    the weights of the events kept."""
    from directpet.direct import CylindricalScanner, EventBatch, deposit, simulate_randoms

    grid, views = ImageGrid((6, 20, 20), 15.0), ViewSet(6, 3)
    ev = simulate_randoms(CylindricalScanner(), 400, seed=int(rng.integers(1 << 30)))
    w = rng.uniform(0.1, 2.0, len(ev)).astype(np.float32)
    weighted = deposit(EventBatch(ev.p1, ev.p2, ev.dt_ps, weights=w), grid, views, mode=mode)
    ref = np.zeros_like(weighted)
    for i in range(len(ev)):
        one = EventBatch(ev.p1[i:i + 1], ev.p2[i:i + 1], ev.dt_ps[i:i + 1])
        ref += w[i] * deposit(one, grid, views, mode=mode)
    np.testing.assert_allclose(weighted, ref, rtol=1e-5, atol=1e-6)
    assert weighted.sum() > 0
    both = EventBatch.concatenate([EventBatch(ev.p1, ev.p2, ev.dt_ps, weights=w), ev])
    np.testing.assert_allclose(deposit(both, grid, views, mode=mode),
                               weighted + deposit(ev, grid, views, mode=mode), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="weights"):
        deposit(EventBatch(ev.p1, ev.p2, ev.dt_ps, weights=w[:-1]), grid, views)
    bad = w.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="weights: contains NaN"):
        deposit(EventBatch(ev.p1, ev.p2, ev.dt_ps, weights=bad), grid, views)


# --- normalisation from detector-pair efficiencies ---------------------------------------------------

def _ring_header(crystal_efficiencies=None):
    from directpet.direct import CylindricalScanner
    from directpet.direct.petsird import scanner_header
    pytest.importorskip("petsird", reason="petsird not installed (pip install 'directpet[io]')")
    return scanner_header(CylindricalScanner(), crystal_mm=20.0, crystal_efficiencies=crystal_efficiencies)


NORM_GRID, NORM_VIEWS = ImageGrid((6, 20, 20), 12.0), ViewSet(6, 3)


def test_uniform_crystals_give_the_square_of_their_efficiency():
    from directpet.direct.normalisation import normalisation_histo_images
    from directpet.direct.petsird import ring_shape
    header = _ring_header()
    e = normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, np.full(ring_shape(header), 0.8))
    assert e.shape == (len(NORM_VIEWS),) + NORM_GRID.shape and e.dtype == np.float32
    np.testing.assert_allclose(e, 0.64, rtol=1e-6)


def test_normalisation_matches_a_brute_force_crystal_lookup(rng):
    """Per (view, voxel): walk the n_sub^2 cell directions, intersect each line with the detector
    cylinder by the quadratic formula, find the crystals as the nearest element centres of the
    PETSIRD header (a KD-tree, not the closed form) and average eps_i eps_j of accepted LORs."""
    from scipy.spatial import cKDTree
    from directpet.direct import CylindricalScanner
    from directpet.direct.normalisation import normalisation_histo_images
    from directpet.direct.petsird import ring_shape
    from directpet.io.petsird import PetsirdScanner
    scanner = CylindricalScanner()
    header = _ring_header()
    eps = rng.uniform(0.5, 1.5, ring_shape(header))
    e = normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, eps, n_sub=2)
    tree = cKDTree(PetsirdScanner(header.scanner).element_centres[0])
    flat = eps.ravel()
    R, h = scanner.radius_mm, scanner.half_length_mm
    centres = [NORM_GRID.centres(a) for a in range(3)]
    for _ in range(40):
        v = int(rng.integers(len(NORM_VIEWS)))
        iz, iy, ix = (int(rng.integers(n)) for n in NORM_GRID.shape)
        r = np.array([centres[2][ix], centres[1][iy], centres[0][iz]])
        values = []
        for view in NORM_VIEWS.cell_views(v, 2):
            u = np.asarray(view.direction, float)
            a, b, c = u[0] ** 2 + u[1] ** 2, 2 * (r[0] * u[0] + r[1] * u[1]), r[0] ** 2 + r[1] ** 2 - R ** 2
            ts = [(-b + s * np.sqrt(b * b - 4 * a * c)) / (2 * a) for s in (1, -1)]
            ends = [r + t * u for t in ts]
            if all(abs(p[2]) <= h for p in ends):
                i, j = tree.query(ends)[1]
                values.append(flat[i] * flat[j])
        expected = np.mean(values) if values else 1.0
        np.testing.assert_allclose(e[v, iz, iy, ix], expected, rtol=2e-6)


def test_header_pair_and_crystal_forms_agree(rng):
    from directpet.direct.normalisation import normalisation_histo_images
    from directpet.direct.petsird import ring_shape
    eps = rng.uniform(0.5, 1.5, ring_shape(_ring_header()))
    by_crystal = normalisation_histo_images(_ring_header(), NORM_GRID, NORM_VIEWS, eps)
    from_header = normalisation_histo_images(_ring_header(eps), NORM_GRID, NORM_VIEWS)
    by_pair = normalisation_histo_images(_ring_header(), NORM_GRID, NORM_VIEWS, np.outer(eps.ravel(), eps.ravel()))
    np.testing.assert_allclose(from_header, by_crystal, rtol=1e-6)
    np.testing.assert_allclose(by_pair, by_crystal, rtol=1e-6)
    assert by_crystal.std() > 0.02               # the efficiencies really vary across bins


@pytest.mark.parametrize("grid, views, n_sub", [(NORM_GRID, NORM_VIEWS, 2),
                                                 (ImageGrid((5, 17, 22), (9.0, 11.0, 13.5)), ViewSet(5, 4, 8.0), 3)])
def test_compiled_normalisation_is_the_array_code_bit_for_bit(rng, grid, views, n_sub):
    """One compiled pass per view (csrc/direct/normalisation.hpp) against the per-direction array code,
    for the header's own efficiencies, crystal efficiencies and a pair table."""
    from directpet.direct.normalisation import normalisation_histo_images
    from directpet.direct.petsird import ring_shape
    eps = rng.uniform(0.5, 1.5, ring_shape(_ring_header()))
    pairs = rng.uniform(0.5, 1.5, (eps.size, eps.size))
    for header, efficiencies in ((_ring_header(eps), None), (_ring_header(), eps), (_ring_header(), pairs)):
        want = normalisation_histo_images(header, grid, views, efficiencies, n_sub=n_sub, engine="python")
        got = normalisation_histo_images(header, grid, views, efficiencies, n_sub=n_sub)
        # equal bins, except where NumPy's atan2 (SIMD code on AVX-512 machines) and the C library's
        # round apart at a crystal edge: at most 1e-4 of them (none on the machines we test on)
        assert got.dtype == np.float32 and np.mean(got != want) <= 1e-4 and got.std() > 0.01
    with pytest.raises(ValueError, match="engine"):
        normalisation_histo_images(_ring_header(), grid, views, engine="cuda")


@pytest.mark.parametrize("grid, views, n_quad", [(ImageGrid((8, 24, 24), 16.0), ViewSet(10, 3), 4),
                                                  (ImageGrid((5, 17, 22), (9.0, 11.0, 13.5)), ViewSet(5, 4, 8.0), 3)])
def test_compiled_acceptance_is_the_array_code(grid, views, n_quad):
    """sensitivity_attenuation without attenuation in one compiled pass per view against the array
    code per azimuth sample (to float32 rounding: atan / sin of the C library and NumPy's may differ
    in the last bit), and the water-cylinder path (array code) still applies its attenuation."""
    want = sensitivity_attenuation(grid, views, n_quad=n_quad, engine="python")
    got = sensitivity_attenuation(grid, views, n_quad=n_quad)
    assert got.dtype == np.float32 and got.shape == want.shape and got.max() == pytest.approx(1.0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    water = WaterCylinder(150.0, 200.0, 0.0096)
    attenuated = sensitivity_attenuation(grid, views, n_quad=n_quad, attenuation=water)
    assert np.all(attenuated <= got + 1e-7) and attenuated.min() < 0.9 * got.max()
    with pytest.raises(ValueError, match="engine"):
        sensitivity_attenuation(grid, views, engine="fast")
    with pytest.raises(ValueError, match="no solid angle"):
        sensitivity_attenuation(grid, ViewSet(4, 1, 0.0))


def test_normalisation_bad_input():
    from directpet.direct.normalisation import normalisation_histo_images
    from directpet.direct.petsird import ring_shape
    header = _ring_header()
    with pytest.raises(ValueError, match="efficiencies"):
        normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, np.ones(7))
    with pytest.raises(ValueError, match="efficiencies"):
        normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, -np.ones(ring_shape(header)))
    with pytest.raises(ValueError, match="n_sub"):
        normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, n_sub=0)
    with pytest.raises(TypeError, match="grid"):
        normalisation_histo_images(header, None, NORM_VIEWS)
    from directpet.direct import CylindricalScanner
    with pytest.raises(ValueError, match="scanner: the header's crystal rings"):
        normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, scanner=CylindricalScanner(radius_mm=400.0))


@pytest.mark.gpu
def test_normalisation_on_the_gpu_matches_the_cpu(rng):
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    from directpet.direct.normalisation import normalisation_histo_images
    from directpet.direct.petsird import ring_shape
    header = _ring_header()
    eps = rng.uniform(0.5, 1.5, ring_shape(header))
    cpu = normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, eps)
    gpu = normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, cp.asarray(eps), xp=cp)
    np.testing.assert_allclose(cp.asnumpy(gpu), cpu, rtol=1e-6)
    from_header = normalisation_histo_images(_ring_header(eps), NORM_GRID, NORM_VIEWS, xp=cp)   # tables on the GPU
    assert isinstance(from_header, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(from_header), cpu, rtol=1e-6)
    # the compiled kernel against CuPy's array code: the same bits (CUDA's math library in both)
    reference = normalisation_histo_images(_ring_header(eps), NORM_GRID, NORM_VIEWS, xp=cp, engine="python")
    cp.testing.assert_array_equal(from_header, reference)
    cp.testing.assert_array_equal(sensitivity_attenuation(NORM_GRID, NORM_VIEWS, xp=cp),
                                  sensitivity_attenuation(NORM_GRID, NORM_VIEWS, xp=cp, engine="python"))
    pairs = cp.asarray(rng.uniform(0.5, 1.5, (eps.size, eps.size)))
    cp.testing.assert_array_equal(normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, pairs, xp=cp),
                                  normalisation_histo_images(header, NORM_GRID, NORM_VIEWS, pairs, xp=cp, engine="python"))
