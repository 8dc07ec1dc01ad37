"""Dual-head event Monte Carlo benchmark: decays per second on the CPU and the GPU, whether the two
backends give identical histograms (they must: same Philox counters, bit-reproducible arithmetic), and
the time to the paper's 1.72e8 detected trues.

Full-size DualHeadScanner (104 x 72 crystals per head, 56.07 M LORs), two sources on its image grid:
the experiment's micro Derenzo phantom (rods along x, radius 16 mm, 20 mm long) and a central point.
For each: the CPU with one thread and all threads; CUDA with the same seed and decays as the CPU (LORs
that differ: expected 0); then CUDA alone on more decays for its throughput, and ``n_trues=1.72e8``
(Derenzo; ``--quick``: 1.72e7). ``seconds`` is the whole call (the alias table of the 14.3 M voxels
included), ``decays_per_s`` the simulation alone (stats.decays_per_second).

    python benchmarks/dualhead_monte_carlo.py [--out benchmarks/results/dualhead_monte_carlo.json] [--quick]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import directpet as dp
from directpet.dualhead import DualHeadScanner, simulate
from directpet.sim import derenzo_phantom

from _common import cpu_name, gpu_name, print_table, stamp, write_records

PAPER_TRUES = 172_000_000


def sources(scanner):
    g = scanner.grid
    derenzo, _ = derenzo_phantom(g, radius_mm=16.0, length_mm=20.0, axis="x")
    point = np.zeros(g.shape, np.float32)
    point[g.shape[0] // 2, g.shape[1] // 2, g.shape[2] // 2] = 1.0
    return {"derenzo": np.ascontiguousarray(derenzo, np.float32), "point": point}


def run(scanner, activity, backend, n=None, n_trues=None, threads=None, seed=1):
    t0 = time.perf_counter()
    counts, st = simulate(scanner, activity, n, n_trues=n_trues, seed=seed, backend=backend, threads=threads, xp=np)
    return counts, st, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "dualhead_monte_carlo.json"))
    ap.add_argument("--quick", action="store_true", help="fewer decays")
    args = ap.parse_args()

    scanner = DualHeadScanner()
    n_threads = os.cpu_count() or 1
    n_cpu = 2_000_000 if args.quick else 20_000_000
    n_gpu = 500 * n_cpu
    trues = PAPER_TRUES // 10 if args.quick else PAPER_TRUES
    cuda = dp.cuda_device_count() > 0
    rows = []
    for case, activity in sources(scanner).items():
        base = dict(case=case)
        ref = None
        for threads in sorted({1, n_threads}):
            n = n_cpu // 4 if threads == 1 else n_cpu
            counts, st, s = run(scanner, activity, "cpu", n, threads=threads)
            rows.append(stamp(dict(base, backend="cpu", threads=threads, decays=n, seconds=s,
                                   decays_per_s=st.decays_per_second, trues=st.n_trues, sensitivity=st.sensitivity),
                              device=cpu_name()))
            if threads == n_threads:
                ref = (counts, st)
        if cuda:
            counts, st, s = run(scanner, activity, "cuda", n_cpu)
            differ = int(np.count_nonzero(counts != ref[0]))
            rows.append(stamp(dict(base, backend="cuda", decays=n_cpu, seconds=s, decays_per_s=st.decays_per_second,
                                   trues=st.n_trues, sensitivity=st.sensitivity, lors_differing_from_cpu=differ,
                                   same_counters=(st.n_in_band, st.n_crossed, st.n_trues) ==
                                   (ref[1].n_in_band, ref[1].n_crossed, ref[1].n_trues)), device=gpu_name()))
            run(scanner, activity, "cuda", n_gpu // 20)  # warm-up at size
            _, st, s = run(scanner, activity, "cuda", n_gpu, seed=2)
            rows.append(stamp(dict(base, backend="cuda", decays=n_gpu, seconds=s, decays_per_s=st.decays_per_second,
                                   trues=st.n_trues, sensitivity=st.sensitivity), device=gpu_name()))
            if case == "derenzo":
                _, st, s = run(scanner, activity, "cuda", n_trues=trues, seed=3)
                rows.append(stamp(dict(base, backend="cuda", decays=st.n_decays, seconds=s,
                                       decays_per_s=st.decays_per_second, trues=st.n_trues,
                                       sensitivity=st.sensitivity, target_trues=trues), device=gpu_name()))
    print_table(rows, ["case", "backend", "threads", "decays", "seconds", "decays_per_s", "trues", "sensitivity",
                       "lors_differing_from_cpu", "same_counters", "target_trues"])
    write_records(rows, args.out)


if __name__ == "__main__":
    main()
