"""Wall time of the dual-head CPU projectors on a synthetic patch model (no physics: per (class, plane)
a random number of taps in [--taps], scattered around the point where the line between the crystal
centres crosses the plane, like the analytic model's patches). Prints ms per full forward / back
projection (all classes), per forward with zero-count skips of a few densities, and tap-MACs per s.

    python scripts/time_dualhead_cpu.py                      # 32 x 24 crystals, D = 4, 59 planes
    python scripts/time_dualhead_cpu.py --n-y 104 --n-z 72 --planes 119 --taps 20 40   # full size
"""

import argparse
import time

import numpy as np

from directpet.dualhead import DualHeadProjector, DualHeadScanner, PatchModel


def local_model(s: DualHeadScanner, rng, lo: int, hi: int) -> PatchModel:
    n_rows = s.n_classes * s.n_planes
    counts = rng.integers(lo, hi + 1, n_rows)
    row = np.repeat(np.arange(n_rows), counts)
    k, p = row // s.n_planes, row % s.n_planes
    a_y, a_z = s.class_of(k)
    D = s.D
    f = (0.5 * s.gap_mm - s.plane_x_mm(p)) / s.gap_mm          # 0 at the upper head, 1 at the lower
    half = np.sqrt(counts[row]) / 2 + 1
    dy = np.clip(np.floor(D / 2 + f * a_y * D + rng.uniform(-half, half)), 0, D * (a_y + 1) - 1).astype(np.int64)
    dz = np.clip(np.floor(D / 2 + f * a_z * D + rng.uniform(-half, half)), 0, D * (a_z + 1) - 1).astype(np.int64)
    return PatchModel.from_taps(s, k, p, dy, dz, rng.uniform(0.1, 1.0, row.size), meta={"kind": "synthetic"})


def best_ms(f, reps):
    f()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return 1e3 * min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-y", type=int, default=32)
    ap.add_argument("--n-z", type=int, default=24)
    ap.add_argument("--D", type=int, default=4)
    ap.add_argument("--planes", type=int, default=59)
    ap.add_argument("--taps", type=int, nargs=2, default=(30, 80))
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    s = DualHeadScanner(n_y=a.n_y, n_z=a.n_z, voxels_per_crystal=a.D, n_planes=a.planes)
    rng = np.random.default_rng(0)
    model = local_model(s, rng, *a.taps)
    nnz = model.nonzeros()
    print(f"{a.n_y} x {a.n_z} crystals, D = {a.D}, {a.planes} planes: {model.n_taps} taps "
          f"({model.n_taps / (s.n_classes * s.n_planes):.1f} per (class, plane)), {nnz:.3g} nonzeros")
    P = DualHeadProjector(model, backend="cpu", threads=a.threads, check_finite=False)
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    y = P.forward(x)
    img = np.empty(s.grid.shape, np.float32)
    tf = best_ms(lambda: P.forward(x, out=y), a.reps)
    tb = best_ms(lambda: P.adjoint(y, out=img), a.reps)
    print(f"forward {tf:.1f} ms ({nnz / tf / 1e6:.2f} G tap-MAC/s), back {tb:.1f} ms ({nnz / tb / 1e6:.2f} G/s)")
    for density in (0.3, 0.05, 0.01):
        counts = (rng.random(s.n_lors) < density).astype(np.float32)
        ts = best_ms(lambda: P.forward(x, skip_zero=counts, out=y), a.reps)
        print(f"forward, {100 * density:g} % of LORs with counts: {ts:.1f} ms")


if __name__ == "__main__":
    main()
