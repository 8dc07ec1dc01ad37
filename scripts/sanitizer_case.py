"""A small case for `compute-sanitizer --tool memcheck --leak-check full`: every CUDA path once,
borders included; every device object is released before exit so that leaks would show.

    python scripts/sanitizer_case.py [direct] [first] [dualhead]     (all three by default)
"""

import gc
import sys

import numpy as np

import directpet as dp
from directpet.direct import FFTProjector, HistoImageProjector, LowRankProjector, SRKernel, View
from directpet import dualhead, first
from directpet.dualhead import DualHeadProjector, DualHeadScanner, build_patch_model
from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table
from directpet.reference.dualhead import random_model


def run():
    grid = dp.ImageGrid((7, 13, 11), 4.0)
    views = [View.from_degrees(31.5, 6.67), View.from_degrees(100.0, -6.67)]
    x = np.random.default_rng(1).random(grid.shape, dtype=np.float32)
    y = x[None]                                   # a one-view stack (1, nz, ny, nx)
    for kernel in (SRKernel.clinical(), SRKernel.stress(),
                   SRKernel(tof_fwhm_ps=600, radial_fwhm=("linear", 10, 40), asymmetric=True)):
        for method in ("default", "slab_table", "slab_r16", "columns", "tlp", "ilp"):
            op = HistoImageProjector(grid, views, kernel, backend="cuda", method=method)
            for v in range(len(views)):
                op.forward(x, v)
                op.adjoint(y, v)
    inv = SRKernel.invariant()
    for mode in ("spatial-exact", "spectral"):
        op = FFTProjector(grid, views, inv, mode=mode, backend="cuda")
        op.forward(x, 0)
        op.adjoint(y, 1)
    op = LowRankProjector(grid, views, SRKernel.clinical(), tol=1e-4, backend="cuda")
    op.adjoint(op.forward(x))                     # all views: the stack and the summed adjoint
    dp._backend.cuda_module().cuda_synchronize()


def run_first():
    """FIRST: every method forward / back (faithful with the sensitivity, both table paths; the fast forward
    with both stagings of its planes where the TMA one can run: the 71-bin scanner), more angles than one
    launch (130: three uneven launches), and the Monte Carlo."""
    rng = np.random.default_rng(2)
    for scanner, tol in ((RotatingScanner(n_rows=5, n_angles=130, n_radial=23, n_columns=16), 0.05),
                         (RotatingScanner(n_rows=30, n_angles=3, n_radial=71, n_columns=40), 0.0)):
        table = build_super_lor_table(scanner, quasi_tolerance=tol)
        x = rng.random(scanner.grid.shape, dtype=np.float32)
        y = rng.random(scanner.sinogram_shape, dtype=np.float32)
        for method in ("fast", "matched", "faithful"):
            op = SuperLORProjector(table, method, backend="cuda")
            op.forward(x)
            model = op._engine.model
            if method == "fast" and not model.fast_forward_tma_unsupported_reason:
                model.fast_forward_tma = True        # the TMA staging of the forward's planes too (opt-in)
                op.forward(x)
            op.adjoint(y)
            op.back_with_sensitivity(y, y)
        band = first.monte_carlo.direction_band(scanner, x)["band_fraction"]
        first.simulate(scanner, x, round(100_000 / band), seed=1, backend="cuda")     # 1e5 followed decays
    dp._backend.cuda_module().cuda_synchronize()


def run_dualhead():
    """Dual-head: every method forward / back on a random model (classes of every width, with the
    zero-count skip), the default under a tiny window limit (global-memory kernels), the GPU model
    build and the Monte Carlo."""
    rng = np.random.default_rng(3)
    scanner = DualHeadScanner.small(n_y=12, n_z=10, voxels_per_crystal=3, n_planes=5)
    model = random_model(scanner, rng, taps=(0, 40))
    x = rng.random(scanner.grid.shape, dtype=np.float32)
    classes = np.array([0, 1, scanner.n_classes - 1, 37, 0], np.int32)
    y = rng.random(scanner.lor_count(classes), dtype=np.float32)
    counts = rng.poisson(0.7, y.size).astype(np.float32)
    for method in ("default", "alg1", "alg2", "alg3"):
        op = DualHeadProjector(model, method, backend="cuda")
        op.forward(x, classes, skip_zero=counts)
        op.adjoint(y, classes)
    from directpet.dualhead.cuda_engine import CudaEngine
    op = DualHeadProjector(model, "default", backend="cuda")
    op._engine = CudaEngine(op, window_limit=1)
    op.forward(x, classes)
    op.adjoint(y, classes)
    op._engine = CudaEngine(op, window_limit=12000)
    op._engine.model.narrow_blocks = True
    op.forward(x, classes)
    build_patch_model(scanner, backend="cuda", classes=np.arange(6))
    dualhead.simulate(scanner, x, 200_000, seed=1, backend="cuda")
    dp._backend.cuda_module().cuda_synchronize()


# the families named on the command line (direct, first, dualhead), all of them by default
PARTS = {"direct": run, "first": run_first, "dualhead": run_dualhead}
for name in sys.argv[1:] or list(PARTS):
    if name not in PARTS:
        raise SystemExit(f"sanitizer_case.py: unknown family {name!r}; expected some of {', '.join(PARTS)}")
    PARTS[name]()
gc.collect()
dp._backend.cuda_module().cuda_synchronize()
print("sanitizer case done")
