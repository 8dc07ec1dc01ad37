"""Degenerate inputs of the compiled entry points and of the FIRST and dual-head Python layers (issue 16).

Organised by module. Each class of bad input is refused in one place every caller passes through,
so one or two representatives per class are tested here:

* ``_checks``: ``out`` overlapping an input (``output_array``), thread counts (``check_threads``),
  sizes that cannot fit in memory (``require_memory``);
* ``operators`` (every projector family's runtime settings), the event Monte Carlos and the dual-head
  response: ``threads=100000`` (it used to kill the interpreter in OpenMP) is a ValueError naming
  ``threads``, raised before any compiled call;
* the projectors of the three families: an ``out`` that partly overlaps the input is refused (it used
  to give a silently wrong result), an adjacent ``out`` from the same buffer is not;
* ``first.geometry`` / ``first.model`` / ``first.normalisation`` / ``first.subsets`` / ``first.data`` /
  ``first.monte_carlo`` and ``dualhead.*``: impossible sizes, None / strings / fractions where
  numbers or objects are expected, NaN in stored models, and provenance that is not a dict;
* their index helpers (another element for an out-of-range index), scanner records (``from_dict`` of
  another family's or an incomplete dict), negative activities and factors, flags, scanner counts
  named themselves, coordinate helpers (None / NaN), save paths, and subset units (never truncated);
  ``reference.first``'s footprints.

A bad-input test asserts the exception type and that the message names the argument. Impossible sizes
are either truly impossible on any machine (tens of TiB) or made impossible by pretending the machine
has 64 KiB (``tiny_memory``), so the tests stay small and fast.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import directpet._checks as checks
from directpet import ImageGrid
from directpet._checks import check_threads, max_threads, output_array, shares_memory
from directpet.direct import FFTProjector, HistoImageProjector, View
from directpet.dualhead import (DualHeadData, DualHeadProjector, DualHeadScanner, DualHeadSubsets, PatchModel, SeedDRF,
                                build_patch_model, build_seed_drf, lor_response, model_consistent_data,
                                storage_report, trace_events)
from directpet.dualhead import simulate as dualhead_simulate
from directpet.dualhead.petsird import coincidences_to_counts, counts_to_coincidences
from directpet.dualhead.response import support_rows
from directpet.first import (AngleSubsets, RotatingScanner, SinogramData, SuperLORProjector, SuperLORTable,
                             analytic_tube, build_super_lor_table, geometric_normalisation, interleaved_angle_subsets,
                             lor_tube)
from directpet.first import model_consistent_data as first_model_consistent_data
from directpet.first import simulate as first_simulate
from directpet.first.model import efficiency, tube_at
from directpet.first.monte_carlo import trace_decays
from directpet.reference.first import cell_voxel_overlap, lattice_footprints

FIRST = RotatingScanner.small()
DUAL = DualHeadScanner.small()
GRID = ImageGrid((6, 8, 7), 4.0)
VIEWS = [View(0.0), View.from_degrees(40.0)]
TOO_MANY = 100000


@pytest.fixture(scope="module")
def first_projector():
    return SuperLORProjector(build_super_lor_table(FIRST), "matched", backend="cpu")


@pytest.fixture(scope="module")
def dual_model():
    return build_patch_model(DUAL, backend="cpu")


@pytest.fixture
def tiny_memory(monkeypatch):
    """Pretend this machine has 64 KiB, so that small problems are 'impossible' sizes."""
    monkeypatch.setattr(checks, "physical_memory_bytes", lambda: 1 << 16)


def _overlapping(rng, in_shape, out_shape, shift):
    """An input and an out living in one buffer, out starting ``shift`` elements after the input
    (shift < input size: they overlap; shift == input size: adjacent, no overlap)."""
    n_in, n_out = int(np.prod(in_shape)), int(np.prod(out_shape))
    buf = rng.uniform(0.1, 1.0, shift + max(n_in - shift, 0) + n_out).astype(np.float32)
    return buf[:n_in].reshape(in_shape), buf[shift:shift + n_out].reshape(out_shape)


# --- _checks: overlap, threads, memory ---------------------------------------------------------------

def test_shares_memory_is_exact_for_contiguous_ranges(rng):
    buf = rng.random(100).astype(np.float32)
    assert shares_memory(buf[:50], buf[49:])            # one shared element
    assert not shares_memory(buf[:50], buf[50:])        # adjacent: no shared byte
    assert not shares_memory(buf[:50], np.empty(50, np.float32))
    assert not shares_memory(buf[:0], buf)              # empty arrays share nothing
    # interleaved strided views share no element (np.shares_memory decides, not the byte ranges)
    assert not shares_memory(buf[0::2], buf[1::2]) and shares_memory(buf[0::2], buf[2::4])


def test_output_array_refuses_any_overlap_with_the_inputs(rng):
    buf = rng.random(300).astype(np.float32)
    x = buf[:100]
    with pytest.raises(ValueError, match="out: overlaps the input"):
        output_array(x, buf[3:103], (100,))
    with pytest.raises(ValueError, match="out: overlaps the input"):
        output_array(x, x, (100,))                          # the same array, as before
    with pytest.raises(ValueError, match="out: overlaps the input"):
        output_array(buf[200:], buf[150:250], (100,), inputs=(buf[120:200],))
    assert output_array(x, buf[100:200], (100,)) is not None  # adjacent is fine


def test_check_threads_bounds():
    assert check_threads(None) == 0 and check_threads(max_threads()) == max_threads()
    with pytest.raises(ValueError, match="threads"):
        check_threads(max_threads() + 1)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="threads"):
            check_threads(bad)
    for bad in (2.0, "4", True):                 # not integers: a TypeError, as NumPy gives
        with pytest.raises(TypeError, match="threads"):
            check_threads(bad)


def test_require_memory_accepts_large_but_feasible_sizes(tiny_memory):
    checks.require_memory("n", (1 << 16) - 1, "just under")
    with pytest.raises(ValueError, match="n: too much would need"):
        checks.require_memory("n", (1 << 16) + 1, "too much")


# --- threads=100000 on every kind of compiled entry point: refused before the compiled call ------------

@pytest.mark.parametrize("make", [
    lambda: HistoImageProjector(GRID, VIEWS, backend="cpu", threads=TOO_MANY),
    lambda: FFTProjector(GRID, VIEWS, backend="cpu", threads=TOO_MANY, planner="estimate"),
    lambda: SuperLORProjector(build_super_lor_table(FIRST), backend="cpu", threads=TOO_MANY),
    lambda: DualHeadProjector(PatchModel.from_taps(DUAL, [0], [0], [0], [0], [1.0]), backend="cpu",
                              threads=TOO_MANY),
], ids=["direct-spatial", "direct-fft", "first", "dualhead"])
def test_projectors_refuse_too_many_threads(make):
    with pytest.raises(ValueError, match="threads"):
        make()


def test_monte_carlos_and_response_refuse_too_many_threads():
    activity = np.ones(FIRST.grid.shape, np.float32)
    with pytest.raises(ValueError, match="threads"):
        first_simulate(FIRST, activity, 10, backend="cpu", threads=TOO_MANY)
    with pytest.raises(ValueError, match="threads"):
        dualhead_simulate(DUAL, np.ones(DUAL.grid.shape, np.float32), 10, seed=1, backend="cpu", threads=TOO_MANY)
    with pytest.raises(ValueError, match="threads"):
        lor_response(DUAL, (0, 0), (0, 0), (0, 0, 0), threads=TOO_MANY)
    with pytest.raises(ValueError, match="threads"):
        build_patch_model(DUAL, backend="cpu", classes=[0], threads=TOO_MANY)


# --- out partly overlapping the input, per family (CPU) --------------------------------------------------

def test_direct_out_overlapping_the_input(rng):
    op = HistoImageProjector(GRID, VIEWS, backend="cpu")
    x, out = _overlapping(rng, GRID.shape, (2,) + GRID.shape, 5)
    with pytest.raises(ValueError, match="out: overlaps"):
        op.forward(x, out=out)                               # multi-view forward
    x, out = _overlapping(rng, GRID.shape, (1,) + GRID.shape, 7)
    with pytest.raises(ValueError, match="out: overlaps"):
        op.forward(x, 1, out=out)                            # one view: a subset of one
    h, out = _overlapping(rng, (2,) + GRID.shape, GRID.shape, 11)
    with pytest.raises(ValueError, match="out: overlaps"):
        op.adjoint(h, out=out)
    x, out = _overlapping(rng, GRID.shape, (2,) + GRID.shape, x.size)   # adjacent: allowed, same result
    np.testing.assert_array_equal(op.forward(x, out=out), op.forward(x.copy()))


def test_first_out_overlapping_the_input(rng, first_projector):
    P = first_projector
    sino_shape = FIRST.sinogram_shape
    x, out = _overlapping(rng, FIRST.grid.shape, sino_shape, 3)
    with pytest.raises(ValueError, match="out: overlaps"):
        P.forward(x, out=out)
    y, out = _overlapping(rng, sino_shape, FIRST.grid.shape, 100)
    with pytest.raises(ValueError, match="out: overlaps"):
        P.adjoint(y, out=out)
    y, out = _overlapping(rng, P.output_shape([0, 5]), FIRST.grid.shape, 1)
    with pytest.raises(ValueError, match="out: overlaps"):
        P.adjoint(y, [0, 5], out=out)
    x, out = _overlapping(rng, FIRST.grid.shape, sino_shape, x.size)
    np.testing.assert_array_equal(P.forward(x, out=out), P.forward(x.copy()))


def test_dualhead_out_overlapping_the_input_or_skip_zero(rng, dual_model):
    P = DualHeadProjector(dual_model, backend="cpu")
    n = P.lor_count()
    x, out = _overlapping(rng, DUAL.grid.shape, (n,), 2)
    with pytest.raises(ValueError, match="out: overlaps"):
        P.forward(x, out=out)
    y, out = _overlapping(rng, (n,), DUAL.grid.shape, 9)
    with pytest.raises(ValueError, match="out: overlaps"):
        P.adjoint(y, out=out)
    skip, out = _overlapping(rng, (n,), (n,), 4)
    with pytest.raises(ValueError, match="out: overlaps"):
        P.forward(rng.uniform(0.1, 1, DUAL.grid.shape).astype(np.float32), out=out, skip_zero=skip)


def test_first_subset_of_impossible_size_names_subset(first_projector, tiny_memory):
    """Repeated angles can ask for more than the full sinogram: refused before allocating."""
    x = np.ones(FIRST.grid.shape, np.float32)
    with pytest.raises(ValueError, match="^subset: a sinogram of 10000 angles would need"):
        first_projector.forward(x, [0] * 10**4)


# --- first.geometry / first.model / first.normalisation / first.subsets: sizes and raw errors ----------

def test_first_impossible_sizes_name_the_argument():
    with pytest.raises(ValueError, match="n_angles"):
        RotatingScanner(n_angles=10**8)                     # a 57 TiB sinogram
    scanner = RotatingScanner()
    with pytest.raises(ValueError, match="J, K: .* would need"):
        with pytest.MonkeyPatch.context() as mp:           # 767 GiB: refused even on a huge host
            mp.setattr(checks, "physical_memory_bytes", lambda: 1 << 16)
            build_super_lor_table(scanner, J=10**6)
    with pytest.raises(ValueError, match="J, K"):
        analytic_tube(FIRST, 0, J=10**7, K=10**7)
    with pytest.raises(ValueError, match="n_quad"):
        geometric_normalisation(FIRST, 10**12)
    with pytest.raises(ValueError, match="n_angles"):
        interleaved_angle_subsets(10**14, 13)
    with pytest.raises(ValueError, match="n_decays"):
        trace_decays(FIRST, np.ones(FIRST.grid.shape, np.float32), 2**26 + 1)
    RotatingScanner()                                       # the default (82 MB sinogram) is fine


FIRST_BAD = [
    (lambda: analytic_tube(FIRST, None), TypeError, "delta"),
    (lambda: analytic_tube(FIRST, "3"), TypeError, "delta"),
    (lambda: analytic_tube(FIRST, FIRST.n_rows), ValueError, "delta"),
    (lambda: analytic_tube(FIRST, 0, J=2.0), TypeError, "J"),
    (lambda: lor_tube(FIRST, 1.5, 0, 0, 0), TypeError, "a"),
    (lambda: lor_tube(FIRST, 0, 0, 0, FIRST.n_radial), ValueError, "rho"),
    (lambda: efficiency(FIRST, None), TypeError, "tan_alpha"),
    (lambda: efficiency(FIRST, "0.1"), TypeError, "tan_alpha"),
    (lambda: tube_at(FIRST, float("nan"), 0.0, 0.0, 0.0), ValueError, "tan_alpha"),
    (lambda: tube_at(FIRST, 0.1, "x", 0.0, 0.0), TypeError, "along_mm"),
    (lambda: geometric_normalisation(FIRST, 16.0), TypeError, "n_quad"),
    (lambda: geometric_normalisation(FIRST, None), TypeError, "n_quad"),
    (lambda: geometric_normalisation(FIRST, 64, full="yes"), TypeError, "full"),
    (lambda: interleaved_angle_subsets(None, 2), TypeError, "n_angles"),
    (lambda: first_model_consistent_data(None, np.ones(FIRST.grid.shape, np.float32)), TypeError, "projector"),
]


@pytest.mark.parametrize("call, exc, name", FIRST_BAD, ids=[f"{n}-{i}" for i, (_, _, n) in enumerate(FIRST_BAD)])
def test_first_raw_errors_name_the_argument(call, exc, name):
    with pytest.raises(exc, match=rf"^{re.escape(name)}\b"):     # the message starts with the argument
        call()


def test_first_model_consistent_data_checks_counts_noise_and_seed(first_projector, volume):
    x = volume(FIRST.grid.shape)
    with pytest.raises(TypeError, match="counts"):
        first_model_consistent_data(first_projector, x, counts="1e5")
    with pytest.raises(TypeError, match="noise"):
        first_model_consistent_data(first_projector, x, noise="no")
    with pytest.raises(TypeError, match="seed"):
        first_model_consistent_data(first_projector, x, seed="1")


def test_super_lor_table_is_checked_and_frozen(rng):
    table = build_super_lor_table(FIRST)
    bad = np.array(table.values)
    bad[0, rng.integers(FIRST.n_radial), 0, 0] = np.nan
    with pytest.raises(ValueError, match="values"):
        SuperLORTable(FIRST, bad, table.super_of_delta, table.flip_k, table.tan_alpha, table.quasi_error)
    with pytest.raises(TypeError, match="values"):
        SuperLORTable(FIRST, None, table.super_of_delta, table.flip_k, table.tan_alpha, table.quasi_error)
    with pytest.raises(TypeError, match="flip_k"):
        SuperLORTable(FIRST, table.values, table.super_of_delta, table.flip_k.astype(float), table.tan_alpha,
                      table.quasi_error)
    with pytest.raises(TypeError, match="meta"):
        SuperLORTable(FIRST, table.values, table.super_of_delta, table.flip_k, table.tan_alpha, table.quasi_error,
                      "provenance")
    # what was checked cannot change behind the table's back (NaN written after construction)
    with pytest.raises(ValueError, match="read-only"):
        table.values[0, 0, 0, 0] = np.nan
    with pytest.raises(AttributeError):
        table.values = bad


def test_first_data_and_subsets_name_the_argument(first_projector, rng):
    prompts = rng.poisson(2.0, FIRST.sinogram_shape).astype(np.float32)
    with pytest.raises(TypeError, match="meta"):
        SinogramData(FIRST, prompts, meta=["source"])
    data = SinogramData(FIRST, prompts)
    with pytest.raises(TypeError, match="subsets"):
        AngleSubsets(first_projector, data, 2.5)


# --- dualhead: sizes, raw errors, model weights ----------------------------------------------------------

def test_dualhead_impossible_sizes_name_the_argument(dual_model, tiny_memory):
    with pytest.raises(ValueError, match="c_u, c_l, voxel"):
        lor_response(DUAL, np.zeros((10**5, 1, 2), np.int32), np.zeros((1, 10**5, 2), np.int32), (0, 0, 0))
    with pytest.raises(ValueError, match="scanner: the patch model"):
        build_patch_model(DUAL, backend="cpu")
    P = DualHeadProjector(dual_model, backend="cpu")
    with pytest.raises(ValueError, match="^subset: a float32 LOR vector"):
        P.forward(np.ones(DUAL.grid.shape, np.float32), [0] * 10**4)
    with pytest.raises(ValueError, match="classes"):
        DUAL.lor_crystals()
    with pytest.raises(ValueError, match="counts"):
        counts_to_coincidences(DUAL, np.full(DUAL.n_lors, 1e6, np.float32))
    with pytest.raises(ValueError, match="n_y, n_z"):
        DualHeadScanner(n_y=200, n_z=200)


def test_dualhead_truly_impossible_sizes(tiny_memory):
    """640 GB of pairs: refused on any machine (the 64 KiB pretence keeps it so on a huge host too)."""
    with pytest.raises(ValueError, match="c_u, c_l, voxel: .* would need"):    # 10^10 pairs: 640 GB
        lor_response(DUAL, np.zeros((10**5, 1, 2), np.int32), np.zeros((1, 10**5, 2), np.int32), (0, 0, 0))
    with pytest.raises(ValueError, match="n_decays"):
        trace_events(DUAL, np.ones(DUAL.grid.shape, np.float32), 2**24 + 1, seed=1)


DUAL_BAD = [
    (lambda: PatchModel.from_taps(DUAL, [0.5], [0], [0], [0], [1.0]), TypeError, "k"),
    (lambda: PatchModel.from_taps(DUAL, [0], [0], [0], [0], ["1"]), TypeError, "w"),
    (lambda: PatchModel.from_taps(DUAL, [0], [0], [0], [0], [np.nan]), ValueError, "w"),
    (lambda: PatchModel.from_taps(DUAL, [0], [0], [0], [0], [-1.0]), ValueError, "w"),
    (lambda: PatchModel(DUAL, None, [], [], []), TypeError, "tap_start"),
    (lambda: PatchModel.from_taps(DUAL, [0], [0], [0], [0], [1.0], meta="x"), TypeError, "meta"),
    (lambda: SeedDRF(None, [], [], np.zeros((0, 2)), np.zeros((0, 2)), [], ()), TypeError, "scanner"),
    (lambda: SeedDRF(DUAL, [0], [0], [[0, 0]], [[0, 0]], [np.nan], (0,)), ValueError, "w"),
    (lambda: build_seed_drf(DUAL, planes=[0.5]), TypeError, "planes"),
    (lambda: support_rows(DUAL, 0.5, 0, 0, ((0, 1), (0, 1)), ((0, 1), (0, 1))), TypeError, "a"),
    (lambda: support_rows(DUAL, 0, 0, DUAL.n_planes, ((0, 1), (0, 1)), ((0, 1), (0, 1))), ValueError, "p"),
    (lambda: support_rows(DUAL, 0, 0, 0, None, ((0, 1), (0, 1))), TypeError, "upper_range"),
    (lambda: coincidences_to_counts(None, None), TypeError, "scanner"),
    (lambda: coincidences_to_counts(DUAL, None), TypeError, "coincidences"),
    (lambda: counts_to_coincidences(DUAL, np.array(["1"] * DUAL.n_lors)), TypeError, "counts"),
]


@pytest.mark.parametrize("call, exc, name", DUAL_BAD, ids=[f"{n}-{i}" for i, (_, _, n) in enumerate(DUAL_BAD)])
def test_dualhead_raw_errors_name_the_argument(call, exc, name):
    with pytest.raises(exc, match=rf"^{re.escape(name)}\b"):     # the message starts with the argument
        call()


def test_patch_model_weights_are_checked_and_read_only(dual_model, rng):
    m = dual_model
    w = np.array(m.tap_w)
    w[rng.integers(w.size)] = np.nan
    with pytest.raises(ValueError, match="tap_w"):
        PatchModel(DUAL, m.tap_start, m.tap_dy, m.tap_dz, w)
    with pytest.raises(ValueError, match="read-only"):
        m.tap_w[0] = np.nan


@pytest.mark.parametrize("bad", [None, "yes", 1])
def test_projector_check_finite_must_be_a_bool(dual_model, bad):
    with pytest.raises(TypeError, match="check_finite"):
        DualHeadProjector(dual_model, backend="cpu", check_finite=bad)


# --- FIRST and dual-head index helpers, records, activities, flags, coordinates, paths ---------------

INDEX_BAD = [
    (lambda t, m: m.patch(0, DUAL.n_planes), ValueError, "p"),        # used to return class 1 plane 0's patch
    (lambda t, m: m.patch(0, -1), ValueError, "p"),                   # used to return empty arrays
    (lambda t, m: m.row("0", 0), TypeError, "k"),
    (lambda t, m: DUAL.lor_index(DUAL.n_y, 0, 0, 0), ValueError, "c_uy"),   # used to return n_lors
    (lambda t, m: DUAL.lor_index(0, 0, 0, 0.5), TypeError, "c_lz"),
    (lambda t, m: DUAL.class_of(DUAL.n_classes), ValueError, "k"),
    (lambda t, m: DUAL.class_signs(0.5), TypeError, "k"),
    (lambda t, m: t.tube(True), TypeError, "delta"),
    (lambda t, m: t.tube(0.5), TypeError, "delta"),
]


@pytest.mark.parametrize("call, exc, name", INDEX_BAD, ids=[f"{n}-{i}" for i, (_, _, n) in enumerate(INDEX_BAD)])
def test_index_helpers_refuse_other_elements(call, exc, name, first_projector, dual_model):
    with pytest.raises(exc, match=rf"^{re.escape(name)}:"):
        call(first_projector.table, dual_model)


def test_index_helpers_still_take_integers_and_arrays(first_projector, dual_model):
    assert dual_model.row(np.int64(3), 2) == 3 * DUAL.n_planes + 2
    assert DUAL.class_signs(np.int32(DUAL.n_z + 1)) == ((1, 1), (-1, 1), (1, -1), (-1, -1))
    ay, az = DUAL.class_of(np.arange(DUAL.n_classes))
    assert np.array_equal(ay * DUAL.n_z + az, np.arange(DUAL.n_classes))
    uy, uz, ly, lz = DUAL.lor_crystals()
    assert np.array_equal(DUAL.lor_index(uy, uz, ly, lz), np.arange(DUAL.n_lors))
    assert first_projector.table.tube(-(FIRST.n_rows - 1)).shape == (FIRST.n_radial, 5, 3)


@pytest.mark.parametrize("cls, own, other", [(RotatingScanner, FIRST, DUAL), (DualHeadScanner, DUAL, FIRST)])
def test_scanner_from_dict_takes_exactly_its_own_fields(cls, own, other):
    assert cls.from_dict(own.to_dict()) == own
    with pytest.raises(TypeError, match=r"^d: expected a mapping"):
        cls.from_dict(None)
    with pytest.raises(ValueError, match=r"^d: .*missing keys"):        # used to build the default scanner
        cls.from_dict({})
    with pytest.raises(ValueError, match=r"^d: .*unknown keys"):        # another family's scanner
        cls.from_dict(other.to_dict())
    with pytest.raises(ValueError, match=r"^d: .*unknown keys \['bogus'\]"):
        cls.from_dict(dict(own.to_dict(), bogus=1))


def test_activities_and_factors_must_be_nonnegative(first_projector, dual_model, volume):
    x = volume(FIRST.grid.shape)
    x[0, 0, 0] = -1.0
    with pytest.raises(ValueError, match=r"^image: contains negative"):
        first_model_consistent_data(first_projector, x, seed=1)
    xd = volume(DUAL.grid.shape)
    xd[0, 0, 0] = -1.0
    with pytest.raises(ValueError, match=r"^image: contains negative"):
        model_consistent_data(DualHeadProjector(dual_model, backend="cpu"), xd, seed=1)
    sino = np.ones(FIRST.sinogram_shape, np.float32)
    with pytest.raises(ValueError, match=r"^factors: contains negative"):
        first_projector.back_with_sensitivity(sino, -sino)


def test_storage_report_flag_is_a_bool(dual_model):
    with pytest.raises(TypeError, match=r"^count_seed_candidates:"):
        storage_report(dual_model, count_seed_candidates="no")


def test_scanner_counts_are_named_themselves():
    with pytest.raises(ValueError, match=r"^n_rows: expected at most 2\*\*31 - 1"):    # used to say "shape[0]"
        RotatingScanner.small(n_rows=2**31)
    with pytest.raises(ValueError, match=r"^n_angles, n_rows, n_radial: .* would need"):   # 1008 TiB
        RotatingScanner.small(n_rows=2**20)
    with pytest.raises(ValueError, match=r"^n_y, voxels_per_crystal: .* int16"):       # used to name only D
        DualHeadScanner.small(n_y=2**31)


COORD_BAD = [
    (lambda: FIRST.row_z_mm(None), TypeError, "r"),                  # used to return NaN
    (lambda: DUAL.crystal_y_mm(None), TypeError, "c"),
    (lambda: DUAL.plane_x_mm("0"), TypeError, "p"),
    (lambda: FIRST.depth_moments(np.array([0.1, np.nan])), ValueError, "tan_alpha"),
    (lambda: lattice_footprints(FIRST, 2.5, 0), TypeError, "J"),
    (lambda: lattice_footprints(FIRST, -1, 0), ValueError, "J"),
    (lambda: lattice_footprints(FIRST, 2, FIRST.n_angles), ValueError, "angle"),
    (lambda: cell_voxel_overlap(np.nan, 0.0, 0.3), ValueError, "dx"),    # used to return 0
]


@pytest.mark.parametrize("call, exc, name", COORD_BAD, ids=[f"{n}-{i}" for i, (_, _, n) in enumerate(COORD_BAD)])
def test_coordinate_helpers_name_the_argument(call, exc, name):
    with pytest.raises(exc, match=rf"^{re.escape(name)}:"):
        call()


def test_coordinate_helpers_still_extrapolate():
    assert FIRST.row_z_mm(0.5) == pytest.approx((0.5 - 0.5 * (FIRST.n_rows - 1)) * FIRST.pitch_mm)
    assert DUAL.crystal_y_mm(-1) == pytest.approx((-1 - 0.5 * (DUAL.n_y - 1)) * DUAL.pitch_mm)


def test_saves_check_the_path(first_projector, dual_model, tmp_path):
    for obj in (first_projector.table, dual_model):
        with pytest.raises(TypeError, match=r"^path:"):
            obj.save(None)
        with pytest.raises(ValueError, match=r"^path: .* is a directory"):
            obj.save(tmp_path)


def test_subset_units_are_never_truncated(first_projector, dual_model, rng):
    data = SinogramData(FIRST, rng.poisson(2.0, FIRST.sinogram_shape).astype(np.float32))
    with pytest.raises(TypeError, match=r"^units:"):                 # used to project angles [0, 1]
        AngleSubsets(first_projector, data, 2).forward_units(np.ones(FIRST.grid.shape, np.float32), [0.5, 1.7])
    P = DualHeadProjector(dual_model, backend="cpu")
    ddata = DualHeadData(DUAL, rng.poisson(2.0, DUAL.n_lors).astype(np.float32))
    with pytest.raises(TypeError, match=r"^units:"):
        DualHeadSubsets(P, ddata, 2).forward_units(np.ones(DUAL.grid.shape, np.float32), [0.5])
