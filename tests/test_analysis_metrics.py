"""ROIs, CRC, noise, contrast-noise curves and plots ([HA] §6.1)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from directpet.analysis import (ContrastNoiseCurve, SphereROIs, annulus_weights, circle_weights,
                                contrast_noise_curve, crc, line_profile, noise, pick_matched_noise,
                                plot_contrast_noise, plot_image_panels, plot_line_profiles,
                                plot_matched_noise_panels, slice_weights)
from directpet.geometry import ImageGrid
from directpet.recon import ReconResult
from directpet.sim import sphere_phantom

GRID = ImageGrid((6, 80, 80), 2.0)


def test_circle_and_annulus_areas():
    w = circle_weights(GRID, (3.3, -5.1), 10.0, supersample=20)
    assert w.sum() * 4.0 == pytest.approx(np.pi * 25, rel=5e-3)
    assert w.max() == 1.0 and w.min() == 0.0
    a = annulus_weights(GRID, (0.0, 0.0), 24.0, 40.0, supersample=20)
    assert a.sum() * 4.0 == pytest.approx(np.pi * (400 - 144), rel=5e-3)
    assert np.all((a >= 0) & (a <= 1))


def test_slice_weights():
    assert slice_weights(GRID, 0.0) == [(2, 0.5), (3, 0.5)]     # between the two central slices
    assert slice_weights(GRID, 1.0) == [(3, 1.0)]                # on slice 3's centre
    (i0, w0), (i1, w1) = slice_weights(GRID, 1.5)
    assert (i0, i1) == (3, 4) and w0 == pytest.approx(0.75) and w1 == pytest.approx(0.25)
    assert slice_weights(GRID, 0.0, "nearest") == [(3, 1.0)]
    with pytest.raises(ValueError):
        slice_weights(GRID, 100.0)


def _block_phantom(sphere_value=5.0, bg=1.0, z=1.0):
    """Spheres of the ROI protocol drawn as 7 x 7-pixel squares (larger than the 10 mm ROI's
    support, smaller than the annulus hole) in slice 3 (z = 1 mm) on a uniform background."""
    _, info = sphere_phantom(GRID, cylinder_diameter_mm=120, length_mm=12, n_spheres=4,
                             sphere_diameter_mm=10, sphere_radius_mm=50, contrast=sphere_value / bg,
                             background=bg, sphere_z_mm=z)
    img = np.full(GRID.shape, bg, np.float32)
    for c in info.sphere_centres_mm:
        iz, iy, ix = GRID.index_of(c[2], c[1], c[0])
        img[:, iy - 3:iy + 4, ix - 3:ix + 4] = sphere_value
    return img, info


def test_crc_is_one_when_rois_fit_the_structures():
    img, info = _block_phantom(5.0, 1.0)
    res = crc(img, info)
    assert res.mean == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(res.per_sphere, 1.0, atol=1e-12)
    np.testing.assert_allclose(res.sphere_means, 5.0)
    np.testing.assert_allclose(res.background_means, 1.0)
    # Half the true contrast -> CRC 0.5 (c = 4 from the phantom, measured 2).
    half = np.where(img > 1, 3.0, 1.0).astype(np.float32)
    assert float(crc(half, info)) == pytest.approx(0.5, abs=1e-12)


def test_crc_hand_computed_partial_voxels():
    """Sphere ROI mean equals the weighted mean computed by hand; a z-gradient is interpolated."""
    img, info = _block_phantom(5.0, 1.0, z=1.5)          # between slices 3 (w 0.75) and 4 (w 0.25)
    ramp = img * (1.0 + 0.1 * np.arange(GRID.nz))[:, None, None]
    res = crc(ramp.astype(np.float32), info)
    # Every ROI mean scales with 0.75 * 1.3 + 0.25 * 1.4 = 1.325; the CRC is unchanged.
    np.testing.assert_allclose(res.sphere_means, 5.0 * 1.325, rtol=1e-6)
    np.testing.assert_allclose(res.background_means, 1.325, rtol=1e-6)
    assert res.mean == pytest.approx(1.0, abs=1e-6)
    # A single sphere with a non-uniform ROI: compare with a direct weighted mean.
    rng = np.random.default_rng(0)
    rnd = rng.random(GRID.shape).astype(np.float32) + 1.0
    rois = SphereROIs.from_info(info)
    w = circle_weights(GRID, info.sphere_centres_mm[0][:2], 10.0)
    wb = annulus_weights(GRID, info.sphere_centres_mm[0][:2], 24.0, 40.0)
    ps = 0.75 * np.sum(w * rnd[3]) / w.sum() + 0.25 * np.sum(w * rnd[4]) / w.sum()
    pb = 0.75 * np.sum(wb * rnd[3]) / wb.sum() + 0.25 * np.sum(wb * rnd[4]) / wb.sum()
    res = crc(rnd, info, rois=rois)
    assert res.per_sphere[0] == pytest.approx((ps - pb) / pb / 4.0, rel=1e-9)


def test_noise_of_known_pattern():
    """A checkerboard of mean m and amplitude a has std a (all pixels fully inside the ROI would
    give exactly a; partial weights change it only slightly) -> noise a / m."""
    _, info = sphere_phantom(GRID, cylinder_diameter_mm=120, length_mm=12, n_spheres=2,
                             sphere_diameter_mm=10, sphere_radius_mm=30, sphere_z_mm=1.0)
    iy, ix = np.indices(GRID.shape[1:])
    board = np.where((iy + ix) % 2 == 0, 1.2, 0.8)
    img = np.broadcast_to(board, GRID.shape).astype(np.float32).copy()
    assert noise(img, info) == pytest.approx(0.2, rel=0.01)
    # Exact against a hand-computed weighted std on slice 3 (the sphere slice).
    rng = np.random.default_rng(1)
    rnd = (rng.standard_normal(GRID.shape) * 0.1 + 2.0).astype(np.float32)
    w = circle_weights(GRID, (0.0, 0.0), 50.0)
    m = np.sum(w * rnd[3]) / w.sum()
    sd = np.sqrt(np.sum(w * (rnd[3] - m) ** 2) / w.sum())
    assert noise(rnd, info) == pytest.approx(sd / m, rel=1e-9)
    # +-1 slice: the mean of the three per-slice values.
    per = []
    for iz in (2, 3, 4):
        mz = np.sum(w * rnd[iz]) / w.sum()
        per.append(np.sqrt(np.sum(w * (rnd[iz] - mz) ** 2) / w.sum()) / mz)
    assert noise(rnd, info, half_slices=1) == pytest.approx(np.mean(per), rel=1e-9)
    # Explicit centre; z = 0 lies on the boundary of slices 2 and 3: both are used.
    both = noise(rnd, (0.0, 0.0, 0.0), grid=GRID)
    assert both == pytest.approx(np.mean(per[:2]), rel=1e-9)
    assert noise(np.full(GRID.shape, 3.0, np.float32), info) == pytest.approx(0.0, abs=1e-7)


def test_contrast_noise_curve_and_matched_noise():
    img, info = _block_phantom(5.0, 1.0)
    rng = np.random.default_rng(2)
    sigmas = [0.02, 0.05, 0.1, 0.15]
    images = [(img * (1 + s * rng.standard_normal(GRID.shape))).astype(np.float32) for s in sigmas]
    res = ReconResult(image=images[-1], images=images, image_iterations=[5, 10, 15, 20], algorithm="test")
    curve = contrast_noise_curve(res, info)
    assert list(curve.iterations) == [5, 10, 15, 20] and curve.label == "test"
    np.testing.assert_allclose(curve.noise, sigmas, rtol=0.15)
    assert curve.per_sphere.shape == (4, 4)
    # Synthetic curves with known crossings.
    c = ContrastNoiseCurve(np.array([2.0, 4.0, 6.0]), np.array([0.2, 0.4, 0.6]), np.array([0.04, 0.06, 0.1]),
                           label="a")
    m = pick_matched_noise([c], 0.08)[0]
    assert (m.status, m.iteration, m.crc, m.index) == ("ok", pytest.approx(5.0), pytest.approx(0.5), 2)
    assert pick_matched_noise(c, 0.2)[0].status == "not reached"
    assert np.isnan(pick_matched_noise(c, 0.2)[0].iteration)
    assert pick_matched_noise(c, 0.01)[0].status == "above at first"


def test_plots_return_figures_and_write_png(tmp_path):
    img, info = _block_phantom(5.0, 1.0)
    c1 = ContrastNoiseCurve(np.arange(1, 6), np.linspace(0.3, 0.8, 5), np.linspace(0.02, 0.12, 5), label="inv")
    c2 = ContrastNoiseCurve(np.arange(1, 6), np.linspace(0.2, 0.7, 5), np.linspace(0.03, 0.1, 5), label="v1")
    fig = plot_contrast_noise([c1, c2], annotate_every=2, path=tmp_path / "cn.png")
    assert fig.axes and (tmp_path / "cn.png").stat().st_size > 1000
    results = [ReconResult(image=img, images=[img] * 5, image_iterations=list(range(1, 6)), algorithm=a)
               for a in ("inv", "v1")]
    fig = plot_matched_noise_panels(results, [c1, c2], info, path=tmp_path / "panels.png")
    # two panels and their shared colour bar, labelled with the intensity's units
    assert len(fig.axes) == 3 and (tmp_path / "panels.png").exists()
    assert fig.axes[-1].get_ylabel() == "activity (a.u.)" and fig.axes[0].get_xlabel() == "x (mm)"
    fig = plot_image_panels([img, img], ["a", "b"], GRID, z_mm=1.0)
    assert len(fig.axes) == 3            # two panels and one colour bar
    fig = plot_line_profiles([img], ["recon"], info, truth=img, path=tmp_path / "prof.png")
    assert (tmp_path / "prof.png").exists()
    s, v = line_profile(img, GRID, (30.0, 0.0), (50.0, 0.0), z_mm=1.0, n_samples=41)
    assert s[-1] == pytest.approx(20.0) and v.max() == pytest.approx(5.0) and v.min() == pytest.approx(1.0)
