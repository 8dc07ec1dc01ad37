"""Two directpet builds timed in one run, in alternation (issue 17: "the old and new kernels timed in the
same run"), under the build before a change and the build after it. Families (--family):

* direct (default): the DIRECT projectors (clinical, stress, variant1 at 2 mm: the default slab kernel and
  the low-rank FFT path) and the block-RAMLA iteration at 4 mm;
* first: the FIRST `fast` forward and back projection at full size;
* first_faithful: the FIRST `faithful` forward, back projection, and back projection with the sensitivity
  image in the same pass, at full size;
* dualhead: the dual-head `default` forward and back projection, a full iteration (72 subsets) at full
  size, the model built once and shared (--model);
* cpu: the CPU loops of the FIRST `fast` and dual-head `default` projectors (first_dualhead_cpu.py, 1 thread
  and all threads; the small dual-head model built once and shared, --model) and of DIRECT (direct_cpu.py).
 Each round runs every benchmark under every build; the records keep the median over rounds
of each (case, method, op) and the ratio before / after.

    python benchmarks/before_after.py --before SPEC --after SPEC [--family direct|first|first_faithful|dualhead|cpu]
        [--rounds 2] [--out FILE] [--model M.npz]

SPEC: a venv's python, or a folder holding an installed build (``pip install --target``); see
_common.build_interpreter. The benchmark scripts are this tree's, so a method the older build lacks is
reported as not built and left out.
"""

from __future__ import annotations

import argparse
import os
import statistics

from _common import alternate_builds, cpu_device, distinct_build_origins, gpu_name, print_table, stamp, write_records

FAMILIES = {
    "direct": (
        ("direct_projectors.py", ["--quick", "--skip-cpu", "--cases", "clinical,stress,variant1_2mm",
                                  "--methods", "default,lowrank,lowrank_1e-4"]),
        ("direct_recon.py", ["--quick", "--skip-cpu", "--skip-events", "--cases", "iteration_variant1"]),
    ),
    "first": (
        ("first_projectors.py", ["--quick", "--methods", "fast", "--skip-cpu", "--skip-osem"]),
    ),
    "first_faithful": (
        ("first_projectors.py", ["--methods", "faithful", "--skip-cpu", "--skip-osem"]),
    ),
    "dualhead": (
        ("dualhead_projectors.py", ["--methods", "default", "--plane-groups", "0", "--skip-narrow",
                                    "--repeats", "3", "--budget", "15"]),
    ),
    "cpu": (
        ("first_dualhead_cpu.py", []),
        ("direct_cpu.py", ["--quick"]),
    ),
}
MODEL_SCRIPTS = ("dualhead_projectors.py", "first_dualhead_cpu.py")   # the benchmarks that take --model


def kept(rec) -> bool:
    """The records compared: timed ones; of the dual-head benchmark, the full iteration only; of the CPU
    benchmarks, the compiled paths (not the float64 reference)."""
    return "ms" in rec and rec.get("case") != "per_subset" and rec.get("method") != "reference_f64"


def key(rec):
    return rec.get("case"), rec.get("method", rec.get("backend")), rec.get("op", "iteration"), rec.get("threads")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--family", choices=sorted(FAMILIES), default="direct")
    ap.add_argument("--model", default=None, help="dualhead, cpu: the saved model (.npz), built there when missing")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "before_after.json"))
    args = ap.parse_args()
    builds = {"before": args.before, "after": args.after}
    origins = distinct_build_origins(builds)
    benchmarks = [(script, extra + (["--model", args.model] if args.model and script in MODEL_SCRIPTS else []))
                  for script, extra in FAMILIES[args.family]]
    times = alternate_builds(builds, benchmarks, args.rounds, keep=kept, key=key)
    records = []
    for k in sorted(set(times["before"]) | set(times["after"]), key=str):
        b, a = times["before"].get(k), times["after"].get(k)
        rec = dict(case=k[0], method=k[1], op=k[2], **({"threads": k[3]} if k[3] is not None else {}),
                   before_ms=statistics.median(b) if b else None, after_ms=statistics.median(a) if a else None,
                   rounds=args.rounds, family=args.family, before_build=origins["before"],
                   after_build=origins["after"])
        rec["ms"] = rec["after_ms"]
        rec["speedup"] = rec["before_ms"] / rec["after_ms"] if b and a else None
        records.append(stamp(rec, device=cpu_device() if args.family == "cpu" else gpu_name()))
    print(f"before: {origins['before']}\nafter:  {origins['after']}")
    print_table(records, ["case", "method", "op"] + (["threads"] if args.family == "cpu" else []) +
                ["before_ms", "after_ms", "speedup"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
