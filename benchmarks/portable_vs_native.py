"""The portable build against the -march=native build on this machine's CPU benchmark (issue 20).

A portable build (the default, and every wheel: no -march=native, the hot loops runtime-dispatched,
csrc/common/cpu_dispatch.hpp) must stay within 10 % of a build tuned for the machine. This script
runs ``benchmarks/direct_cpu.py`` (the DIRECT CPU projectors, clinical and stress kernels, 1 and all
threads) and the CPU prior benchmark (``recon_priors.py --cpu``) against two importable directpet
packages in alternation (native, portable, native, portable, ...: the same machine state for
both), and records per case the median over the rounds and the ratio portable / native.

    python benchmarks/portable_vs_native.py --native DIR --portable DIR [--rounds 2] [--out FILE]

DIR is a folder holding a ``directpet`` package with its built ``_core`` (e.g. a copy of
``src/directpet`` with the extension of ``cmake -DDIRECTPET_NATIVE=ON`` / ``OFF``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from _common import cpu_device, print_table, stamp, write_records

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once(package_dir: str, script: str, args, out: str) -> list:
    env = dict(os.environ, PYTHONPATH=package_dir)
    subprocess.run([sys.executable, os.path.join(HERE, script), *args, "--out", out], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def dispatch_level(package_dir: str) -> str:
    code = "import directpet; print(directpet.build_info()['cpu_dispatch'])"
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=package_dir), check=True,
                          capture_output=True, text=True).stdout.strip()


def key(r: dict) -> tuple:
    if r["case"] == "rdp_gradient_cpu":
        return ("rdp_gradient", "gradient", "x".join(map(str, r["shape"])), r["threads"])
    return (r["case"], r["op"], "x".join(map(str, r["shape"])), r["threads"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--native", required=True)
    ap.add_argument("--portable", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "portable_vs_native.json"))
    args = ap.parse_args()
    builds = {"native": args.native, "portable": args.portable}
    levels = {name: dispatch_level(d) for name, d in builds.items()}
    times = {name: {} for name in builds}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, d in builds.items():
                runs = run_once(d, "direct_cpu.py", [], os.path.join(tmp, f"{name}_{r}.json"))
                runs += run_once(d, "recon_priors.py", ["--cpu"], os.path.join(tmp, f"{name}_{r}_prior.json"))
                for rec in runs:
                    if rec.get("method", "cpu") != "cpu":
                        continue                 # direct_cpu's float64 reference rows
                    times[name].setdefault(key(rec), []).append(rec["ms"])
    records = []
    for k in times["native"]:
        native, portable = float(np.median(times["native"][k])), float(np.median(times["portable"][k]))
        records.append(stamp(dict(case=k[0], op=k[1], shape=k[2], threads=k[3], native_ms=native,
                                  portable_ms=portable, ratio=portable / native, rounds=args.rounds,
                                  native_dispatch=levels["native"], portable_dispatch=levels["portable"],
                                  target_ratio=1.10), device=cpu_device()))
    print_table(records, ["case", "op", "shape", "threads", "native_ms", "portable_ms", "ratio"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
