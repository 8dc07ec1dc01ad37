"""The notebook's experiment as a script (for GPU machines without Jupyter): all five kernel
models, the CRC / noise table, the [HA] section 6 checks, figures and a JSON summary in OUTDIR.

    python scripts/run_experiment.py OUTDIR [--size paper|small|tiny] [--iterations N] [--events N]
"""

import argparse
import json
import os

import directpet as dp
from directpet.direct.experiment import ExperimentConfig, run_experiment, science_checks, write_figures

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--size", default="paper" if dp.cuda_device_count() > 0 else "small")
ap.add_argument("--iterations", type=int, default=40)
ap.add_argument("--events", type=float, default=None)
args = ap.parse_args()
cfg = ExperimentConfig(size=args.size, n_iter=args.iterations,
                       n_events=None if args.events is None else int(args.events),
                       kernels=("invariant-fft", "invariant", "variant1", "variant2", "variant3"), progress=False)
res = run_experiment(cfg)
print(f"{res.grid.shape} voxels, {res.data.meta['n_deposited']:,} events deposited, backend {res.backend}, "
      f"simulation {res.timings['simulation_s']:.1f} s")
print(res.table())
checks = science_checks(res)
for name, value in checks:
    print(f"{name:<78} {value:+.4f}")
os.makedirs(args.out, exist_ok=True)
write_figures(res, args.out)
summary = {
    "size": args.size, "iterations": args.iterations, "events_deposited": res.data.meta["n_deposited"],
    "backend": res.backend,
    "curves": {c.label: {"iteration": [int(i) for i in c.iterations], "crc": [float(v) for v in c.crc],
                         "noise": [float(v) for v in c.noise]} for c in res.curves},
    "matched": [{"label": m.label, "iteration": float(m.iteration), "crc": float(m.crc), "noise": float(m.noise),
                 "status": m.status} for m in res.matched],
    "checks": {name: float(value) for name, value in checks},
    "seconds_per_iteration": {k: r.time_s / r.n_iter for k, r in res.results.items()},
}
with open(os.path.join(args.out, "experiment.json"), "w") as f:
    json.dump(summary, f, indent=1)
