"""The repaired wheel against the source build on the GPU benchmarks (issue 20).

A user who installs the wheel must get the speed of a source build. This script runs GPU benchmarks
(``direct_recon.py --quick --skip-cpu``: block-RAMLA iterations with the spatial and cuFFT engines
and the event simulation; ``recon_priors.py --quick``: the RDP kernel and the BSREM pass) under two
interpreters in alternation (source, wheel, source, wheel, ...: the same machine state for both),
and records per case the median over the rounds and the ratio wheel / source.

    python benchmarks/wheel_vs_source.py --wheel SPEC [--source SPEC] [--rounds 2] [--out FILE]

SPEC is a venv's python, or a folder put first on PYTHONPATH (``scripts/gpu_check.sh`` stage ``wheel``
installs the wheel with ``pip install --target`` into one); the source build is, by default, the
directpet this interpreter imports without PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from _common import alternate_builds, build_origin, gpu_name, print_table, stamp, write_records

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = (("direct_recon.py", ["--quick", "--skip-cpu"]), ("recon_priors.py", ["--quick"]))


def key(r: dict) -> tuple:
    return (r["case"], r.get("backend", "cuda"), r.get("events", ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", required=True, help="the installed wheel: a venv's python or a site folder")
    ap.add_argument("--source", default=sys.executable, help="the source build: a python (default: this one)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "wheel_vs_source.json"))
    args = ap.parse_args()
    builds = {"source": args.source, "wheel": args.wheel}
    where = {name: build_origin(spec) for name, spec in builds.items()}
    for name, w in where.items():
        print(f"{name}: directpet {w}")
    if where["source"] == where["wheel"]:
        sys.exit("wheel_vs_source: both interpreters import the same directpet")
    times = alternate_builds(builds, BENCHMARKS, args.rounds, key=key,
                             keep=lambda rec: "ms" in rec and rec.get("backend", "cuda") == "cuda")
    records = []
    for k in times["source"]:
        if k not in times["wheel"]:
            continue
        source, wheel = float(np.median(times["source"][k])), float(np.median(times["wheel"][k]))
        records.append(stamp(dict(case=k[0], source_ms=source, wheel_ms=wheel, ratio=wheel / source,
                                  rounds=args.rounds, source_build=where["source"], wheel_build=where["wheel"]),
                             device=gpu_name()))
    print_table(records, ["case", "source_ms", "wheel_ms", "ratio"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
