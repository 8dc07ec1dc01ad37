"""Dual-head projectors at full size (issue 8, section 5): the projections of ONE FULL OSEM ITERATION.

One full iteration = the forward projection of every subset (the paper's 72 random subsets of 104
orientation classes; LORs with zero counts skipped, here none: the counts are positive) followed by
the back projection of every subset's ratios, i.e. every one of the 56.07 M LORs forward and back
once. Methods: default, alg1, alg2, alg3 (CUDA) and the CPU backend (all cores). The paper's
Tesla C2070 needed 111.38 s (forward, algorithm 3) and 678.27 s (back) per iteration.

Model: --model PATH loads a saved PatchModel; when PATH does not exist it is built with
directpet.dualhead.build_patch_model (the analytic detector response) and saved there. Without
--model the analytic model is built in memory. --synthetic instead uses a synthetic model (elongated
patches along the LOR direction whose length grows with the obliquity: 20-350 taps per class and
plane); its results are labelled 'synthetic' everywhere.

Subsets: directpet.dualhead.orientation_subsets (fixed documented seed) when available, else a
random split with numpy.random.default_rng(201272) (classes permuted, cut into equal runs).

Timing: CUDA events (CuPy) around whole sweeps of the subsets on CuPy arrays (image, counts and
ratios resident), a warm-up sweep first, median of repeats. A method whose first subset takes longer
than --budget seconds (alg1 at full size) is timed on a fixed sample of subsets and extrapolated by
multiply-adds to the full iteration; so is the CPU backend (--cpu-subsets subsets). The table and the
records say which numbers are extrapolated.

Floor: M = sum over LORs of their taps (over all planes) multiply-adds per full forward (and back).
Printed: M against the fp32 FMA rate (SMs x 128 lanes x clock), against the shared-memory load rate
(one warp-wide 4-byte load per SM and clock; the default forward issues 4.5 of them per 128 MACs, the
back 2.5 per 64), and the forward's image-window traffic from L2 (at least 4 D^2 bytes per LOR and
plane with taps) against a nominal L2 bandwidth (--l2-tbps).

    python benchmarks/dualhead_projectors.py [--small] [--model PATH | --synthetic] [--json FILE]
        [--methods default,alg3,alg2,alg1,cpu] [--repeats 3] [--budget 20] [--cpu-subsets 2]
        [--plane-groups 0,1]

Records (list of dicts, merged into --json, default benchmarks/results/dualhead_projectors.json):
case ('full_iteration': ms per iteration and op; 'per_subset': that over the number of subsets),
method ('default', 'alg1', 'alg2', 'alg3', 'cpu'), op ('fp', 'bp'), ms, device, date, plus scanner,
model, n_subsets, macs, extrapolated, note.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from directpet.dualhead import DualHeadScanner, PatchModel

from _common import cpu_name, gpu_name, print_table, time_device, time_host, today, write_records

PAPER_MS = {"fp": 111.38e3, "bp": 678.27e3}   # Tesla C2070, algorithm 3 forward / back, per iteration
SUBSET_SEED = 201272
GPU_METHODS = ("default", "alg3", "alg2", "alg1")


# --- model -------------------------------------------------------------------------------------------
def synthetic_model(s: DualHeadScanner) -> PatchModel:
    """Elongated patches: at plane p the (+,+) LOR of class (a_y, a_z) crosses the plane at fraction t_p
    of the way from the upper to the lower crystal (mid depth); its taps are the voxels within a
    stadium along the direction (a_y, a_z): half length = crystal half width + D |a| depth / (gap + 2
    depth) / 2 (the depth-of-interaction smear), half width 0.6 D, tent weights. Same shape on every
    plane, moved with the crossing point and clipped to the crystal cells of the class."""
    D, P = s.D, s.n_planes
    x_u = 0.5 * s.gap_mm + 0.5 * s.depth_mm
    t = (x_u - s.plane_x_mm(np.arange(P))) / (2 * x_u)
    frac = s.depth_mm / (s.gap_mm + 2 * s.depth_mm)
    counts, dys, dzs, ws = [], [], [], []
    for k in range(s.n_classes):
        ay, az = divmod(k, s.n_z)
        a = float(np.hypot(ay, az))
        uy, uz = (ay / a, az / a) if a > 0 else (1.0, 0.0)
        half_len = 0.5 * D * s.crystal_mm / s.pitch_mm + 0.5 * D * a * frac
        half_w = 0.6 * D
        R = int(np.ceil(half_len + half_w)) + 1
        oz, oy = np.meshgrid(np.arange(-R, R + 1), np.arange(-R, R + 1), indexing="ij")   # (dz, dy) order
        along, perp = oy * uy + oz * uz, -oy * uz + oz * uy
        w = (np.clip(1 - np.abs(along) / (half_len + 0.5), 0, None) *
             np.clip(1 - np.abs(perp) / (half_w + 0.5), 0, None))
        keep = w > 1e-3 * w.max()
        oy, oz, w = oy[keep], oz[keep], w[keep]          # row-major in (oz, oy): sorted by (dz, dy)
        cy = np.rint(0.5 * D - 0.5 + t * D * ay).astype(np.int64)
        cz = np.rint(0.5 * D - 0.5 + t * D * az).astype(np.int64)
        dy, dz = cy[:, None] + oy[None, :], cz[:, None] + oz[None, :]
        ok = (dy >= 0) & (dy < D * (ay + 1)) & (dz >= 0) & (dz < D * (az + 1))
        counts.append(ok.sum(axis=1))
        dys.append(dy[ok].astype(np.int16))
        dzs.append(dz[ok].astype(np.int16))
        ws.append(np.broadcast_to(w.astype(np.float32), dy.shape)[ok])
    start = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.int64)
    return PatchModel(s, start, np.concatenate(dys), np.concatenate(dzs), np.concatenate(ws),
                      {"kind": "synthetic", "builder": "benchmarks/dualhead_projectors.py synthetic_model"})


def load_model(args, scanner):
    if args.synthetic:
        t0 = time.perf_counter()
        m = synthetic_model(scanner)
        print(f"model: SYNTHETIC ({time.perf_counter() - t0:.0f} s to build)")
        return m, "synthetic"
    try:
        from directpet.dualhead import build_patch_model
    except ImportError:
        build_patch_model = None
    if args.model and os.path.exists(args.model):
        m = PatchModel.load(args.model)
        if m.scanner != scanner:
            raise SystemExit(f"--model {args.model}: its scanner differs from the benchmark's ({'--small' if args.small else 'full size'})")
        print(f"model: loaded {args.model} ({m.meta.get('builder', 'unknown builder')})")
        return m, m.meta.get("kind", "analytic") if m.meta.get("kind") == "synthetic" else "analytic"
    if build_patch_model is None:
        raise SystemExit("directpet.dualhead.build_patch_model is not available: give --model PATH of a saved "
                         "PatchModel, or --synthetic for a synthetic model")
    t0 = time.perf_counter()
    m = build_patch_model(scanner, progress=True)
    print(f"model: analytic, built in {time.perf_counter() - t0:.0f} s")
    if args.model:
        m.save(args.model)
        print(f"  saved to {args.model}")
    return m, "analytic"


def subsets_of(scanner, n_subsets):
    try:
        from directpet.dualhead import orientation_subsets
    except ImportError:
        perm = np.random.default_rng(SUBSET_SEED).permutation(scanner.n_classes).astype(np.int32)
        return [np.sort(part) for part in np.array_split(perm, n_subsets)], f"own split (default_rng({SUBSET_SEED}))"
    return [np.asarray(c, np.int32) for c in orientation_subsets(scanner, n_subsets)], "orientation_subsets"


def subset_macs(model, subsets):
    """Multiply-adds of each subset's forward (= back): sum over its classes of taps x LORs."""
    per_class = model.taps_per_row().sum(axis=1).astype(np.float64) * model.scanner.class_lor_counts()
    return np.array([per_class[k].sum() for k in subsets])


# --- timing ------------------------------------------------------------------------------------------
def time_sweep(run_subset, n_subsets, macs, budget_s, repeats, device, sample):
    """ms of one sweep over all subsets: measured (warm-up, median of repeats) or, when the first subset
    alone takes longer than budget_s, extrapolated by multiply-adds from the subsets in `sample`.
    Returns (ms, note or None)."""
    timer = (lambda fn: time_device(lambda k: fn(), repeat=1, warmup=0)) if device else \
        (lambda fn: time_host(fn, repeat=1, warmup=0))
    probe = timer(lambda: run_subset(sample[0]))
    if probe > budget_s * 1e3 or not device:
        ms = {sample[0]: probe}
        for s in sample[1:]:
            ms[s] = timer(lambda s=s: run_subset(s))
        sampled = sum(ms.values())
        scale = macs.sum() / sum(macs[s] for s in ms)
        return sampled * scale, (f"extrapolated by multiply-adds from {len(ms)} subset(s) {sorted(ms)} "
                                 f"({sampled / 1e3:.1f} s measured, x{scale:.1f})")

    def sweep():
        for s in range(n_subsets):
            run_subset(s)

    t_one = timer(sweep)                                            # also the warm-up
    rep = repeats if t_one < 30e3 else 1
    return (time_device(lambda k: sweep(), repeat=rep, warmup=0) if rep > 1 else t_one), None


def device_numbers():
    import cupy as cp

    dev = cp.cuda.Device()
    att = dev.attributes
    sms, clock_hz = att["MultiProcessorCount"], att["ClockRate"] * 1e3
    return sms, clock_hz


def merge_records(path, new):
    old = []
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    key = lambda r: (r.get("case"), r.get("method"), r.get("op"), r.get("device"), r.get("scanner"), r.get("model"),
                     r.get("plane_groups"))
    replaced = {key(r) for r in new}
    write_records([r for r in old if key(r) not in replaced] + new, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="32 x 24 crystals, D = 4, 59 planes (a quick run)")
    ap.add_argument("--model", default=None, help="saved PatchModel (.npz); built and saved there when missing")
    ap.add_argument("--synthetic", action="store_true", help="a synthetic model instead of the analytic one")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "dualhead_projectors.json"))
    ap.add_argument("--methods", default="default,alg3,alg2,alg1,cpu")
    ap.add_argument("--subsets", type=int, default=72)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds: slower subsets -> sampled, extrapolated")
    ap.add_argument("--cpu-subsets", type=int, default=2, help="subsets the CPU backend is timed on")
    ap.add_argument("--plane-groups", default="0", help="default forward plane groups to time (0: automatic)")
    ap.add_argument("--l2-tbps", type=float, default=5.5, help="nominal L2 bandwidth for the floor (TB/s)")
    args = ap.parse_args()
    import cupy as cp

    from directpet.dualhead import DualHeadProjector

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    scanner = (DualHeadScanner.small(n_y=32, n_z=24, voxels_per_crystal=4, n_planes=59, plane_mm=1.0) if args.small
               else DualHeadScanner())
    size = "small" if args.small else "full"
    model, model_kind = load_model(args, scanner)
    subsets, split = subsets_of(scanner, args.subsets)
    n_sub = len(subsets)
    macs = subset_macs(model, subsets)
    M = float(macs.sum())
    tpr = model.taps_per_row()
    nz_rows = tpr[tpr > 0]
    lor_w = np.repeat(scanner.class_lor_counts(), scanner.n_planes)
    print(f"scanner {size}: {scanner.n_y} x {scanner.n_z} crystals, D = {scanner.D}, {scanner.n_planes} planes, image "
          f"{scanner.grid.shape} ({scanner.grid.shape[0] * scanner.grid.shape[1] * scanner.n_planes * 4 / 1e6:.0f} MB), "
          f"{scanner.n_lors:,} LORs, {scanner.n_classes} classes in {n_sub} subsets ({split})")
    print(f"model ({model_kind}): {model.n_taps:,} taps ({model.nbytes / 1e9:.2f} GB on the host); taps per (class, "
          f"plane) with taps: median {np.median(nz_rows):.0f}, 10-90% {np.percentile(nz_rows, 10):.0f}-"
          f"{np.percentile(nz_rows, 90):.0f}, LOR-weighted mean {np.average(tpr.ravel(), weights=lor_w):.0f}")

    gpu = gpu_name()
    sms, clock = device_numbers()
    fma_rate = sms * 128 * clock
    lds_rate = sms * clock
    D = scanner.D
    lor_planes = float((scanner.class_lor_counts()[:, None] * (tpr > 0)).sum())
    floors = {
        "fma": M / fma_rate * 1e3,
        "lds_fp": M * 4.5 / 128 / lds_rate * 1e3,
        "lds_bp": M * 2.5 / 64 / lds_rate * 1e3,
        "l2_fp": 4.0 * D * D * lor_planes / (args.l2_tbps * 1e12) * 1e3,
    }
    print(f"floor per full projection: M = {M:.3e} multiply-adds -> {floors['fma']:.1f} ms at {fma_rate / 1e12:.1f} T "
          f"FMA/s ({sms} SMs x 128 x {clock / 1e9:.2f} GHz); shared loads {floors['lds_fp']:.1f} ms (fp) / "
          f"{floors['lds_bp']:.1f} ms (bp); fp image windows >= {4 * D * D * lor_planes / 1e9:.0f} GB from L2 -> "
          f">= {floors['l2_fp']:.1f} ms at {args.l2_tbps} TB/s (nominal)")

    rng = np.random.default_rng(7)
    x_h = rng.uniform(0.1, 1.0, scanner.grid.shape).astype(np.float32)
    x = cp.asarray(x_h)
    lens = [scanner.lor_count(k) for k in subsets]
    counts = [cp.asarray(rng.integers(1, 20, n).astype(np.float32)) for n in lens]   # positive: none skipped
    ratios = [cp.asarray(rng.uniform(0.5, 1.5, n).astype(np.float32)) for n in lens]
    ys = [cp.empty(n, cp.float32) for n in lens]
    img = cp.empty(scanner.grid.shape, cp.float32)
    date = today()
    records, rows, it_ms = [], [], {}
    sample = sorted({0, n_sub // 2})

    def record(method, op, ms, note, device, extra=None):
        base = {"method": method, "op": op, "device": device, "date": date, "scanner": size, "model": model_kind,
                "n_subsets": n_sub, "macs": M, "extrapolated": note is not None, "note": note}
        base.update(extra or {})
        records.append(dict(base, case="full_iteration", ms=ms))
        records.append(dict(base, case="per_subset", ms=ms / n_sub))

    for method in [m for m in GPU_METHODS if m in methods]:
        P = DualHeadProjector(model, method, backend="cuda", check_finite=False)
        groups = [int(g) for g in args.plane_groups.split(",")] if method == "default" else [None]
        for g in groups:
            if g is not None:
                P._engine.model.plane_groups = g
            label = method if g in (None, 0) else f"{method} (plane groups {g})"
            fp, note_f = time_sweep(lambda s: P.forward(x, subsets[s], out=ys[s], skip_zero=counts[s]), n_sub, macs,
                                    args.budget, args.repeats, True, sample)
            bp, note_b = time_sweep(lambda s: P.adjoint(ratios[s], subsets[s], out=img), n_sub, macs,
                                    args.budget, args.repeats, True, sample)
            extra = {"plane_groups": g, "model_gpu_bytes": P._engine.model.model_nbytes,
                     "gpu_bytes": P._engine.model.nbytes}
            record(method, "fp", fp, note_f, gpu, extra)
            record(method, "bp", bp, note_b, gpu, extra)
            if g in (None, 0) or method not in it_ms:
                it_ms[method] = (fp, bp)
            for op, ms, note in (("fp", fp, note_f), ("bp", bp, note_b)):
                rows.append({"method": label, "op": op, "ms": ms, "note": note or ""})
            print(f"  {label}: fp {fp / 1e3:.3f} s, bp {bp / 1e3:.3f} s per iteration; model {P._engine.model.model_nbytes / 2**20:.0f} MiB "
                  f"on the GPU ({P._engine.model.nbytes / 2**20:.0f} MiB with workspaces)" +
                  (f"  [fp {note_f}]" if note_f else "") + (f"  [bp {note_b}]" if note_b else ""), flush=True)
        del P

    if "cpu" in methods:
        threads = os.cpu_count()
        P = DualHeadProjector(model, "default", backend="cpu", threads=threads, check_finite=False)
        cs = sorted(set(np.linspace(0, n_sub - 1, max(1, args.cpu_subsets)).round().astype(int).tolist()))
        c_h = {s: cp.asnumpy(counts[s]) for s in cs}
        r_h = {s: cp.asnumpy(ratios[s]) for s in cs}
        out_h = np.empty(scanner.grid.shape, np.float32)
        fp, note_f = time_sweep(lambda s: P.forward(x_h, subsets[s], skip_zero=c_h[s]), n_sub, macs, 0, 1, False, cs)
        bp, note_b = time_sweep(lambda s: P.adjoint(r_h[s], subsets[s], out=out_h), n_sub, macs, 0, 1, False, cs)
        dev = f"{cpu_name()} ({threads} threads)"
        record("cpu", "fp", fp, note_f, dev)
        record("cpu", "bp", bp, note_b, dev)
        it_ms["cpu"] = (fp, bp)
        rows.append({"method": "cpu", "op": "fp", "ms": fp, "note": note_f})
        rows.append({"method": "cpu", "op": "bp", "ms": bp, "note": note_b})
        print(f"  CPU ({threads} threads): fp {fp / 1e3:.1f} s, bp {bp / 1e3:.1f} s per iteration [{note_f}]", flush=True)

    ref = it_ms.get("default")
    for r in rows:
        i = 0 if r["op"] == "fp" else 1
        if ref:
            r["x_default"] = r["ms"] / ref[i]
        r["paper/this"] = PAPER_MS[r["op"]] / r["ms"]
        if r["method"] in GPU_METHODS or r["method"].startswith("default"):
            r["% FMA"] = 100 * floors["fma"] / r["ms"]
            r["% smem"] = 100 * floors["lds_fp" if i == 0 else "lds_bp"] / r["ms"]
    for r in records:
        if r["case"] == "full_iteration":
            r["fraction_fma_peak"] = floors["fma"] / r["ms"] if r["method"] != "cpu" else None
    print(f"\none full iteration ({n_sub} subsets forward + back), {size} scanner, {model_kind} model, {gpu}:")
    print_table(rows, ["method", "op", "ms", "x_default", "paper/this", "% FMA", "% smem", "note"])
    if ref:
        print(f"default: fp {ref[0]:.0f} ms, bp {ref[1]:.0f} ms, bp/fp {ref[1] / ref[0]:.2f}; "
              f"{M / (ref[0] * 1e-3) / 1e12:.2f} / {M / (ref[1] * 1e-3) / 1e12:.2f} T MAC/s")
    merge_records(args.json, records)


if __name__ == "__main__":
    main()
