"""Spatial resolution analysis (directpet.analysis.resolution).

Tolerances
----------
* ``fwhm_1d`` on a Gaussian of sigma ``sigma`` sampled every ``h``: the crossings are found by
  linear interpolation between samples, whose error at the half-maximum crossing is about
  ``h^2 |f''| / (8 |f'|)``, i.e. ``0.035 (h / sigma)^2`` of the FWHM over both sides
  (``0.098 (h / sigma)^2`` of the FWTM at a tenth). The parabolic peak adds a term of fourth order
  (about ``0.05 (h / sigma)^4`` of the FWHM). The test allows ``0.07 (h / sigma)^2`` (FWHM) and
  ``0.15 (h / sigma)^2`` (FWTM), twice the leading term, for sigma >= 1.2 samples at any sub-sample
  offset. A symmetric triangle with its apex on a sample is measured exactly (1e-12): the
  parabola's vertex is the apex and linear interpolation is exact on its flanks.
* ``point_source_fwhm`` reads profiles from the trilinear interpolant of the voxel values. With
  sigma >= 2.25 voxels along every axis the 1D sampling above contributes <= 1.4 %, and the
  interpolant deviates from the Gaussian by up to ``(h^2 / 8) |d^2 f|`` per axis (about
  ``(h / sigma)^2 / 8`` = 2.5 % near the peak), a deviation that varies along an oblique profile.
  We allow 5 % (FWHM) and 6 % (FWTM); the largest error seen over 40 random placements was 3.4 %.
  The located peak must be within half a voxel of the true centre on each axis (the per-axis
  parabola through the largest voxel is biased for a response rotated against the grid).
* Peak-to-valley: exact where the truth is exact (an unblurred phantom: valleys of exactly 0, or the
  background), otherwise orderings (blur, rod size), not values.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter

from directpet.analysis import fwhm_1d, peak_to_valley, point_source_fwhm, rod_noise, rod_profiles
from directpet.geometry import ImageGrid
from directpet.sim import derenzo_phantom

FWHM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(2.0))
FWTM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(10.0))
FIRST_LIKE = ImageGrid((3, 91, 91), (0.8, 0.4, 0.4))


# --- fwhm_1d ---------------------------------------------------------------------------------------

def test_fwhm_1d_of_sampled_gaussians(rng):
    for _ in range(200):
        s = rng.uniform(1.2, 4.0)                       # sigma in samples
        h = rng.uniform(0.1, 2.0)                       # mm per sample
        off = rng.uniform(-0.5, 0.5)
        x = np.arange(-int(6 * s) - 2, int(6 * s) + 3) - off
        p = rng.uniform(0.5, 50.0) * np.exp(-0.5 * (x / s) ** 2)
        sigma_mm = s * h
        assert fwhm_1d(p, h) == pytest.approx(FWHM_PER_SIGMA * sigma_mm, rel=0.07 / s**2)
        assert fwhm_1d(p, h, fraction=0.1) == pytest.approx(FWTM_PER_SIGMA * sigma_mm, rel=0.15 / s**2)


def test_fwhm_1d_exact_on_a_triangle(rng):
    for _ in range(20):
        half_base = int(rng.integers(3, 20))            # samples from apex to zero
        h = rng.uniform(0.05, 3.0)
        k = np.arange(-half_base - 5, half_base + 6)
        p = rng.uniform(0.5, 10.0) * np.clip(1.0 - np.abs(k) / half_base, 0, None)
        assert fwhm_1d(p, h) == pytest.approx(half_base * h, rel=1e-12)
        assert fwhm_1d(p, h, fraction=0.1) == pytest.approx(1.8 * half_base * h, rel=1e-12)


def test_fwhm_1d_rejects_bad_profiles(rng):
    g = np.exp(-0.5 * ((np.arange(31) - 15 - rng.uniform(-0.4, 0.4)) / 2.5) ** 2)
    with pytest.raises(ValueError, match="edge"):
        fwhm_1d(g[15:], 1.0)                             # maximum at the first sample
    with pytest.raises(ValueError, match="edge"):
        fwhm_1d(g[:16], 1.0)                             # maximum at the last sample
    with pytest.raises(ValueError, match="never falls below .* left"):
        fwhm_1d(g[13:], 1.0)
    with pytest.raises(ValueError, match="never falls below .* right"):
        fwhm_1d(g[:18], 1.0)
    with pytest.raises(ValueError, match="never falls below 0.1 .* right"):
        fwhm_1d(g[:20], 1.0, fraction=0.1)
    with pytest.raises(ValueError, match="NaN"):
        fwhm_1d(np.where(np.arange(31) == 3, np.nan, g), 1.0)
    with pytest.raises(ValueError, match="positive maximum"):
        fwhm_1d(g - 2.0, 1.0)                            # an interior peak below zero
    with pytest.raises(ValueError, match="1D"):
        fwhm_1d(np.stack([g, g]), 1.0)
    with pytest.raises(ValueError, match="at least 3"):
        fwhm_1d(g[14:16], 1.0)
    with pytest.raises(ValueError, match="spacing_mm"):
        fwhm_1d(g, 0.0)
    with pytest.raises(ValueError, match="fraction"):
        fwhm_1d(g, 1.0, fraction=1.0)


# --- point sources ----------------------------------------------------------------------------------

def _blob(grid, centre, sigmas, radial):
    """Anisotropic Gaussian (sigma_r, sigma_t, sigma_a) mm at centre, radial unit vector in-plane."""
    z, y, x = np.meshgrid(*(grid.centres(a) for a in range(3)), indexing="ij")
    dx, dy, dz = x - centre[0], y - centre[1], z - centre[2]
    r = dx * radial[0] + dy * radial[1]
    t = -dx * radial[1] + dy * radial[0]
    return np.exp(-0.5 * ((r / sigmas[0]) ** 2 + (t / sigmas[1]) ** 2 + (dz / sigmas[2]) ** 2)).astype(np.float32)


@pytest.mark.parametrize("sum_halfwidth_mm", [0.0, 0.8])
def test_point_source_fwhm_recovers_anisotropic_widths_off_centre(rng, sum_halfwidth_mm):
    grid = ImageGrid((31, 81, 81), (0.8, 0.4, 0.4))
    for _ in range(3):
        rho, phi = rng.uniform(3.0, 8.0), rng.uniform(0, 2 * np.pi)
        centre = np.array([rho * np.cos(phi), rho * np.sin(phi), rng.uniform(-2.0, 2.0)])
        # Distinct by > 10 % so that swapped directions fail; >= 2.25 voxels each.
        sigmas = np.array([rng.uniform(1.15, 1.4), rng.uniform(0.9, 1.0), rng.uniform(1.8, 2.4)])
        img = _blob(grid, centre, sigmas, (np.cos(phi), np.sin(phi))) * rng.uniform(1, 100)
        nominal = centre + rng.uniform(-0.3, 0.3, 3)     # the peak is searched for near the nominal point
        res = point_source_fwhm(img, grid, nominal, half_width_mm=6.0, sum_halfwidth_mm=sum_halfwidth_mm)
        for name, s in zip(("radial", "tangential", "axial"), sigmas):
            assert res["fwhm_mm"][name] == pytest.approx(FWHM_PER_SIGMA * s, rel=0.05), name
            assert res["fwtm_mm"][name] == pytest.approx(FWTM_PER_SIGMA * s, rel=0.06), name
        assert np.all(np.abs(res["peak_mm"] - centre) <= 0.5 * np.array(grid.voxel_size)[::-1])
        er = res["directions"]["radial"]
        np.testing.assert_allclose(er, [nominal[0] / np.hypot(*nominal[:2]), nominal[1] / np.hypot(*nominal[:2]), 0])
        t, v = res["profiles"]["axial"]
        assert t.shape == v.shape and t[0] == pytest.approx(-t[-1])


def test_point_source_fwhm_at_centre_uses_x(rng):
    grid = ImageGrid((21, 61, 61), (0.8, 0.4, 0.4))
    sx, sy, sz = rng.uniform(1.15, 1.4), rng.uniform(0.9, 1.0), rng.uniform(1.8, 2.2)
    centre = np.array([0.0, 0.0, rng.uniform(-1, 1)])
    img = _blob(grid, centre, (sx, sy, sz), (1.0, 0.0))
    res = point_source_fwhm(img, grid, (0.0, 0.0, centre[2]), axes=("radial", "tangential"), oversample=4)
    np.testing.assert_allclose(res["directions"]["radial"], [1.0, 0.0, 0.0])
    assert set(res["fwhm_mm"]) == {"radial", "tangential"}
    assert res["fwhm_mm"]["radial"] == pytest.approx(FWHM_PER_SIGMA * sx, rel=0.05)
    assert res["fwhm_mm"]["tangential"] == pytest.approx(FWHM_PER_SIGMA * sy, rel=0.05)


def test_point_source_fwhm_rejects_bad_input(rng):
    grid = ImageGrid((11, 31, 31), (0.8, 0.4, 0.4))
    img = _blob(grid, (0.0, 0.0, 0.0), (1.0, 1.0, 1.5), (1.0, 0.0))
    with pytest.raises(ValueError, match="image"):
        point_source_fwhm(img[:-1], grid, (0, 0, 0))
    with pytest.raises(TypeError, match="grid"):
        point_source_fwhm(img, (11, 31, 31), (0, 0, 0))
    with pytest.raises(ValueError, match="position_mm"):
        point_source_fwhm(img, grid, (0, 0))
    with pytest.raises(ValueError, match="position_mm"):
        point_source_fwhm(img, grid, (0, 0, 50.0))
    with pytest.raises(ValueError, match="axes"):
        point_source_fwhm(img, grid, (0, 0, 0), axes=("sideways",))
    with pytest.raises(ValueError, match="oversample"):
        point_source_fwhm(img, grid, (0, 0, 0), oversample=0)
    with pytest.raises(ValueError, match="never falls below"):
        point_source_fwhm(img, grid, (0, 0, 0), half_width_mm=0.9)
    flat = np.full(grid.shape, rng.uniform(0.5, 2), np.float32)
    with pytest.raises(ValueError, match="profile"):
        point_source_fwhm(flat, grid, (0, 0, 0))


# --- Derenzo peak-to-valley ---------------------------------------------------------------------------

@pytest.fixture
def derenzo(rng):
    centre = (rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3), 0.0)
    return derenzo_phantom(FIRST_LIKE, centre_mm=centre, first_sector_deg=rng.uniform(0, 360))


def _blur(img, sigma_mm, grid=FIRST_LIKE):
    # truncate=8: no artificial exact zeros in the valleys from a cut-off kernel.
    sig = [0.0] + [sigma_mm / v for v in grid.voxel_size[1:]]
    return gaussian_filter(img.astype(np.float64), sig, truncate=8.0)


def test_peak_to_valley_decreases_with_blur_and_rod_size(rng, derenzo):
    img, info = derenzo
    sigmas = [rng.uniform(0.2, 0.25), rng.uniform(0.32, 0.38), rng.uniform(0.45, 0.55)]
    ratios = [{d: r.ratio for d, r in peak_to_valley(rod_profiles(_blur(img, s), FIRST_LIKE, info)).items()}
              for s in sigmas]
    for d in info.diameters_mm:
        seq = [r[d] for r in ratios]
        assert seq[0] > seq[1] > seq[2] > 0, (d, seq)
    mid = ratios[1]
    assert mid[0.75] < mid[2.4]
    assert mid[0.75] < mid[1.35] < mid[2.4]


def test_peak_to_valley_large_for_small_blur(rng, derenzo):
    img, info = derenzo
    s = rng.uniform(0.05, 0.1)                 # FWHM <= 0.24 mm, a third of the smallest rod
    pv = peak_to_valley(rod_profiles(_blur(img, s), FIRST_LIKE, info))
    assert set(pv) == set(info.diameters_mm)
    for d, r in pv.items():
        assert r.ratio > 10.0, (d, r.ratio)
        assert r.peaks.shape == (len(info.group(d).profile_rods),) and r.valleys.shape == (r.peaks.size - 1,)


def test_peak_to_valley_exact_cases_cold_and_warm_background(rng):
    centre = (rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3), 0.0)
    img, info = derenzo_phantom(FIRST_LIKE, centre_mm=centre)
    pv = peak_to_valley(rod_profiles(img, FIRST_LIKE, info))
    big = pv[2.4]
    # Cold background, no blur: the 2.4 mm valleys (1.2 mm from either rod edge) are exactly 0.
    assert big.mean_valley == 0.0 and big.ratio == np.inf
    assert big.mean_peak == pytest.approx(info.concentration)
    conc, bg = rng.uniform(2, 6), rng.uniform(0.3, 1.0)
    img, info = derenzo_phantom(FIRST_LIKE, centre_mm=centre, concentration=conc, background=bg)
    big = peak_to_valley(rod_profiles(img, FIRST_LIKE, info))[2.4]
    assert big.ratio == pytest.approx(conc / bg, rel=1e-6)
    # An empty image has no peaks: nan, not an error or a warning.
    zero = peak_to_valley(rod_profiles(np.zeros(FIRST_LIKE.shape, np.float32), FIRST_LIKE, info))
    assert all(np.isnan(r.ratio) for r in zero.values())


def test_rod_profiles_follow_info_and_axis_x_matches_axis_z(rng):
    g = ImageGrid((41, 91, 91), (0.8, 0.4, 0.4))
    c = (rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3), rng.uniform(-1.0, 1.0))
    img, info = derenzo_phantom(g, centre_mm=c, length_mm=20.0)
    frac = rng.uniform(0.3, 0.6)
    prof = rod_profiles(img, g, info, axial_fraction=frac)
    z = g.centres(0)
    want = np.flatnonzero(np.abs(z - c[2]) <= 0.5 * frac * 20.0)
    for d, p in prof.items():
        np.testing.assert_array_equal(p.slices, want)
        grp = info.group(d)
        assert p.rod_mm.size == grp.profile_rods.size
        # Rods at the documented positions: the profile reaches the rod concentration there.
        at = np.interp(p.rod_mm, p.distance_mm, p.values)
        if d >= 2.0:                           # the 4 voxels read around the centre lie inside the rod
            np.testing.assert_allclose(at, info.concentration, rtol=1e-6)
        np.testing.assert_allclose(p.start_mm[:2], grp.profile_start_mm)
        assert p.start_mm[2] == pytest.approx(c[2])
    # The same phantom along x on the permuted grid gives the same profiles.
    gx = ImageGrid((g.ny, g.nx, g.nz), (g.voxel_size[1], g.voxel_size[2], g.voxel_size[0]))
    img_x, info_x = derenzo_phantom(gx, centre_mm=(c[2], c[0], c[1]), axis="x", length_mm=20.0)
    prof_x = rod_profiles(img_x, gx, info_x, axial_fraction=frac)
    for d in prof:
        np.testing.assert_allclose(prof_x[d].values, prof[d].values, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(prof_x[d].slices, prof[d].slices)


def test_rod_profiles_reject_bad_input(derenzo):
    img, info = derenzo
    with pytest.raises(ValueError, match="info"):
        rod_profiles(np.zeros((5, 91, 91), np.float32), ImageGrid((5, 91, 91), (0.8, 0.4, 0.4)), info)
    with pytest.raises(ValueError, match="image"):
        rod_profiles(img[:, :-1], FIRST_LIKE, info)
    with pytest.raises(ValueError, match="axial_fraction"):
        rod_profiles(img, FIRST_LIKE, info, axial_fraction=0.0)
    with pytest.raises(ValueError, match="step_mm"):
        rod_profiles(img, FIRST_LIKE, info, step_mm=-0.1)
    with pytest.raises(ValueError, match="window_fraction"):
        peak_to_valley(rod_profiles(img, FIRST_LIKE, info), window_fraction=0.0)


# --- what the voxels can resolve ----------------------------------------------------------------------

def test_point_source_fwhm_flags_a_response_narrower_than_two_voxels(rng):
    """A source much narrower than the voxels measures about one voxel whatever its width: it is
    flagged as voxel-limited; a response three voxels wide is not flagged."""
    grid = ImageGrid((21, 61, 61), (0.8, 0.4, 0.4))
    centre = np.array([0.0, 0.0, 0.0])
    narrow = _blob(grid, centre, (0.05, 0.05, 0.05), (1.0, 0.0)) * rng.uniform(1, 10)
    res = point_source_fwhm(narrow, grid, centre)
    assert res["voxel_mm"] == {"radial": 0.4, "tangential": 0.4, "axial": 0.8}
    for name, voxel in res["voxel_mm"].items():
        assert res["fwhm_mm"][name] == pytest.approx(voxel, rel=0.05), name     # a single hot voxel
        assert res["sampling_limited"][name], name
    wide = _blob(grid, centre, (3 * 0.4 / FWHM_PER_SIGMA, 3 * 0.4 / FWHM_PER_SIGMA, 3 * 0.8 / FWHM_PER_SIGMA),
                 (1.0, 0.0))
    res = point_source_fwhm(wide, grid, centre, half_width_mm=6.0)
    assert not any(res["sampling_limited"].values())
    # oversampling the profile does not change what the voxels limit
    assert point_source_fwhm(narrow, grid, centre, oversample=4)["sampling_limited"]["axial"]


def test_peak_to_valley_marks_rods_closer_than_two_voxels(rng):
    """On 0.3 mm voxels every group's rods (at least 1.5 mm apart on the line) are sampled; on 0.9 mm
    voxels the groups whose rods are closer than 1.8 mm (0.75 mm rods) are marked, and the mark shows
    in the ratio text."""
    for voxel in (0.3, 0.9):
        grid = ImageGrid((5, int(40 / voxel) | 1, int(40 / voxel) | 1), (0.8, voxel, voxel))
        img, info = derenzo_phantom(grid, first_sector_deg=rng.uniform(0, 360))
        pv = peak_to_valley(rod_profiles(_blur(img, 0.3, grid), grid, info))
        for d, r in pv.items():
            assert r.pitch_mm == pytest.approx(2 * d, rel=1e-6)      # hexagonal rows: centres 2 d apart
            assert r.sampled == (2 * d >= 2 * voxel), (voxel, d)
            assert r.ratio_text().endswith("*") == (not r.sampled)
        assert any(not r.sampled for r in pv.values()) == (voxel > 0.75)


# --- noise in the rod cores ---------------------------------------------------------------------------------

def test_rod_noise_measures_the_noise_put_into_the_rod_cores(rng, derenzo):
    """The truth has uniform rods: their cores (half a radius, on 0.4 mm voxels well inside the
    2.4 mm rods) read 0, and so does the truth blurred across the rods (the peaked profile a strong
    prior makes is not noise). Gaussian noise of relative sigma s added voxel by voxel reads s (the
    cores hold ~7 columns x 3 slices per rod, 6 rods: the estimate is within ~20 % of s); Poisson
    noise at four times the counts reads half as much."""
    img, info = derenzo
    assert rod_noise(img, FIRST_LIKE, info) < 1e-6
    assert rod_noise(_blur(img, 0.8), FIRST_LIKE, info) < 1e-6
    sigma = rng.uniform(0.05, 0.2)
    noisy = img * (1 + sigma * rng.standard_normal(img.shape))
    assert rod_noise(noisy, FIRST_LIKE, info) == pytest.approx(sigma, rel=0.2)
    # a group's noise by its diameter; a smaller core holds fewer voxels but the same noise level
    assert rod_noise(noisy, FIRST_LIKE, info, diameter_mm=2.0, core_fraction=0.6) == pytest.approx(sigma, rel=0.25)
    low = [rod_noise(rng.poisson(20.0 * img / img.max()), FIRST_LIKE, info) for _ in range(4)]
    high = [rod_noise(rng.poisson(80.0 * img / img.max()), FIRST_LIKE, info) for _ in range(4)]
    assert np.mean(high) / np.mean(low) == pytest.approx(0.5, rel=0.2)


def test_rod_noise_rejects_bad_input(derenzo):
    img, info = derenzo
    with pytest.raises(ValueError, match="core_fraction"):
        rod_noise(img, FIRST_LIKE, info, core_fraction=1.5)
    with pytest.raises(ValueError, match="core_fraction: the core of no 0.75 mm rod"):
        rod_noise(img, FIRST_LIKE, info, diameter_mm=0.75, core_fraction=0.01)
    with pytest.raises(ValueError, match="diameter_mm"):
        rod_noise(img, FIRST_LIKE, info, diameter_mm=3.3)
    with pytest.raises(ValueError, match="image: a column"):
        rod_noise(-img, FIRST_LIKE, info)
    with pytest.raises(TypeError, match="info: expected a DerenzoInfo"):
        rod_noise(img, FIRST_LIKE, object())
