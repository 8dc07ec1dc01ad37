"""A small case for `compute-sanitizer --tool memcheck`: every CUDA path once, borders included."""

import numpy as np

import directpet as dp
from directpet import direct
from directpet.direct import HistoImageProjector, SRKernel, View

grid = dp.ImageGrid((7, 13, 11), 4.0)
views = [View.from_degrees(31.5, 6.67), View.from_degrees(100.0, -6.67)]
x = np.random.default_rng(1).random(grid.shape, dtype=np.float32)
for kernel in (SRKernel.clinical(), SRKernel.stress(),
               SRKernel(tof_fwhm_ps=600, radial_fwhm=("linear", 10, 40), asymmetric=True)):
    for method in ("default", "tlp", "ilp"):
        op = HistoImageProjector(grid, views, kernel, backend="cuda", method=method)
        for v in range(len(views)):
            op.forward(x, v)
            op.adjoint(x, v)
inv = SRKernel.invariant()
if hasattr(direct, "FFTProjector"):
    for mode in ("spatial-exact", "spectral"):
        op = direct.FFTProjector(grid, views, inv, mode=mode, backend="cuda")
        op.forward(x, 0)
        op.adjoint(x, 1)
if hasattr(direct, "LowRankProjector"):
    op = direct.LowRankProjector(grid, views, SRKernel.clinical(), tol=1e-4, backend="cuda")
    op.forward(x, 0)
    op.adjoint(x, 1)
dp._core.cuda_synchronize()
print("sanitizer case done")
