"""One full-size forward and back projection of each FIRST method on the GPU, for `ncu` (per-kernel
durations and limiters of the fast path's stages: resample / stencil / transposed stencil / gather).

    ncu --clock-control none --section SpeedOfLight python scripts/profile_first.py [fast faithful ...]

The method name faithful_sens runs only the faithful back projection with the sensitivity image in the
same pass (SuperLORProjector.back_with_sensitivity).
"""

import sys

import numpy as np

import directpet as dp
from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table

methods = sys.argv[1:] or ["fast"]
scanner = RotatingScanner()
table = build_super_lor_table(scanner)
rng = np.random.default_rng(0)
x = rng.uniform(0.1, 1.0, scanner.grid.shape).astype(np.float32)
y = rng.uniform(0.1, 1.0, scanner.sinogram_shape).astype(np.float32)
for m in methods:
    if m == "faithful_sens":
        SuperLORProjector(table, "faithful", backend="cuda", check_finite=False).back_with_sensitivity(y)
        continue
    op = SuperLORProjector(table, m, backend="cuda", check_finite=False)
    op.forward(x)
    op.adjoint(y)
dp._backend.cuda_module().cuda_synchronize()
