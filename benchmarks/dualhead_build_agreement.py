"""Two directpet builds' dual-head `default` projections of the full-size model, compared in float64 (issue 17:
a kernel that changes the arithmetic, e.g. the back projection on the tensor cores, must keep the float32
accuracy of the build before it).

Each build projects subsets of the 72 orientation subsets (random x and y in [0.5, 1.5], seeded) in a
process of its own; the script prints, per subset and operator, the relative norm of the difference, its
mean signed relative value (a bias) and the largest relative difference over the elements above 1e-3 of
the maximum, and each build's adjointness |<H x, y> - <x, H^T y>| / |<x, H^T y>|.

    python benchmarks/dualhead_build_agreement.py --before SPEC --after SPEC --model M.npz [--subsets 0,17,40]
        [--backend cuda|cpu]

SPEC as in before_after.py (a venv's python, or a folder holding an installed build).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

from _common import build_interpreter, distinct_build_origins


def project(model_path: str, subsets, backend: str, out: str) -> None:
    """Under one build: forward and back projection of each subset, saved to ``out`` (.npz)."""
    from directpet.dualhead import DualHeadProjector, PatchModel, orientation_subsets

    model = PatchModel.load(model_path)
    scanner = model.scanner
    P = DualHeadProjector(model, "default", backend=backend, check_finite=False)
    if backend == "cuda":
        import cupy as cp
        to_device, to_host = cp.asarray, cp.asnumpy
    else:
        to_device = to_host = np.asarray
    all_subsets = orientation_subsets(scanner, 72)
    x = np.random.default_rng(1).uniform(0.5, 1.5, scanner.grid.shape).astype(np.float32)
    res = {}
    for k in subsets:
        sub = np.asarray(all_subsets[k], np.int32)
        y = np.random.default_rng(k).uniform(0.5, 1.5, scanner.lor_count(sub)).astype(np.float32)
        fp = to_host(P.forward(to_device(x), sub))
        bp = to_host(P.adjoint(to_device(y), sub))
        lhs = np.dot(fp.astype(np.float64), y.astype(np.float64))
        rhs = np.dot(x.ravel().astype(np.float64), bp.ravel().astype(np.float64))
        res[f"fp{k}"], res[f"bp{k}"], res[f"adj{k}"] = fp, bp, np.array(abs(lhs - rhs) / abs(rhs))
    np.savez(out, **res)


def compare(a, b, subsets) -> None:
    for k in subsets:
        for op in ("fp", "bp"):
            u, v = a[f"{op}{k}"].astype(np.float64).ravel(), b[f"{op}{k}"].astype(np.float64).ravel()
            big = np.abs(u) > 1e-3 * np.abs(u).max()
            if not big.any():
                raise SystemExit(f"subset {k} {op}: the before build's projection is all zeros: nothing to compare")
            d = v - u
            print(f"subset {k:2d} {op}: identical {np.array_equal(u, v)}, relative norm "
                  f"{np.linalg.norm(d) / np.linalg.norm(u):.3e}, mean relative {np.mean(d[big] / np.abs(u[big])):.3e}, "
                  f"max relative {np.max(np.abs(d[big]) / np.abs(u[big])):.3e}")
        print(f"subset {k:2d} adjointness: before {float(a[f'adj{k}']):.3e}, after {float(b[f'adj{k}']):.3e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before")
    ap.add_argument("--after")
    ap.add_argument("--model", required=True, help="the saved model (.npz; the full-size one for the records)")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--subsets", default="0,17,40")
    ap.add_argument("--project-to", help=argparse.SUPPRESS)   # internal: run under one build
    args = ap.parse_args()
    subsets = [int(v) for v in args.subsets.split(",")]
    if args.project_to:
        project(args.model, subsets, args.backend, args.project_to)
        return
    if not (args.before and args.after):
        ap.error("--before and --after are required")
    origins = distinct_build_origins({"before": args.before, "after": args.after})
    with tempfile.TemporaryDirectory() as tmp:
        out = {}
        for name in ("before", "after"):
            python, env = build_interpreter(getattr(args, name))
            out[name] = os.path.join(tmp, f"{name}.npz")
            subprocess.run([python, os.path.abspath(__file__), "--model", args.model, "--subsets", args.subsets,
                            "--backend", args.backend, "--project-to", out[name]], env=env, check=True)
            print(f"{name}: {origins[name]}")
        compare(np.load(out["before"]), np.load(out["after"]), subsets)


if __name__ == "__main__":
    sys.exit(main())
