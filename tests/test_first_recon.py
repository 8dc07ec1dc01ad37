"""FIRST reconstruction through the shared layer: angle subsets, OSEM, data storage, a point source
from the Monte Carlo reconstructed at the right place with the expected width."""

import numpy as np
import pytest

from directpet import analysis, recon
from directpet.first import (AngleSubsets, RotatingScanner, SinogramData, SuperLORProjector, build_super_lor_table,
                             geometric_normalisation, interleaved_angle_subsets, model_consistent_data, simulate)
from directpet.first.model import tube_at
from directpet.first.monte_carlo import direction_band
from directpet.geometry import ImageGrid
from directpet.recon.problem import spread_order
from directpet.sim import point_sources

SMALL = RotatingScanner.small()


@pytest.fixture(scope="module")
def table():
    return build_super_lor_table(SMALL)


def _blob(rng, s):
    x = np.zeros(s.grid.shape, np.float32)
    c = s.n_radial // 2
    x[:, c - 5:c + 5, c - 4:c + 6] = rng.uniform(0.5, 1.5, (s.n_slices, 10, 10))
    return x


def test_interleaved_subsets_and_their_order():
    groups = interleaved_angle_subsets(130, 13)
    assert [len(g) for g in groups] == [10] * 13
    assert list(groups[3]) == list(range(3, 130, 13))
    order = spread_order(13)
    assert sorted(order) == list(range(13)) and order[:3] == [0, 6, 3]
    with pytest.raises(ValueError, match="n_subsets"):
        interleaved_angle_subsets(12, 13)


@pytest.mark.parametrize("method", ["fast", "matched"])
def test_osem_increases_the_likelihood(table, rng, method):
    P = SuperLORProjector(table, method, backend="cpu")
    shape = SMALL.sinogram_shape
    factors = rng.uniform(0.5, 1.0, shape).astype(np.float32)
    background = rng.uniform(0.01, 0.05, shape).astype(np.float32)
    data = model_consistent_data(P, _blob(rng, SMALL), factors=factors, background=background, counts=2e5, seed=rng)
    res = recon.osem(AngleSubsets(P, data, 4), 6, track_loglik=True, progress=False)
    assert np.all(np.diff(res.loglik) > 0)


@pytest.mark.parametrize("method", ["fast", "matched", "faithful"])
def test_osem_on_noise_free_data_approaches_the_phantom(table, rng, method):
    """A smooth phantom (a random blob low-passed by the projector's own resolution scale) from
    noise-free data: the error falls every iteration and by at least half over 30."""
    from scipy.ndimage import gaussian_filter

    P = SuperLORProjector(table, method, backend="cpu")
    truth = gaussian_filter(_blob(rng, SMALL), (0.7, 1.5, 1.5)).astype(np.float32)
    data = model_consistent_data(P, truth, noise=False)
    errs = []
    recon.osem(AngleSubsets(P, data, 3), 30, progress=False,
               callback=lambda it, sub, x: errs.append(np.linalg.norm(x - truth) / np.linalg.norm(truth)) and False)
    per_iteration = np.array(errs[2::3])
    assert np.all(np.diff(per_iteration) < 0)
    assert per_iteration[-1] < 0.5 * per_iteration[0]


def test_faithful_uses_its_own_back_projector_for_the_sensitivity(table, rng):
    """The layer's sensitivity is the faithful back projection of the factors (the same back
    projector for numerator and sensitivity), which back_with_sensitivity also returns."""
    P = SuperLORProjector(table, "faithful", backend="cpu")
    f = rng.uniform(0.5, 1.0, SMALL.sinogram_shape).astype(np.float32)
    data = SinogramData(SMALL, rng.poisson(3.0, SMALL.sinogram_shape).astype(np.float32), f)
    problem = AngleSubsets(P, data, 3)
    S = recon.sensitivity_image(problem)
    y = rng.uniform(0.1, 1.0, SMALL.sinogram_shape).astype(np.float32)
    _, sens = P.back_with_sensitivity(y, f)
    np.testing.assert_allclose(S, sens, rtol=1e-4, atol=1e-6 * float(sens.max()))


def test_monte_carlo_point_source_lands_at_its_place_with_the_expected_width():
    """Monte Carlo (not the model) of two point sources, reconstructed with the analytic model:
    each peak within a quarter voxel of its true place; radial and tangential FWHM between 0.3 mm
    and the projection's own blur (the model's tube FWHM at the LOR centre, ~0.95 mm: OSEM with the
    resolution model recovers below it), axial within two slices."""
    s = RotatingScanner(n_rows=8, n_angles=26, n_radial=61, n_columns=24)
    g = s.grid
    plane = ImageGrid((1, 4 * g.ny + 1, 4 * g.nx + 1), (0.1, 0.1, 0.1))
    pos = np.array([[0.0, 0.0, 0.0], [6.0 * np.cos(0.5), 6.0 * np.sin(0.5), 0.0]])
    act, _ = point_sources(plane, pos)
    n_decays = round(4_000_000 / direction_band(s, act, grid=plane)["band_fraction"])   # 4e6 followed decays
    sino, st = simulate(s, act, n_decays, seed=3, backend="cpu", grid=plane)
    data = SinogramData(s, sino, geometric_normalisation(s))
    P = SuperLORProjector(build_super_lor_table(s), "fast", backend="cpu")
    res = recon.osem(AngleSubsets(P, data, 13), 10, progress=False)
    T = float(s.tan_alpha[s.n_rows - 1])
    d = np.linspace(-3, 3, 6001)
    profile = tube_at(s, T, 0.0, d, 0.0)                    # cell integrals: close to the density
    tube_fwhm = float(np.ptp(d[profile >= 0.5 * profile.max()]))
    assert 0.8 < tube_fwhm < 1.2
    for p in pos:
        f = analysis.point_source_fwhm(res.image, g, p)
        assert np.linalg.norm(np.asarray(f["peak_mm"]) - p) < 0.25 * g.voxel_size[2]
        for axis in ("radial", "tangential"):
            assert 0.3 < f["fwhm_mm"][axis] < tube_fwhm
        assert f["fwhm_mm"]["axial"] <= 2 * g.voxel_size[0]


def test_sinogram_data_round_trip_and_checks(tmp_path, rng):
    shape = SMALL.sinogram_shape
    d = SinogramData(SMALL, rng.poisson(2.0, shape).astype(np.float32),
                     rng.uniform(0.5, 1, shape).astype(np.float32), None, {"seed": 3})
    d.save(tmp_path / "s.npz")
    for xp in (None, np, "numpy"):
        back = SinogramData.load(tmp_path / "s.npz", xp=xp)
        np.testing.assert_array_equal(back.prompts, d.prompts)
        np.testing.assert_array_equal(back.factors, d.factors)
        assert back.background is None and back.scanner == SMALL and back.meta == {"seed": 3}
    with pytest.raises(TypeError):
        SinogramData.load(tmp_path / "s.npz", np)          # xp is keyword-only
    with pytest.raises(TypeError, match="xp"):
        SinogramData.load(tmp_path / "s.npz", xp="gpu")
    assert d.to(np) is not d and d.to("numpy").xp is np
    bad = d.prompts.copy()
    bad[0, 0, 0, 0] = -1
    with pytest.raises(ValueError, match="prompts"):
        SinogramData(SMALL, bad)
    # a Poisson draw is int64: the message says how to store it
    with pytest.raises(TypeError, match=r"prompts.*float32.*\.astype\(np\.float32\)"):
        SinogramData(SMALL, rng.poisson(2.0, shape))
    nan = d.factors.copy()
    nan[1, 1, 1, 1] = np.nan
    with pytest.raises(ValueError, match="factors"):
        SinogramData(SMALL, d.prompts, nan)
    with pytest.raises(ValueError, match="background"):
        SinogramData(SMALL, d.prompts, None, -np.ones(shape, np.float32))
    with pytest.raises(ValueError, match="prompts"):
        SinogramData(SMALL, d.prompts[:, :2])
    with pytest.raises(TypeError, match="scanner"):
        SinogramData(d.prompts, SMALL)                      # the scanner comes first, as in every family
    np.savez(tmp_path / "other.npz", prompts=d.prompts)
    with pytest.raises(ValueError, match="path"):
        SinogramData.load(tmp_path / "other.npz")


def test_angle_subsets_reject_bad_arguments(table, rng):
    P = SuperLORProjector(table, backend="cpu")
    data = SinogramData(SMALL, rng.poisson(2.0, SMALL.sinogram_shape).astype(np.float32))
    with pytest.raises(TypeError, match="projector"):
        AngleSubsets("P", data)
    with pytest.raises(TypeError, match="data"):
        AngleSubsets(P, data.prompts)
    other = RotatingScanner.small(n_angles=8)
    with pytest.raises(ValueError, match="data"):
        AngleSubsets(P, SinogramData(other, np.ones(other.sinogram_shape, np.float32)))
    with pytest.raises(ValueError, match="subsets"):
        AngleSubsets(P, data, [[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="subsets"):
        AngleSubsets(P, data, [[0, 1], [2, 99]])             # an angle out of range, named as subsets
    with pytest.raises(ValueError, match="subsets"):
        AngleSubsets(P, data, 0)
    with pytest.raises(ValueError, match="subsets"):
        AngleSubsets(P, data, SMALL.n_angles + 1)
    with pytest.raises(ValueError, match="subsets"):
        AngleSubsets(P, data, [])
    with pytest.raises(TypeError, match="subsets"):
        AngleSubsets(P, data, 3.0)
    with pytest.raises(TypeError, match="subsets"):
        AngleSubsets(P, data, True)
    with pytest.raises(ValueError, match="n_iter"):
        recon.osem(AngleSubsets(P, data, 3), 0, progress=False)
    problem = AngleSubsets(P, data, [list(range(0, 12, 2)), list(range(1, 12, 2))])
    assert problem.n_subsets == 2 and problem.order() == [0, 1]
    assert problem.data(1).shape == (6,) + SMALL.sinogram_shape[1:]
    dealt = AngleSubsets(P, data, 3)                          # an int: interleaved angles, spread order
    assert dealt.n_subsets == 3 and [list(a) for a in dealt.angles] == [list(range(m, 12, 3)) for m in range(3)]
    assert dealt.order() == spread_order(3)
    with pytest.raises(ValueError, match=r"subsets: expected an integer in \[1, 12\], got 13"):
        AngleSubsets(P, data)                                 # the default, 13 subsets, needs 13 angles


@pytest.mark.gpu
def test_gpu_osem_with_data_on_the_device_matches_cpu(table, rng):
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    truth = _blob(rng, SMALL)
    cpu = SuperLORProjector(table, "fast", backend="cpu")
    gpu = SuperLORProjector(table, "fast", backend="cuda")
    data = model_consistent_data(cpu, truth, counts=3e5, seed=rng)
    a = recon.osem(AngleSubsets(cpu, data, 4), 4, progress=False).image
    b = recon.osem(AngleSubsets(gpu, data.to(cp), 4), 4, progress=False).image
    assert isinstance(b, cp.ndarray)
    b = cp.asnumpy(b)
    assert np.linalg.norm(a - b) / np.linalg.norm(a) < 1e-4
