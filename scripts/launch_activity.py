"""How full a kernel's launches keep the GPU (issue 17): every launch of the kernels matching a pattern,
under Nsight Compute with a few counters each, summed up.

    python scripts/launch_activity.py --kernel back_default_kernel --out A.json -- python3 CASE.py [ARGS...]
    python scripts/launch_activity.py --csv NCU.csv [--out A.json]      # an earlier run's CSV

Per launch: its duration, how much of the elapsed time the SMs were active (``sm__cycles_active.avg`` /
``sm__cycles_elapsed.max``: below 1 when SMs stand idle while the launch's last blocks run) and the warps
an active SM held on average, as a share of its warp slots (``sm__warps_active.avg.pct_of_peak_sustained_active``;
64 slots per SM on Hopper). Summed over the launches: the active fraction of all elapsed cycles and the
median, smallest and largest warp share. A kernel whose theoretical occupancy (its registers and shared
memory) is well above the warps it holds, with SMs idle at the end, loses time to the order and size of its
blocks rather than to its code: the dual-head back projection held 12.4 of 16 possible warps per SM with
its SMs active 93.6 % of the time, and started its blocks heaviest first for 1.086x
(benchmarks/RESULTS.md section 14n).

The counters come from one pass per launch, under ncu's clock control; a kernel launched many times (a
full iteration) takes a few seconds of replay per hundred launches.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import subprocess
import sys

METRICS = ("gpu__time_duration.sum", "launch__grid_size", "sm__cycles_active.avg", "sm__cycles_elapsed.max",
           "sm__warps_active.avg.pct_of_peak_sustained_active")


def ncu_command(kernel: str, case: list[str]) -> list[str]:
    """The ncu command line that profiles every launch of the kernels matching ``kernel`` (a regex) in ``case``."""
    return ["ncu", "--csv", "--kernel-name", f"regex:{kernel}", "--metrics", ",".join(METRICS), *case]


def parse_csv(text: str) -> list[dict]:
    """The launches of an ncu ``--csv`` metrics listing, in launch order: dicts with ``id``, ``kernel`` and one
    float per metric. Lines before the header (ncu's ``==PROF==`` messages, the case's own output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise ValueError("csv: no ncu metrics header (a line starting with \"ID\",) found")
    launches: dict[int, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        launch = launches.setdefault(int(row["ID"]), {"id": int(row["ID"]), "kernel": row["Kernel Name"]})
        launch[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    return [launches[k] for k in sorted(launches)]


def summarise(launches: list[dict]) -> dict:
    """Totals over the launches and the per-launch figures (see the module's docstring)."""
    if not launches:
        raise ValueError("launches: no launch of the kernel was profiled")
    missing = [m for m in METRICS if any(m not in launch for launch in launches)]
    if missing:
        raise ValueError(f"launches: metrics missing from the listing: {', '.join(missing)}")
    active = [launch["sm__cycles_active.avg"] / launch["sm__cycles_elapsed.max"] for launch in launches]
    warps = [launch["sm__warps_active.avg.pct_of_peak_sustained_active"] for launch in launches]
    return {
        "launches": len(launches),
        "kernels": sorted({launch["kernel"].split("(")[0] for launch in launches}),
        "sum_duration_ms": sum(launch["gpu__time_duration.sum"] for launch in launches) / 1e6,
        "sm_active_fraction_of_elapsed": (sum(launch["sm__cycles_active.avg"] for launch in launches) /
                                          sum(launch["sm__cycles_elapsed.max"] for launch in launches)),
        "warps_active_pct_of_peak_median": statistics.median(warps),
        "warps_active_pct_of_peak_min": min(warps),
        "warps_active_pct_of_peak_max": max(warps),
        "per_launch_duration_ms": [launch["gpu__time_duration.sum"] / 1e6 for launch in launches],
        "per_launch_sm_active_fraction": active,
        "per_launch_warps_active_pct": warps,
        "per_launch_grid_size": [int(launch["launch__grid_size"]) for launch in launches],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", help="regex of the kernel names to profile (with a case after --)")
    ap.add_argument("--csv", help="summarise this ncu --csv listing instead of running a case")
    ap.add_argument("--out", help="write the summary as JSON here")
    ap.add_argument("--save-csv", help="with a case: also keep ncu's listing here")
    ap.add_argument("case", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]: the case to run under ncu")
    args = ap.parse_args(argv)
    case = args.case[1:] if args.case[:1] == ["--"] else args.case
    if args.csv:
        if case:
            ap.error("give either --csv or a case, not both")
        with open(args.csv) as f:
            text = f.read()
    else:
        if not case or not args.kernel:
            ap.error("a case needs --kernel REGEX and -- COMMAND [ARGS...]")
        run = subprocess.run(ncu_command(args.kernel, case), capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stderr[-4000:])
            raise SystemExit(f"ncu exited with status {run.returncode}")
        text = run.stdout
        if args.save_csv:
            with open(args.save_csv, "w") as f:
                f.write(text)
    summary = summarise(parse_csv(text))
    print(f"{summary['launches']} launches of {', '.join(summary['kernels'])}: {summary['sum_duration_ms']:.2f} ms in all; "
          f"SMs active {100 * summary['sm_active_fraction_of_elapsed']:.1f} % of the elapsed cycles; warps held "
          f"{summary['warps_active_pct_of_peak_median']:.1f} % of the slots (median; "
          f"{summary['warps_active_pct_of_peak_min']:.1f}-{summary['warps_active_pct_of_peak_max']:.1f} %)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    return summary


if __name__ == "__main__":
    main()
