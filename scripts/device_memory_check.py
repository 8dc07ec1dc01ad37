"""Device memory returns to its starting level once projectors are released (CuPy reads it)."""

import gc

import cupy
import numpy as np

import directpet as dp
from directpet.direct import FFTProjector, HistoImageProjector, LowRankProjector, SRKernel, View
from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table


def used():
    dp._backend.cuda_module().cuda_synchronize()
    free, total = cupy.cuda.runtime.memGetInfo()
    return total - free


def run():
    g = dp.ImageGrid((48, 144, 144), 4.0)
    x = np.ones(g.shape, np.float32)
    ops = [HistoImageProjector(g, [View(0.5, 0.1)], SRKernel.stress(), backend="cuda"),
           FFTProjector(g, [View(0.5, 0.1)], SRKernel.invariant(), backend="cuda"),
           LowRankProjector(g, [View(0.5, 0.1)], SRKernel.clinical(), backend="cuda")]
    for op in ops:
        op.forward(x, 0)
        op.adjoint(x, 0)
    s = RotatingScanner()
    table = build_super_lor_table(s)
    xf = np.ones(s.grid.shape, np.float32)
    yf = np.ones(s.sinogram_shape, np.float32)
    for method in ("fast", "matched", "faithful"):
        op = SuperLORProjector(table, method, backend="cuda")
        op.forward(xf, [0, 1, 2])
        op.back_with_sensitivity(yf[:40], yf[:40], list(range(40)))
        ops.append(op)
    return used()


base = used()
peak = run()
gc.collect()
after = used()
print(f"device memory in use: start {base / 2**20:.1f} MiB, with projectors {peak / 2**20:.1f} MiB, "
      f"after release {after / 2**20:.1f} MiB")
