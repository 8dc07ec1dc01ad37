"""A small case for `compute-sanitizer --tool memcheck --leak-check full`: every CUDA path once,
borders included; every device object is released before exit so that leaks would show."""

import gc

import numpy as np

import directpet as dp
from directpet.direct import FFTProjector, HistoImageProjector, LowRankProjector, SRKernel, View


def run():
    grid = dp.ImageGrid((7, 13, 11), 4.0)
    views = [View.from_degrees(31.5, 6.67), View.from_degrees(100.0, -6.67)]
    x = np.random.default_rng(1).random(grid.shape, dtype=np.float32)
    for kernel in (SRKernel.clinical(), SRKernel.stress(),
                   SRKernel(tof_fwhm_ps=600, radial_fwhm=("linear", 10, 40), asymmetric=True)):
        for method in ("default", "slab_table", "columns", "tlp", "ilp"):
            op = HistoImageProjector(grid, views, kernel, backend="cuda", method=method)
            for v in range(len(views)):
                op.forward(x, v)
                op.adjoint(x, v)
    inv = SRKernel.invariant()
    for mode in ("spatial-exact", "spectral"):
        op = FFTProjector(grid, views, inv, mode=mode, backend="cuda")
        op.forward(x, 0)
        op.adjoint(x, 1)
    op = LowRankProjector(grid, views, SRKernel.clinical(), tol=1e-4, backend="cuda")
    op.forward(x, 0)
    op.adjoint(x, 1)
    dp._core.cuda_synchronize()


run()
gc.collect()
dp._core.cuda_synchronize()
print("sanitizer case done")
