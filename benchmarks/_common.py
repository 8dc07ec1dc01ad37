"""Shared helpers for the benchmark scripts: device description, timing, records, tables.

Every record a benchmark writes goes through :func:`stamp`, which adds where, when, how and from
which tree it was measured: ``device``, ``date`` (UTC), ``command`` and ``commit``.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAMP_FIELDS = ("device", "date", "command", "commit")


def today() -> str:
    """The UTC date, YYYY-MM-DD (the records' ``date``)."""
    return _dt.datetime.now(_dt.timezone.utc).date().isoformat()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_device() -> str:
    """The CPU as a record's device: its model and logical CPU count."""
    return f"{cpu_name()} ({os.cpu_count()} CPUs)"


def gpu_name() -> str | None:
    try:
        import cupy  # optional: only for naming the GPU and for event timing

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:  # no CuPy or no device: the benchmark runs CPU-only
        return None


def nvidia_smi_name() -> str | None:
    """The GPU model from nvidia-smi (names joined when they differ), or None without one. Does not
    initialise CUDA in this process (a parent of GPU worker processes may call it)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = list(dict.fromkeys(line.strip() for line in out.splitlines() if line.strip()))
    return " / ".join(names) or None


@functools.lru_cache(maxsize=None)
def machine_device() -> str:
    """This machine's compute device: the GPU's name (CuPy, else nvidia-smi), else the CPU model and
    its logical CPU count."""
    return gpu_name() or nvidia_smi_name() or cpu_device()


def command_line() -> str:
    """How this process was started, as a shell command: ``python`` + sys.argv."""
    return "python " + shlex.join(sys.argv)


@functools.lru_cache(maxsize=None)
def git_commit() -> str:
    """The checkout's commit, with ``+dirty`` when tracked files differ from it.

    ``DIRECTPET_COMMIT`` overrides it: a copy of the working tree without ``.git`` (a lent GPU
    machine) is given the commit of the tree it was copied from that way. "unknown" when neither
    is available (no git, or not a git checkout).
    """
    given = os.environ.get("DIRECTPET_COMMIT", "").strip()
    if given:
        return given
    try:
        def git(*args):
            return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                                  check=True).stdout.strip()

        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def stamp(record: dict, device: str | None = None, command: str | None = None) -> dict:
    """Add ``device``, ``date``, ``command`` and ``commit`` to a new record (in place) and return it.

    device: the given one, else the record's own, else :func:`machine_device` (CPU timings on a GPU
    machine name the CPU: pass ``device=cpu_name() + " (N threads)"``). command: the given one (the
    command that produced a log this record summarises), else :func:`command_line`. date is UTC.
    """
    record["device"] = device or record.get("device") or machine_device()
    record["date"] = today()
    record["command"] = command or command_line()
    record["commit"] = git_commit()
    return record


def time_host(fn, repeat: int = 5, warmup: int = 1) -> float:
    """Median wall time (ms) of fn() on the host (synchronous work only)."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def time_device(fn, repeat: int = 15, warmup: int = 2, inner: int = 1) -> float:
    """Median device time (ms) of one fn(i) call, with CUDA events (CuPy) around `inner` back-to-back calls.

    fn receives a running call index so it can rotate among input sets (inputs larger than L2 in
    total). Several calls between one pair of events let the host's Python overhead overlap with
    the device work of the previous call, so short kernels are not timed as host gaps.
    """
    import cupy

    k = 0
    for _ in range(warmup):
        fn(k)
        k += 1
    cupy.cuda.Device().synchronize()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    ts = []
    for _ in range(repeat):
        start.record()
        for _ in range(inner):
            fn(k)
            k += 1
        stop.record()
        stop.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(start, stop) / inner)
    return statistics.median(ts)


def rel_err(y, y_ref) -> float:
    y = np.asarray(y, dtype=np.float64)
    y_ref = np.asarray(y_ref, dtype=np.float64)
    return float(np.linalg.norm(y - y_ref) / np.linalg.norm(y_ref))


def write_records(records, path):
    """Write the records as a JSON list; warn (stderr) about any record without the stamp fields."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(records, f, indent=1)
    print(f"wrote {len(records)} records to {path}")
    unstamped = [i for i, r in enumerate(records) if any(k not in r for k in STAMP_FIELDS)]
    if unstamped:
        print(f"warning: {path}: {len(unstamped)} record(s) without {', '.join(STAMP_FIELDS)} "
              f"(indices {unstamped[:10]}{' ...' if len(unstamped) > 10 else ''}): build them with stamp()",
              file=sys.stderr)


def print_table(rows, columns):
    widths = [max(len(str(c)), *(len(_fmt(r.get(c))) for r in rows)) for c in columns]
    print("  ".join(str(c).ljust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(w) for c, w in zip(columns, widths)))


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def build_interpreter(spec: str):
    """``(python, environment)`` that imports the directpet build ``spec``, for benchmarks that compare
    builds in one run: a venv's python (its installed directpet; PYTHONPATH cleared), or a folder put
    first on PYTHONPATH for this interpreter (a package folder holding ``directpet``, or a
    ``pip install --target`` site folder holding an installed wheel)."""
    if os.path.isfile(spec) and os.access(spec, os.X_OK):
        return spec, {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return sys.executable, dict(os.environ, PYTHONPATH=spec)


def build_origin(spec: str) -> str:
    """'version path' of the directpet that ``spec`` (see :func:`build_interpreter`) imports."""
    python, env = build_interpreter(spec)
    code = "import directpet; print(directpet.__version__, directpet.__file__)"
    return subprocess.run([python, "-c", code], env=env, check=True, capture_output=True, text=True).stdout.strip()


def distinct_build_origins(builds: dict) -> dict:
    """name -> :func:`build_origin` of each spec in ``builds`` (name -> spec), for a comparison of a
    before and an after build; exits when both import the same build (a --before folder without a build
    falls through to the installed package)."""
    origins = {name: build_origin(spec) for name, spec in builds.items()}
    if origins["before"] == origins["after"]:
        raise SystemExit(f"--before and --after import the same build ({origins['after']}): nothing to compare")
    return origins


def alternate_builds(builds: dict, benchmarks, rounds: int, keep, key) -> dict:
    """Run benchmark scripts under several directpet builds in alternation (every build once per round),
    so that all see the same machine state. ``builds``: name -> a :func:`build_interpreter` spec;
    ``benchmarks``: (script in benchmarks/, extra arguments) pairs, each writing its records with
    ``--out``. Returns ``times[name][key(record)]``: the ``ms`` of every round, for the records that
    ``keep(record)`` accepts."""
    times = {name: {} for name in builds}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for name, spec in builds.items():
                python, env = build_interpreter(spec)
                for script, extra in benchmarks:
                    out = os.path.join(tmp, f"{name}_{r}_{script}.json")
                    subprocess.run([python, os.path.join(REPO_ROOT, "benchmarks", script), *extra, "--out", out],
                                   env=env, check=True, stdout=subprocess.DEVNULL)
                    with open(out) as f:
                        for rec in json.load(f):
                            if keep(rec):
                                times[name].setdefault(key(rec), []).append(rec["ms"])
    return times
