"""The operator algebra of directpet.operators on small dense operators written here: A.H, A @ B,
A + B, A - B, c * A, -A, vstack, A.subset(units) and A.norm() against the matrices they stand for,
the errors of the calling convention (each names the operator and the argument), and the
conformance check of tests/operator_checks.py itself (it must pass these operators and catch broken
ones).

The operators compute in float64 and round once to float32, so a float32 result is compared with
the float64 matrix product to 1e-6 relative."""

from __future__ import annotations

import re

import numpy as np
import pytest

from directpet.operators import LinearOperator, vstack
from operator_checks import check_operator


class Dense(LinearOperator):
    """The matrix M (n_out x n_in) as an operator ``in_shape -> out_shape`` (both reshaped)."""

    def __init__(self, M, in_shape, out_shape, name="Dense"):
        self.M = np.asarray(M, np.float64)
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        assert self.M.shape == (int(np.prod(out_shape)), int(np.prod(in_shape)))
        self.label = name

    def _forward(self, x, units, out):
        out[...] = (self.M @ x.ravel().astype(np.float64)).reshape(out.shape)
        return out

    def _adjoint(self, y, units, out):
        out[...] = (self.M.T @ y.ravel().astype(np.float64)).reshape(out.shape)
        return out

    def _name(self):
        return self.label


class Blocks(LinearOperator):
    """Split into units: unit u maps x (in_shape) to ``M[u] @ x`` (rows values); a subset's output is
    the stack ``(len(units), rows)`` in the listed order, the whole operator's ``(n_units, rows)``."""

    unit_name = "block"
    in_name, out_name = "image", "data"

    def __init__(self, M, in_shape):
        self.M = np.asarray(M, np.float64)                     # (n_units, rows, prod(in_shape))
        self.n_units, self.rows = self.M.shape[:2]
        self.in_shape, self.out_shape = tuple(in_shape), (self.n_units, self.rows)
        self.check_finite = True

    def _subset_shape(self, units):
        return (len(units), self.rows)

    def _rows(self, units):
        return self.M if units is None else self.M[units]

    def _forward(self, x, units, out):
        out[...] = np.einsum("urn,n->ur", self._rows(units), x.ravel().astype(np.float64))
        return out

    def _adjoint(self, y, units, out):
        out[...] = np.einsum("urn,ur->n", self._rows(units), y.astype(np.float64)).reshape(out.shape)
        return out

    def dense(self, units=None):
        """The matrix of the (sub)operator: rows in output order."""
        return self._rows(units).reshape(-1, self.M.shape[2])


def f32(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def close(got, want, rtol=1e-6):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.fixture
def ops(rng):
    """A: (2, 3) -> (4,), B: (5,) -> (2, 3), C like A, U: a 4-block operator on (2, 3)."""
    A = Dense(rng.standard_normal((4, 6)), (2, 3), (4,), "A")
    B = Dense(rng.standard_normal((6, 5)), (5,), (2, 3), "B")
    C = Dense(rng.standard_normal((4, 6)), (2, 3), (4,), "C")
    U = Blocks(rng.standard_normal((4, 3, 6)), (2, 3))
    return A, B, C, U


# --- the algebra against the matrices --------------------------------------------------------------

def test_adjoint_operator_is_the_transpose_and_its_adjoint_is_the_operator(ops, rng):
    A = ops[0]
    x, y = f32(rng, (2, 3)), f32(rng, (4,))
    assert A.H.in_shape == (4,) and A.H.out_shape == (2, 3)
    assert A.H.in_name == A.out_name and A.H.out_name == A.in_name
    close(A.H.forward(y), (A.M.T @ y).reshape(2, 3))
    close(A.H.adjoint(x), A.M @ x.ravel())
    assert A.H.H is A


def test_composition_sum_difference_and_scaling_are_the_matrix_expressions(ops, rng):
    A, B, C, _ = ops
    x5, x6, y = f32(rng, (5,)), f32(rng, (2, 3)), f32(rng, (4,))
    cases = {"A @ B": (A @ B, A.M @ B.M), "A + C": (A + C, A.M + C.M), "A - C": (A - C, A.M - C.M),
             "2.5 * A": (2.5 * A, 2.5 * A.M), "A * -3": (A * -3, -3 * A.M), "-A": (-A, -A.M),
             "np.float32(2) * A": (np.float32(2) * A, 2 * A.M), "A.H @ A": (A.H @ A, A.M.T @ A.M),
             "(A + C).H @ (A - C)": ((A + C).H @ (A - C), (A.M + C.M).T @ (A.M - C.M))}
    for name, (op, M) in cases.items():
        x = x5 if op.in_shape == (5,) else x6
        r = f32(rng, op.out_shape)
        close(op.forward(x), (M @ x.ravel().astype(np.float64)).reshape(op.out_shape))
        close(op.adjoint(r), (M.T @ r.ravel().astype(np.float64)).reshape(op.in_shape))
        assert isinstance(op, LinearOperator), name
    assert (A @ B).in_shape == (5,) and (A @ B).out_shape == (4,)
    close((A @ B).H.forward(y), B.M.T @ A.M.T @ y)


def test_vstack_concatenates_the_outputs_and_sums_the_adjoints(ops, rng):
    A, _, C, U = ops
    S = vstack([A, C, U])
    M = np.vstack([A.M, C.M, U.dense()])
    assert S.in_shape == (2, 3) and S.out_shape == (4 + 4 + 12,)
    x, y = f32(rng, (2, 3)), f32(rng, (20,))
    close(S.forward(x), M @ x.ravel())
    close(S.adjoint(y), (M.T @ y).reshape(2, 3))
    close(vstack((A,)).forward(x), A.M @ x.ravel())


def test_subset_gives_the_rows_of_the_listed_units_in_order(ops, rng):
    U = ops[3]
    x = f32(rng, (2, 3))
    full = U.forward(x)
    for subset in ([2, 0, 2], (3,), np.array([1, 3], np.int64), 1, np.int16(2), np.array(3)):
        units = np.atleast_1d(np.asarray(subset))
        S = U.subset(subset)
        assert S.out_shape == U.output_shape(subset) == (len(units), 3)
        got = U.forward(x, subset)
        assert got.shape == (len(units), 3)
        np.testing.assert_array_equal(got, full[units])            # the same float32 values as the full result
        np.testing.assert_array_equal(S.forward(x), got)
        y = f32(rng, S.out_shape)
        close(U.adjoint(y, subset), (U.dense(units).T @ y.ravel()).reshape(2, 3))
        np.testing.assert_array_equal(S.adjoint(y), U.adjoint(y, subset))
        np.testing.assert_array_equal(S.H.forward(y), S.adjoint(y))


def test_norm_is_the_largest_singular_value(rng):
    Q1, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    Q2, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    M = Q1[:, :5] @ np.diag([3.0, 1.5, 1.0, 0.5, 0.1]) @ Q2.T       # a clear gap: power iteration converges
    A = Dense(M, (5,), (2, 3))
    assert A.norm(rng=rng) == pytest.approx(np.linalg.norm(M, 2), rel=1e-5)
    R = Dense(rng.standard_normal((7, 4)), (4,), (7,))
    assert R.norm(n_iter=300, rng=rng) == pytest.approx(np.linalg.norm(R.M, 2), rel=1e-4)
    assert (2 * R).H.norm(n_iter=300, rng=rng) == pytest.approx(2 * np.linalg.norm(R.M, 2), rel=1e-4)
    assert Dense(np.zeros((2, 2)), (2,), (2,)).norm() == 0.0
    with pytest.raises(ValueError, match="n_iter"):
        A.norm(n_iter=0)


def test_adjointness_test_of_a_transpose_pair_is_rounding(ops):
    for op in ops:
        assert op.adjointness_test(np.random.default_rng(1)) < 1e-6


# --- out ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fill", [np.nan, 7.0])
def test_out_is_overwritten_not_accumulated_and_returned(ops, rng, fill):
    A, B, C, U = ops
    x = f32(rng, (2, 3))
    for op in (A, A + C, 2 * A, A.H @ A, vstack([A, U]), U.subset([1, 1])):
        want = op.forward(x)
        out = np.full(op.out_shape, fill, np.float32)
        assert op.forward(x, out=out) is out
        np.testing.assert_array_equal(out, want)
        y = f32(rng, op.out_shape)
        want = op.adjoint(y)
        back = np.full(op.in_shape, fill, np.float32)
        assert op.adjoint(y, out=back) is back
        np.testing.assert_array_equal(back, want)
    out = np.full((2, 3), fill, np.float32)
    assert U.forward(x, [3, 0], out=out[:2]) is not None
    np.testing.assert_array_equal(out[:2], U.forward(x)[[3, 0]])


# --- errors name the operator and the argument --------------------------------------------------

def raises(exc, *parts):
    """pytest.raises whose message must hold every part (literally)."""
    return pytest.raises(exc, match="(?s)" + ".*".join(re.escape(p) for p in parts))


def test_composition_of_mismatched_shapes_names_both_operators(ops):
    A, B, C, U = ops
    with raises(ValueError, "A @ B", "B = A gives (4,)", "A = C takes (2, 3)"):
        C @ A
    with raises(ValueError, "A + B", "A = A is (2, 3) -> (4,)", "B = B is (5,) -> (2, 3)"):
        A + B
    with raises(ValueError, "A + B", "(4, 3)"):
        A - U
    with raises(ValueError, "vstack", "A takes (2, 3)", "B takes (5,)"):
        vstack([A, B])
    with raises(TypeError, "vstack"):
        vstack([])
    with raises(TypeError, "vstack"):
        vstack([A, np.eye(2)])


def test_algebra_with_non_operators_is_a_type_error(ops):
    A = ops[0]
    for bad in (lambda: A @ np.ones(6), lambda: np.ones(4) @ A, lambda: np.ones(3) * A, lambda: A * A,
                lambda: A + 1.0, lambda: "2" * A):
        with pytest.raises(TypeError):
            bad()
    with raises(TypeError, "c * A", "bool"):
        True * A
    with raises(TypeError, "c * A", "complex"):
        A * 1j
    with raises(ValueError, "c * A", "finite"):
        float("nan") * A


def test_wrong_input_and_out_are_named_with_the_operator(ops, rng):
    A, B, C, U = ops
    x = f32(rng, (2, 3))
    with raises(ValueError, "x: expected shape (2, 3), got (3, 2)", "[A.forward]"):
        A.forward(x.reshape(3, 2))
    with raises(TypeError, "x: expected dtype float32, got float64", "[A.forward]"):
        A.forward(x.astype(np.float64))
    with raises(TypeError, "x: expected a numpy.ndarray", "list", "[A.forward]"):
        A.forward(x.tolist())
    with raises(ValueError, "x: array must be C-contiguous", "[A.forward]"):
        A.forward(np.ones((3, 2), np.float32).T)
    with raises(ValueError, "y: expected shape (4,), got (5,)", "[A.adjoint]"):
        A.adjoint(np.ones(5, np.float32))
    with raises(ValueError, "x: contains NaN", "[A.forward]"):
        A.forward(np.full((2, 3), np.nan, np.float32))
    with raises(ValueError, "out: expected shape (4,), got (3,)", "[A.forward]"):
        A.forward(x, out=np.empty(3, np.float32))
    with raises(TypeError, "out: expected dtype float32", "[A.adjoint]"):
        A.adjoint(np.ones(4, np.float32), out=np.empty((2, 3)))
    with raises(ValueError, "data: expected shape (2, 3), got (4, 3)", "[Blocks.adjoint]"):
        U.adjoint(np.ones((4, 3), np.float32), [0, 1])
    with raises(ValueError, "image: expected shape", "[Blocks.subset.forward]"):
        U.subset([0]).forward(np.ones(6, np.float32))
    with raises(ValueError, "y: expected shape (4,)", "[A.H.forward]"):
        A.H.forward(x)
    with raises(ValueError, "x: expected shape (5,)", "[(A @ B).forward]"):
        (A @ B).forward(x)
    with raises(ValueError, "out: expected shape (4,), got (2, 3)", "[(A + C).forward]"):
        (A + C).forward(x, out=np.empty((2, 3), np.float32))


def test_out_overlapping_the_input_is_refused(ops, rng):
    A = ops[0]
    AtA = A.H @ A                                           # (2, 3) -> (2, 3): out could be x
    x = f32(rng, (2, 3))
    with raises(ValueError, "out: overlaps the input", "[(A.H @ A).forward]"):
        AtA.forward(x, out=x)
    with raises(ValueError, "out: overlaps the input", "[(A.H @ A).adjoint]"):
        AtA.adjoint(x, out=x)
    buf = np.zeros(7, np.float32)                           # a view shifted by one element
    with raises(ValueError, "out: overlaps the input"):
        Dense(np.eye(6), (6,), (6,)).forward(buf[:6], out=buf[1:])


def test_subset_errors_name_the_units(ops, rng):
    A, _, _, U = ops
    x = f32(rng, (2, 3))
    with raises(TypeError, "subset: A is not split into units"):
        A.subset([0])
    with raises(TypeError, "subset: A is not split into units"):
        A.forward(x, 0)
    with raises(TypeError, "subset: Blocks.subset is not split into units"):
        U.subset([0]).forward(x, [0])
    for bad in ([4], [-1], [0, 5], 4, -1, np.int64(9)):
        with raises(ValueError, "subset: block indices must lie in [0, 4)"):
            U.forward(x, bad)
    for bad in ([0.5], [1.0, 2.0], 1.5, np.array([0.0]), "1", [True], True, np.bool_(False), [None]):
        with raises(TypeError, "subset: expected an integer"):
            U.forward(x, bad)
    for bad in ([], np.zeros(0, np.int64), [[0, 1]]):
        with raises(ValueError, "subset: expected a non-empty sequence of block indices"):
            U.subset(bad)
    with raises(ValueError, "subset"):
        U.adjoint(np.ones((1, 3), np.float32), [7])


def test_extra_forward_keywords_pass_to_subsets_only(ops, rng):
    class Keyword(Blocks):
        def _forward(self, x, units, out, scale=1.0):
            super()._forward(x, units, out)
            out *= scale
            return out

    K = Keyword(ops[3].M, (2, 3))
    x = f32(rng, (2, 3))
    np.testing.assert_array_equal(K.forward(x, [1], scale=2.0), 2 * K.forward(x, [1]))
    np.testing.assert_array_equal(K.subset([1]).forward(x, scale=2.0), 2 * K.forward(x, [1]))
    with pytest.raises(TypeError, match="scale"):
        (2 * K).forward(x, scale=2.0)                       # c * A has no such keyword: not dropped silently


def test_check_finite_of_a_projector_follows_to_its_derived_operators(ops):
    U = ops[3]
    nan = np.full((2, 3), np.nan, np.float32)
    S, H = U.subset([0]), U.H
    with raises(ValueError, "contains NaN"):
        S.forward(nan)
    U.check_finite = False
    assert np.isnan(S.forward(nan)).all() and np.isnan(H.adjoint(nan)).all()


# --- the conformance check on these operators, and on broken ones -----------------------------------

def test_the_conformance_check_passes_the_dense_operators_and_their_algebra(ops, rng):
    A, B, C, U = ops
    for op in (A, B, U, A.H, A @ B, A + C, A - C, -A, 3 * U, vstack([A, U]), U.subset([3, 1, 1]), U.H @ U):
        check_operator(op, rng)


class _Broken(Blocks):
    """Blocks with one fault (by name): the conformance check must report that property."""

    def __init__(self, M, fault):
        super().__init__(M, (2, 3))
        self.fault, self.calls = fault, 0

    def _forward(self, x, units, out):
        self.calls += 1
        if self.fault == "accumulates into out":
            tmp = np.empty_like(out)
            out += super()._forward(x, units, tmp)
            return out
        super()._forward(np.maximum(x, 0) if self.fault == "clamps negatives" else x, units, out)
        if self.fault == "subset off by one" and units is not None:
            out[...] = np.roll(out, 1, axis=0)
        if self.fault == "not deterministic" and self.calls % 2:       # one ulp, every other call
            out.flat[0] = np.nextafter(out.flat[0], np.float32(np.inf))
        if self.fault == "adds an offset":
            out += 1e-3
        return out

    def _adjoint(self, y, units, out):
        super()._adjoint(y, units, out)
        if self.fault == "wrong adjoint":
            out *= 1.01
        return out.copy() if self.fault == "returns a copy" else out


@pytest.mark.parametrize("fault, check", [
    ("wrong adjoint", "adjointness"), ("clamps negatives", "linearity"), ("accumulates into out", "out"),
    ("subset off by one", "subset"), ("not deterministic", "repeat"), ("adds an offset", "zero"),
    ("returns a copy", "out")])
def test_the_conformance_check_catches_a_broken_operator(ops, rng, fault, check):
    with pytest.raises(AssertionError, match=check):
        check_operator(_Broken(ops[3].M, fault), rng)
