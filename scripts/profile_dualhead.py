"""Default forward and back projections of the full-size dual-head scanner on the GPU, for Nsight Compute
(issue 17: what bounds the default pair). The analytic model is built on the GPU (about half a minute) or
loaded from PATH when given and present; benchmarks/dualhead_projectors.py's 72 orientation subsets, the
first --subsets of them (default 1: subset 0), random positive counts (none skipped) and ratios. Per subset:
the forward projection without and with the zero-count skip (ncu's first forward launch is the one without,
as in the records before), then the back projection.

    ncu --set full --kernel-name regex:"fwd_default_kernel|back_default_kernel" --launch-count 2 \\
        python scripts/profile_dualhead.py [MODEL.npz]
    python scripts/launch_activity.py --kernel back_default_kernel -- \\
        python scripts/profile_dualhead.py MODEL.npz --subsets 72 --ops bp      # a full iteration's launches
"""

import argparse
import os

import cupy as cp
import numpy as np

from directpet.dualhead import DualHeadProjector, DualHeadScanner, PatchModel, build_patch_model, orientation_subsets

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("model", nargs="?", default=None, help="saved PatchModel (.npz); built and saved there when missing")
ap.add_argument("--subsets", type=int, default=1, help="how many of the 72 subsets, in order (default 1)")
ap.add_argument("--ops", default="fp,bp", help="fp, bp or both (comma-separated)")
args = ap.parse_args()
ops = set(args.ops.split(","))
if not ops <= {"fp", "bp"} or not 1 <= args.subsets <= 72:
    raise SystemExit("profile_dualhead.py: --ops takes fp and/or bp, --subsets 1 to 72")

scanner = DualHeadScanner()
path = args.model
model = PatchModel.load(path) if path and os.path.exists(path) else build_patch_model(scanner, backend="cuda")
if path and not os.path.exists(path):
    model.save(path)
rng = np.random.default_rng(0)
P = DualHeadProjector(model, "default", backend="cuda", check_finite=False)
x = cp.asarray(rng.uniform(0.5, 1.5, scanner.grid.shape).astype(np.float32))
for subset in orientation_subsets(scanner, 72)[:args.subsets]:
    subset = np.asarray(subset, np.int32)
    n = scanner.lor_count(subset)
    counts = cp.asarray(rng.integers(1, 20, n).astype(np.float32))
    ratios = cp.asarray(rng.uniform(0.5, 1.5, n).astype(np.float32))
    if "fp" in ops:
        P.forward(x, subset)
        P.forward(x, subset, skip_zero=counts)
    if "bp" in ops:
        P.adjoint(ratios, subset)
cp.cuda.Device().synchronize()
