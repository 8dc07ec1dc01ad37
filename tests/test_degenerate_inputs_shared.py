"""Degenerate and bad inputs of the shared layers (issue 16), in the spirit of FINUFFT's dumb-input tests.

Organised by module: recon, analysis, sim, geometry, io.nifti, reference. Every bad input is a
ValueError or TypeError whose message names the argument (design.md "Errors"); one or two
representatives per class of input. The reconstruction checks must fire before any projection,
and recon's documented division guards are exercised on a problem that really has zero-sensitivity
voxels, zero-count bins and a bin with counts but zero expected counts.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from dense_problem import DenseSubsets, random_dense

from directpet.analysis import (ContrastNoiseCurve, SphereROIs, circle_weights, crc, fwhm_1d, line_profile, noise,
                                pick_matched_noise, plot_contrast_noise, plot_contrast_noise_errorbars,
                                plot_image_panels, point_source_fwhm, roi_mean)
from directpet.geometry import ImageGrid
from directpet.operators import LinearOperator
from directpet.recon import (StoredSubsets, block_ramla, check_nonnegative, mlem, osem, poisson_loglik, ramla_lambda,
                             sensitivity_image, spread_order)
from directpet.sim import (AnalyticPhantom, CylinderSource, PointSource, SphereSource, WaterCylinder,
                           derenzo_phantom, make_rng, point_source_phantom, radial_point_positions, sphere_phantom,
                           uniform_cylinder)

# === recon ================================================================================================

SHAPE = (2, 3, 4)                    # 24 voxels
ROWS = (9, 11, 10)                   # rows per subset: subsets differ in shape


def _dense(rng) -> DenseSubsets:
    """The shared dense problem with every bin's count at least 1 (no zero-count guard involved)."""
    p = random_dense(rng, SHAPE, ROWS, low=0.1, background=(0.2, 1.0))
    p._d = [d + 1 for d in p._d]
    return p


ALGORITHMS = {"mlem": mlem, "osem": osem, "block_ramla": block_ramla}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("make, error, message", [
    (lambda x: -x, ValueError, "x0: contains negative"),
    (lambda x: np.where(np.arange(x.size).reshape(x.shape) == 5, np.nan, x), ValueError, "x0: contains NaN"),
    (lambda x: x.astype(np.float64) * 1e300, ValueError, "x0: contains NaN or inf"),   # beyond float32
    (lambda x: x + 1j * x, TypeError, "x0: expected a real"),
    (lambda x: x.tolist(), TypeError, "x0: expected a numpy array"),
    (lambda x: x > 0, TypeError, "x0: expected a real"),                             # bool
    (lambda x: np.zeros_like(x), ValueError, "x0: is zero everywhere"),
    (lambda x: x[:1], ValueError, r"x0: expected shape \(2, 3, 4\)"),
], ids=["negative", "nan", "overflow", "complex", "list", "bool", "zeros", "shape"])
def test_recon_bad_x0_is_rejected_before_any_projection(algorithm, make, error, message, rng, volume):
    problem = _dense(rng)
    with pytest.raises(error, match=message):
        ALGORITHMS[algorithm](problem, 2, x0=make(volume(SHAPE)), progress=False)
    assert problem.projections == 0


BAD_ARGUMENTS = [
    ("mlem", {"n_iter": 0}, ValueError, "n_iter"),
    ("osem", {"n_iter": 2.5}, TypeError, "n_iter"),
    ("mlem", {"store_every": 0}, ValueError, "store_every"),
    ("osem", {"store_every": -1}, ValueError, "store_every"),
    ("block_ramla", {"store_every": 1.5}, TypeError, "store_every"),
    ("mlem", {"callback": 3}, TypeError, "callback"),
    ("block_ramla", {"callback": "print"}, TypeError, "callback"),
    ("osem", {"track_loglik": "yes"}, TypeError, "track_loglik"),
    ("mlem", {"progress": None}, TypeError, "progress"),
    ("block_ramla", {"lambda0": 0.0}, ValueError, "lambda0"),
    ("block_ramla", {"lambda0": -0.1}, ValueError, "lambda0"),
    ("block_ramla", {"lambda0": np.nan}, ValueError, "lambda0"),
    ("block_ramla", {"lambda0": "0.1"}, TypeError, "lambda0"),
    ("block_ramla", {"gamma": -0.5}, ValueError, "gamma"),
    ("block_ramla", {"floor": -1e-3}, ValueError, "floor"),
    ("block_ramla", {"floor": np.inf}, ValueError, "floor"),
    ("block_ramla", {"schedule": []}, ValueError, "schedule: 0 relaxation"),
    ("block_ramla", {"schedule": [0.1, 0.05]}, ValueError, "schedule: 2 relaxation"),     # n_iter = 3
    ("block_ramla", {"schedule": [0.1, -0.05, 0.1]}, ValueError, "schedule: lambda_2"),
    ("block_ramla", {"schedule": [0.1, np.nan, 0.1]}, ValueError, "schedule: lambda_2"),
    ("block_ramla", {"schedule": lambda n: 0.1 if n < 3 else 0.0}, ValueError, "schedule: lambda_3"),
    ("block_ramla", {"schedule": lambda n: "0.1"}, TypeError, "schedule: lambda_1"),
    ("block_ramla", {"schedule": 0.1}, TypeError, "schedule"),
    ("block_ramla", {"order": [0, 1, 1]}, ValueError, "order"),
]


@pytest.mark.parametrize("algorithm, kwargs, error, message", BAD_ARGUMENTS,
                         ids=[f"{a}-{next(iter(k))}-{i}" for i, (a, k, _, _) in enumerate(BAD_ARGUMENTS)])
def test_recon_bad_arguments_are_rejected_before_any_projection(algorithm, kwargs, error, message, rng):
    problem = _dense(rng)
    kwargs = {"n_iter": 3, "progress": False, **kwargs}
    with pytest.raises(error, match=message):
        ALGORITHMS[algorithm](problem, **kwargs)
    assert problem.projections == 0


def test_recon_schedule_sequence_and_callable_are_used_as_given(rng):
    """A long enough schedule runs with exactly its values (the checks do not reject good input)."""
    problem = _dense(rng)
    lams = list(rng.uniform(0.05, 0.5, 3))
    assert block_ramla(problem, 3, schedule=lams + [9.0], progress=False).lambdas == lams
    assert block_ramla(problem, 2, schedule=lambda n: lams[n - 1], progress=False).lambdas == lams[:2]


@pytest.mark.parametrize("call, error, message", [
    (lambda: ramla_lambda(0), ValueError, "n:"),
    (lambda: ramla_lambda(1.5), TypeError, "n:"),
    (lambda: ramla_lambda(1, 0.0), ValueError, "lambda0"),
    (lambda: ramla_lambda(1, 0.1, -1.0), ValueError, "gamma"),
    (lambda: ramla_lambda(1, None), TypeError, "lambda0"),
])
def test_ramla_lambda_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_poisson_loglik_and_sensitivity_bad_arguments(rng, volume):
    problem = _dense(rng)
    x = volume(SHAPE)
    with pytest.raises(ValueError, match="x: contains negative"):
        poisson_loglik(problem, -x)
    with pytest.raises(ValueError, match="x: contains NaN"):
        poisson_loglik(problem, np.full(SHAPE, np.nan, np.float32))
    with pytest.raises(TypeError, match="x: expected a numpy array"):
        poisson_loglik(problem, x.tolist())
    with pytest.raises(ValueError, match="subsets: empty"):
        sensitivity_image(problem, subsets=[])
    with pytest.raises(TypeError, match="subsets: expected a sequence"):
        sensitivity_image(problem, subsets=1)
    assert problem.projections == 0
    assert np.isfinite(poisson_loglik(problem, np.zeros(SHAPE, np.float32)))     # zero image: a valid point


def _guarded(rng):
    """A problem with every guarded case of recon's docstring:

    * voxel 3 is seen by no LOR (its column is 0 in every block): zero sensitivity;
    * voxel 7 is seen only by two rows of subset 0 (rows 0 and 1, which see nothing else), and x0 is
      0 there: row 0 has counts (5) but expected counts 0 (f A x0 + b with b = 0), row 1 has no counts
      and expected counts 0 (0 / 0 without the guard);
    * voxel 11 has zero sensitivity in subset 1 only (OSEM's per-subset guard);
    * a few more bins have no counts, and subset 2 has counts in only one bin.
    """
    p = _dense(rng)
    for s, a in enumerate(p.blocks):
        a[:, 3] = 0.0
        a[:2, :] = 0.0 if s == 0 else a[:2, :]
    p.blocks[0][0:2, 7] = rng.uniform(0.5, 1.0, 2)
    p.blocks[0][2:, 7] = 0.0
    p.blocks[1][:, 7] = 0.0
    p.blocks[2][:, 7] = 0.0
    p.blocks[1][:, 11] = 0.0
    p._b[0][:2] = 0.0
    p._d[0][0], p._d[0][1] = 5.0, 0.0
    p._d[1][[2, 5]] = 0.0
    p._d[2][1:] = 0.0
    x0 = rng.uniform(0.5, 1.5, SHAPE).astype(np.float32)
    x0.reshape(-1)[7] = 0.0
    return p, x0


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_recon_guards_give_the_documented_results(algorithm, rng):
    problem, x0 = _guarded(rng)
    S = sensitivity_image(problem).reshape(-1)
    assert S[3] == 0 and S[7] > 0 and np.all(np.delete(S, 3) > 0)
    kept = []
    res = ALGORITHMS[algorithm](problem, 4, x0=x0, track_loglik=True, progress=False,
                                callback=lambda it, sub, x: kept.append(x.copy()))
    x = res.image.reshape(-1)
    assert np.all(np.isfinite(res.image)) and np.all(res.image >= 0)
    assert np.all(np.isfinite(res.loglik))
    # Zero sensitivity: the voxel keeps its start value (factor 1 / step 0; x0 is above RAMLA's floor).
    assert x[3] == x0.reshape(-1)[3]
    if algorithm == "block_ramla":
        # 0 + 0 * step = 0, then the floor: afterwards ybar > 0 and the ratio d / ybar is large but finite.
        assert x[7] >= res.params["floor"]
    else:
        assert x[7] == 0.0                        # multiplicative updates keep a zero voxel at zero
    assert np.all(x[np.delete(np.arange(x.size), [3, 7])] > 0)
    if algorithm == "osem":
        # Subset 1 (position 1 of the default order) does not see voxel 11: that update leaves it,
        # while the updates of subsets 0 and 2 change it.
        v11 = [k.reshape(-1)[11] for k in kept[:3]]
        assert v11[1] == v11[0] and v11[0] != x0.reshape(-1)[11] and v11[2] != v11[1]


def test_recon_zero_counts_give_the_zero_estimate(rng):
    """All counts 0: every informative voxel goes to 0 (the ML estimate) in one MLEM iteration, without
    NaN; the unseen voxel keeps its value."""
    problem, x0 = _guarded(rng)
    for d in problem._d:
        d[:] = 0.0
    x = mlem(problem, 2, x0=x0, progress=False).image.reshape(-1)
    assert x[3] == x0.reshape(-1)[3]
    np.testing.assert_array_equal(np.delete(x, 3), 0.0)


def test_osem_subset_without_counts_is_an_error(rng):
    """OSEM's update for a subset without counts would zero every voxel it sees, for good."""
    problem = _dense(rng)
    problem._d[1][:] = 0.0
    with pytest.raises(ValueError, match="data: subset 1 has no counts"):
        osem(problem, 1, progress=False)
    assert problem.projections == 0


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_recon_zero_sensitivity_everywhere_is_an_error(algorithm, rng):
    problem = _dense(rng)
    for f in problem._f:
        f[:] = 0.0
    with pytest.raises(ValueError, match="problem: its sensitivity image .* zero everywhere"):
        ALGORITHMS[algorithm](problem, 1, progress=False)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_recon_callback_may_keep_x(algorithm, rng):
    """The x handed to a callback is never changed afterwards (block-RAMLA used to update it in place):
    each kept array still equals the copy taken when it was handed over, and they differ from update
    to update as the reconstruction did."""
    problem = _dense(rng)
    kept = []
    res = ALGORITHMS[algorithm](problem, 3, progress=False, callback=lambda it, sub, x: kept.append((x, x.copy())))
    assert len(kept) == (3 if algorithm == "mlem" else 3 * len(ROWS))
    for x, snapshot in kept:
        np.testing.assert_array_equal(x, snapshot)
    assert all(not np.array_equal(a[1], b[1]) for a, b in zip(kept, kept[1:]))
    np.testing.assert_array_equal(kept[-1][1], res.image)


# === analysis =============================================================================================

GRID = ImageGrid((4, 40, 40), 2.0)


@pytest.fixture(scope="module")
def phantom():
    return sphere_phantom(GRID, cylinder_diameter_mm=70, length_mm=8, n_spheres=3, sphere_diameter_mm=8,
                          sphere_radius_mm=18, contrast=4.0, supersample=2)


def _with_nan(img):
    bad = img.copy()
    bad[1, 20, 20] = np.nan
    return bad


@pytest.mark.parametrize("call, error, message", [
    (lambda img, info: crc(np.zeros_like(img), info), ValueError, "image: the background mean"),
    (lambda img, info: crc(_with_nan(img), info), ValueError, "image: contains NaN"),
    (lambda img, info: crc(img + 1j, info), TypeError, "image: expected a real"),
    (lambda img, info: crc(img, None), TypeError, "phantom_info"),
    (lambda img, info: noise(np.zeros_like(img), info), ValueError, "image: the mean in the noise ROI"),
    (lambda img, info: noise(_with_nan(img), info), ValueError, "image: contains NaN"),
    (lambda img, info: noise(img, info, half_slices=0.5), TypeError, "half_slices"),
    (lambda img, info: noise(img, None, grid=GRID), TypeError, "where"),
    (lambda img, info: line_profile(_with_nan(img), GRID, (0, 0), (10, 0)), ValueError, "image: contains NaN"),
    (lambda img, info: line_profile(img, GRID, (0, 0), (10, 0), n_samples=20.5), TypeError, "n_samples"),
    (lambda img, info: line_profile(img, GRID, None, (10, 0)), TypeError, "start_xy_mm"),
    (lambda img, info: line_profile(img[1:], GRID, (0, 0), (10, 0)), ValueError, "image: expected shape"),
    (lambda img, info: circle_weights(GRID, (0, 0), 10.0, supersample=2.5), TypeError, "supersample"),
    (lambda img, info: circle_weights(GRID, (0, 0), "10"), TypeError, "diameter_mm"),
    (lambda img, info: fwhm_1d([0.0, 1.0, 0.0], "1"), TypeError, "spacing_mm"),
    (lambda img, info: fwhm_1d([0.0, 1.0, np.nan], 1.0), ValueError, "profile"),
], ids=["crc-zero", "crc-nan", "crc-complex", "crc-none", "noise-zero", "noise-nan", "noise-half", "noise-where",
        "profile-nan", "profile-n", "profile-none", "profile-shape", "circle-ss", "circle-str", "fwhm-str",
        "fwhm-nan"])
def test_analysis_bad_inputs(call, error, message, phantom):
    img, info = phantom
    with pytest.raises(error, match=message):
        call(img, info)


def test_analysis_good_phantom_still_measures(phantom):
    """The same calls on the noise-free phantom give finite values (the checks do not reject it)."""
    img, info = phantom
    assert np.isfinite(crc(img, info).mean) and np.isfinite(noise(img, info))
    assert np.all(np.isfinite(line_profile(img, GRID, (0, 0), (30, 0), n_samples=20)[1]))


@pytest.mark.parametrize("change, target, error, message", [
    ({"noise": [0.02, np.nan, 0.1]}, 0.08, ValueError, "curves: entry 0 noise: expected finite"),
    ({"crc": [0.2, 0.3]}, 0.08, ValueError, "curves: entry 0 has 3 iterations, 2 CRC"),
    ({}, 0.0, ValueError, "target"),
    ({}, np.nan, ValueError, "target"),
    ({}, "0.08", TypeError, "target"),
])
def test_pick_matched_noise_bad_inputs(change, target, error, message):
    curve = ContrastNoiseCurve([1, 2, 3], [0.2, 0.3, 0.4], [0.02, 0.05, 0.1])
    for k, v in change.items():          # a curve changed after construction (which checks it) is checked again
        setattr(curve, k, np.asarray(v, float))
    with pytest.raises(error, match=message):
        pick_matched_noise([curve], target)
    with pytest.raises(TypeError, match="curves: entry 0"):
        pick_matched_noise([{"noise": [0.1]}])


def test_pick_matched_noise_not_reached_is_a_documented_nan():
    m = pick_matched_noise(ContrastNoiseCurve(np.arange(1.0, 4.0), np.ones(3), np.array([0.01, 0.02, 0.03])), 0.08)
    assert m[0].status == "not reached" and np.isnan(m[0].crc)


# === sim ==================================================================================================

SMALL = ImageGrid((4, 20, 20), 4.0)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"contrast": np.nan}, ValueError, "contrast"),
    ({"contrast": -1.0}, ValueError, "contrast"),
    ({"sphere_radius_mm": np.nan}, ValueError, "sphere_radius_mm"),
    ({"sphere_diameter_mm": -4.0}, ValueError, "sphere_diameter_mm"),
    ({"cylinder_diameter_mm": "60"}, TypeError, "cylinder_diameter_mm"),
    ({"background": None}, TypeError, "background"),
    ({"mu_per_mm": np.nan}, ValueError, "mu_per_mm"),
    ({"supersample": 2.5}, TypeError, "supersample"),
    ({"n_spheres": 2.5}, TypeError, "n_spheres"),
    ({"sphere_z_mm": np.inf}, ValueError, "sphere_z_mm"),
])
def test_sphere_phantom_bad_parameters(kwargs, error, message):
    args = {"cylinder_diameter_mm": 60.0, "length_mm": 12.0, "n_spheres": 2, "sphere_diameter_mm": 8.0,
            "sphere_radius_mm": 15.0, **kwargs}
    with pytest.raises(error, match=message):
        sphere_phantom(SMALL, **args)


@pytest.mark.parametrize("call, error, message", [
    (lambda: sphere_phantom(None), TypeError, "grid"),
    (lambda: uniform_cylinder(SMALL, 60.0, 12.0, activity=-1.0), ValueError, "activity"),
    (lambda: uniform_cylinder(SMALL, np.nan, 12.0), ValueError, "diameter_mm"),
    (lambda: CylinderSource(10.0, 20.0, concentration="1"), TypeError, "concentration"),
    (lambda: CylinderSource(np.nan, 20.0), ValueError, "radius_mm"),
    (lambda: SphereSource((0, 0, 0), -1.0, 1.0), ValueError, "radius_mm"),
    (lambda: SphereSource(None, 1.0, 1.0), TypeError, "centre_mm"),
    (lambda: SphereSource((0, 0, np.nan), 1.0, 1.0), ValueError, "centre_mm"),
    (lambda: PointSource((0, 0, 0), -1.0), ValueError, "activity"),
    (lambda: PointSource(("a", 0, 0)), TypeError, "position_mm"),
    (lambda: WaterCylinder(10.0, 20.0, mu_per_mm=-0.01), ValueError, "mu_per_mm"),
    (lambda: AnalyticPhantom(None), TypeError, "sources"),
    (lambda: AnalyticPhantom([PointSource((0, 0, 0))], attenuation="water"), TypeError, "attenuation"),
    (lambda: AnalyticPhantom([PointSource((0, 0, 0))]).image(SMALL, supersample=1.5), TypeError, "supersample"),
    (lambda: AnalyticPhantom([PointSource((0, 0, 0))]).sample(2.5, np.random.default_rng(0)), TypeError, "n:"),
    (lambda: point_source_phantom(SMALL, [(0, 0, 0)], activity=np.nan), ValueError, "activity"),
    (lambda: point_source_phantom(SMALL, np.zeros((0, 3))), ValueError, "points_mm"),
    (lambda: point_source_phantom(SMALL, "origin"), TypeError, "points_mm"),
    (lambda: derenzo_phantom(SMALL, background="0"), TypeError, "background"),
    (lambda: derenzo_phantom(SMALL, diameters_mm=["a"] * 6), TypeError, "diameters_mm"),
    (lambda: derenzo_phantom(SMALL, supersample=2.0), TypeError, "supersample"),
    (lambda: radial_point_positions(10.0, 3, z_mm=np.nan), ValueError, "z_mm"),
    (lambda: radial_point_positions(10.0, 3.5), TypeError, "n:"),
    (lambda: make_rng(-1), ValueError, "rng"),
    (lambda: make_rng("seed"), TypeError, "rng"),
])
def test_sim_bad_parameters(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_sim_valid_edge_values_still_work():
    """Zero spheres, a cold sphere, zero attenuation and an empty sample are legitimate."""
    img, info = sphere_phantom(SMALL, 60.0, 12.0, n_spheres=0, mu_per_mm=0.0, supersample=1)
    assert info.n_spheres == 0 and info.attenuation is None and img.max() > 0
    cold = AnalyticPhantom([CylinderSource(20.0, 10.0, 1.0), SphereSource((0, 0, 0), 5.0, -1.0)])
    assert np.all(np.isfinite(cold.image(SMALL, 2)))
    assert cold.sample(0, np.random.default_rng(0)).shape == (0, 3)


# === geometry =============================================================================================

@pytest.mark.parametrize("args, error, message", [
    (((4.7, 16, 16),), TypeError, r"shape\[0\]: expected an integer, got float 4.7"),
    (((4, 16.0, 16),), TypeError, r"shape\[1\]"),
    (((4, "16", 16),), TypeError, r"shape\[1\]"),
    ((None,), TypeError, "shape"),
    (("abc",), TypeError, "shape"),
    (((4, 16),), ValueError, "shape"),
    (((True, 16, 16),), TypeError, r"shape\[0\]"),
    (((4, 16, 16), "4"), TypeError, "voxel_size"),
    (((4, 16, 16), (4.0, 4.0)), ValueError, "voxel_size"),
    (((4, 16, 16), (4.0, np.inf, 4.0)), ValueError, r"voxel_size\[1\]"),
    (((4, 16, 16), None), TypeError, "voxel_size"),
])
def test_image_grid_bad_arguments(args, error, message):
    with pytest.raises(error, match=message):
        ImageGrid(*args)


def test_image_grid_accepts_numpy_integers_and_bad_axis_is_named():
    g = ImageGrid(np.array([4, 16, 16]), np.float32(2.0))
    assert g.shape == (4, 16, 16) and all(type(n) is int for n in g.shape) and g.voxel_size == (2.0,) * 3
    with pytest.raises(ValueError, match="axis"):
        g.centres(3)


# === io.nifti =============================================================================================

def test_nifti_complex_file_and_float32_overflow_are_errors(tmp_path, rng):
    nib = pytest.importorskip("nibabel", reason="nibabel not installed")
    from directpet.io import load_nifti, nifti_affine, save_nifti

    grid = ImageGrid((3, 4, 5), 2.0)
    data = rng.uniform(0.1, 1.0, (5, 4, 3))
    nib.save(nib.Nifti1Image((data + 1j * data).astype(np.complex64), nifti_affine(grid)), str(tmp_path / "c.nii"))
    with pytest.raises(ValueError, match="path: .*complex"):
        load_nifti(tmp_path / "c.nii")
    nib.save(nib.Nifti1Image(data * 1e300, nifti_affine(grid)), str(tmp_path / "big.nii"))     # float64 file
    with pytest.raises(ValueError, match="path: .*float32"):
        load_nifti(tmp_path / "big.nii")
    x = rng.uniform(0.1, 1.0, grid.shape)
    x[1, 2, 3] = 1e39                                  # finite in float64, inf in float32
    with pytest.raises(ValueError, match="image: values must be finite in float32"):
        save_nifti(tmp_path / "a.nii", x, grid)
    assert not (tmp_path / "a.nii").exists()
    with pytest.raises(TypeError, match="path"):
        save_nifti(None, rng.uniform(0.1, 1.0, grid.shape).astype(np.float32), grid)
    with pytest.raises(ValueError, match="atol_mm"):
        load_nifti(tmp_path / "c.nii", atol_mm=-1.0)


# === reference ============================================================================================

@pytest.fixture(scope="module")
def lut():
    from directpet.direct import SRKernel, View, build_lut

    return build_lut(ImageGrid((3, 8, 8), 8.0), View(0.3), SRKernel.invariant())


@pytest.mark.parametrize("make, error, message", [
    (lambda x: x.tolist(), TypeError, "expected a numpy.ndarray"),
    (lambda x: x.astype(np.complex64), TypeError, "expected a real"),
    (lambda x: x[:, :, :7], ValueError, r"expected shape \(3, 8, 8\)"),
    (lambda x: np.where(x > 0.5, np.inf, x), ValueError, "contains NaN or inf"),
])
def test_reference_direct_checks_its_arrays(lut, make, error, message, volume):
    from directpet.reference import direct as ref

    bad = make(volume((3, 8, 8)))
    with pytest.raises(error, match="image: " + message):
        ref.forward(bad, lut)
    with pytest.raises(error, match="histo: " + message):
        ref.back(bad, lut)
    with pytest.raises(TypeError, match="lut"):
        ref.forward(volume((3, 8, 8)), None)


def test_reference_direct_kernel_values_check_parameters(lut):
    from directpet.reference.direct import gaussian_kernel_values

    grid, view, n = ImageGrid((3, 8, 8), 8.0), lut.view, lut.n_kernels
    good = dict(sigma_tof=20.0, sigma_axial=3.0, sigma_radial=np.full(n, 2.0))
    assert np.all(np.isfinite(gaussian_kernel_values(grid, view, lut.offsets, **good)))
    for change, error, name in [({"sigma_tof": 0.0}, ValueError, "sigma_tof"),
                                ({"sigma_axial": "3"}, TypeError, "sigma_axial"),
                                ({"sigma_radial": np.full(n, np.nan)}, ValueError, "sigma_radial"),
                                ({"narrow_weight": np.full(n, 1.5)}, ValueError, "narrow_weight"),
                                ({"wide_shift": np.zeros(n + 1)}, ValueError, "wide_shift")]:
        with pytest.raises(error, match=name):
            gaussian_kernel_values(grid, view, lut.offsets, **{**good, **change})
    with pytest.raises(TypeError, match="offsets"):
        gaussian_kernel_values(grid, view, lut.offsets.astype(float), **good)


def test_reference_dualhead_checks_its_arrays(volume, rng):
    from directpet.dualhead import DualHeadScanner
    from directpet.reference import dualhead as ref

    s = DualHeadScanner.small(n_y=3, n_z=3, voxels_per_crystal=1, n_planes=3)
    model = ref.random_model(s, rng, taps=(1, 3))
    x = volume(s.grid.shape)
    assert ref.forward(model, x).shape == (s.lor_count(),)
    with pytest.raises(ValueError, match="image: expected shape"):
        ref.forward(model, x[:1])
    with pytest.raises(TypeError, match="image: expected a numpy.ndarray"):
        ref.forward(model, x.tolist())
    y = volume((s.lor_count([0, 1]),))
    y[0] = np.nan
    with pytest.raises(ValueError, match="y: contains NaN"):
        ref.adjoint(model, y, [0, 1])
    with pytest.raises(ValueError, match="y: expected shape"):
        ref.adjoint(model, y[1:], [0, 1])
    with pytest.raises(ValueError, match="^subset:"):
        ref.forward(model, x, [s.n_classes])
    with pytest.raises(TypeError, match="model"):
        ref.forward(None, x)
    with pytest.raises(ValueError, match="taps"):
        ref.random_model(s, rng, taps=(3, 1))
    with pytest.raises(TypeError, match=r"taps\[0\]"):
        ref.random_model(s, rng, taps=(0.5, 3))
    with pytest.raises(ValueError, match="rng"):
        ref.random_model(s, -1)


# --- reference.first ----------------------------------------------------------------------------------

def test_reference_first_checks_its_inputs(rng):
    from directpet.first import RotatingScanner, build_super_lor_table
    from directpet.reference import first as ref_first

    s = RotatingScanner(n_rows=2, n_angles=3, n_radial=7, n_columns=8)
    table = build_super_lor_table(s)
    x = rng.uniform(0.1, 1.0, s.grid.shape)
    with pytest.raises(TypeError, match="table"):
        ref_first.forward(s, x)
    with pytest.raises(ValueError, match="image"):
        ref_first.forward(table, x[:-1])
    with pytest.raises(TypeError, match="image"):
        ref_first.forward(table, x.tolist())
    bad = x.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="image"):
        ref_first.forward(table, bad)
    with pytest.raises(TypeError, match="subset"):
        ref_first.forward(table, x, subset=[0.5])
    with pytest.raises(ValueError, match="sinogram"):
        ref_first.back(table, rng.uniform(0.1, 1.0, s.sinogram_shape), subset=[0])
    y = rng.uniform(0.1, 1.0, (1,) + s.sinogram_shape[1:])
    assert ref_first.back(table, y, subset=[2]).shape == s.grid.shape
    assert ref_first.faithful_back(table, y, subset=[2]).shape == s.grid.shape


# === second round of the fuzz: subset indices, absurd counts and sizes, float32 overflow, helpers, paths ======

class _Stacked(StoredSubsets):
    """A StoredSubsets whose subsets are stacks over units (rows of a dense block per unit)."""

    image_shape = SHAPE

    def __init__(self, rng):
        self.blocks = [rng.uniform(0.1, 1.0, (3, 2, 24)).astype(np.float32) for _ in range(2)]   # 3 units of 2 rows
        self.store([np.ones((3, 2), np.float32)] * 2, [None] * 2, [None] * 2, [1, 0])

    def forward(self, x, subset, out=None):
        return self.forward_units(x, list(range(3)), data=None, block=self.blocks[subset])

    def adjoint(self, y, subset, out=None):
        return np.einsum("urv,ur->v", self.blocks[subset], y).reshape(SHAPE)

    def subset_units(self, subset):
        return [0, 1, 2]

    def forward_units(self, x, units, out=None, data=None, block=None):
        return (block[units] @ x.reshape(-1)).astype(np.float32)

    def adjoint_units(self, y, units, out=None):
        return np.zeros(SHAPE, np.float32)


@pytest.mark.parametrize("call, error, message", [
    (lambda p, x: p.forward(x, -1), ValueError, r"^subset: expected an integer in \[0, 1\], got -1"),
    (lambda p, x: p.adjoint(np.ones((3, 2), np.float32), 2), ValueError, "^subset:"),
    (lambda p, x: p.data(True), TypeError, "^subset:"),
    (lambda p, x: p.factors(0.5), TypeError, "^subset:"),
    (lambda p, x: p.background(2**63), ValueError, "^subset:"),
    (lambda p, x: p.forward(x, subset=None), TypeError, "^subset:"),
    (lambda p, x: p.take_units(p.data(0), 0, [0.5]), TypeError, "^positions:"),
    (lambda p, x: p.take_units(p.data(0), 0, [-1]), ValueError, "^positions:"),
    (lambda p, x: p.take_units(p.data(0), 0, None), TypeError, "^positions:"),
    (lambda p, x: p.share(0, 1, xp="numpy"), TypeError, "^xp:"),
], ids=["forward-neg", "adjoint-n", "data-bool", "factors-frac", "background-huge", "kw-none", "pos-frac",
        "pos-neg", "pos-none", "share-xp"])
def test_subset_index_is_checked_for_every_family(call, error, message, rng, volume):
    """StoredSubsets (every family's subsets class) checks subset indices and unit positions."""
    p = _Stacked(rng)
    with pytest.raises(error, match=message):
        call(p, volume(SHAPE))
    np.testing.assert_array_equal(p.take_units(p.data(1), 1, [2, 0]), p.data(1)[[2, 0]])   # good ones pass


def test_subset_index_of_a_plain_subset_problem_and_its_count(rng, volume):
    """A SubsetProblem subclass (the dense problem) is checked too; n_subsets of the wrong type is named."""
    problem = _dense(rng)
    with pytest.raises(ValueError, match="^subset:"):
        problem.forward(volume(SHAPE), 3)
    with pytest.raises(ValueError, match="^subsets: expected distinct"):
        sensitivity_image(problem, subsets=[0, 0])
    for bad, error in (("x", TypeError), (None, TypeError), (0, ValueError)):
        problem.n_subsets = bad
        with pytest.raises(error, match="^n_subsets:"):
            problem.check()


@pytest.mark.parametrize("call, error, message", [
    (lambda: spread_order(10**9), ValueError, "^n: expected an integer in"),
    (lambda: spread_order(None), TypeError, "^n:"),
    (lambda: spread_order(3.0), TypeError, "^n:"),
    (lambda: check_nonnegative(np.ones(3, np.float32), "a", None, None, (3,)), TypeError, "^xp:"),
])
def test_recon_helpers_bounds_and_types(call, error, message):
    with pytest.raises(error, match=message):
        call()
    assert spread_order(40)[:6] == [0, 20, 10, 30, 5, 25]


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_recon_absurd_iteration_counts_are_refused_at_once(algorithm, rng):
    problem = _dense(rng)
    with pytest.raises(ValueError, match=r"^n_iter: expected an integer in \[1, 2147483647\]"):
        ALGORITHMS[algorithm](problem, 2**63, progress=False)
    assert problem.projections == 0


def test_block_ramla_overflowing_relaxation_is_named(rng):
    with pytest.raises(ValueError, match="^lambda0: the relaxation 1e[+]300 of pass 1"):
        block_ramla(_dense(rng), 2, lambda0=1e300, progress=False)
    with pytest.raises(ValueError, match="^schedule: lambda_1:"):
        block_ramla(_dense(rng), 1, schedule=[1e300], progress=False)


@pytest.mark.parametrize("call, error, message", [
    (lambda img, info: circle_weights(GRID, (0, 0), 10.0, supersample=10**9), ValueError,
     "^supersample: .* would need"),
    (lambda img, info: crc(img, info, supersample=2**63), ValueError, "^supersample:"),
    (lambda img, info: line_profile(img, GRID, (0, 0), (10, 0), n_samples=10**12), ValueError, "^n_samples:"),
    (lambda img, info: point_source_fwhm(img, GRID, (0, 0, 0), half_width_mm=1e300), ValueError, "half_width_mm"),
    (lambda img, info: info.analytic.sample(2**63, np.random.default_rng(0)), ValueError, "^n: .* would need"),
    (lambda img, info: info.analytic.image(GRID, 2**40), ValueError, "^supersample:"),
    (lambda img, info: radial_point_positions(10.0, 2**62), ValueError, "^n:"),
], ids=["circle", "crc", "line", "fwhm", "sample", "image", "radial"])
def test_absurd_sizes_are_refused_before_allocating(call, error, message, phantom):
    with pytest.raises(error, match=message):
        call(*phantom)


@pytest.mark.parametrize("call, message", [
    (lambda: sphere_phantom(SMALL, 60.0, 12.0, n_spheres=10**9, sphere_diameter_mm=8.0, sphere_radius_mm=15.0),
     "^n_spheres: 1000000000 spheres .* overlap"),
    (lambda: sphere_phantom(SMALL, 60.0, 12.0, n_spheres=2, sphere_radius_mm=15.0, contrast=1e300), "^contrast:"),
    (lambda: sphere_phantom(SMALL, 60.0, 12.0, n_spheres=2, sphere_radius_mm=15.0, mu_per_mm=1e300), "^mu_per_mm:"),
    (lambda: sphere_phantom(SMALL, 1e300, 12.0), "^cylinder_diameter_mm:"),
    (lambda: uniform_cylinder(SMALL, 60.0, 12.0, activity=1e300), "^activity: .* beyond float32"),
    (lambda: point_source_phantom(SMALL, [(1e4, 0.0, 0.0)]), "^points_mm: points .* outside"),
    (lambda: derenzo_phantom(SMALL, diameters_mm=(2.4, 2.4, 1.7, 1.35, 1.0, 0.75)),
     "^diameters_mm: expected six distinct"),
], ids=["n-spheres", "contrast", "mu", "cylinder", "activity", "outside", "derenzo-repeat"])
def test_sim_overflow_and_nonsense_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("call, error, message", [
    (lambda img, W, S: roi_mean(img, np.full_like(W, np.nan), S), ValueError, "^weights2d: expected finite"),
    (lambda img, W, S: roi_mean(img, -W, S), ValueError, "^weights2d: expected weights >= 0"),
    (lambda img, W, S: roi_mean(img, np.array(1.0), S), ValueError, "^weights2d: expected shape"),
    (lambda img, W, S: roi_mean(img, W, [(-1, 1.0)]), ValueError, "^slices: entry 0 index"),
    (lambda img, W, S: roi_mean(img, W, [(0, -1.0)]), ValueError, "^slices: entry 0 weight"),
    (lambda img, W, S: roi_mean(img + 1j, W, S), TypeError, "^image: expected real numbers"),          # complex
    (lambda img, W, S: roi_mean(img, W > 0, S), TypeError, "^weights2d: expected real"),            # bool
    (lambda img, W, S: circle_weights(GRID, (0, 0), 0.0), ValueError, "^diameter_mm:"),
    (lambda img, W, S: ContrastNoiseCurve(["a", "b"], [0.5, 0.6], [0.1, 0.2]), TypeError, "^iterations:"),
    (lambda img, W, S: ContrastNoiseCurve([1, 2, 3], [0.5, 0.6], [0.1, 0.2]), ValueError, "^crc: 2 values for 3"),
    (lambda img, W, S: ContrastNoiseCurve([1, 2], [0.5, 0.6], [0.1, np.nan]), ValueError, "^noise:"),
    (lambda img, W, S: plot_image_panels(None, ["a"], GRID), TypeError, "^images:"),
    (lambda img, W, S: plot_image_panels([img], "a", GRID), TypeError, "^titles:"),
    (lambda img, W, S: plot_contrast_noise_errorbars([1]), TypeError, "^aggregated_rows: row 0"),
    (lambda img, W, S: make_rng(1, xp="numpy"), TypeError, "^xp:"),
    (lambda img, W, S: GRID.index_of(np.nan, 0.0, 0.0), ValueError, "^z_mm:"),
    (lambda img, W, S: ImageGrid({1: 2, 3: 4, 5: 6}, 4.0), TypeError, "^shape:"),
], ids=["w-nan", "w-neg", "w-0d", "slice-neg", "slice-weight", "complex", "bool", "circle-0", "cnc-str",
        "cnc-len", "cnc-nan", "panels-none", "titles-str", "rows-int", "rng-xp", "index-nan", "grid-dict"])
def test_public_helpers_check_their_arguments(call, error, message, phantom):
    img, info = phantom
    with pytest.raises(error, match=message):
        call(img, circle_weights(GRID, (0, 0), 10.0), [(1, 0.5), (2, 0.5)])


def test_noise_roi_and_sphere_means_name_their_arguments(phantom):
    img, info = phantom
    with pytest.raises(ValueError, match="^diameter_mm:"):
        noise(img, info, diameter_mm=0)
    with pytest.raises(ValueError, match="^where: the 20.0 mm noise ROI .* outside the grid"):
        noise(img, (1e6, 0.0, 0.0), 20.0, grid=GRID)
    with pytest.raises(TypeError, match="^image: expected real numbers"):
        SphereROIs.from_info(info, supersample=2).means(img > 0)


def test_adjointness_test_rng_is_checked():
    class Dense(LinearOperator):
        in_shape, out_shape = (3,), (2,)
        A = np.arange(6.0).reshape(2, 3)

        def _forward(self, x, units, out):
            out[...] = self.A @ x
            return out

        def _adjoint(self, y, units, out):
            out[...] = self.A.T @ y
            return out

    with pytest.raises(TypeError, match="^rng:"):
        Dense().adjointness_test(rng="x")
    assert Dense().adjointness_test(rng=1) < 1e-6        # float32 operands (the model checks float32)


def test_saving_to_a_directory_or_a_foreign_extension_names_path(tmp_path, phantom):
    img, info = phantom
    from directpet.first import RotatingScanner, SinogramData

    scanner = RotatingScanner.small()
    data = SinogramData(scanner, np.ones(scanner.sinogram_shape, np.float32))
    with pytest.raises(ValueError, match="^path: .* is a directory"):
        data.save(tmp_path)
    curve = ContrastNoiseCurve([1, 2], [0.5, 0.6], [0.05, 0.1])
    with pytest.raises(ValueError, match="^path: .* is a directory"):
        plot_contrast_noise([curve], path=tmp_path)
    pytest.importorskip("nibabel", reason="nibabel not installed")
    from directpet.io import load_nifti, save_nifti

    with pytest.raises(ValueError, match="^path: .* is a directory"):
        save_nifti(tmp_path, img, GRID)
    with pytest.raises(ValueError, match=r"^path: .*a\.txt does not end in \.nii or \.nii\.gz"):
        save_nifti(tmp_path / "a.txt", img, GRID)
    with pytest.raises(ValueError, match="^path: .* is a directory"):
        load_nifti(tmp_path)
    assert list(tmp_path.iterdir()) == []
