"""One launch of each fast CUDA DIRECT kernel on the benchmark problems, for `ncu`.

    ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section Occupancy python scripts/profile_direct.py [--kernels stress,clinical] [--ops fp,bp] [method ...]

--kernels / --ops keep only the named kernels and projections (one launch for scripts/kernel_profile.sh,
whose ncu filter sees the kernel's name, not whether it is the forward or the back instantiation).
"""

import argparse

import numpy as np

import directpet as dp
from directpet.direct import HistoImageProjector, SRKernel, View

parser = argparse.ArgumentParser()
parser.add_argument("--kernels", default="stress,clinical")
parser.add_argument("--ops", default="fp,bp")
parser.add_argument("methods", nargs="*", default=["default", "columns"])
args = parser.parse_args()
ops = args.ops.split(",")
kernels = args.kernels.split(",")
if not set(ops) <= {"fp", "bp"} or not set(kernels) <= {"stress", "clinical"}:
    parser.error("--ops takes fp and / or bp, --kernels stress and / or clinical")
grid = dp.ImageGrid((48, 144, 144), 4.0)
view = View.from_degrees(31.5, 6.67)
x = np.random.default_rng(0).random(grid.shape, dtype=np.float32)
for name in kernels:
    kernel = {"stress": SRKernel.stress, "clinical": SRKernel.clinical}[name]()
    base = HistoImageProjector(grid, [view], kernel, backend="cpu")
    for m in args.methods:
        op = HistoImageProjector(grid, [view], kernel, backend="cuda", method=m, luts={0: base.lut(0)})
        if "fp" in ops:
            op.forward(x, 0)
        if "bp" in ops:
            op.adjoint(x[None], 0)
dp._backend.cuda_module().cuda_synchronize()
