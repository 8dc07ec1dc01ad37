"""Degenerate inputs of the DIRECT family (issue 16), by module: each class of bad call found by the
fuzz is a ValueError or TypeError that names the argument, raised before anything is allocated or
any compiled code runs -- never a silent result, a raw NumPy / pybind11 error, or an exhausted
machine. One or two representatives per class; sizes are tiny, except where the point is that a
large but feasible size still works.

Classes: (1) data not matched to their projector, (2) silently accepted NaN / negative / fractional
values, (3) impossible sizes (estimated before allocating), (4) raw exceptions (None, strings,
arguments the compiled layer cannot take, damaged files).
"""

from __future__ import annotations

import numpy as np
import pytest

from directpet import ImageGrid
from directpet.direct import (CylindricalScanner, EventBatch, FFTProjector, HistoImageData, HistoImageProjector,
                              SRKernel, View, ViewSet, ViewSubsets, build_lut, deposit, model_consistent_data,
                              randoms_background, sensitivity_attenuation, simulate_deposit, simulate_randoms)
from directpet.direct.fft import auto_padding, fft_bytes
from directpet.sim import sphere_phantom

GRID = ImageGrid((4, 10, 9), 4.0)
VIEWS = ViewSet(2, 1)
STACK = (len(VIEWS),) + GRID.shape


@pytest.fixture
def op():
    return HistoImageProjector(GRID, VIEWS, SRKernel.invariant(), backend="cpu", threads=1)


@pytest.fixture
def counts(rng):
    return rng.uniform(1.0, 5.0, STACK).astype(np.float32)


def _events(rng, n=6):
    """n LORs through the centre of the grid along x, with small random TOF offsets."""
    p1 = np.zeros((n, 3), np.float32)
    p1[:, 0], p1[:, 1] = -400.0, rng.uniform(-2.0, 2.0, n)
    p2 = -p1
    return EventBatch(p1, p2, rng.uniform(-20.0, 20.0, n).astype(np.float32))


# --- (1) subsets / histo_data: data must match the projector's grid and views ----------------------

@pytest.mark.parametrize("data_grid, data_views, name", [
    (ImageGrid((4, 10, 9), 3.0), VIEWS, "grid"),                       # same shape, other voxel size
    (GRID, ViewSet(1, 2), "views"),                                      # same number of views
    (GRID, ViewSet(2, 1, theta_max_deg=20.0), "views"),                  # other tilt range
])
def test_data_of_another_grid_or_view_set_is_refused(op, counts, data_grid, data_views, name):
    with pytest.raises(ValueError, match=f"data: .*{name}"):
        ViewSubsets(op, HistoImageData(counts, data_grid, data_views))


def test_stored_data_still_match_their_projector(op, counts, tmp_path):
    """The grid and the view set survive .npz storage exactly, so reloaded data still pair up."""
    path = tmp_path / "d.npz"
    HistoImageData(counts, GRID, ViewSet(2, 1, theta_max_deg=7.3)).save(path)
    back = HistoImageData.load(path)
    assert back.grid == GRID and back.viewset.theta_max_deg == 7.3
    ViewSubsets(HistoImageProjector(GRID, ViewSet(2, 1, 7.3), backend="cpu"), back)
    with pytest.raises(ValueError, match="data: its views"):
        ViewSubsets(op, back)                                            # 10 degrees, not 7.3


def test_model_data_with_another_view_set_is_refused(op, volume):
    with pytest.raises(ValueError, match="viewset"):
        model_consistent_data(op, volume(GRID.shape), noise=False, viewset=ViewSet(1, 2))


# --- (2) silently accepted values ---------------------------------------------------------------

@pytest.mark.parametrize("field", ["histos", "sensitivity", "background"])
@pytest.mark.parametrize("bad, why", [(np.nan, "NaN"), (-1.0, "negative")])
def test_histo_image_data_refuse_nan_and_negative_values(counts, field, bad, why):
    arrays = {"histos": counts, "sensitivity": counts.copy(), "background": counts.copy()}
    arrays[field][1, 2, 3, 4] = bad
    with pytest.raises(ValueError, match=f"{field}: contains {why}"):
        HistoImageData(arrays["histos"], GRID, VIEWS, arrays["sensitivity"], arrays["background"])


@pytest.mark.parametrize("bad", [np.nan, -0.5])
def test_model_data_name_the_factors_before_projecting(op, volume, bad):
    sens = volume(STACK)
    sens[0, 1, 2, 3] = bad
    with pytest.raises(ValueError, match="sensitivity \\(factors\\)"):
        model_consistent_data(op, volume(GRID.shape), sens, rng=1)


def test_nan_lut_values_are_refused():
    lut = build_lut(GRID, View(0.3), SRKernel.clinical())
    values = lut.values.copy()
    values[0, 0] = np.nan
    import dataclasses

    with pytest.raises(ValueError, match="values"):
        dataclasses.replace(lut, values=values)
    kernel = SRKernel(values=lambda t, r, a, s: np.where(t > 0, np.nan, 1.0) + 0 * s)
    with pytest.raises(ValueError, match="values"):
        build_lut(GRID, View(0.3), kernel)


@pytest.mark.parametrize("total", [np.nan, -1.0])
def test_randoms_background_total(total):
    with pytest.raises(ValueError, match="total"):
        randoms_background(GRID, VIEWS, total=total)


@pytest.mark.parametrize("where", ["p1", "dt_ps"])
def test_events_with_nan_are_corrupt_data(rng, where):
    """A NaN position or time difference is an error naming events, not a silent drop."""
    ev = _events(rng)
    getattr(ev, where)[2] = np.nan
    with pytest.raises(ValueError, match="events: 1 of 6"):
        deposit(ev, GRID, VIEWS)


def test_events_without_a_direction_are_counted_not_nan(rng):
    """p1 == p2 has no direction: counted outside the views, no NaN warning (warnings are errors)."""
    ev = _events(rng)
    ev.p2[0] = ev.p1[0]
    h, st = deposit(ev, GRID, VIEWS, return_stats=True)
    assert st.n_outside_views == 1 and st.n_deposited + st.n_outside_grid == 5 and h.sum() == st.n_deposited


@pytest.mark.parametrize("call", [
    lambda op, x, d: op.forward(x, 1.0),
    lambda op, x, d: op.forward(x, np.float64(2.7)),
    lambda op, x, d: ViewSubsets(op, d, subsets=[[0.0], [1.0]]),
    lambda op, x, d: op.forward_views(x, [0, 0.5]),
    lambda op, x, d: VIEWS.index(1.5, 0),
], ids=["forward_1.0", "forward_2.7", "subsets_of_floats", "forward_views", "viewset_index"])
def test_fractional_view_indices_are_type_errors(op, volume, counts, call):
    with pytest.raises(TypeError, match="view|subsets|\\bk\\b"):
        call(op, volume(GRID.shape), counts)


# --- (3) impossible sizes: estimated before allocating ------------------------------------------------

@pytest.mark.parametrize("make, name", [
    (lambda: ViewSet(10**9), "n_phi"),
    (lambda: build_lut(ImageGrid((48, 144, 144), 4.0), View(0.3), SRKernel.clinical(epsilon=1e-7)), "epsilon"),
    (lambda: build_lut(GRID, View(0.3), SRKernel.clinical(truncation=1e6)), "kernel"),
    (lambda: FFTProjector(GRID, View(0.3), padding=(2**30, 2**10, 9), backend="cpu"), "padding"),
    (lambda: simulate_randoms(CylindricalScanner(), 10**14), "n"),
    (lambda: deposit([], ImageGrid((10**5, 10**5, 10**4), 1.0), VIEWS), "grid"),
], ids=["viewset", "lut_epsilon", "lut_truncation", "fft_padding",
        "randoms", "histo_stack"])
def test_impossible_sizes_are_refused_up_front(make, name):
    with pytest.raises(ValueError, match=f"\\b{name}\\b"):
        make()


def test_large_but_feasible_sizes_still_work():
    """The paper's 144 x 144 x 48 grid with 40 x 3 views and the stress kernel of ~14,000 offsets;
    a 288 x 288 x 96 FFT projector over all 120 views needs a few GB, not an impossible amount."""
    paper = ImageGrid((48, 144, 144), 4.0)
    views = ViewSet(40, 3)
    assert build_lut(paper, views[1], SRKernel.stress()).n_offsets > 10_000
    assert FFTProjector(paper, views, backend="cpu", planner="estimate").n_views == 120
    big = ImageGrid((96, 288, 288), 2.0)
    lut = build_lut(big, views[1], SRKernel.invariant())
    assert fft_bytes(auto_padding(big.shape, lut.half_extent), 120) < 16 * 2**30


# --- (4) raw exceptions: None, strings, what the compiled layer cannot take, damaged files ------------

@pytest.mark.parametrize("call, name", [
    (lambda op, d: ViewSubsets(None, d), "projector"),
    (lambda op, d: model_consistent_data(None, d[0]), "projector"),
    (lambda op, d: HistoImageData(None, GRID), "histos"),
    (lambda op, d: deposit(None, GRID, VIEWS), "events"),
    (lambda op, d: sensitivity_attenuation(GRID, None), "viewset"),
    (lambda op, d: HistoImageData(d, GRID, kernel=5.8), "kernel"),
], ids=["subsets_projector", "model_projector", "histos", "events", "viewset", "kernel"])
def test_none_or_a_wrong_object_is_a_type_error(op, counts, call, name):
    with pytest.raises(TypeError, match=name):
        call(op, counts)


@pytest.mark.parametrize("call, name", [
    (lambda: ViewSet(2, 1, "10"), "theta_max_deg"),
    (lambda: View("0.1"), "phi"),
    (lambda: SRKernel(tof_fwhm_ps="400"), "tof_fwhm_ps"),
    (lambda: SRKernel(asymmetric="yes"), "asymmetric"),
    (lambda: CylindricalScanner(radius_mm="465"), "radius_mm"),
    (lambda: randoms_background(GRID, VIEWS, total="1"), "total"),
])
def test_strings_are_not_numbers(call, name):
    with pytest.raises(TypeError, match=name):
        call()


def _simulate(**kw):
    args = {"n_events": 10, "backend": "cpu", **kw}
    return simulate_deposit(sphere_phantom(GRID)[1], CylindricalScanner(), GRID, VIEWS, args.pop("n_events"), **args)


@pytest.mark.parametrize("call, name", [
    (lambda: _simulate(n_events=2**63), "n_events"),
    (lambda: _simulate(threads=10**12), "threads"),
    (lambda: build_lut(ImageGrid((2**31, 2, 2), 4.0), View(0.1), SRKernel()), "shape"),
    (lambda: FFTProjector(GRID, View(0.3), padding=(2**31, 10, 9), backend="cpu"), "padding"),
], ids=["n_events", "threads", "grid_extent", "fft_padding"])
def test_arguments_the_compiled_code_cannot_take(call, name):
    """Checked in Python: pybind11's 'incompatible function arguments' never reaches the user."""
    with pytest.raises(ValueError, match=name):
        call()


def _tampered(path, tmp_path, rng):
    """Four damaged versions of a good file: cut, random bytes, NaN counts, a later version."""
    good = path.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good[: len(good) // 2])
    noise = tmp_path / "noise.npz"
    noise.write_bytes(rng.integers(0, 256, 2000, dtype=np.uint8).tobytes())
    with np.load(path) as f:
        arrays = dict(f)
    arrays["histos"] = arrays["histos"].copy()
    arrays["histos"][0, 0, 0, 0] = np.nan
    nan = tmp_path / "nan.npz"
    np.savez(nan, **arrays)
    arrays = {k: v for k, v in arrays.items() if k != "histos"}
    arrays["histos"] = np.ones(STACK, np.float32)
    arrays["metadata"] = np.array(str(arrays["metadata"]).replace('"version": 1', '"version": 2'))
    later = tmp_path / "later.npz"
    np.savez(later, **arrays)
    return {"cut": cut, "noise": noise, "nan": nan, "later": later}


def test_damaged_files_name_the_path(counts, tmp_path, rng):
    path = tmp_path / "good.npz"
    HistoImageData(counts, GRID, VIEWS).save(path)
    for kind, bad in _tampered(path, tmp_path, rng).items():
        with pytest.raises(ValueError, match=f"path: {bad}") as err:
            HistoImageData.load(bad)
        if kind in ("nan", "later"):
            assert ("NaN" if kind == "nan" else "version 2") in str(err.value)
    with pytest.raises(ValueError, match="path"):
        HistoImageData.load(tmp_path / "missing.npz")
