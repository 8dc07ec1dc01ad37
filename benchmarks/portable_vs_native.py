"""The portable build against the -march=native build on this machine's CPU benchmark (issue 20).

A portable build (the default, and every wheel: no -march=native, the hot loops runtime-dispatched,
csrc/common/cpu_dispatch.hpp) must stay within 10 % of a build tuned for the machine. This script
runs ``benchmarks/direct_cpu.py`` (the DIRECT CPU projectors, clinical and stress kernels, 1 and all
threads), ``benchmarks/first_dualhead_cpu.py`` (the FIRST `fast` and dual-head `default` CPU projectors;
its dual-head model from --model, built and saved there when missing; without --model it is built in every
run, about a minute on 2 cores) and the CPU prior benchmark
(``recon_priors.py --cpu``) against two importable directpet
packages in alternation (native, portable, native, portable, ...: the same machine state for
both), and records per case the median over the rounds and the ratio portable / native.

    python benchmarks/portable_vs_native.py --native DIR [--portable DIR] [--wheel PYTHON] [--rounds 2] [--model M.npz]
        [--out FILE]

DIR is a folder holding a ``directpet`` package with its built ``_core`` (e.g. a copy of
``src/directpet`` with the extension of ``cmake -DDIRECTPET_NATIVE=ON`` / ``OFF``). PYTHON is the
interpreter of a venv where the repaired wheel is installed (``scripts/build_wheel.sh``): that build
runs as a user gets it, with its vendored FFTW and OpenMP. Each candidate's ratio is its time / native.
"""

from __future__ import annotations

import argparse
import os
import subprocess

import numpy as np

from _common import alternate_builds, build_interpreter, cpu_device, print_table, stamp, write_records

HERE = os.path.dirname(os.path.abspath(__file__))


def dispatch_level(spec: str) -> str:
    python, env = build_interpreter(spec)
    code = "import directpet; print(directpet.build_info()['cpu_dispatch'], directpet.__file__)"
    return subprocess.run([python, "-c", code], env=env, check=True, capture_output=True, text=True).stdout.strip()


def key(r: dict) -> tuple:
    if r["case"] == "rdp_gradient_cpu":
        return ("rdp_gradient", "gradient", "x".join(map(str, r["shape"])), r["threads"])
    return (r["case"], r["op"], "x".join(map(str, r["shape"])), r["threads"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--native", required=True)
    ap.add_argument("--portable", help="a package folder of the portable source build")
    ap.add_argument("--wheel", help="the python of a venv holding the installed, repaired wheel")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--model", default=None, help="first_dualhead_cpu.py's dual-head model (.npz), built there when missing")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "portable_vs_native.json"))
    args = ap.parse_args()
    builds = {"native": args.native}
    builds.update({name: spec for name, spec in (("portable", args.portable), ("wheel", args.wheel)) if spec})
    if len(builds) < 2:
        ap.error("give --portable, --wheel or both")
    levels = {name: dispatch_level(d) for name, d in builds.items()}
    for name, level in levels.items():
        print(f"{name}: {level}")
    # direct_cpu's float64 reference rows left out
    model = ["--model", args.model] if args.model else []
    times = alternate_builds(builds, (("direct_cpu.py", []), ("first_dualhead_cpu.py", model),
                                      ("recon_priors.py", ["--cpu"])), args.rounds,
                             keep=lambda rec: rec.get("method", "cpu") == "cpu", key=key)
    records, columns = [], ["case", "op", "shape", "threads", "native_ms"]
    for name in builds:
        if name != "native":
            columns += [f"{name}_ms", f"{name}_ratio"]
    for k in times["native"]:
        rec = dict(case=k[0], op=k[1], shape=k[2], threads=k[3], rounds=args.rounds, target_ratio=1.10)
        native = float(np.median(times["native"][k]))
        for name in builds:
            ms = float(np.median(times[name][k]))
            rec[f"{name}_ms"] = ms
            rec[f"{name}_dispatch"] = levels[name]
            if name != "native":
                rec[f"{name}_ratio"] = ms / native
        if "portable" in builds:
            rec["ratio"] = rec["portable_ratio"]      # the name the earlier records use
        records.append(stamp(rec, device=cpu_device()))
    print_table(records, columns)
    write_records(records, args.out)


if __name__ == "__main__":
    main()
