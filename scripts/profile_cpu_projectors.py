"""A few CPU projections of one case, for a sampling profiler (`perf record`): the FIRST `fast` forward or
back projection of one 10-angle subset at full size (first_fp, first_bp; the footprint tables are built
first, in the same process), or the dual-head `default` projection of every class of the 32 x 24-crystal
scanner (dh_fp, dh_bp; its model loaded from MODEL, e.g. the one benchmarks/first_dualhead_cpu.py saves).
One thread, random non-zero inputs.

    perf record -o OUT python scripts/profile_cpu_projectors.py {first_fp|first_bp|dh_fp|dh_bp} [MODEL]
    perf report -i OUT --stdio --sort symbol

A build whose module keeps its symbols (cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo: pybind11 strips Release
modules) names the functions.
"""

import sys

import numpy as np

from directpet.dualhead import DualHeadProjector, PatchModel
from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table

case = sys.argv[1]
rng = np.random.default_rng(1)
if case in ("first_fp", "first_bp"):
    s = RotatingScanner()
    P = SuperLORProjector(build_super_lor_table(s), "fast", backend="cpu", threads=1, check_finite=False)
    angles = np.arange(0, s.n_angles, 13, dtype=np.int32)
    x = rng.uniform(0.1, 1, s.grid.shape).astype(np.float32)
    y = rng.uniform(0.1, 1, (len(angles),) + s.sinogram_shape[1:]).astype(np.float32)
    for _ in range(4):
        P.forward(x, angles) if case == "first_fp" else P.adjoint(y, angles)
elif case in ("dh_fp", "dh_bp") and len(sys.argv) > 2:
    m = PatchModel.load(sys.argv[2])
    P = DualHeadProjector(m, "default", backend="cpu", threads=1, check_finite=False)
    x = rng.uniform(0.1, 1, m.scanner.grid.shape).astype(np.float32)
    y = rng.uniform(0.1, 1, m.scanner.n_lors).astype(np.float32)
    for _ in range(8):
        P.forward(x) if case == "dh_fp" else P.adjoint(y)
else:
    raise SystemExit(__doc__)
