"""Degenerate inputs of the DIRECT family (issue 16), by module: each class of bad call found by the
fuzz is a ValueError or TypeError that names the argument, raised before anything is allocated or
any compiled code runs -- never a silent result, a raw NumPy / pybind11 error, or an exhausted
machine. One or two representatives per class; sizes are tiny, except where the point is that a
large but feasible size still works.

Classes: (1) data not matched to their projector, (2) silently accepted NaN / negative / fractional
values, (3) impossible sizes (estimated before allocating), (4) raw exceptions (None, strings,
arguments the compiled layer cannot take, damaged files); then the fuzz's second round: huge
sub-sample counts, index and size arguments, truthy flags, negative / NaN / overflowing values,
missing type checks, the public geometric helpers, complex and boolean arrays, PETSIRD indices.
"""

from __future__ import annotations

import numpy as np
import pytest

from directpet import ImageGrid
from directpet.direct import (CylindricalScanner, EventBatch, FFTProjector, HistoImageData, HistoImageProjector,
                              LowRankProjector, SRKernel, View, ViewSet, ViewSubsets, attenuation_histo_images,
                              bin_views, build_lut, deposit, detector_exits, detector_hits, local_coordinates,
                              make_blocks, model_consistent_data, normalisation_histo_images, randoms_background,
                              randoms_from_delayeds, sensitivity_attenuation, simulate, simulate_events,
                              simulate_randoms, tof_fwhm_mm)
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


# --- (1) subsets / data: data must match the projector's grid and views ----------------------

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


def test_model_consistent_data_with_another_view_set_is_refused(op, volume):
    with pytest.raises(ValueError, match="viewset"):
        model_consistent_data(op, volume(GRID.shape), noise=False, viewset=ViewSet(1, 2))


# --- (2) silently accepted values ---------------------------------------------------------------

@pytest.mark.parametrize("field", ["prompts", "factors", "background"])
@pytest.mark.parametrize("bad, why", [(np.nan, "NaN"), (-1.0, "negative")])
def test_histo_image_data_refuse_nan_and_negative_values(counts, field, bad, why):
    arrays = {"prompts": counts, "factors": counts.copy(), "background": counts.copy()}
    arrays[field][1, 2, 3, 4] = bad
    with pytest.raises(ValueError, match=f"{field}: contains {why}"):
        HistoImageData(arrays["prompts"], GRID, VIEWS, arrays["factors"], arrays["background"])


@pytest.mark.parametrize("bad", [np.nan, -0.5])
def test_model_consistent_data_name_the_factors_before_projecting(op, volume, bad):
    factors = volume(STACK)
    factors[0, 1, 2, 3] = bad
    with pytest.raises(ValueError, match="factors"):
        model_consistent_data(op, volume(GRID.shape), factors=factors, seed=1)


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
    lambda op, x, d: op.forward(x, [0, 0.5]),
    lambda op, x, d: VIEWS.index(1.5, 0),
], ids=["forward_1.0", "forward_2.7", "subsets_of_floats", "forward_subset", "viewset_index"])
def test_fractional_view_indices_are_type_errors(op, volume, counts, call):
    with pytest.raises(TypeError, match="view|subset|\\bk\\b"):
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
    (lambda op, d: HistoImageData(None, GRID), "prompts"),
    (lambda op, d: deposit(None, GRID, VIEWS), "events"),
    (lambda op, d: sensitivity_attenuation(GRID, None), "viewset"),
    (lambda op, d: HistoImageData(d, GRID, kernel=5.8), "kernel"),
], ids=["subsets_projector", "model_projector", "prompts", "events", "viewset", "kernel"])
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
    args = {"n_trues": 10, "backend": "cpu", **kw}
    return simulate(CylindricalScanner(), sphere_phantom(GRID)[1], grid=GRID, viewset=VIEWS, **args)


@pytest.mark.parametrize("call, name", [
    (lambda: _simulate(n_trues=2**63), "n_trues"),
    (lambda: _simulate(threads=10**12), "threads"),
    (lambda: build_lut(ImageGrid((2**31, 2, 2), 4.0), View(0.1), SRKernel()), "shape"),
    (lambda: FFTProjector(GRID, View(0.3), padding=(2**31, 10, 9), backend="cpu"), "padding"),
], ids=["n_trues", "threads", "grid_extent", "fft_padding"])
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
    arrays["prompts"] = arrays["prompts"].copy()
    arrays["prompts"][0, 0, 0, 0] = np.nan
    nan = tmp_path / "nan.npz"
    np.savez(nan, **arrays)
    arrays = {k: v for k, v in arrays.items() if k != "prompts"}
    arrays["prompts"] = np.ones(STACK, np.float32)
    arrays["version"] = np.array(int(arrays["version"]) + 1)
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
            assert ("NaN" if kind == "nan" else f"version {HistoImageData.VERSION + 1}") in str(err.value)
    with pytest.raises(ValueError, match="path"):
        HistoImageData.load(tmp_path / "missing.npz")


# --- round 2 of the fuzz: counts, indices, flags, values, types, helpers, complex arrays, PETSIRD -------

def _header():
    pytest.importorskip("petsird", reason="petsird not installed (pip install 'directpet[io]')")
    from directpet.direct.petsird import scanner_header

    return scanner_header(CylindricalScanner())


_MU = np.full(GRID.shape, 0.0096, np.float32)
_PHANTOM = sphere_phantom(GRID)[1]


@pytest.mark.parametrize("call, name", [
    (lambda: sensitivity_attenuation(GRID, VIEWS, _PHANTOM, n_quad=2**63), "n_quad"),     # was: zeros
    (lambda: randoms_background(GRID, VIEWS, n_quad=2**40), "n_quad"),                    # was: MemoryError
    (lambda: attenuation_histo_images(_MU, GRID, GRID, VIEWS, n_sub=2**63), "n_sub"),     # was: "please report"
    (lambda: VIEWS.cell_views(0, 10**5), "n_sub"),                                        # was: a hang
], ids=["sensitivity", "randoms", "attenuation", "cell_views"])
def test_huge_sub_sample_counts_are_refused(call, name):
    """np.arange(2**63) is empty: a huge n_quad / n_sub used to give zeros or ones silently."""
    with pytest.raises(ValueError, match=rf"^{name}: expected an integer in \[1, 1024\]"):
        call()


def test_huge_normalisation_sub_samples_are_refused():
    with pytest.raises(ValueError, match=r"^n_sub:"):
        normalisation_histo_images(_header(), GRID, VIEWS, n_sub=2**63)


@pytest.mark.parametrize("call, error, name", [
    (lambda: build_lut(GRID, View(0.3), SRKernel()).kernel_volume(0.5), TypeError, "identifier"),
    (lambda: make_blocks(4, 2, VIEWS), ValueError, "n_views"),                       # the viewset has 2
    (lambda: make_blocks(2**62, 2), ValueError, "n_views"),
    (lambda: HistoImageProjector(ImageGrid((64, 96, 96), 4.0), VIEWS, backend="cpu").forward(
        np.ones((64, 96, 96), np.float32), [0] * 10**7), ValueError, "subset"),           # 22 TiB of output
    (lambda: attenuation_histo_images(_MU, GRID, GRID, VIEWS, step_mm=1e-12), ValueError, "step_mm"),
    (lambda: next(simulate_events(CylindricalScanner(), _PHANTOM, 2**63, progress=False)), ValueError,
     "n_events"),
    (lambda: LowRankProjector(GRID, VIEWS, rank=10**9, backend="cpu", planner="estimate"), ValueError, "rank"),
], ids=["kernel_volume", "blocks_of_another_viewset", "blocks_huge", "forward_subset", "step_mm",
        "simulate_events", "lowrank_rank"])
def test_index_and_size_arguments(call, error, name):
    with pytest.raises(error, match=rf"^{name}:"):
        call()


@pytest.mark.parametrize("call, name", [
    (lambda rng: next(simulate_events(CylindricalScanner(), _PHANTOM, 10, blur="no", progress=False)), "blur"),
    (lambda rng: next(simulate_events(CylindricalScanner(), _PHANTOM, 10, progress="yes")), "progress"),
    (lambda rng: _simulate(tof=None), "tof"),
    (lambda rng: deposit(_events(rng), GRID, VIEWS, return_stats="yes"), "return_stats"),
    (lambda rng: build_lut(GRID, View(0.3), SRKernel()).with_values(np.ones((1, 1)), normalize="no"), "normalize"),
], ids=["blur", "progress", "tof", "return_stats", "normalize"])
def test_flags_are_bools_not_truthy_values(rng, call, name):
    with pytest.raises(TypeError, match=rf"^{name}: expected True or False"):
        call(rng)


def test_save_refuses_a_truthy_compress_and_a_directory(counts, tmp_path):
    data = HistoImageData(counts, GRID, VIEWS)
    with pytest.raises(TypeError, match=r"^compress:"):
        data.save(tmp_path / "d.npz", compress="yes")
    with pytest.raises(ValueError, match=r"^path: .* is a directory"):
        data.save(tmp_path)
    with pytest.raises(TypeError, match=r"^path:"):
        data.save(None)


def _negative_first(a):
    a = np.array(a, dtype=np.float64)
    a.flat[0] = -1.0
    return a


@pytest.mark.parametrize("call, name", [
    (lambda rng: build_lut(GRID, View(0.3), SRKernel()).with_values(
        _negative_first(build_lut(GRID, View(0.3), SRKernel()).values)), "values"),   # build_lut's rule
    (lambda rng: EventBatch(_events(rng).p1, _events(rng).p2, np.zeros(6, np.float32),
                            weights=-np.ones(6, np.float32)), "weights"),
    (lambda rng: deposit(_events(rng), GRID, VIEWS, out=np.full(STACK, np.nan, np.float32)), "out"),
    (lambda rng: _simulate(out=np.full(STACK, np.nan, np.float32)), "out"),
    (lambda rng: randoms_background(GRID, VIEWS, total=1e300), "total"),                 # was: inf
    (lambda rng: randoms_from_delayeds(_events(rng), GRID, VIEWS, scale=1e300), "scale"),   # was: inf
    (lambda rng: randoms_from_delayeds(_events(rng), GRID, VIEWS, smooth_fwhm_mm=1e300), "smooth_fwhm_mm"),
], ids=["lut_values", "weights", "deposit_out", "simulate_out", "total", "scale", "smoothing"])
def test_negative_nan_and_overflowing_values(rng, call, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        call(rng)


def test_large_but_finite_totals_stay_finite():
    """A total close to float32's largest value: normalised before scaling, so no overflow."""
    b = randoms_background(GRID, VIEWS, total=3e38)
    assert np.isfinite(b).all() and float(b.sum(dtype=np.float64)) == pytest.approx(3e38, rel=1e-4)


@pytest.mark.parametrize("call, error, name", [
    (lambda rng: sensitivity_attenuation(GRID, VIEWS, "phantom"), TypeError, "phantom_info"),
    (lambda rng: sensitivity_attenuation(GRID, VIEWS, _PHANTOM, attenuation=3), TypeError, "attenuation"),
    (lambda rng: bin_views(None, _events(rng).p2, VIEWS), TypeError, "p1"),
    (lambda rng: bin_views(_events(rng).p1, _events(rng).p2, None), TypeError, "viewset"),
    (lambda rng: detector_hits(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, "scanner"), TypeError, "scanner"),
    (lambda rng: EventBatch.concatenate([]), ValueError, "batches"),
    (lambda rng: EventBatch.concatenate([1, 2]), TypeError, "batches"),
    (lambda rng: HistoImageProjector(GRID, VIEWS, backend="cpu", luts=[build_lut(GRID, VIEWS[0], SRKernel())]),
     TypeError, "luts"),
    (lambda rng: HistoImageProjector(GRID, VIEWS, backend="cpu", luts={5: build_lut(GRID, VIEWS[0], SRKernel())}),
     ValueError, "luts key"),
    (lambda rng: HistoImageData(np.zeros(STACK, np.float32), GRID).to("torch"), TypeError, "xp"),
], ids=["phantom_info", "attenuation", "p1", "viewset", "scanner", "no_batches", "not_batches", "luts_list",
        "luts_key", "xp"])
def test_wrong_types_name_the_argument(rng, call, error, name):
    with pytest.raises(error, match=rf"^{name}"):
        call(rng)


@pytest.mark.parametrize("call, error, name", [
    (lambda: tof_fwhm_mm("400"), TypeError, "tof_fwhm_ps"),                          # was: 59.96
    (lambda: tof_fwhm_mm(-1.0), ValueError, "tof_fwhm_ps"),
    (lambda: VIEWS.bin_directions(np.array([[np.nan, 1.0, 0.0]])), ValueError, "u"),   # was: view -1
    (lambda: VIEWS.bin_directions(np.ones((3, 2))), ValueError, "u"),
    (lambda: local_coordinates(GRID, VIEWS[0], np.zeros((4, 2), np.int32)), ValueError, "offsets"),
    (lambda: detector_hits(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, CylindricalScanner()), ValueError, "ux, uy, uz"),
    (lambda: detector_exits(1e4, 0.0, 0.0, 1.0, 0.0, 0.0, CylindricalScanner()), ValueError, "x, y"),
    (lambda: EventBatch(np.zeros((6, 3)), np.zeros((6, 3)), np.zeros(5)), ValueError, "dt_ps"),  # not "p1"
    (lambda: SRKernel.clinical().radial_fwhm_at(np.array([1.0]), 0.0), ValueError, "s_max"),
    (lambda: SRKernel.clinical().radial_fwhm_at(np.array([np.nan]), 100.0), ValueError, "s"),
], ids=["tof_string", "tof_negative", "nan_direction", "directions_2d", "offsets_2d", "zero_direction",
        "point_outside", "batch_lengths", "s_max", "s_nan"])
def test_public_helpers_check_their_arguments(call, error, name):
    with pytest.raises(error, match=rf"^{name}:") as err:
        call()
    assert "has 5 events but p1 has 6" in str(err.value) or name != "dt_ps"


@pytest.mark.parametrize("call, name", [
    (lambda rng: attenuation_histo_images(_MU.astype(np.complex64), GRID, GRID, VIEWS), "mu"),
    (lambda rng: bin_views(_events(rng).p1.astype(np.complex64), _events(rng).p2, VIEWS), "p1"),
    (lambda rng: build_lut(GRID, View(0.3), SRKernel()).with_values(
        build_lut(GRID, View(0.3), SRKernel()).values > 0), "values"),
], ids=["mu", "p1", "lut_values_bool"])
def test_complex_and_boolean_arrays_are_not_real_numbers(rng, call, name):
    """No ComplexWarning and a lost imaginary part, no booleans counted as 0 / 1."""
    with pytest.raises(TypeError, match=rf"^{name}: expected real numbers"):
        call(rng)


def test_boolean_efficiencies_are_not_real_numbers():
    from directpet.direct.petsird import ring_shape

    header = _header()
    with pytest.raises(TypeError, match=r"^efficiencies: expected real numbers"):
        normalisation_histo_images(header, GRID, VIEWS, np.ones(ring_shape(header), bool), n_sub=1)


def test_petsird_indices_are_checked():
    from directpet.io.petsird import Coincidences, PetsirdReader, PetsirdScanner

    header = _header()
    scanner = PetsirdScanner(header.scanner)
    swapped = Coincidences(np.array([0]), np.array([5]), np.array([1]))
    with pytest.raises(ValueError, match=r"^n_tof_bins:"):
        swapped.ordered(1)                                  # was: TOF bin 4294967295 (a uint32 wrap)
    with pytest.raises(TypeError, match=r"^n_tof_bins:"):
        swapped.ordered("3")
    with pytest.raises(ValueError, match=r"^pair:"):
        scanner.pair_efficiency((5, 0), [0], [50])          # was: 1.0
    with pytest.raises(ValueError, match=r"^bins:"):
        scanner.positions(0, [-1])                          # was: the last element (a wrap)
    with pytest.raises(ValueError, match=r"^t0:"):
        scanner.tof_edges_mm(-1, 0)
    with pytest.raises(TypeError, match=r"^scanner_information: .*header\.scanner"):
        PetsirdScanner(header)
    with pytest.raises(TypeError, match=r"^events:"):
        scanner.check((0, 0), None)
    with pytest.raises(TypeError, match=r"^path:"):
        PetsirdReader(None)
