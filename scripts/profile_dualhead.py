"""One subset's default forward and back projection of the full-size dual-head scanner on the GPU, for
Nsight Compute (issue 17: what bounds the default pair). The analytic model is built on the GPU (about
half a minute) or loaded from PATH when given and present; subset 0 of benchmarks/dualhead_projectors.py's
72 orientation subsets, random positive counts (none skipped) and ratios.

    ncu --set full --kernel-name regex:"fwd_default_kernel|back_default_kernel" --launch-count 2 \\
        python scripts/profile_dualhead.py [MODEL.npz]
"""

import os
import sys

import cupy as cp
import numpy as np

from directpet.dualhead import DualHeadProjector, DualHeadScanner, PatchModel, build_patch_model, orientation_subsets

scanner = DualHeadScanner()
path = sys.argv[1] if len(sys.argv) > 1 else None
model = PatchModel.load(path) if path and os.path.exists(path) else build_patch_model(scanner, backend="cuda")
if path and not os.path.exists(path):
    model.save(path)
subset = np.asarray(orientation_subsets(scanner, 72)[0], np.int32)
rng = np.random.default_rng(0)
P = DualHeadProjector(model, "default", backend="cuda", check_finite=False)
x = cp.asarray(rng.uniform(0.5, 1.5, scanner.grid.shape).astype(np.float32))
n = P.forward(x, subset).size
counts = cp.asarray(rng.integers(1, 20, n).astype(np.float32))
ratios = cp.asarray(rng.uniform(0.5, 1.5, n).astype(np.float32))
P.forward(x, subset, skip_zero=counts)
P.adjoint(ratios, subset)
cp.cuda.Device().synchronize()
