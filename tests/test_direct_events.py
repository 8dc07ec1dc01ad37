"""Phantoms and list-mode event simulation (docs/physics.rst 1.12)."""

import numpy as np
import pytest

from directpet.direct import CylindricalScanner, EventBatch, simulate_events, simulate_randoms
from directpet.direct.model import C_MM_PER_PS, FWHM_PER_SIGMA
from directpet.geometry import ImageGrid
from directpet.sim import (AnalyticPhantom, CylinderSource, PointSource, SphereSource, WaterCylinder,
                           point_source_phantom, sphere_phantom, uniform_cylinder)

GRID = ImageGrid((8, 32, 32), 8.0)
SCANNER = CylindricalScanner()


def _collect(*args, **kw):
    return EventBatch.concatenate(list(simulate_events(*args, progress=False, **kw)))


def _tilt(b):
    d = (b.p2 - b.p1).astype(np.float64)
    return np.arcsin(np.abs(d[:, 2]) / np.linalg.norm(d, axis=1))


# --- phantoms -------------------------------------------------------------------------------------

def test_sphere_phantom_values_and_partial_volume():
    img, info = sphere_phantom(GRID, cylinder_diameter_mm=200, length_mm=100, sphere_radius_mm=50,
                               sphere_diameter_mm=16, contrast=4.0)
    assert img.dtype == np.float32 and img.shape == GRID.shape
    assert info.n_spheres == 6
    np.testing.assert_allclose(np.hypot(info.sphere_centres_mm[:, 0], info.sphere_centres_mm[:, 1]), 50)
    np.testing.assert_allclose(info.contrast, 4.0)
    # Background voxel well inside; partial-volume sphere values lie between background and 4.
    assert img[3, 16, 16] == pytest.approx(1.0)
    assert 1.0 < img.max() <= 4.0
    # Total activity in the grid: the grid covers 64 of the 100 mm length, spheres fully inside.
    vv = np.prod(GRID.voxel_size)
    expect = np.pi * 100**2 * 64 * 1.0 + 6 * 3.0 * 4 / 3 * np.pi * 8**3
    assert img.sum(dtype=np.float64) * vv == pytest.approx(expect, rel=0.01)
    # Attenuation map: water inside the cylinder.
    assert info.mu_map[3, 16, 16] == pytest.approx(0.0096)
    assert info.mu_map[3, 0, 0] == 0.0


def test_point_source_image_and_cylinder():
    img, info = point_source_phantom(GRID, [(4.0, -4.0, 4.0)], activity=512.0)
    iz, iy, ix = GRID.index_of(4.0, -4.0, 4.0)
    assert img[iz, iy, ix] == pytest.approx(1.0) and img.sum() == pytest.approx(1.0)
    cyl, cinfo = uniform_cylinder(GRID, diameter_mm=100, length_mm=40, activity=2.0)
    assert cinfo.n_spheres == 0 and cyl.max() == pytest.approx(2.0)


def test_analytic_sampling_matches_activity():
    """Points fall into each source in proportion to its activity; cold inserts are emptied."""
    rng = np.random.default_rng(1)
    ph = AnalyticPhantom([CylinderSource(100, 100, 1.0), SphereSource((50, 0, 0), 20, 3.0),
                          SphereSource((-50, 0, 0), 20, -1.0), PointSource((0, 0, 0), 5e4)])
    pts = ph.sample(200_000, rng)
    x, y, z = pts.T
    hot = (x - 50) ** 2 + y**2 + z**2 <= 400
    cold = (x + 50) ** 2 + y**2 + z**2 <= 400
    at_point = np.all(pts == 0, axis=1)
    total = ph.total_activity
    v_s = 4 / 3 * np.pi * 20**3
    assert hot.mean() == pytest.approx(4.0 * v_s / total, rel=0.05)
    assert cold.sum() == 0
    assert at_point.mean() == pytest.approx(5e4 / total, rel=0.05)
    assert np.all(np.abs(z) <= 50) and np.all(np.hypot(x, y) <= 100)


# --- events ---------------------------------------------------------------------------------------

def test_events_on_detector_within_acceptance():
    _, info = sphere_phantom(GRID, cylinder_diameter_mm=200, length_mm=100, sphere_radius_mm=50,
                             sphere_diameter_mm=16)
    b = _collect(SCANNER, info, 50_000, seed=3, chunk_size=200_000)
    assert len(b) == 50_000 and b.p1.dtype == np.float32 and b.dt_ps.dtype == np.float32
    for p in (b.p1, b.p2):
        np.testing.assert_allclose(np.hypot(p[:, 0], p[:, 1]), SCANNER.radius_mm, rtol=1e-5)
        assert np.all(np.abs(p[:, 2]) <= SCANNER.half_length_mm + 1e-3)
    tilt = _tilt(b)
    assert tilt.max() <= np.deg2rad(SCANNER.theta_max_deg) + 1e-5
    assert tilt.max() > np.deg2rad(9.0)          # the acceptance is actually used


def test_tof_statistics_match_timing_resolution():
    """Central point, no blur or attenuation: dt ~ N(0, sigma_t); the MLP of an off-centre point
    is centred on it with sigma c sigma_t / 2 along the LOR."""
    ph = AnalyticPhantom([PointSource((0.0, 0.0, 0.0))])
    b = _collect(SCANNER, ph, 40_000, seed=4, blur=False)
    sigma = SCANNER.tof_fwhm_ps / FWHM_PER_SIGMA
    assert abs(float(b.dt_ps.mean())) < 4 * sigma / np.sqrt(len(b))
    assert float(b.dt_ps.std()) == pytest.approx(sigma, rel=0.03)

    src = np.array([100.0, -40.0, 20.0])
    b = _collect(SCANNER, AnalyticPhantom([PointSource(tuple(src))]), 40_000, seed=5, blur=False)
    r = b.most_likely_points()
    np.testing.assert_allclose(r.mean(axis=0), src, atol=1.0)
    dist = np.linalg.norm(r - src, axis=1)
    assert np.sqrt(np.mean(dist**2)) == pytest.approx(C_MM_PER_PS * sigma / 2, rel=0.03)
    # Without timing noise the MLP is the annihilation point.
    b = _collect(SCANNER, AnalyticPhantom([PointSource(tuple(src))]), 1000, seed=6, blur=False, tof=False)
    np.testing.assert_allclose(b.most_likely_points(), np.broadcast_to(src, (len(b), 3)), atol=1e-2)


def test_intrinsic_blur_is_perpendicular_gaussian():
    src = np.array([0.0, 0.0, 0.0])
    b = _collect(SCANNER, AnalyticPhantom([PointSource(tuple(src))]), 20_000, seed=7, tof=False)
    r = b.most_likely_points()
    d = (b.p2 - b.p1).astype(np.float64)
    u = d / np.linalg.norm(d, axis=1, keepdims=True)
    assert np.allclose(np.sum(r * u, axis=1), 0.0, atol=1e-2)   # shift is perpendicular to the LOR
    s = SCANNER.intrinsic_fwhm_mm / FWHM_PER_SIGMA
    assert np.sqrt(np.mean(np.sum(r * r, axis=1)) / 2) == pytest.approx(s, rel=0.03)


def test_attenuation_survival_central_point():
    """A central point in a 350 mm water cylinder survives with exp(-mu * 350 / cos(theta))."""
    water = WaterCylinder(175.0, 250.0)
    _, info = point_source_phantom(GRID, [(0.0, 0.0, 0.0)], attenuation=water)
    batches = list(simulate_events(SCANNER, info, 400_000, count="in_band", chunk_size=100_000, seed=8,
                                   blur=False, progress=False))
    assert len(batches) == 4
    kept = sum(len(b) for b in batches)
    drawn = sum(b.n_in_band for b in batches)
    assert drawn == 400_000
    # Average of exp(-mu 350 / cos theta) over the band (u_z uniform), about 0.995 * exp(-mu 350).
    uz = np.linspace(-1, 1, 2001) * np.sin(SCANNER.theta_max)
    expect = np.mean(np.exp(-0.0096 * 350 / np.sqrt(1 - uz**2)))
    assert kept / drawn == pytest.approx(expect, rel=0.03)
    assert kept / drawn == pytest.approx(np.exp(-0.0096 * 350), rel=0.03)


def test_axial_acceptance_of_an_edge_point():
    """A point near the axial edge loses the LORs whose far end leaves the detector."""
    z0 = 110.0
    ph = AnalyticPhantom([PointSource((0.0, 0.0, z0))])
    b = list(simulate_events(SCANNER, ph, 100_000, count="in_band", seed=9, blur=False, progress=False))
    frac = sum(len(x) for x in b) / 100_000
    # One photon of every LOR goes up: accepted iff R |tan(theta)| <= h - z0; u_z uniform in the band.
    t_up = np.sin(np.arctan((SCANNER.half_length_mm - z0) / SCANNER.radius_mm))
    expect = t_up / np.sin(SCANNER.theta_max)
    assert frac == pytest.approx(expect, abs=0.01)


def test_randoms_and_prompt_counts():
    _, info = sphere_phantom(GRID, cylinder_diameter_mm=200, length_mm=100, n_spheres=0)
    batches = list(simulate_events(SCANNER, info, 30_000, randoms_fraction=0.25, chunk_size=50_000,
                                   seed=10, progress=False))
    b = EventBatch.concatenate(batches)
    assert len(b) == 30_000
    assert b.n_randoms / len(b) == pytest.approx(0.25, abs=0.02)
    r = simulate_randoms(SCANNER, 20_000, seed=11)
    assert len(r) == 20_000 and r.n_randoms == 20_000
    assert _tilt(r).max() <= SCANNER.theta_max + 1e-5
    mlp = r.most_likely_points()
    assert np.hypot(mlp[:, 0], mlp[:, 1]).max() <= SCANNER.fov_radius_mm + 1e-2


def test_seeded_reproducible_and_errors():
    ph = AnalyticPhantom([PointSource((0.0, 0.0, 0.0))])
    a = _collect(SCANNER, ph, 1000, seed=12)
    b = _collect(SCANNER, ph, 1000, seed=12)
    np.testing.assert_array_equal(a.dt_ps, b.dt_ps)
    with pytest.raises(ValueError, match="n_events"):
        next(simulate_events(SCANNER, ph, 0, progress=False))
    with pytest.raises(ValueError, match="randoms_fraction"):
        next(simulate_events(SCANNER, ph, 10, randoms_fraction=1.0, progress=False))
    with pytest.raises(TypeError, match="activity"):
        next(simulate_events(SCANNER, "x", 10, progress=False))
    outside = AnalyticPhantom([PointSource((0.0, 0.0, 500.0))])     # beyond the detector's axial end
    with pytest.raises(RuntimeError, match="accepted"):
        next(simulate_events(SCANNER, outside, 10, chunk_size=100, progress=False))
    with pytest.raises(ValueError, match="theta_max_deg"):
        CylindricalScanner(theta_max_deg=95)
