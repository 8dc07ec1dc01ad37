"""Conformance checks that every directpet operator must pass, whatever its family, method, backend or
array library (SigPy's reusable ``Linop`` checks, for the operator model of ``directpet.operators``).

:func:`check_operator` checks one operator on inputs of one array library; a failure is an
AssertionError whose message starts with the property that failed and names the operator:

``out``        forward / adjoint return an array of the input's library (NumPy, CuPy, PyTorch CUDA),
               float32, of ``output_shape`` / ``in_shape``; an ``out`` pre-filled with NaN is overwritten
               (never accumulated into) and returned; the input is left untouched.
``repeat``     two calls on the same input give the same bits (or, where an operator documents why
               not -- a scatter with atomic adds -- the same values to 1e-6).
``zero``       zero in gives exactly zero out.
``linearity``  ``A(a x + b z) = a A x + b A z`` on zero-mean x, z and coefficients of both signs, to
               ``tol`` (1e-5) relative to ``|a| |A x| + |b| |A z|`` (L2): float32 rounding of sums of
               at most ~10^4 terms is far below; a projector that clamps negative values or adds an
               offset is far above.
``adjointness`` ``|<y, A x> - <A^T y, x>|`` (inner products in float64) on uniform [0, 1) inputs,
               relative to ``|<y, A x>|``, and on zero-mean inputs, relative to the typical size of
               ``<y, A x>`` for a zero-mean y, ``|y| |A x| / sqrt(y.size)`` (the inner product itself can
               come out near 0 by chance, and then float32 rounding would dominate it): below
               ``adjoint_tol`` -- 1e-5 for an exact transpose pair (rounding lands near 1e-7), the
               documented bound for an operator whose adjoint is an approximation (FIRST's
               ``faithful``: a few per cent).
``subset``     (operators split into units) every unit's ``forward(x, u)`` is its block of the full
               result (the blocks, flattened, concatenate to it); a random subset with a repeat and in
               reversed order gives its units' blocks in its order, its adjoint the sum of the units'
               adjoints (to ``tol``), ``A.subset(s)`` the same as ``A.forward(x, s)``.
``errors``     a wrong dtype / shape of the input or of ``out``, a NaN input (when ``check_finite``)
               and a unit out of range are TypeError / ValueError naming the argument and the operator.

:func:`check_backends_agree` compares the CPU and CUDA backends of one operator on the same inputs.
"""

from __future__ import annotations

from typing import Optional

import numpy as np


# --- arrays of one library ------------------------------------------------------------------------

def library(xp) -> str:
    """'numpy', 'cupy' or 'torch': the array library a module stands for."""
    name = xp.__name__.split(".")[0]
    assert name in ("numpy", "cupy", "torch"), f"xp: expected numpy, cupy or torch, got {xp!r}"
    return name


def to_lib(a, xp):
    """The host array a (any dtype) as an array of library xp (CuPy / PyTorch arrays on the GPU)."""
    a = np.ascontiguousarray(a)
    lib = library(xp)
    if lib == "cupy":
        return xp.asarray(a)
    if lib == "torch":
        return xp.as_tensor(a, device="cuda")
    return a


def host(a) -> np.ndarray:
    """A NumPy copy of a NumPy, CuPy or PyTorch array."""
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    if hasattr(a, "get"):
        return a.get()
    return np.array(a)


def _is_of(a, xp) -> bool:
    lib = library(xp)
    if lib == "torch":
        return isinstance(a, xp.Tensor) and a.is_cuda and a.dtype == xp.float32
    return isinstance(a, xp.ndarray) and a.dtype == np.float32 and (lib == "cupy" or type(a) is np.ndarray)


def _rel(got, want) -> float:
    """|got - want| / |want| (L2, float64)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.linalg.norm(want)
    return float(np.linalg.norm(got - want) / scale) if scale > 0 else float(np.linalg.norm(got))


# --- the check ------------------------------------------------------------------------------------

def check_operator(op, rng, xp=np, *, adjoint_tol: float = 1e-5, tol: float = 1e-5, subset=None,
                   skip_zero_mean_adjoint: Optional[str] = None, nondeterministic: Optional[str] = None) -> dict:
    """Every property of the module docstring, on arrays of library ``xp`` (numpy, cupy or torch).

    ``subset``: the units of the subset check (default: up to 3 random units in reversed order plus a
    repeat of one). ``skip_zero_mean_adjoint``: the reason why an approximate adjoint's documented
    bound does not cover zero-mean inputs; the mismatch is then measured and reported, not asserted.
    ``nondeterministic``: the documented reason why repeated calls may differ in their last bits (a
    scatter with atomic adds); repeats are then compared to 1e-6 relative instead of bit for bit.
    Returns the measured values (for reports): the adjointness mismatches, the linearity error,
    whether the subset results were bit-identical to the full result's blocks.
    """
    c = _Check(op, rng, xp, nondeterministic)
    report = {"operator": c.name}
    c.outputs()
    c.repeat()
    if nondeterministic:
        report["repeats"] = f"to 1e-6, not bit for bit: {nondeterministic}"
    c.zero()
    report["linearity"] = c.linearity(tol)
    report.update(c.adjointness(adjoint_tol, skip_zero_mean_adjoint))
    if skip_zero_mean_adjoint:
        report["not asserted"] = f"adjointness on zero-mean inputs: {skip_zero_mean_adjoint}"
    if op.n_units is not None:
        report.update(c.subsets(tol, subset))
    c.errors()
    return report


class _Check:
    def __init__(self, op, rng, xp, nondeterministic=None):
        self.op, self.rng, self.xp, self.nondeterministic = op, rng, xp, nondeterministic
        self.name = op._name()
        self.lib = library(xp)

    # random inputs of both ends, on the host (float32)
    def uniform(self, shape):
        return self.rng.random(shape, dtype=np.float32)

    def zero_mean(self, shape):
        a = self.rng.standard_normal(shape)
        return (a - a.mean()).astype(np.float32)

    def same(self, a, b) -> bool:
        """Two results of the same computation: the same bits (to 1e-6 for a nondeterministic operator)."""
        return _rel(a, b) <= 1e-6 if self.nondeterministic else bool(np.array_equal(a, b))

    def fail(self, prop, what):
        raise AssertionError(f"{prop}: {self.name}: {what}")

    def call(self, method, a, subset=None, out=None):
        """forward / adjoint on a host array converted to the library; the library's result."""
        return getattr(self.op, method)(to_lib(a, self.xp), subset, out)

    def ends(self, method, subset=None):
        """(shape of the input, shape of the output) of ``method`` for ``subset``."""
        data = tuple(self.op.output_shape(subset))
        image = tuple(self.op.in_shape)
        return (image, data) if method == "forward" else (data, image)

    # --- properties ---
    def outputs(self):
        for method in ("forward", "adjoint"):
            shape_in, shape_out = self.ends(method)
            a = self.uniform(shape_in)
            src = to_lib(a, self.xp)
            fresh = getattr(self.op, method)(src)
            if not _is_of(fresh, self.xp):
                self.fail("out", f"{method} of a {self.lib} float32 input returned {type(fresh).__name__} "
                                 f"{getattr(fresh, 'dtype', '')} (array type: expected {self.lib} float32)")
            if tuple(fresh.shape) != shape_out:
                self.fail("out", f"{method} returned shape {tuple(fresh.shape)}, expected {shape_out}")
            out = to_lib(np.full(shape_out, np.nan, np.float32), self.xp)
            got = getattr(self.op, method)(src, None, out)
            if got is not out:
                self.fail("out", f"{method}(out=...) returned a {type(got).__name__}, not out itself")
            err = _rel(host(out), host(fresh))
            if not np.isfinite(err) or err > 1e-6:
                self.fail("out", f"{method}(out=NaN-filled) differs from a fresh call by {err:.3g} (relative L2): "
                                 "out must be overwritten, never accumulated into")
            if not np.array_equal(host(src), a):
                self.fail("out", f"{method} changed its input")

    def repeat(self):
        for method in ("forward", "adjoint"):
            a = self.uniform(self.ends(method)[0])
            first, second = host(self.call(method, a)), host(self.call(method, a))
            if not self.same(second, first):
                self.fail("repeat", f"two {method} calls on the same input differ (max |difference| "
                                    f"{np.abs(first - second).max():.3g}): expected the same bits")

    def zero(self):
        for method in ("forward", "adjoint"):
            got = host(self.call(method, np.zeros(self.ends(method)[0], np.float32)))
            if np.any(got != 0):
                self.fail("zero", f"{method} of zeros has {np.count_nonzero(got)} non-zero values "
                                  f"(max |value| {np.nanmax(np.abs(got)):.3g})")

    def linearity(self, tol) -> float:
        worst = 0.0
        a, b = self.rng.uniform(0.5, 2.0) * np.array([1.0, -1.0]) * self.rng.choice([-1.0, 1.0])
        for method in ("forward", "adjoint"):
            x, z = self.zero_mean(self.ends(method)[0]), self.zero_mean(self.ends(method)[0])
            ax, az = (host(self.call(method, v)).astype(np.float64) for v in (x, z))
            mix = (a * x.astype(np.float64) + b * z.astype(np.float64)).astype(np.float32)
            lhs = host(self.call(method, mix)).astype(np.float64)
            err = float(np.linalg.norm(lhs - (a * ax + b * az)) /
                        (abs(a) * np.linalg.norm(ax) + abs(b) * np.linalg.norm(az)))
            if not err <= tol:
                self.fail("linearity", f"{method}(a x + b z) differs from a {method}(x) + b {method}(z) by "
                                       f"{err:.3g} relative (allowed {tol:g}; a = {a:.3g}, b = {b:.3g}, zero-mean x, z)")
            worst = max(worst, err)
        return worst

    def adjointness(self, tol, skip_zero_mean=None) -> dict:
        found = {}
        image, data = self.ends("forward")
        for kind, draw in (("random", self.uniform), ("zero-mean", self.zero_mean)):
            x, y = draw(image), draw(data)
            ax = host(self.call("forward", x)).astype(np.float64)
            aty = host(self.call("adjoint", y)).astype(np.float64)
            lhs = float(np.vdot(y.astype(np.float64), ax))
            rhs = float(np.vdot(aty, x.astype(np.float64)))
            scale = abs(lhs) if kind == "random" else float(np.linalg.norm(y) * np.linalg.norm(ax) / np.sqrt(y.size))
            mismatch = abs(lhs - rhs) / scale
            if not mismatch <= tol and not (kind == "zero-mean" and skip_zero_mean):
                self.fail("adjointness", f"<y, A x> = {lhs:.8g} but <A^T y, x> = {rhs:.8g} on {kind} inputs: "
                                         f"mismatch {mismatch:.3g}, allowed {tol:g}")
            found[f"adjoint_{kind}"] = mismatch
        return found

    def subsets(self, tol, subset=None) -> dict:
        op = self.op
        n = op.n_units
        if subset is None:
            picked = sorted(self.rng.choice(n, size=min(3, n), replace=False).tolist(), reverse=True)
            subset = picked + [picked[len(picked) // 2]]          # reversed order, and a repeat
        subset = [int(u) for u in subset]
        x = self.uniform(op.in_shape)
        full = host(self.call("forward", x))
        blocks = []
        for u in range(n):
            b = host(self.call("forward", x, u))
            if b.shape != tuple(op.output_shape(u)):
                self.fail("subset", f"forward(x, {u}) has shape {b.shape}, output_shape({u}) says "
                                    f"{tuple(op.output_shape(u))}")
            blocks.append(b.ravel())
        joined = np.concatenate(blocks)
        if joined.size != full.size or _rel(joined, full.ravel()) > tol:
            self.fail("subset", f"the units' forward blocks (0..{n - 1}) do not make up forward(x) "
                                f"({joined.size} vs {full.size} values)")
        exact = bool(np.array_equal(joined, full.ravel()))

        got = host(self.call("forward", x, subset))
        want = np.concatenate([blocks[u] for u in subset])
        if got.shape != tuple(op.output_shape(subset)) or _rel(got.ravel(), want) > tol:
            self.fail("subset", f"forward(x, {subset}) (shape {got.shape}) is not its units' blocks in that order")
        exact = exact and bool(np.array_equal(got.ravel(), want))
        out = to_lib(np.full(op.output_shape(subset), np.nan, np.float32), self.xp)
        self.call("forward", x, subset, out)
        if not self.same(host(out), got):
            self.fail("subset", f"forward(x, {subset}, out=NaN-filled) differs from forward(x, {subset})")
        derived = host(op.subset(subset).forward(to_lib(x, self.xp)))
        if not self.same(derived, got):
            self.fail("subset", f"A.subset({subset}).forward(x) differs from A.forward(x, {subset})")

        # adjoints: a subset's back projection is the sum of its units' (a repeated unit counts twice)
        errors = {}
        for units in (subset, None):
            shape = op.output_shape(units)
            y = self.uniform(shape)
            back = host(self.call("adjoint", y, units)).astype(np.float64)
            listed = range(n) if units is None else units
            sizes = [int(np.prod(op.output_shape(u))) for u in listed]
            parts = np.split(y.ravel(), np.cumsum(sizes)[:-1])
            total = sum(host(self.call("adjoint", p.reshape(op.output_shape(u)), u)).astype(np.float64)
                        for u, p in zip(listed, parts))
            err = _rel(back, total)
            if not err <= tol:
                self.fail("subset", f"adjoint(y, {units}) differs from the sum of its units' adjoints by "
                                    f"{err:.3g} relative (allowed {tol:g})")
            errors["subset_adjoint" if units is not None else "units_adjoint"] = err
        y = self.uniform(op.output_shape(subset))
        if not self.same(host(op.subset(subset).adjoint(to_lib(y, self.xp))), host(self.call("adjoint", y, subset))):
            self.fail("subset", f"A.subset({subset}).adjoint(y) differs from A.adjoint(y, {subset})")
        return {"subset": subset, "subset_bit_identical": exact, **errors}

    def errors(self):
        op = self.op
        for method, arg in (("forward", op.in_name), ("adjoint", op.out_name)):
            shape_in, shape_out = self.ends(method)
            good = self.uniform(shape_in)
            cases = [(TypeError, arg, "a float64 input", good.astype(np.float64), None),
                     (ValueError, arg, "an input of the wrong shape", np.zeros(shape_in + (2,), np.float32), None),
                     (ValueError, "out", "an out of the wrong shape", good,
                      np.zeros(shape_out + (1,), np.float32)),
                     (TypeError, "out", "a float64 out", good, np.zeros(shape_out, np.float64))]
            if getattr(op, "check_finite", True):
                bad = good.copy()
                bad.flat[bad.size // 2] = np.nan
                cases.append((ValueError, arg, "a NaN input", bad, None))
            for exc, argument, what, a, out in cases:
                self.expect_error(exc, argument, f"{method} of {what}", lambda: getattr(op, method)(
                    to_lib(a, self.xp), None, None if out is None else to_lib(out, self.xp)))
        if op.n_units is not None:
            x = to_lib(self.uniform(op.in_shape), self.xp)
            self.expect_error(ValueError, "subset", "forward of a unit out of range",
                              lambda: op.forward(x, [0, op.n_units]))

    def expect_error(self, exc, argument, what, fn):
        try:
            fn()
        except exc as e:
            msg = str(e)
            if not (msg.startswith(f"{argument}:") and self.name in msg):
                self.fail("errors", f"{what}: the message {msg!r} should start with '{argument}:' and name {self.name}")
            return
        except Exception as e:      # noqa: BLE001 - the wrong kind of error is the finding
            self.fail("errors", f"{what}: raised {type(e).__name__}({e}), expected {exc.__name__} naming {argument}")
        self.fail("errors", f"{what}: no error, expected {exc.__name__} naming {argument}")


# --- CPU against GPU ------------------------------------------------------------------------------

def check_backends_agree(make_op, rng, *, tol: float = 1e-5, subset=None) -> dict:
    """``make_op(backend)`` for 'cpu' and 'cuda' give the same forward and adjoint (whole, and of a
    subset with a repeat for operators split into units) on the same NumPy inputs, to ``tol``
    relative (L2). Returns the measured differences."""
    cpu, gpu = make_op("cpu"), make_op("cuda")
    assert (cpu.backend, gpu.backend) == ("cpu", "cuda"), f"backends: got {cpu.backend!r} and {gpu.backend!r}"
    if subset is None and cpu.n_units is not None:
        subset = [cpu.n_units - 1, 0, cpu.n_units - 1]
    found = {}
    for units in ([None] if cpu.n_units is None else [None, subset]):
        x = rng.random(cpu.in_shape, dtype=np.float32)
        y = rng.random(cpu.output_shape(units), dtype=np.float32)
        for method, a in (("forward", x), ("adjoint", y)):
            err = _rel(getattr(gpu, method)(a, units), getattr(cpu, method)(a, units))
            key = method if units is None else f"{method}_subset"
            assert err <= tol, f"backends: {gpu._name()}.{method}(subset={units}) on the GPU differs from the CPU " \
                               f"by {err:.3g} relative (allowed {tol:g})"
            found[key] = err
    return found
