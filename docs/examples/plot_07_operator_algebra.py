"""
One operator model for every family
===================================

Every projector of every family is a :class:`directpet.operators.LinearOperator`. Each has
``forward(x, subset=None, out=None)`` and ``adjoint(y, subset=None, out=None)`` over the family's
units (DIRECT views, FIRST angles, dual-head orientation classes), and the algebra of the field's
operator libraries: ``A.H``, ``A @ B``, sums and scalings, ``A.subset(s)``,
:func:`~directpet.operators.vstack` and ``A.norm()``. This example runs the same calls on all three
families and uses the algebra to estimate the largest singular value of each projector by power
iteration, plotted against the iteration.
"""

import matplotlib.pyplot as plt
import numpy as np

import directpet as dp
from directpet.direct import HistoImageProjector, SRKernel, ViewSet
from directpet.dualhead import DualHeadProjector, DualHeadScanner, build_patch_model
from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table
from directpet.operators import vstack

projectors = {
    "DIRECT": HistoImageProjector(dp.ImageGrid((2, 32, 32), 8.0), ViewSet(6, 1), SRKernel.clinical(),
                                  backend="cpu"),
    "FIRST": SuperLORProjector(build_super_lor_table(RotatingScanner.small()), "matched", backend="cpu"),
    "dual-head": DualHeadProjector(build_patch_model(DualHeadScanner.small(), backend="cpu"), backend="cpu"),
}

# %%
# The same calls on every family: the output of a subset of two units, the subset as an operator,
# its normal operator ``A.H @ A`` (image to image), and two subsets stacked into one vector.
rng = np.random.default_rng(0)
for name, A in projectors.items():
    x = rng.random(A.in_shape, dtype=np.float32)
    y = A.forward(x, [0, 1])
    As = A.subset([0, 1])
    N = As.H @ As
    S = vstack([A.subset([0]), A.subset([1])])
    same = np.allclose(S.forward(x), y.ravel(), rtol=1e-6, atol=0)
    print(f"{name:>9}: {A.n_units} units, image {A.in_shape} -> data {A.out_shape}; "
          f"forward(x, [0, 1]) {y.shape}; (A.H @ A) maps {N.in_shape} -> {N.out_shape}; "
          f"vstack of the units equals the subset: {same}; adjointness {A.adjointness_test(rng=1):.1e}")

# %%
# Power iteration on ``A.H @ A`` (what ``A.norm()`` does), by hand to plot the estimate of the
# largest singular value against the iteration.
fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
for name, A in projectors.items():
    N = A.H @ A
    x = rng.random(A.in_shape, dtype=np.float32)
    estimates = []
    for _ in range(15):
        x = N.forward(x / np.float32(np.linalg.norm(x)))
        estimates.append(float(np.sqrt(np.linalg.norm(x))))
    print(f"{name:>9}: ||A|| = {A.norm(rng=2):.4g} (A.norm()), {estimates[-1]:.4g} (by hand)")
    ax.plot(np.arange(1, 16), np.array(estimates) / estimates[-1], "o-", ms=3, label=name)
ax.set_xlabel("power iteration")
ax.set_ylabel("estimate of ||A|| / final estimate")
ax.set_title("largest singular value by power iteration")
ax.legend()
plt.show()
