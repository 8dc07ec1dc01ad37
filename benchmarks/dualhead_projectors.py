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
ratios resident), a warm-up sweep first, median of repeats. Each method is first timed on a probe
(the first twelfth of subset 0's classes); a method whose sweep is then projected to take longer than
--sweep-budget seconds (alg1 at full size) is timed on whole subsets 0 and n/2 (those projected to take
at most --budget seconds each; else on the probe alone) and extrapolated by multiply-adds to the full
iteration; so is the CPU backend (--cpu-subsets subsets, --cpu-budget). The table and the
records say which numbers are extrapolated.

Floor: M = sum over LORs of their taps (over all planes) multiply-adds per full forward (and back).
Forward: M against the fp32 FMA rate (SMs x 128 lanes x clock) and against the shared-memory load
rate (one warp-wide 4-byte load per SM and clock; the default forward issues 4.5 of them per 128
MACs), and its image-window traffic from L2 (at least 4 D^2 bytes per LOR and plane with taps)
against a nominal L2 bandwidth (--l2-tbps). Back: the default back projection runs over the distinct
cell offsets q of each (class, plane) with dense D^2 residue weights, M_dense = sum over LORs and
planes of q x D^2 FMAs (= M / fill), against the FMA rate (shared loads: 2.25 per 32 q-cell pairs).

    python benchmarks/dualhead_projectors.py [--small] [--model PATH | --synthetic] [--json FILE]
        [--methods default,alg3,alg2,alg1,cpu] [--repeats 3] [--budget 20] [--sweep-budget 90] [--cpu-subsets 2]
        [--plane-groups 0,1]

Records (list of dicts, merged into --json, default benchmarks/results/dualhead_projectors.json):
case ('full_iteration': ms per iteration and op; 'per_subset': that over the number of subsets),
method ('default', 'alg1', 'alg2', 'alg3', 'cpu'), op ('fp', 'bp'), ms, device, date, command, commit, plus scanner,
model, n_subsets, macs, extrapolated, note, floors_ms (the floors above per full projection: fma_fp,
lds_fp, l2_fp, fma_bp, lds_bp) and l2_window_bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from directpet.dualhead import DualHeadScanner, PatchModel

from _common import cpu_name, gpu_name, print_table, stamp, time_device, time_host, write_records

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
    """(model, kind): --model PATH when it exists; else the synthetic model (--synthetic) or the analytic
    one (build_patch_model), saved to --model PATH when given."""
    if args.model and os.path.exists(args.model):
        m = PatchModel.load(args.model)
        if m.scanner != scanner:
            raise SystemExit(f"--model {args.model}: its scanner differs from the benchmark's "
                             f"({'--small' if args.small else 'full size'})")
        kind = "synthetic" if m.meta.get("kind") == "synthetic" else "analytic"
        if args.synthetic and kind != "synthetic":
            raise SystemExit(f"--synthetic: {args.model} holds a {kind} model")
        print(f"model: loaded {args.model} ({kind}; {m.meta.get('builder', 'unknown builder')})")
        return m, kind
    t0 = time.perf_counter()
    if args.synthetic:
        m, kind = synthetic_model(scanner), "synthetic"
    else:
        try:
            from directpet.dualhead import build_patch_model
        except ImportError:
            raise SystemExit("directpet.dualhead.build_patch_model is not available: give --model PATH of a saved "
                             "PatchModel, or --synthetic for a synthetic model") from None
        m, kind = build_patch_model(scanner, progress=True), "analytic"
    print(f"model: {kind.upper() if kind == 'synthetic' else kind}, built in {time.perf_counter() - t0:.0f} s")
    if args.model:
        m.save(args.model)
        print(f"  saved to {args.model}")
    return m, kind


def subsets_of(scanner, n_subsets):
    try:
        from directpet.dualhead import orientation_subsets
    except ImportError:
        perm = np.random.default_rng(SUBSET_SEED).permutation(scanner.n_classes).astype(np.int32)
        return [np.sort(part) for part in np.array_split(perm, n_subsets)], f"own split (default_rng({SUBSET_SEED}))"
    return [np.asarray(c, np.int32) for c in orientation_subsets(scanner, n_subsets)], "orientation_subsets"


def dense_macs(model, chunk=256):
    """FMAs of the default back projection without edge work: sum over LORs and planes of the (class,
    plane)'s distinct cell offsets (dy // D, dz // D) times D^2."""
    s = model.scanner
    D, P = s.D, s.n_planes
    lors = s.class_lor_counts().astype(np.float64)
    total = 0.0
    for k0 in range(0, s.n_classes, chunk):
        k1 = min(k0 + chunk, s.n_classes)
        a, b = int(model.tap_start[k0 * P]), int(model.tap_start[k1 * P])
        row = np.repeat(np.arange(k0 * P, k1 * P, dtype=np.int64), np.diff(model.tap_start[k0 * P:k1 * P + 1]))
        key = ((row << 32) | ((model.tap_dy[a:b].astype(np.int64) // D) << 16) |
               (model.tap_dz[a:b].astype(np.int64) // D))
        q_rows = np.unique(key) >> 32
        total += float(lors[q_rows // P].sum())
    return total * D * D


def subset_macs(model, subsets):
    """Multiply-adds of each subset's forward (= back): sum over its classes of taps x LORs."""
    per_class = model.taps_per_row().sum(axis=1).astype(np.float64) * model.scanner.class_lor_counts()
    return np.array([per_class[k].sum() for k in subsets])


# --- timing ------------------------------------------------------------------------------------------
def time_sweep(run_subset, run_probe, probe_macs, n_subsets, macs, budget_s, sweep_budget_s, repeats, device,
               sample):
    """ms of one sweep over all subsets and a note (None when measured directly).

    A probe (a few classes, also the warm-up) gives the rate. On the GPU, when the whole sweep is
    projected to take at most sweep_budget_s, it is measured (median of `repeats` after a warm-up
    sweep). Otherwise (and always on the host) the subsets in `sample` projected to take at most
    budget_s each are measured and the sweep extrapolated by multiply-adds; when none is, the probe
    itself is extrapolated."""
    timer = (lambda fn: time_device(lambda k: fn(), repeat=1, warmup=0)) if device else \
        (lambda fn: time_host(fn, repeat=1, warmup=0))
    t_probe = timer(run_probe)
    rate = t_probe / probe_macs                                     # ms per multiply-add
    if device and rate * macs.sum() <= sweep_budget_s * 1e3:
        def sweep():
            for s in range(n_subsets):
                run_subset(s)

        t_one = timer(sweep)                                        # also the warm-up
        rep = repeats if t_one < 30e3 else 1
        return (time_device(lambda k: sweep(), repeat=rep, warmup=0) if rep > 1 else t_one), None
    measured = {s: timer(lambda s=s: run_subset(s)) for s in sample if rate * macs[s] <= budget_s * 1e3}
    if measured:
        t, work, what = sum(measured.values()), sum(macs[s] for s in measured), f"subset(s) {sorted(measured)}"
    else:
        t, work, what = t_probe, probe_macs, "the probe classes"
    scale = macs.sum() / work
    return t * scale, f"extrapolated by multiply-adds from {what} ({t / 1e3:.1f} s measured, x{scale:.1f})"


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
                     r.get("plane_groups"), bool(r.get("narrow_blocks")))
    replaced = {key(r) for r in new}
    write_records([r for r in old if key(r) not in replaced] + new, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="32 x 24 crystals, D = 4, 59 planes (a quick run)")
    ap.add_argument("--model", default=None, help="saved PatchModel (.npz); built and saved there when missing")
    ap.add_argument("--synthetic", action="store_true", help="a synthetic model instead of the analytic one")
    ap.add_argument("--json", "--out", dest="json", default=os.path.join(os.path.dirname(__file__), "results", "dualhead_projectors.json"))
    ap.add_argument("--methods", default="default,alg3,alg2,alg1,cpu")
    ap.add_argument("--subsets", type=int, default=72)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds: slower subsets -> sampled, extrapolated")
    ap.add_argument("--sweep-budget", type=float, default=90.0,
                    help="seconds: methods whose full sweep would take longer are sampled and extrapolated")
    ap.add_argument("--cpu-subsets", type=int, default=2, help="subsets the CPU backend is timed on")
    ap.add_argument("--cpu-budget", type=float, default=60.0,
                    help="seconds: CPU subsets projected to take longer are not timed (the probe is extrapolated)")
    ap.add_argument("--plane-groups", default="0,1", help="default forward plane groups to time (0: automatic)")
    ap.add_argument("--skip-narrow", action="store_true", help="leave out the narrow-block forward variant")
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
    M_dense = dense_macs(model)
    floors = {
        "fma_fp": M / fma_rate * 1e3,
        "lds_fp": M * 4.5 / 128 / lds_rate * 1e3,
        "l2_fp": 4.0 * D * D * lor_planes / (args.l2_tbps * 1e12) * 1e3,
        "fma_bp": M_dense / fma_rate * 1e3,
        "lds_bp": M_dense / (D * D) * 2.25 / 32 / lds_rate * 1e3,
    }
    print(f"floor per full projection ({sms} SMs x 128 lanes x {clock / 1e9:.2f} GHz = {fma_rate / 1e12:.1f} T FMA/s):\n"
          f"  forward: M = {M:.3e} multiply-adds -> {floors['fma_fp']:.1f} ms of FMA, {floors['lds_fp']:.1f} ms of "
          f"shared loads; image windows >= {4 * D * D * lor_planes / 1e9:.0f} GB from L2 -> >= {floors['l2_fp']:.1f} ms "
          f"at {args.l2_tbps} TB/s (nominal)\n"
          f"  back: M_dense = {M_dense:.3e} FMAs over cell offsets (fill {M / M_dense:.2f}) -> {floors['fma_bp']:.1f} ms "
          f"of FMA, {floors['lds_bp']:.1f} ms of shared loads (plus the edge work of partly reached tiles)")

    rng = np.random.default_rng(7)
    x_h = rng.uniform(0.1, 1.0, scanner.grid.shape).astype(np.float32)
    x = cp.asarray(x_h)
    lens = [scanner.lor_count(k) for k in subsets]
    counts = [cp.asarray(rng.integers(1, 20, n).astype(np.float32)) for n in lens]   # positive: none skipped
    ratios = [cp.asarray(rng.uniform(0.5, 1.5, n).astype(np.float32)) for n in lens]
    ys = [cp.empty(n, cp.float32) for n in lens]
    img = cp.empty(scanner.grid.shape, cp.float32)
    records, rows, it_ms = [], [], {}
    sample = sorted({0, n_sub // 2})
    # the probe: the first few classes of subset 0 (rate before committing to whole subsets)
    probe = subsets[0][:max(1, len(subsets[0]) // 12)]
    probe_macs = float(subset_macs(model, [probe])[0])
    probe_n = scanner.lor_count(probe)
    probe_y = cp.empty(probe_n, cp.float32)
    probe_c = cp.asarray(rng.integers(1, 20, probe_n).astype(np.float32))
    probe_r = cp.asarray(rng.uniform(0.5, 1.5, probe_n).astype(np.float32))

    def record(method, op, ms, note, device, extra=None):
        base = {"method": method, "op": op, "scanner": size, "model": model_kind, "n_subsets": n_sub, "macs": M,
                "macs_dense": M_dense, "extrapolated": note is not None, "note": note,
                "floors_ms": floors, "l2_window_bytes": 4.0 * D * D * lor_planes}
        base.update(extra or {})
        records.append(stamp(dict(base, case="full_iteration", ms=ms), device=device))
        records.append(stamp(dict(base, case="per_subset", ms=ms / n_sub), device=device))

    for method in [m for m in GPU_METHODS if m in methods]:
        P = DualHeadProjector(model, method, backend="cuda", check_finite=False)
        # default: its launch variants (plane groups; narrow forward blocks), the first one the reference
        variants = ([(int(g), False) for g in args.plane_groups.split(",")] + ([] if args.skip_narrow else [(0, True)])
                    if method == "default" else [(None, None)])
        for g, narrow in variants:
            if g is not None:
                P._engine.model.plane_groups = g
                P._engine.model.narrow_blocks = narrow
            label = method if g in (None, 0) and not narrow else \
                f"{method} (plane groups {g})" if not narrow else f"{method} (narrow blocks)"
            fp, note_f = time_sweep(lambda s: P.forward(x, subsets[s], out=ys[s], skip_zero=counts[s]),
                                    lambda: P.forward(x, probe, out=probe_y, skip_zero=probe_c), probe_macs, n_sub,
                                    macs, args.budget, args.sweep_budget, args.repeats, True, sample)
            bp, note_b = time_sweep(lambda s: P.adjoint(ratios[s], subsets[s], out=img),
                                    lambda: P.adjoint(probe_r, probe, out=img), probe_macs, n_sub,
                                    macs, args.budget, args.sweep_budget, args.repeats, True, sample)
            extra = {"plane_groups": g, "narrow_blocks": narrow, "model_gpu_bytes": P._engine.model.model_nbytes,
                     "gpu_bytes": P._engine.model.nbytes}
            record(method, "fp", fp, note_f, gpu, extra)
            record(method, "bp", bp, note_b, gpu, extra)
            if (g in (None, 0) and not narrow) or method not in it_ms:
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
        probe_h = (cp.asnumpy(probe_c), cp.asnumpy(probe_r))
        fp, note_f = time_sweep(lambda s: P.forward(x_h, subsets[s], skip_zero=c_h[s]),
                                lambda: P.forward(x_h, probe, skip_zero=probe_h[0]), probe_macs, n_sub, macs,
                                args.cpu_budget, 0, 1, False, cs)
        bp, note_b = time_sweep(lambda s: P.adjoint(r_h[s], subsets[s], out=out_h),
                                lambda: P.adjoint(probe_h[1], probe, out=out_h), probe_macs, n_sub, macs,
                                args.cpu_budget, 0, 1, False, cs)
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
        if r["method"] != "cpu":
            r["% FMA (M)"] = 100 * floors["fma_fp"] / r["ms"]
            if r["method"].startswith("default"):
                r["% floor"] = 100 * (floors["lds_fp"] if i == 0 else floors["fma_bp"]) / r["ms"]
    for r in records:
        if r["case"] == "full_iteration" and r["method"] != "cpu":
            r["fraction_fma_peak"] = floors["fma_fp"] / r["ms"]
            if r["method"] == "default":
                r["fraction_floor"] = (floors["lds_fp"] if r["op"] == "fp" else floors["fma_bp"]) / r["ms"]
                r["floor"] = "shared-memory loads" if r["op"] == "fp" else "FMAs over cell offsets (macs_dense)"
    print(f"\none full iteration ({n_sub} subsets forward + back), {size} scanner, {model_kind} model, {gpu}:")
    print("(% FMA (M): useful multiply-adds against the FMA rate; % floor: default against its own bound, "
          "shared loads (fp) / FMAs over cell offsets (bp))")
    print_table(rows, ["method", "op", "ms", "x_default", "paper/this", "% FMA (M)", "% floor", "note"])
    if ref:
        print(f"default: fp {ref[0]:.0f} ms, bp {ref[1]:.0f} ms, bp/fp {ref[1] / ref[0]:.2f}; "
              f"{M / (ref[0] * 1e-3) / 1e12:.2f} / {M / (ref[1] * 1e-3) / 1e12:.2f} T MAC/s")
    merge_records(args.json, records)


if __name__ == "__main__":
    main()
