"""FIRST event Monte Carlo benchmark: decays per second on the CPU and the GPU, and how many events
the two backends bin differently (they simulate the same decays: same Philox counters).

Default RotatingScanner (130 angles x 30 x 30 rows x 175 radial bins), two sources on its image
grid: a uniform cylinder (radius 40 % of the field of view, every slice) and a central point. For
each: the CPU with one thread and all threads, CUDA with the same seed and decays as the CPU (the
mismatch count: half the L1 distance of the sinograms, i.e. events moved to another bin), then CUDA
alone on more decays for its throughput. ``decays`` are the decays followed (those whose pair axis
lies in the direction band, the engine's work): each run asks ``simulate`` for ``decays /
band_fraction`` decays of the activity in all (``all_decays`` in the records).

    python benchmarks/first_monte_carlo.py [--out benchmarks/results/first_monte_carlo.json] [--quick]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import directpet as dp
from directpet.first import RotatingScanner, simulate
from directpet.first.monte_carlo import direction_band

from _common import cpu_name, gpu_name, print_table, stamp, write_records


def sources(scanner):
    g = scanner.grid
    z, y, x = np.meshgrid(*(g.centres(a) for a in range(3)), indexing="ij")
    cylinder = ((x**2 + y**2) < (0.4 * scanner.n_radial * scanner.radial_bin_mm) ** 2).astype(np.float32)
    point = np.zeros(g.shape, np.float32)
    point[g.nz // 2, g.ny // 2, g.nx // 2] = 1.0
    return {"cylinder": cylinder, "point": point}


def run(scanner, activity, n, backend, threads=None, seed=1):
    """About ``n`` followed (band) decays: ``n / band_fraction`` decays of the activity."""
    n_decays = round(n / direction_band(scanner, activity)["band_fraction"])
    t0 = time.perf_counter()
    sino, st = simulate(scanner, activity, n_decays, seed=seed, backend=backend, threads=threads, xp=np)
    return sino, st, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "first_monte_carlo.json"))
    ap.add_argument("--quick", action="store_true", help="fewer decays")
    args = ap.parse_args()

    scanner = RotatingScanner()
    n_threads = os.cpu_count() or 1
    n_cpu = 10_000_000 if args.quick else 100_000_000
    n_gpu = 20 * n_cpu
    cuda = dp.cuda_device_count() > 0
    rows = []
    for case, activity in sources(scanner).items():
        base = dict(case=case)
        ref = None
        for threads in sorted({1, n_threads}):
            n = n_cpu // 10 if threads == 1 else n_cpu
            sino, st, s = run(scanner, activity, n, "cpu", threads)
            rows.append(stamp(dict(base, backend="cpu", threads=threads, decays=st.n_in_band, all_decays=st.n_decays,
                                   seconds=s, decays_per_s=st.n_in_band / s, binned=st.n_binned), device=cpu_name()))
            if threads == n_threads:
                ref = (sino, st)
        if cuda:
            sino, st, s = run(scanner, activity, n_cpu, "cuda")
            moved = float(np.abs(sino.astype(np.float64) - ref[0]).sum() / 2)
            counters = {k: getattr(st, k) - getattr(ref[1], k)
                        for k in ("n_entered_both", "n_detected_both", "n_binned", "n_outside_radial")}
            rows.append(stamp(dict(base, backend="cuda", decays=st.n_in_band, all_decays=st.n_decays, seconds=s,
                                   decays_per_s=st.n_in_band / s, binned=st.n_binned, moved_vs_cpu=moved, moved_fraction=moved / ref[1].n_binned,
                                   counter_diff=counters), device=gpu_name()))
            run(scanner, activity, n_gpu // 20, "cuda")  # warm-up at size
            _, st, s = run(scanner, activity, n_gpu, "cuda", seed=2)
            rows.append(stamp(dict(base, backend="cuda", decays=st.n_in_band, all_decays=st.n_decays, seconds=s,
                                   decays_per_s=st.n_in_band / s, binned=st.n_binned), device=gpu_name()))
    print_table(rows, ["case", "backend", "threads", "decays", "seconds", "decays_per_s", "binned",
                       "moved_vs_cpu", "moved_fraction"])
    for r in rows:
        if "counter_diff" in r:
            print(f"{r['case']}: CUDA - CPU counters {r['counter_diff']}")
    write_records(rows, args.out)


if __name__ == "__main__":
    main()
