"""Records (JSON, stamped like the benchmarks') for the stages of scripts/gpu_check.sh that are no
benchmark: the machine's software and hardware, a pytest run's counts, a compute-sanitizer run's
error counts.

    python benchmarks/stage_records.py environment --json FILE
    python benchmarks/stage_records.py pytest LOG --status RC --command CMD --json FILE
    python benchmarks/stage_records.py sanitizer LOG --status RC --command CMD --json FILE

``pytest`` and ``sanitizer`` summarise a log another command wrote: ``--command`` is that command
(it becomes the record's ``command``) and ``--status`` its exit status. ``sanitizer`` exits 1 when
the log shows memory errors other than the leak check's allocations still held at exit (the
leak-check reports each of those as one error too), or has no error summary at all.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import cpu_name, stamp  # noqa: E402


def _run(*cmd) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict:
    """GPUs (nvidia-smi), the CUDA compiler, Python and the array libraries, the CPU."""
    gpus = _run("nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm",
                "--format=csv,noheader")
    nvcc = _run("nvcc", "--version")
    versions = {}
    for mod in ("numpy", "scipy", "cupy", "torch", "directpet"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # absent or broken: recorded as such
            versions[mod] = None
    rec = {"case": "environment", "gpus": gpus.splitlines() if gpus else [],
           "gpu_fields": "name, driver_version, memory.total, clocks.sm, clocks.max.sm",
           "nvcc": nvcc.splitlines()[-2:] if nvcc else None, "python": sys.version.split()[0],
           "versions": versions, "cpu": cpu_name(), "cpus": os.cpu_count(), "platform": platform.platform()}
    try:
        import directpet

        rec["directpet_has_cuda"], rec["cuda_devices"] = directpet.has_cuda(), directpet.cuda_device_count()
    except Exception:
        pass
    return rec


def pytest_counts(text: str) -> dict:
    """The counts of pytest's closing summary line ('3 failed, 940 passed, 5 skipped in 61.2s')."""
    lines = [ln for ln in text.splitlines() if re.search(r"\b(passed|failed|error|errors|skipped|no tests ran)\b", ln)
             and re.search(r"\bin [\d.]+s\b", ln)]
    if not lines:
        return {"summary": None}
    last = lines[-1].strip(" =")
    counts = {k if k != "error" else "errors": int(n) for n, k in re.findall(r"(\d+) ([a-z]+)", last.split(" in ")[0])}
    seconds = re.search(r"\bin ([\d.]+)s\b", last)
    return {"summary": last, **counts, "seconds": float(seconds.group(1)) if seconds else None}


def sanitizer_counts(text: str) -> dict:
    """compute-sanitizer's error count, the leak check's leaked allocations, and their difference.

    The counts come from the summaries, not from the printed reports: past its print limit (100) the
    sanitizer prints a count of the errors it did not print ("ERROR SUMMARY: N errors were not
    printed"), which is not the total.
    """
    errors = re.findall(r"ERROR SUMMARY: ([\d,]+) errors?\s*$", text, re.M)
    leak_summary = re.findall(r"LEAK SUMMARY: ([\d,]+) bytes leaked in ([\d,]+) allocation", text)
    n_err = int(errors[-1].replace(",", "")) if errors else None
    leaks = int(leak_summary[-1][1].replace(",", "")) if leak_summary else 0
    rec = {"errors": n_err, "leaked_allocations": leaks,
           "leaked_bytes": int(leak_summary[-1][0].replace(",", "")) if leak_summary else None}
    rec["errors_other_than_leaks"] = None if n_err is None else n_err - leaks
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["environment", "pytest", "sanitizer"])
    ap.add_argument("log", nargs="?", help="pytest / sanitizer: the log to summarise")
    ap.add_argument("--status", type=int, default=None, help="exit status of the command that wrote the log")
    ap.add_argument("--command", default=None, help="the command that wrote the log")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    if args.kind == "environment":
        rec = stamp(environment())
    else:
        if not args.log:
            ap.error(f"log: {args.kind} needs the log file to summarise")
        with open(args.log, errors="replace") as f:
            text = f.read()
        counts = pytest_counts(text) if args.kind == "pytest" else sanitizer_counts(text)
        rec = stamp({"case": args.kind, "log": os.path.basename(args.log), "exit_status": args.status, **counts},
                    command=args.command)
    with open(args.json, "w") as f:
        json.dump(rec, f, indent=1)
    print(json.dumps({k: v for k, v in rec.items() if k not in ("command",)}))
    if args.kind == "sanitizer" and (rec["errors_other_than_leaks"] is None or rec["errors_other_than_leaks"] > 0):
        print(f"{args.log}: memory errors other than leaked allocations at exit "
              f"({rec['errors_other_than_leaks']}; None: no error summary)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
