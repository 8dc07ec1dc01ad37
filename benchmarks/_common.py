"""Shared helpers for the benchmark scripts: device description, timing, records, tables."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import time

import numpy as np


def today() -> str:
    return _dt.date.today().isoformat()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def gpu_name() -> str | None:
    try:
        import cupy  # optional: only for naming the GPU and for event timing

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:  # no CuPy or no device: the benchmark runs CPU-only
        return None


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
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(records, f, indent=1)
    print(f"wrote {len(records)} records to {path}")


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
