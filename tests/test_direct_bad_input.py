"""Degenerate and bad inputs (design.md "Errors"): every one is a ValueError or TypeError that
names the argument -- never a crash, a hang or a silent zero result."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from directpet import ImageGrid
from directpet.direct import HistoImageProjector, SRKernel, View, ViewSet, build_lut

GRID = ImageGrid((9, 16, 15), 4.0)


@pytest.fixture
def op():
    return HistoImageProjector(GRID, ViewSet(n_phi=2, n_theta=3), SRKernel.clinical("variant2"),
                               backend="cpu")


# --- arrays ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16, np.complex64])
def test_wrong_dtype_is_type_error(op, dtype, volume):
    """Only float32 is accepted; no silent casts. The message names the argument and the operator."""
    x = volume(GRID.shape).astype(dtype)
    with pytest.raises(TypeError, match=r"^image\b.*float32.*\[HistoImageProjector\.forward\]"):
        op.forward(x, 0)
    with pytest.raises(TypeError, match=r"^histo_images\b.*float32.*\[HistoImageProjector\.adjoint\]"):
        op.adjoint(x[None], 0)
    with pytest.raises(TypeError, match="image"):
        op.forward(x)


def test_non_array_is_type_error(op):
    with pytest.raises(TypeError, match="image"):
        op.forward(np.ones(GRID.shape, dtype=np.float32).tolist(), 0)


@pytest.mark.parametrize("shape", [(16, 15), (1, 9, 16, 15), (9, 15, 16), (9, 16, 14), (10, 16, 15)])
def test_wrong_shape_is_value_error(op, shape, volume):
    """Wrong rank or extent: ValueError naming the argument and the expected shape (a one-view
    subset's histo-images are a (1, nz, ny, nx) stack)."""
    x = volume(shape)
    with pytest.raises(ValueError, match=r"image: expected shape \(9, 16, 15\)"):
        op.forward(x, 0)
    if shape != (1, 9, 16, 15):
        with pytest.raises(ValueError, match=r"histo_images: expected shape \(1, 9, 16, 15\)"):
            op.adjoint(x, 0)
    with pytest.raises(ValueError, match=r"histo_images: expected shape \(2, 9, 16, 15\)"):
        op.adjoint(x, [0, 3])


def test_wrong_stack_shape_is_value_error(op, volume):
    """The all-views adjoint needs (n_views, nz, ny, nx)."""
    with pytest.raises(ValueError, match=r"histo_images: expected shape \(6, 9, 16, 15\)"):
        op.adjoint(volume((5,) + GRID.shape))
    with pytest.raises(ValueError, match="histo_images"):
        op.adjoint(volume(GRID.shape))


def test_non_contiguous_is_value_error(op, volume):
    """Strided slices and transposes are rejected (no hidden copies): message says contiguous."""
    strided = volume((9, 16, 30))[:, :, ::2]
    transposed = volume((15, 16, 9)).T
    for x in (strided, transposed):
        assert x.shape == GRID.shape and not x.flags.c_contiguous
        with pytest.raises(ValueError, match="image.*contiguous"):
            op.forward(x, 0)
        with pytest.raises(ValueError, match="histo_images.*contiguous"):
            op.adjoint(x[None], 0)
    with pytest.raises(ValueError, match="histo_images.*contiguous"):
        op.adjoint(volume((6,) + GRID.shape)[[0, 2]][:, :, ::-1], [0, 2])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_value_error(op, bad, volume):
    """A single NaN or inf anywhere is rejected before projecting."""
    x = volume(GRID.shape)
    x[4, 7, 3] = bad
    with pytest.raises(ValueError, match="image: contains NaN or inf"):
        op.forward(x, 0)
    with pytest.raises(ValueError, match="histo_images: contains NaN or inf"):
        op.adjoint(x[None], 0)


def test_bad_out_arguments(op, volume):
    """out must be float32, the right shape, writable and not the input itself."""
    x = volume(GRID.shape)
    one = (1,) + GRID.shape
    with pytest.raises(TypeError, match="out"):
        op.forward(x, 0, out=np.empty(one, dtype=np.float64))
    with pytest.raises(ValueError, match="out"):
        op.forward(x, 0, out=np.empty(GRID.shape, dtype=np.float32))  # one view is a (1, nz, ny, nx) stack
    with pytest.raises(ValueError, match="out"):
        op.forward(x, out=np.empty(GRID.shape, dtype=np.float32))  # all views need a stack
    with pytest.raises(ValueError, match="out.*(overlap|alias)"):
        op.forward(x, 0, out=x[None])
    with pytest.raises(ValueError, match="out.*(overlap|alias)"):
        op.adjoint(x[None], 0, out=x)
    ro = np.empty(one, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        op.forward(x, 0, out=ro)
    with pytest.raises(ValueError, match="read-only"):
        op.adjoint(x[None], 0, out=ro[0])


# --- views ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", [6, 100, -1, [0, 6], [-1, 2]])
def test_view_index_out_of_range(op, v, volume):
    """Valid view indices are 0..n_views-1; negative indices are not wrapped around."""
    with pytest.raises(ValueError, match=r"^subset: view indices must lie in \[0, 6\)"):
        op.forward(volume(GRID.shape), v)
    with pytest.raises(ValueError, match="subset: view indices"):
        op.adjoint(volume((len(np.atleast_1d(v)),) + GRID.shape), v)
    with pytest.raises(ValueError, match="subset: view indices"):
        op.subset(v)
    if np.ndim(v) == 0:
        with pytest.raises(ValueError, match="view"):
            op.lut(v)


@pytest.mark.parametrize("v", [1.0, "1", True, np.float64(2.0), [0.5], [True, False]])
def test_view_index_not_an_int(op, v, volume):
    """Floats, strings and bools are not view indices (a float is never truncated)."""
    with pytest.raises(TypeError, match="^subset: expected an integer"):
        op.forward(volume(GRID.shape), v)
    if np.ndim(v) == 0:
        with pytest.raises(TypeError, match="view"):
            ViewSet(2, 3)[v]


@pytest.mark.parametrize("subset", [[], [[0, 1]], np.zeros((0,), np.int64)])
def test_empty_or_nested_subsets_are_value_errors(op, subset, volume):
    with pytest.raises(ValueError, match="^subset: expected a non-empty sequence of view indices"):
        op.forward(volume(GRID.shape), subset)


@pytest.mark.parametrize("phi", [np.pi, -0.01, 4.0, np.nan, np.inf])
def test_view_phi_outside_range(phi):
    with pytest.raises(ValueError, match="phi"):
        View(phi)


@pytest.mark.parametrize("theta", [np.pi / 2, -np.pi / 2, 2.0, np.nan])
def test_view_theta_outside_range(theta):
    with pytest.raises(ValueError, match="theta"):
        View(0.1, theta)


@pytest.mark.parametrize("kw,name,exc", [({"n_phi": 0}, "n_phi", ValueError), ({"n_phi": 2.5}, "n_phi", TypeError),
                                         ({"n_theta": 0}, "n_theta", ValueError),
                                         ({"theta_max_deg": 90.0}, "theta_max_deg", ValueError),
                                         ({"theta_max_deg": -1.0}, "theta_max_deg", ValueError)])
def test_bad_viewset(kw, name, exc):
    with pytest.raises(exc, match=name):
        ViewSet(**kw)


def test_bad_views_argument():
    with pytest.raises(TypeError, match="views"):
        HistoImageProjector(GRID, [], backend="cpu")
    with pytest.raises(TypeError, match="views"):
        HistoImageProjector(GRID, [View(0.0), 0.5], backend="cpu")
    with pytest.raises(TypeError, match="views"):
        HistoImageProjector(GRID, 0.5, backend="cpu")


# --- grids and kernels ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(0, 16, 15), (9, 0, 15), (9, 16, -1), (9, 16)])
def test_grid_with_zero_extent(shape):
    with pytest.raises(ValueError, match="shape"):
        ImageGrid(shape, 4.0)


@pytest.mark.parametrize("voxel", [0.0, -4.0, (4.0, 0.0, 4.0), np.nan])
def test_grid_with_bad_voxel_size(voxel):
    with pytest.raises(ValueError, match="voxel_size"):
        ImageGrid((9, 16, 15), voxel)


@pytest.mark.parametrize("kw,name", [
    ({"tof_fwhm_ps": 0.0}, "tof_fwhm_ps"), ({"tof_fwhm_ps": -400.0}, "tof_fwhm_ps"),
    ({"tof_fwhm_ps": np.nan}, "tof_fwhm_ps"),
    ({"radial_fwhm": 0.0}, "radial_fwhm"), ({"radial_fwhm": -5.8}, "radial_fwhm"),
    ({"radial_fwhm": ("linear", -1.0, 10.0)}, "radial_fwhm"),
    ({"radial_fwhm": ("linear", 10.0, 0.0)}, "radial_fwhm"),
    ({"radial_fwhm": ("quadratic", 1.0, 2.0)}, "radial_fwhm"),
    ({"radial_fwhm": "variant9"}, "radial_fwhm"),
    ({"axial_fwhm": 0.0}, "axial_fwhm"), ({"axial_fwhm": -1.0}, "axial_fwhm"),
    ({"epsilon": 0.0}, "epsilon"), ({"epsilon": -2.0}, "epsilon"),
    ({"truncation": 0.0}, "truncation"), ({"truncation": -3.0}, "truncation"),
    ({"narrow_weight": 0.0}, "narrow_weight"), ({"narrow_weight": 1.5}, "narrow_weight"),
    ({"wide_shift": -1.0}, "wide_shift"), ({"s_max": 0.0}, "s_max"),
])
def test_bad_kernel_parameters(kw, name):
    """Non-positive widths, bins or truncation are rejected when the kernel is made."""
    with pytest.raises(ValueError, match=name):
        SRKernel(**kw)


def test_radial_model_callable_giving_bad_widths():
    """A radial-width callable that returns non-positive widths is caught when the LUT is built."""
    kernel = SRKernel(radial_fwhm=lambda s: 5.0 - 0.5 * np.abs(s))
    with pytest.raises(ValueError, match="radial_fwhm"):
        build_lut(GRID, View(0.0), kernel)


def test_values_callable_giving_bad_values():
    """Custom kernel values must be finite, non-negative and not all zero in any row."""
    for f in (lambda t, r, a, s: t, lambda t, r, a, s: np.nan + 0 * t, lambda t, r, a, s: 0 * t):
        with pytest.raises(ValueError, match="values"):
            build_lut(GRID, View(0.3), SRKernel(values=f))
    with pytest.raises(TypeError, match="values"):
        SRKernel(values=3.0)


def test_bad_projector_options():
    with pytest.raises(ValueError, match="threads"):
        HistoImageProjector(GRID, View(0.0), backend="cpu", threads=0)
    with pytest.raises(ValueError, match="backend"):
        HistoImageProjector(GRID, View(0.0), backend="gpu")
    with pytest.raises(ValueError, match="method"):
        HistoImageProjector(GRID, View(0.0), backend="cpu", method="fastest")
    for method in ("tlp", "ilp", "slab_table", "slab_r16", "columns"):          # CUDA schemes: never silently ignored
        with pytest.raises(ValueError, match=f"^method: '{method}' is a CUDA scheme.*backend=\"cuda\""):
            HistoImageProjector(GRID, View(0.0), backend="cpu", method=method)
    for method in ("default", "slab"):                               # the CPU's one scheme
        assert HistoImageProjector(GRID, View(0.0), backend="cpu", method=method).method == method
    with pytest.raises(TypeError, match="grid"):
        HistoImageProjector((9, 16, 15), View(0.0), backend="cpu")
    with pytest.raises(TypeError, match="kernel"):
        HistoImageProjector(GRID, View(0.0), kernel=5.8, backend="cpu")


# --- corrupted LUTs -----------------------------------------------------------------------------------
def _with_lut(lut):
    return HistoImageProjector(GRID, [lut.view], backend="cpu", luts={0: lut})


@pytest.mark.parametrize("where", ["too_large", "negative"])
def test_corrupted_lormap_is_value_error(where, volume):
    """A LORmap identifier outside [0, n_kernels) would index past mSRval: the C++ LUT check
    must refuse it (ValueError naming lormap) before any kernel runs."""
    lut = build_lut(GRID, View(0.4), SRKernel.clinical("variant1"))
    ids = lut.lormap.copy()
    ids[3, 5] = lut.n_kernels + 7 if where == "too_large" else -1
    op = _with_lut(dataclasses.replace(lut, lormap=ids))
    x = volume(GRID.shape)
    with pytest.raises(ValueError, match="lormap"):
        op.forward(x, 0)
    with pytest.raises(ValueError, match="lormap"):
        op.adjoint(x[None], 0)


@pytest.mark.parametrize("how", ["identity", "out_of_range", "negative", "off_by_one"])
def test_corrupted_flip_is_value_error(how, volume):
    """flip must point at the negated offset; anything else (including the paper's off-by-one,
    docs/physics.rst Q2) is a ValueError naming flip."""
    lut = build_lut(GRID, View(0.4), SRKernel.clinical("variant1"))
    n = lut.n_offsets
    flip = {"identity": np.arange(n), "out_of_range": np.full(n, n), "negative": lut.flip - n,
            "off_by_one": np.minimum(lut.flip + 1, n - 1)}[how].astype(np.int32)
    op = _with_lut(dataclasses.replace(lut, flip=flip))
    with pytest.raises(ValueError, match="flip"):
        op.forward(volume(GRID.shape), 0)


def test_corrupted_lut_arrays_are_rejected(volume):
    """Wrong dtypes or inconsistent shapes of LUT arrays: TypeError / ValueError naming them, when
    the LUT is made (dtypes, ranks, NaN values) or before the first projection (shapes, ranges)."""
    lut = build_lut(GRID, View(0.4), SRKernel.clinical("variant1"))
    x = volume(GRID.shape)
    nan_values = lut.values.copy()
    nan_values[1, 2] = np.nan
    cases = [
        (lambda: dataclasses.replace(lut, values=lut.values.astype(np.float64)), TypeError, "values"),
        (lambda: dataclasses.replace(lut, offsets=lut.offsets.astype(np.int64)), TypeError, "offsets"),
        (lambda: dataclasses.replace(lut, lormap=lut.lormap.tolist()), TypeError, "lormap"),
        (lambda: dataclasses.replace(lut, values=nan_values), ValueError, "values"),
        (lambda: dataclasses.replace(lut, values=lut.values[:, :-1].copy()), ValueError, "values"),
        (lambda: dataclasses.replace(lut, flip=lut.flip[:-1].copy()), ValueError, "flip"),
        (lambda: dataclasses.replace(lut, values=lut.values[: lut.n_kernels // 2].copy()), ValueError, "lormap"),
        (lambda: dataclasses.replace(lut, offsets=np.zeros((0, 3), np.int32), flip=np.zeros(0, np.int32),
                                     values=np.zeros((lut.n_kernels, 0), np.float32)), ValueError, "offsets"),
    ]
    for make_bad, exc, name in cases:
        with pytest.raises(exc, match=name):
            _with_lut(make_bad()).forward(x, 0)


def test_luts_argument_checks():
    """luts must map valid view indices to DirectLUTs of the grid's transaxial size."""
    lut = build_lut(GRID, View(0.4), SRKernel.clinical("variant1"))
    with pytest.raises(TypeError, match="luts"):
        HistoImageProjector(GRID, [View(0.4)], backend="cpu", luts={0: "not a lut"})
    with pytest.raises(ValueError, match="view"):
        HistoImageProjector(GRID, [View(0.4)], backend="cpu", luts={1: lut})
    other = build_lut(ImageGrid((9, 16, 14), 4.0), View(0.4), SRKernel.clinical("variant1"))
    with pytest.raises(ValueError, match="luts"):
        HistoImageProjector(GRID, [View(0.4)], backend="cpu", luts={0: other})


def test_with_values_bad_input(rng):
    lut = build_lut(GRID, View(0.4), SRKernel.clinical("variant1"))
    with pytest.raises(ValueError, match="values"):
        lut.with_values(rng.random((lut.n_kernels, lut.n_offsets + 1)))
    bad = rng.random(lut.values.shape)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="values"):
        lut.with_values(bad)
    with pytest.raises(ValueError, match="values"):
        lut.with_values(np.zeros(lut.values.shape))
    with pytest.raises(ValueError, match="identifier"):
        lut.kernel_volume(lut.n_kernels)
