"""The penalised arm of the FIRST and dual-head Derenzo experiments (issue 19 §3): BSREM with the
relative difference prior from the last OSEM image over relative strengths b, peak-to-valley of
every rod group against the noise in the largest rods' cores, and BSREM's time per pass against
OSEM's time per iteration over the same subsets (the prior must not dominate).

The experiments are the ones ``directpet demo first`` / ``directpet demo dualhead`` run (event Monte
Carlo data, no inverse crime), at the paper's sizes by default, with the FIRST ``fast`` projector and
the dual-head ``default`` projector. Records (one per family and b, the OSEM point as b = null) go to
``--json``; the tables and the figures to ``--out``.

    python benchmarks/penalised_sweeps.py [--family first,dualhead] [--size full] [--betas ...]
        [--passes 10] [--out DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import time

from _common import cpu_device, gpu_name, print_table, stamp, write_records

EXPERIMENTS = {"first": ("directpet.first.experiment", "fast"), "dualhead": ("directpet.dualhead.experiment", "default")}


def run_family(family: str, size: str, betas, passes: int, n_iter: int, backend: str, out_dir: str):
    import importlib

    module, method = EXPERIMENTS[family]
    exp = importlib.import_module(module)
    cfg = exp.ExperimentConfig(size=size, methods=(method,), n_iter=n_iter, backend=backend, progress=False,
                               bsrem_betas=tuple(betas), bsrem_passes=passes)
    t0 = time.perf_counter()
    res = exp.run_experiment(cfg)
    seconds = time.perf_counter() - t0
    os.makedirs(out_dir, exist_ok=True)
    text = res.table_text()
    with open(os.path.join(out_dir, f"{family}_{size}_bsrem.txt"), "w") as f:
        f.write(text + f"\n\ntotal {seconds:.1f} s (simulation {res.timings['simulation_s']:.1f} s)\n")
    figures = exp.write_figures(res, out_dir)
    print(f"== {family} ({size}), {method}: {seconds:.1f} s\n{text}\nfigures: {', '.join(figures)}")
    r = res.methods[method]
    device = gpu_name() if res.backend == "cuda" else cpu_device()
    records = []
    for p in r.bsrem:
        records.append(stamp(dict(
            family=family, size=size, method=method, b=p.b, passes=None if p.b is None else passes,
            osem_iterations=n_iter, n_subsets=cfg.n_subsets, noise=p.noise,
            noise_measure=f"std/mean along the rods per core column of the {max(res.derenzo_info.diameters_mm):g} mm "
                          "rods, RMS over the columns (analysis.rod_noise)",
            peak_to_valley={f"{d:g}": pv.ratio for d, pv in p.pv.items()},
            sampled={f"{d:g}": bool(pv.sampled) for d, pv in p.pv.items()},
            ms_per_pass=None if p.b is None else 1e3 * p.seconds_per_pass,
            osem_ms_per_iteration=1e3 * r.seconds_per_iteration,
            pass_to_osem_iteration=None if p.b is None else p.seconds_per_pass / r.seconds_per_iteration,
            backend=res.backend), device=device))
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="first,dualhead", help="comma list of first, dualhead")
    ap.add_argument("--size", default="full")
    ap.add_argument("--betas", default="0.0003,0.001,0.003,0.01,0.03")
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=24, help="OSEM iterations before the arm (the demo's 24)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "penalised_sweeps"))
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "penalised_sweeps.json"))
    args = ap.parse_args()
    betas = [float(b) for b in args.betas.split(",")]
    records = []
    for family in args.family.split(","):
        if family not in EXPERIMENTS:
            ap.error(f"--family: expected some of {', '.join(EXPERIMENTS)}, got {family!r}")
        records += run_family(family, args.size, betas, args.passes, args.iterations, args.backend, args.out)
    print_table(records, ["family", "b", "noise", "ms_per_pass", "osem_ms_per_iteration", "pass_to_osem_iteration"])
    write_records(records, args.json)


if __name__ == "__main__":
    main()
