"""One launch of each fast CUDA DIRECT kernel on the benchmark problems, for `ncu`.

    ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section Occupancy python scripts/profile_direct.py
"""

import sys

import numpy as np

import directpet as dp
from directpet.direct import HistoImageProjector, SRKernel, View

methods = sys.argv[1:] or ["default", "columns"]
grid = dp.ImageGrid((48, 144, 144), 4.0)
view = View.from_degrees(31.5, 6.67)
x = np.random.default_rng(0).random(grid.shape, dtype=np.float32)
for name, kernel in (("stress", SRKernel.stress()), ("clinical", SRKernel.clinical())):
    base = HistoImageProjector(grid, [view], kernel, backend="cpu")
    for m in methods:
        op = HistoImageProjector(grid, [view], kernel, backend="cuda", method=m, luts={0: base.lut(0)})
        op.forward(x, 0)
        op.adjoint(x[None], 0)
dp._backend.cuda_module().cuda_synchronize()
