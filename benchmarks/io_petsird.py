"""PETSIRD list-mode throughput and the normalisation histo-images, against their baselines.

* Writing and reading list-mode with directpet's array codec vs the ``petsird`` package's own
  per-event reader (the baseline, timed on a prefix of the same file: it costs microseconds per
  event). The floor of reading is the file's bytes: reported as MB/s next to a plain ``readinto``
  of the same file (page cache warm).
* The event-list decoder alone (``decode_varints`` on the file's event bytes, in memory): one thread
  (the one-pass decoder) against all OpenMP threads (chunks, a prefix sum of their terminating bytes,
  then each chunk decoded), events per second; issue 18's CPU target is >= 150 M events/s on 16 cores.
* ``normalisation_histo_images`` at the paper's size (120 views, n_sub = 2) on the GPU and the CPU:
  the compiled pass per view against the per-direction array code (on the CPU extrapolated from 3
  views).
* ``deposit_file``: the compiled list-mode deposition against the Python path (decoded batches,
  ``coincidences_to_events``, ``deposit``), on the CPU and the GPU, and whether they agree bit for bit;
  next to it the host's part of the compiled path alone (the file read and the varints counted).

Events are coincidences of random crystal pairs of the default scanner's ring header (4 mm
crystals, 25 ps TOF bins) within the 10 degree acceptance, random TOF bins within +-300 mm:
throughput does not depend on the activity.

    python benchmarks/io_petsird.py [--events 20000000] [--baseline-events 300000] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import cpu_name, gpu_name, stamp, write_records  # noqa: E402

from directpet.direct import CylindricalScanner, normalisation_histo_images  # noqa: E402
from directpet.direct import petsird as direct_petsird  # noqa: E402
from directpet.geometry import ImageGrid  # noqa: E402
from directpet.io.petsird import Coincidences, PetsirdReader, PetsirdScanner, PetsirdWriter  # noqa: E402


def random_coincidences(n, n_per_ring, n_rings, n_tof, rng):
    """Crystal pairs across the ring (azimuth difference >= 90 degrees) within +-8 rings, TOF bins
    within +-300 mm of the middle."""
    k1 = rng.integers(0, n_per_ring, n)
    k2 = (k1 + rng.integers(n_per_ring // 4, 3 * n_per_ring // 4, n)) % n_per_ring
    r1 = rng.integers(8, n_rings - 8, n)
    r2 = r1 + rng.integers(-8, 9, n)
    mid = n_tof // 2
    return Coincidences(k1 * n_rings + r1, k2 * n_rings + r2, rng.integers(mid - 80, mid + 81, n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=float, default=2e7)
    ap.add_argument("--baseline-events", type=float, default=3e5)
    ap.add_argument("--block", type=float, default=2e6, help="events per time block")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "io_petsird.json"))
    args = ap.parse_args()
    n, block = int(args.events), int(args.block)
    scanner = CylindricalScanner()
    header = direct_petsird.scanner_header(scanner)
    crystals = PetsirdScanner(header.scanner)
    n_per_ring, n_rings = direct_petsird.ring_shape(header)
    n_tof = crystals.tof_edges_mm(0, 0).size - 1
    rng = np.random.default_rng(7)
    blocks = [random_coincidences(min(block, n - s), n_per_ring, n_rings, n_tof, rng) for s in range(0, n, block)]
    records = []
    host = cpu_name()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.petsird")
        t0 = time.perf_counter()
        with PetsirdWriter(path, header) as w:
            for b in blocks:
                w.write_block({(0, 0): b})
        t_write = time.perf_counter() - t0
        size_mb = os.path.getsize(path) / 1e6
        t0 = time.perf_counter()
        with open(path, "rb") as f:
            buf = bytearray(1 << 24)
            while f.readinto(buf):
                pass
        t_raw = time.perf_counter() - t0
        t0 = time.perf_counter()
        with PetsirdReader(path) as f:
            n_read = sum(len(ev) for _, ev in f.coincidences())
        t_read = time.perf_counter() - t0
        assert n_read == n
        # the baseline: petsird's own reader on a prefix of the same events
        import petsird

        m = int(args.baseline_events)
        base_path = os.path.join(tmp, "baseline.petsird")
        with PetsirdWriter(base_path, header) as w:
            w.write_block({(0, 0): Coincidences(blocks[0].bin0[:m], blocks[0].bin1[:m], blocks[0].tof_idx[:m])})
        t0 = time.perf_counter()
        with petsird.BinaryPETSIRDReader(base_path) as r:
            r.read_header()
            n_base = sum(len(tb.value.prompt_events[0][0]) for tb in r.read_time_blocks())
        t_base = time.perf_counter() - t0
        t0 = time.perf_counter()
        with PetsirdReader(base_path) as f:
            n_ours = sum(len(ev) for _, ev in f.coincidences())
        t_ours_prefix = time.perf_counter() - t0
        assert n_base == n_ours == m
        print(f"file: {n:,} events, {size_mb:.0f} MB ({1e6 * size_mb / n:.2f} bytes/event)")
        print(f"write (directpet):           {n / t_write / 1e6:7.2f} M events/s  ({size_mb / t_write:6.1f} MB/s)")
        print(f"read  (directpet):           {n / t_read / 1e6:7.2f} M events/s  ({size_mb / t_read:6.1f} MB/s)")
        print(f"read  (plain readinto):      {'':>7}                ({size_mb / t_raw:6.1f} MB/s)  <- floor")
        print(f"read  (petsird, {m:,} ev):   {m / t_base / 1e6:7.3f} M events/s; directpet on the same file "
              f"{m / t_ours_prefix / 1e6:.2f} M events/s: {t_base / t_ours_prefix:.0f}x")
        records.append(stamp({"case": "petsird_io", "events": n, "mb": size_mb,
                              "write_mev_s": n / t_write / 1e6, "read_mev_s": n / t_read / 1e6,
                              "read_mb_s": size_mb / t_read, "readinto_mb_s": size_mb / t_raw,
                              "baseline_events": m, "petsird_mev_s": m / t_base / 1e6,
                              "speedup_vs_petsird": t_base / t_ours_prefix}, device=host))

        # the decoder alone, on the event bytes of the whole file (3 varints per event)
        from directpet import _core
        from directpet.io.petsird import _event_bytes

        data = np.concatenate([_event_bytes(b) for b in blocks])
        decode = {}
        for threads in (1, os.cpu_count()):
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                values, used = _core.decode_varints(data, 3 * n, threads=threads)
                runs.append(time.perf_counter() - t0)
            assert values.size == 3 * n and used == data.size
            decode[threads] = float(np.median(runs))
        one, every = decode[1], decode[os.cpu_count()]
        print(f"decode alone: 1 thread {n / one / 1e6:7.1f} M events/s; {os.cpu_count()} threads "
              f"{n / every / 1e6:7.1f} M events/s ({one / every:.1f}x; {data.size / every / 1e9:.2f} GB/s)")
        records.append(stamp({"case": "varint_decode", "events": n, "bytes": int(data.size),
                              "threads": os.cpu_count(), "mev_s": n / every / 1e6, "one_thread_mev_s": n / one / 1e6,
                              "speedup": one / every, "target_mev_s": 150.0}, device=host))
        del data, values

        grid = ImageGrid((48, 144, 144), 4.0)
        views = scanner.viewset(40, 3)
        try:
            import cupy as cp
        except ImportError:
            cp = None
            print("CuPy not installed: GPU not timed")
        gpu = cp is not None and cp.cuda.runtime.getDeviceCount() > 0

        def deposit_seconds(xp, engine, repeats):
            """Median seconds of deposit_file (the GPU warmed up and waited for), and the histo-images."""
            sync = cp.cuda.Device().synchronize if xp is not np else (lambda: None)
            if xp is not np:
                direct_petsird.deposit_file(path, grid, views, xp=xp, progress=False, engine=engine)
            runs = []
            for _ in range(repeats):
                sync()
                t0 = time.perf_counter()
                h = direct_petsird.deposit_file(path, grid, views, xp=xp, progress=False, engine=engine)
                sync()
                runs.append(time.perf_counter() - t0)
            return float(np.median(runs)), (cp.asnumpy(h) if xp is not np else h)

        # the host's share of the compiled pipeline: the file read and its varints counted, nothing decoded
        from directpet.io.petsird import list_end

        t0 = time.perf_counter()
        with PetsirdReader(path) as f:
            f.stream_lists(list_end)
        t_scan = time.perf_counter() - t0
        print(f"read + count the lists' varints (the host's part): {n / t_scan / 1e6:8.1f} M events/s "
              f"({size_mb / t_scan:7.0f} MB/s)")
        results = {}
        for backend, xp, device in (("cpu", np, host), ("cuda", cp, gpu_name() if gpu else None)):
            if backend == "cuda" and not gpu:
                continue
            for engine, repeats in (("compiled", 5), ("python", 1)):
                seconds, h = deposit_seconds(xp, engine, repeats)
                results[backend, engine] = h
                print(f"deposit_file {backend:4s} {engine:8s}: {n / seconds / 1e6:8.2f} M events/s ({seconds:.3f} s)")
                records.append(stamp({"case": "petsird_deposit", "backend": backend, "engine": engine, "events": n,
                                      "seconds": seconds, "mev_s": n / seconds / 1e6, "repeats": repeats,
                                      "readinto_s": t_raw, "scan_s": t_scan,
                                      "fraction_of_readinto": t_raw / seconds}, device=device))
            same = bool(np.array_equal(results[backend, "compiled"], results[backend, "python"]))
            compiled, python = records[-2], records[-1]
            print(f"  {backend}: compiled {python['seconds'] / compiled['seconds']:.1f}x the Python path; "
                  f"identical histo-images: {same}")
            compiled["speedup_vs_python"] = python["seconds"] / compiled["seconds"]
            compiled["identical_to_python"] = same
        if gpu:
            same = bool(np.array_equal(results["cuda", "compiled"], results["cpu", "compiled"]))
            print(f"  GPU compiled = CPU compiled: {same}")
            records[-2]["identical_to_cpu"] = same
        # normalisation at the paper's size: 120 views x n_sub^2 = 4 directions x 995,328 voxels
        evaluations = len(views) * 4 * grid.n_voxels
        eps_host = rng.normal(1.0, 0.1, (n_per_ring, n_rings)).clip(0.6, 1.4)

        def normalisation_seconds(xp, engine, repeats, viewset=views):
            sync = cp.cuda.Device().synchronize if xp is not np else (lambda: None)
            eps = xp.asarray(eps_host)
            if xp is not np:                                        # CuPy's kernels compiled first
                normalisation_histo_images(header, grid, viewset, eps, xp=xp, engine=engine)
            runs = []
            for _ in range(repeats):
                sync()
                t0 = time.perf_counter()
                normalisation_histo_images(header, grid, viewset, eps, xp=xp, engine=engine)
                sync()
                runs.append(time.perf_counter() - t0)
            return float(np.median(runs))

        from directpet.direct import ViewSet

        plans = [("cuda", cp, "compiled", 5, views, 1), ("cuda", cp, "python", 3, views, 1)] if gpu else []
        # the CPU's array code extrapolated from 3 views (it takes about a minute for 120)
        plans += [("cpu", np, "compiled", 1, views, 1), ("cpu", np, "python", 1, ViewSet(1, 3), len(views) // 3)]
        for backend, xp, engine, repeats, viewset, scale in plans:
            seconds = scale * normalisation_seconds(xp, engine, repeats, viewset)
            device = gpu_name() if backend == "cuda" else host
            print(f"normalisation_histo_images {backend:4s} {engine:8s}: {seconds:8.3f} s for 120 views x 4 directions, "
                  f"144 x 144 x 48 ({evaluations / seconds / 1e9:.2f} G direction-voxels/s)"
                  + (f", extrapolated from {len(viewset)} views" if scale > 1 else ""))
            rec = {"case": "normalisation_paper", "backend": backend, "engine": engine, "seconds": seconds,
                   "views": 120, "n_sub": 2, "direction_voxels": evaluations, "repeats": repeats,
                   "target_s": 0.1 if backend == "cuda" else None}
            if scale > 1:
                rec["extrapolated_from_views"] = len(viewset)
            records.append(stamp(rec, device=device))
            if engine == "python":
                records[-2]["speedup_vs_python"] = seconds / records[-2]["seconds"]
                print(f"  {backend}: compiled {seconds / records[-2]['seconds']:.1f}x the array code")
    write_records(records, args.json)


if __name__ == "__main__":
    main()
