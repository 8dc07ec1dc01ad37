"""Time ``python -m directpet.cli demo ...`` end to end, as a user runs it, and record where the time
goes.

    python benchmarks/demo_timing.py [--runs 2] [--fresh-cupy-cache] [--log FILE] [--json FILE] [-- DEMO ARGS]

DEMO ARGS go to the CLI after ``demo`` (default: ``--out directpet_demo``, i.e. ``directpet demo``
as the README shows it). Each run is a fresh process, timed from outside like ``time`` does (wall,
and the children's user and system CPU seconds and largest resident set so far). The record splits a run
with what the CLI prints: ``total`` (its own timer, from the experiment's start to the figures
written), ``simulation`` (events, deposition and corrections), and per kernel model the seconds per
block-RAMLA pass; wall - total is the interpreter start, the imports and the device set-up before the
CLI's timer. A separate process times the imports alone (directpet.direct.experiment, then cupy, then
matplotlib.pyplot). --fresh-cupy-cache points CUPY_CACHE_DIR at an empty folder for all runs: the
first run then compiles every CuPy kernel (as on a new machine), the later ones find them compiled.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import stamp, write_records  # noqa: E402

IMPORTS = """
import json, time
out = {}
for mod in ("directpet.direct.experiment", "cupy", "matplotlib.pyplot"):
    t0 = time.perf_counter()
    try:
        __import__(mod)
        out[mod] = time.perf_counter() - t0
    except ImportError:
        out[mod] = None
print(json.dumps(out))
"""

# a row of ExperimentResult.table(): label, iter@noise, CRC@noise, noise%, CRC@last, noise@last%, s per pass
ROW = re.compile(r"^(\S+)\s+(.+?)\s+(\S+)\s+(\S+)%\s+(\S+)\s+(\S+)%\s+([\d.]+)s\s*$")


def parse_output(text: str) -> dict:
    """What the DIRECT demo prints: its total and simulation seconds, the grid, and per kernel model
    the seconds per pass (and CRC / noise at the last pass)."""
    out = {}
    m = re.findall(r"total ([\d.]+) s \(simulation ([\d.]+) s\)", text)
    if m:
        out["cli_total_s"], out["simulation_s"] = float(m[-1][0]), float(m[-1][1])
    g = re.search(r"sphere phantom, (\d+)x(\d+)x(\d+) voxels .*?([\d,]+) events deposited, backend (\w+)", text)
    if g:
        out["grid"] = [int(g.group(i)) for i in (1, 2, 3)]
        out["events_deposited"] = int(g.group(4).replace(",", ""))
        out["backend"] = g.group(5)
    rows = [ROW.match(line) for line in text.splitlines()]
    out["kernels"] = [{"kernel": k, "s_per_pass": float(sp), "crc_last": float(cl), "noise_last_pct": float(nl)}
                      for k, _, _, _, cl, nl, sp in (r.groups() for r in rows if r)]
    return out


def passes(demo_args: list, grid) -> int | None:
    """Block-RAMLA passes of the run: --iterations, else the CLI's default (40 at the paper's 48 slices,
    30 otherwise)."""
    if "--iterations" in demo_args:
        return int(demo_args[demo_args.index("--iterations") + 1])
    return None if grid is None else (40 if grid[0] == 48 else 30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--fresh-cupy-cache", action="store_true")
    ap.add_argument("--log", default=None, help="append the demo's output here")
    ap.add_argument("--json", default=None)
    ap.add_argument("demo_args", nargs="*", help="arguments after 'demo' (put them after --)")
    args = ap.parse_args()
    demo_args = args.demo_args or ["--out", "directpet_demo"]
    env = dict(os.environ)
    if args.fresh_cupy_cache:
        env["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy_cache_")
    cmd = [sys.executable, "-m", "directpet.cli", "demo", *demo_args]

    imp = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, env=env)
    imports = json.loads(imp.stdout) if imp.returncode == 0 else {"error": imp.stderr[-2000:]}
    print(f"imports (s): {imports}", flush=True)
    runs, status = [], 0
    for i in range(args.runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        text = p.stdout + p.stderr
        if args.log:
            with open(args.log, "a") as f:
                f.write(f"===== run {i}: {' '.join(cmd)}\n{text}\n")
        run = {"run": i, "exit_status": p.returncode, "wall_s": wall, "user_s": after.ru_utime - before.ru_utime,
               "sys_s": after.ru_stime - before.ru_stime, "max_rss_mb": after.ru_maxrss / 1024,
               **parse_output(p.stdout)}
        n = passes(demo_args, run.get("grid"))
        if n is not None and run["kernels"]:
            run["passes"] = n
            run["reconstruction_passes_s"] = n * sum(k["s_per_pass"] for k in run["kernels"])
        if "cli_total_s" in run:
            run["before_cli_timer_s"] = wall - run["cli_total_s"]
            if "reconstruction_passes_s" in run:
                run["rest_s"] = run["cli_total_s"] - run["simulation_s"] - run["reconstruction_passes_s"]
        if p.returncode != 0:
            status = 1
            print(text[-3000:], file=sys.stderr)
        runs.append(run)
        print(json.dumps(run), flush=True)
    rec = stamp({"case": "demo", "demo_command": "python -m directpet.cli demo " + " ".join(demo_args),
                 "cupy_cache": "fresh" if args.fresh_cupy_cache else "as found", "imports_s": imports,
                 "runs": runs,
                 "note": "rest_s = CLI total - simulation - passes: projector builds, sensitivity images, "
                         "contrast-noise analysis, figures"})
    if args.json:
        write_records([rec], args.json)
    return status


if __name__ == "__main__":
    sys.exit(main())
