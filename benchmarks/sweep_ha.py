"""Many reconstructions on Dask: the [HA] section 6 experiment over noise realisations.

Every kernel model (invariant-fft, invariant, variant1-3) reconstructs every noise realisation
of the sphere phantom (realisation r = seed seed0 + r, the same data for every model) by
block-RAMLA; one job = one (realisation, model), run by :func:`directpet.parallel.run_sweep` with
:func:`directpet.direct.experiment.noise_realisation_job`. The whole sweep runs once per cluster size asked for
(``--gpus 1,2``: one GPU worker, then two; ``--cpu-workers N``: a CPU LocalCluster), timed from the
first submission to the last result (cluster start-up excluded, reported apart), with the speed-up
over the 1-worker run of the same invocation.

Prints, per kernel, CRC and noise at the last pass and the pass at which noise reaches 8 % (with
the CRC there), mean +- std over the realisations; writes the contrast-noise figure with error
bars and the rows as CSV to --out, and merges one record per run into --json (records of other
cases, or of other cluster sizes / sizes / devices, are kept).

    python benchmarks/sweep_ha.py [--size paper] [--realisations 20] [--iterations 40] [--gpus 1,2]
        [--cpu-workers N] [--quick] [--events N] [--out DIR] [--json benchmarks/results/multi_gpu.json]

``--quick``: tiny size, 2 realisations, 3 passes and 5 M events (instead of the size's 72 M, so a
2-core CPU finishes in a few minutes; the noise is then far above the paper's).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

import directpet as dp
from directpet import analysis
from directpet.direct.experiment import KERNEL_MODELS, SIZES, ha_noise_jobs, noise_realisation_job
from directpet.parallel import SweepResult, aggregate, run_sweep

from _common import cpu_name, nvidia_smi_name, print_table, stamp, write_records

TARGET_NOISE = 0.08


def per_job_summary(result: SweepResult) -> list:
    """One row per successful job: the kernel, the last pass's CRC and noise, and where the noise
    first reaches 8 % (interpolated pass and CRC; NaN when it is not reached or already above at
    the first pass)."""
    by_job = {}
    for r in result.rows:
        by_job.setdefault(r["job"], []).append(r)
    out = []
    for job, rows in sorted(by_job.items()):
        rows = sorted(rows, key=lambda r: r["iteration"])
        curve = analysis.ContrastNoiseCurve(np.array([r["iteration"] for r in rows], float),
                                            np.array([r["crc"] for r in rows]), np.array([r["noise"] for r in rows]),
                                            label=rows[0]["kernel"])
        m = analysis.pick_matched_noise(curve, TARGET_NOISE)[0]
        ok = m.status == "ok"
        out.append({"job": job, "kernel": rows[0]["kernel"], "realisation": rows[0].get("realisation"),
                    "crc_last": rows[-1]["crc"], "noise_last": rows[-1]["noise"],
                    "iter_at_target": m.iteration if ok else math.nan, "crc_at_target": m.crc if ok else math.nan,
                    "seconds": rows[0]["seconds"]})
    return out


def pm(g, v, scale=1.0, fmt="{:.3f}", std_fmt=None):
    if g[f"{v}_n"] == 0:
        return "-"
    s = fmt.format(scale * g[f"{v}_mean"])
    if g[f"{v}_n"] > 1:
        s += " ± " + (std_fmt or fmt).format(scale * g[f"{v}_std"])
    return s


def kernel_summary(result: SweepResult, reference: str = "invariant") -> tuple:
    """Per kernel, mean / std / count over the realisations of the per-job summary (CRC and noise
    at the last pass, pass and CRC at 8 % noise, seconds per job); and the paired differences of the
    CRC at 8 % noise against ``reference`` (same realisation, so the same data), per kernel."""
    per_job = per_job_summary(result)
    groups = aggregate(per_job, by=("kernel",),
                       values=("crc_last", "noise_last", "iter_at_target", "crc_at_target", "seconds"))
    ref = {r["realisation"]: r["crc_at_target"] for r in per_job if r["kernel"] == reference}
    diffs = [{"kernel": r["kernel"], "crc_at_target_minus_ref": r["crc_at_target"] - ref[r["realisation"]]}
             for r in per_job if r["kernel"] != reference and r["realisation"] in ref]
    paired = [dict(g, reference=reference) for g in aggregate(diffs, by=("kernel",),
                                                                values=("crc_at_target_minus_ref",))]
    return groups, paired


def print_kernel_table(groups: list, paired: list, iterations: int):
    rows = [{"kernel": g["kernel"], "n": g["n"],
             f"CRC @{iterations}": pm(g, "crc_last"), f"noise @{iterations} (%)": pm(g, "noise_last", 100, "{:.2f}"),
             "pass @8%": pm(g, "iter_at_target", fmt="{:.1f}") + f" ({g['iter_at_target_n']}/{g['n']})",
             "CRC @8%": pm(g, "crc_at_target"), "s / job": pm(g, "seconds", fmt="{:.1f}")} for g in groups]
    print_table(rows, list(rows[0]))
    if paired:
        print(f"\npaired differences of the CRC at 8 % noise against {paired[0]['reference']} (same data), "
              "mean ± std over realisations:")
        print_table([{"kernel": g["kernel"], "CRC @8% - ref": pm(g, "crc_at_target_minus_ref", fmt="{:+.4f}", std_fmt="{:.4f}"),
                      "n": g["crc_at_target_minus_ref_n"]} for g in paired], ["kernel", "CRC @8% - ref", "n"])


def compare_runs(a: SweepResult, b: SweepResult) -> float:
    """Largest |CRC| or |noise| difference between two runs of the same jobs (NaN if none shared)."""
    key = lambda r: (r["job"], r["iteration"])  # noqa: E731
    other = {key(r): r for r in b.rows}
    d = [max(abs(r["crc"] - other[key(r)]["crc"]), abs(r["noise"] - other[key(r)]["noise"]))
         for r in a.rows if key(r) in other]
    return max(d) if d else math.nan


def merge_records(path: str, records: list):
    """Replace the records of the same (case, gpus, workers, size, device), keep every other one."""
    old = []
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        if not isinstance(old, list):
            raise ValueError(f"--json: {path} holds a {type(old).__name__}, expected a list of records")
    key = lambda r: (r.get("case"), r.get("gpus"), r.get("workers"), r.get("size"), r.get("device"))  # noqa: E731
    new = {key(r) for r in records}
    write_records([r for r in old if key(r) not in new] + records, path)


def parse_counts(text: str, what: str) -> list:
    try:
        counts = [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        raise SystemExit(f"{what}: expected comma-separated worker counts, got {text!r}")
    if not counts or min(counts) < 1:
        raise SystemExit(f"{what}: expected positive worker counts, got {text!r}")
    return counts


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="paper", choices=sorted(SIZES))
    ap.add_argument("--realisations", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--events", type=float, default=None, help="prompts per realisation (default: the size's)")
    ap.add_argument("--kernels", default=",".join(KERNEL_MODELS))
    ap.add_argument("--seed0", type=int, default=2026)
    ap.add_argument("--gpus", default="1,2", help="GPU worker counts, one whole sweep each (default 1,2)")
    ap.add_argument("--cpu-workers", default=None, help="CPU LocalCluster worker counts instead of GPUs (e.g. 2)")
    ap.add_argument("--quick", action="store_true", help="tiny size, 2 realisations, 3 passes, 5 M events")
    ap.add_argument("--out", default=os.path.join(here, "results", "sweep_ha"))
    ap.add_argument("--json", default=os.path.join(here, "results", "multi_gpu.json"))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.size, args.realisations, args.iterations = "tiny", 2, 3
        args.events = 5e6 if args.events is None else args.events

    if args.cpu_workers is not None:
        runs = [("local", n) for n in parse_counts(args.cpu_workers, "--cpu-workers")]
        backend, device = "cpu", cpu_name()
    else:
        n_gpus = dp.cuda_device_count()
        if n_gpus == 0:
            raise SystemExit("no usable CUDA device: run with --cpu-workers N for a CPU cluster")
        runs = [("gpu", n) for n in parse_counts(args.gpus, "--gpus")]
        if max(n for _, n in runs) > n_gpus:
            raise SystemExit(f"--gpus: asked for {max(n for _, n in runs)} GPU workers, {n_gpus} GPUs are usable")
        backend, device = "cuda", nvidia_smi_name() or "unknown GPU"   # nvidia-smi: no CUDA in this parent

    events = None if args.events is None else int(args.events)
    jobs = ha_noise_jobs(args.kernels.split(","), args.realisations, args.size, args.iterations, args.seed0,
                         backend=backend, n_events=events)
    shape = SIZES[args.size][0]
    print(f"[HA] noise-realisation sweep: {len(jobs)} jobs ({args.realisations} realisations x "
          f"{len(jobs) // args.realisations} kernel models), {shape[0]}x{shape[1]}x{shape[2]} voxels, "
          f"{events or SIZES[args.size][2]:,} events, {args.iterations} block-RAMLA passes; device {device}")
    os.makedirs(args.out, exist_ok=True)

    results, records, timing_rows = [], [], []
    for kind, n in runs:
        t0 = time.perf_counter()
        res = run_sweep(noise_realisation_job, jobs, cluster=kind, n_workers=n, progress=not args.no_progress)
        tag = f"{'gpu' if kind == 'gpu' else 'cpu'}{n}"
        csv_path = res.to_csv(os.path.join(args.out, f"rows_{tag}.csv"))
        print(f"{res.cluster}: {res.wall_s:.1f} s for the sweep (+{res.startup_s:.1f} s cluster start, "
              f"{time.perf_counter() - t0:.1f} s in all); {len(res.failed)} failed; rows in {csv_path}")
        for f in res.failed[:5]:
            print(f"  job {f.index} {f.params}: {f.error}")
        results.append((kind, n, res))
    ref = next((r for k, n, r in results if n == 1), None)
    for kind, n, res in results:
        speedup = ref.wall_s / res.wall_s if ref is not None and res.wall_s > 0 else None
        records.append(stamp({"case": "sweep", "gpus": n if kind == "gpu" else 0, "workers": n,
                              "ms": 1e3 * res.wall_s, "speedup": speedup, "jobs": len(jobs), "failed": len(res.failed),
                              "size": args.size, "iterations": args.iterations, "realisations": args.realisations,
                              "kernels": args.kernels.split(","), "events": events or SIZES[args.size][2],
                              "startup_s": res.startup_s, "cluster": res.cluster}, device=device))
        if res.rows:   # the table's numbers, per kernel over the realisations (see kernel_summary)
            records[-1]["per_kernel"], records[-1]["paired_crc_at_8pct"] = kernel_summary(res)
        timing_rows.append({"workers": n, "kind": kind, "sweep s": res.wall_s, "speed-up": speedup,
                            "jobs": len(jobs), "failed": len(res.failed),
                            "max |diff| vs first run": compare_runs(res, results[0][2]) if res is not results[0][2]
                            else None})
    print()
    print_table(timing_rows, list(timing_rows[0]))

    best = next((r for _, _, r in results if r.rows), None)
    if best is None:
        print("no job succeeded: no table or figure")
    else:
        print(f"\nper kernel, mean ± std over realisations (pass @8%: first pass reaching {100 * TARGET_NOISE:g} % "
              f"noise, interpolated; (k/n): realisations reaching it)")
        print_kernel_table(*kernel_summary(best), args.iterations)
        agg = best.aggregate(by=("kernel", "iteration"), values=("crc", "noise"))
        fig_path = os.path.join(args.out, "contrast_noise_errorbars.png")
        analysis.plot_contrast_noise_errorbars(agg, fig_path, target_noise=TARGET_NOISE,
                                               title=f"[HA] §6, {args.size}: CRC vs noise, mean ± std over "
                                                     f"{args.realisations} realisations")
        SweepResult(rows=agg).to_csv(os.path.join(args.out, "aggregated.csv"))
        print(f"\nfigure {fig_path}; aggregated table {os.path.join(args.out, 'aggregated.csv')}")
    merge_records(args.json, records)
    return 0 if all(not r.failed for _, _, r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
