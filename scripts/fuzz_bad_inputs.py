#!/usr/bin/env python
"""Subprocess fuzz of directpet's public API with bad inputs (issue 16 follow-up).

Every call is a short Python expression (or statement block setting ``_r``) evaluated in a worker
process that holds small fixtures (tiny grids and scanners, CPU backends). Workers run up to BATCH
calls each; a worker killed by a signal or stuck for TIMEOUT seconds is replaced and the next call
goes on in a fresh process. Each outcome is classified:

* ``ok``            a baseline (valid) call that succeeded (``baseline-fail`` otherwise);
* ``clear``         ValueError / TypeError whose message names the argument;
* ``unclear``       another exception type, or a message not naming the argument;
* ``crash``         the worker was killed by a signal (segfault, abort, OOM kill);
* ``hang``          no answer within TIMEOUT seconds;
* ``accepted``      no exception for a nonsense input (``silent-nan`` when the result holds NaN/inf);
* ``wrong-answer``  an ``out=`` overlapping an input was accepted and the result differs from out=None;
* ``...-but-fine``  accepted / unclear / hang / NaN outcomes inspected by hand and judged legitimate (FINE,
  with a one-line reason each): a 0-d array where a number is fine, a documented default, a long but
  valid Monte Carlo job, a message naming the argument in other words.

Usage::

    cd /work/main && PYTHONPATH=src .venv/bin/python scripts/fuzz_bad_inputs.py [--jobs 2] [--only SUBSTR]

Writes /tmp/fuzz_report.txt (summary per module and class, then every non-clear case) and
/tmp/fuzz_results.json (every case). Judgements of accepted / unclear cases that were inspected by
hand and found legitimate are in FINE (keyed by (function, class, argument), each with a one-line
reason; 0-d numbers are judged in ints() / floats()).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

TIMEOUT = 20.0          # seconds per call
BATCH = 20              # calls per worker process
MEM_LIMIT = 6 << 30     # address-space limit per worker (the machine has no swap)

# =====================================================================================================
# The worker: fixtures and the evaluation of one call
# =====================================================================================================

PRELUDE = r'''
import os, io, math, json, warnings, tempfile, dataclasses
from functools import lru_cache
import numpy as np
import matplotlib
matplotlib.use("Agg")
import directpet
from directpet import ImageGrid, LinearOperator
import directpet.direct as D
import directpet.first as F
import directpet.dualhead as H
import directpet.recon as R
import directpet.analysis as A
import directpet.sim as S
import directpet.io.nifti as NI
import directpet.reference.direct as RD
import directpet.reference.first as RF
import directpet.reference.dualhead as RH
try:
    import petsird as _petsird  # noqa: F401
    import directpet.io.petsird as PI
    from directpet.dualhead.petsird import scanner_header as dh_header
    HAVE_PETSIRD = True
except Exception:
    HAVE_PETSIRD = False
try:
    import torch  # noqa: F401
    import directpet.autograd as AG
    HAVE_TORCH = True
except Exception:
    HAVE_TORCH = False

cache = lru_cache(None)
TMP = tempfile.mkdtemp(prefix="fuzz_")
rng0 = np.random.default_rng(1234)

def u(shape, lo=0.1, hi=1.0):
    return np.random.default_rng(7).uniform(lo, hi, shape).astype(np.float32)

def nc(a):
    """A non-contiguous view with a's shape and values."""
    a = np.asarray(a)
    b = np.repeat(a[..., None], 2, axis=-1)[..., 0]
    assert not b.flags.c_contiguous or a.size <= 1
    return b

def _set(a, v, where=None):
    a = np.array(a, copy=True)
    if a.dtype.kind not in "fc":
        a = a.astype(np.float64)
    flat = a.reshape(-1)
    flat[(flat.size // 2) if where is None else where] = v
    return a

def nan_(a): return _set(a, np.nan)
def inf_(a): return _set(a, np.inf)
def neg_(a): return _set(a, -1.0)
def frac_(a): return _set(a, 2.5)

def overlap(in_shape, out_shape, shift, lo=0.1, hi=1.0):
    """An input and an out in one buffer, out starting shift elements after the input."""
    n_in, n_out = int(np.prod(in_shape)), int(np.prod(out_shape))
    buf = np.random.default_rng(3).uniform(lo, hi, max(n_in, shift + n_out)).astype(np.float32)
    return buf[:n_in].reshape(in_shape), buf[shift:shift + n_out].reshape(out_shape)

def same(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(b).max(initial=0)))

# --- shared -------------------------------------------------------------------------------------------
G = ImageGrid((4, 12, 12), 4.0)
def gimg(): return u(G.shape)

# --- DIRECT -------------------------------------------------------------------------------------------
V = D.ViewSet(n_phi=2, n_theta=1)
NV = len(V)
STACK = (NV,) + G.shape
KER = D.SRKernel.invariant()
CS = D.CylindricalScanner()
def stack(): return u(STACK, 1.0, 5.0)
@cache
def HP(): return D.HistoImageProjector(G, V, KER, backend="cpu", threads=1)
@cache
def FP(): return D.FFTProjector(G, V, KER, backend="cpu", threads=1, planner="estimate")
@cache
def LP(): return D.LowRankProjector(G, V, KER, backend="cpu", threads=1, planner="estimate")
def HD(): return D.HistoImageData(stack(), G, V)
def HDfull(): return D.HistoImageData(stack(), G, V, stack(), u(STACK, 0.0, 0.5))
@cache
def VS(): return D.ViewSubsets(HP(), HD(), 2)
@cache
def LUT(): return D.build_lut(G, V[0], KER)
@cache
def PHI():      # sphere phantom on G: (image, info)
    return S.sphere_phantom(G, cylinder_diameter_mm=40.0, length_mm=16.0, n_spheres=2, sphere_diameter_mm=8.0,
                            sphere_radius_mm=10.0, contrast=4.0, supersample=2)
def EV(n=6):
    p1 = np.zeros((n, 3), np.float32); p1[:, 0] = -400.0; p1[:, 1] = np.linspace(-2, 2, n)
    return D.EventBatch(p1, -p1, np.linspace(-20, 20, n).astype(np.float32))
def P1(n=6):
    p = np.zeros((n, 3), np.float32); p[:, 0] = -400.0; p[:, 1] = np.linspace(-2, 2, n); return p

# --- FIRST --------------------------------------------------------------------------------------------
FS = F.RotatingScanner.small()
FG = FS.grid
FSINO = FS.sinogram_shape
@cache
def TAB(): return F.build_super_lor_table(FS)
@cache
def FPJ(): return F.SuperLORProjector(TAB(), "matched", backend="cpu", threads=1)
@cache
def FPJfaith(): return F.SuperLORProjector(TAB(), "faithful", backend="cpu", threads=1)
def fimg(): return u(FG.shape)
def fsino(n=None): return u(FSINO if n is None else (n,) + FSINO[1:], 1.0, 5.0)
def SD(): return F.SinogramData(FS, fsino())
@cache
def AS(): return F.AngleSubsets(FPJ(), SD(), 3)

# --- dual-head ----------------------------------------------------------------------------------------
DS = H.DualHeadScanner.small()
DG = DS.grid
NL = DS.n_lors
@cache
def PM(): return H.build_patch_model(DS, backend="cpu", threads=1)
@cache
def DP(): return H.DualHeadProjector(PM(), backend="cpu", threads=1)
def dimg(): return u(DG.shape)
def dy(n=NL): return u((n,), 1.0, 5.0)
def DD(): return H.DualHeadData(DS, dy())
@cache
def DSUB(): return H.DualHeadSubsets(DP(), DD(), 4)
@cache
def SEEDS(): return H.build_seed_drf(DS, planes=[0])

# --- sim / analysis -----------------------------------------------------------------------------------
@cache
def DER():       # Derenzo phantom on a FIRST-like grid: (grid, info)
    g = ImageGrid((3, 91, 91), (0.8, 0.4, 0.4))
    return g, S.derenzo_phantom(g, supersample=2)[1]
@cache
def DERIMG():    # a noisy reconstruction-like image of it (positive in the rods)
    g, info = DER()
    return (S.derenzo_phantom(g, supersample=2)[0] * np.random.default_rng(0).uniform(0.8, 1.2, g.shape)
            ).astype(np.float32)
@cache
def CURVE():
    img, info = PHI()
    imgs = [img + 0.05 * u(G.shape) for _ in range(3)]
    return A.contrast_noise_curve(imgs, info, iterations=[1, 2, 3])
def blob(grid=None, pos=(0.0, 0.0, 0.0), sig=(3.0, 3.0, 3.0)):
    grid = grid or ImageGrid((9, 21, 21), 1.0)
    z, y, x = np.meshgrid(grid.centres(0), grid.centres(1), grid.centres(2), indexing="ij")
    return np.exp(-((x - pos[0])**2 / (2*sig[0]**2) + (y - pos[1])**2 / (2*sig[1]**2)
                    + (z - pos[2])**2 / (2*sig[2]**2))).astype(np.float32)
BG = ImageGrid((9, 21, 21), 1.0)
def profile(): return np.exp(-0.5 * (np.arange(21) - 10.0)**2 / 9.0)

# --- files --------------------------------------------------------------------------------------------
@cache
def NIFTI():
    p = os.path.join(TMP, "img.nii")
    NI.save_nifti(p, gimg(), G)
    return p
@cache
def HDFILE():
    p = os.path.join(TMP, "hd.npz"); HD().save(p); return p
@cache
def PFILE():
    """A small DIRECT PETSIRD file: a few simulated prompts and delayeds."""
    p = os.path.join(TMP, "scan.petsird")
    D.petsird.write_events(p, D.petsird.scanner_header(CS), prompts=list(D.simulate_events(CS, PHI()[1], 40, seed=1,
                                                                                               progress=False)),
                           delayeds=D.simulate_randoms(CS, 8, seed=2))
    return p
def truncated(path, keep=0.7):
    """A copy of the file cut at `keep` of its length."""
    with open(path, "rb") as f:
        data = f.read()
    return garbage("cut_" + os.path.basename(path), data[: int(len(data) * keep)])
def garbage(name="garbage.npz", data=b"not a zip file at all"):
    p = os.path.join(TMP, name)
    with open(p, "wb") as f:
        f.write(data)
    return p

# --- recon --------------------------------------------------------------------------------------------
class ToyProblem(R.SubsetProblem):
    """A dense 2-subset problem (for the recon checks independent of any family)."""
    image_shape = (2, 3, 4)
    def __init__(self, d0=None):
        r = np.random.default_rng(5)
        self.A = [r.uniform(0.1, 1, (7, 24)).astype(np.float32) for _ in range(2)]
        self.d = [r.poisson(3.0, 7).astype(np.float32) + 1 for _ in range(2)]
        if d0 is not None:
            self.d[0] = d0
        self.n_subsets = 2
    def forward(self, x, subset, out=None): return (self.A[subset] @ x.reshape(-1)).astype(np.float32)
    def adjoint(self, y, subset, out=None): return (self.A[subset].T @ y).reshape(self.image_shape).astype(np.float32)
    def data(self, subset): return self.d[subset]
'''

WORKER = r'''
import sys, json, signal, traceback, warnings, resource, math
mem = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
cases = json.load(open(sys.argv[1]))
env = {}
exec(compile(PRELUDE, "<prelude>", "exec"), env)
np = env["np"]

def nonfinite(obj, depth=0, seen=None):
    """Where obj (result) holds NaN or inf: a short path, or None."""
    if seen is None:
        seen = set()
    if depth > 4 or id(obj) in seen:
        return None
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "fc" and obj.size and not np.isfinite(obj).all():
            return f"array{obj.shape}"
        return None
    if isinstance(obj, (float, np.floating, complex)):
        return None if np.isfinite(obj) else repr(obj)
    if isinstance(obj, (str, bytes, int, bool, type(None))):
        return None
    if isinstance(obj, dict):
        items = list(obj.items())[:200]
    elif isinstance(obj, (list, tuple)):
        items = list(enumerate(obj))[:200]
    elif hasattr(obj, "__dataclass_fields__"):
        items = [(k, getattr(obj, k, None)) for k in obj.__dataclass_fields__]
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("directpet"):
        items = [(k, v) for k, v in vars(obj).items() if not k.startswith("_")][:50]
    else:
        return None
    for k, v in items:
        w = nonfinite(v, depth + 1, seen)
        if w is not None:
            return f"{k}.{w}" if not isinstance(obj, (list, tuple)) else f"[{k}]{w}"
    return None

def summary(obj):
    if isinstance(obj, np.ndarray):
        return f"ndarray{obj.shape} {obj.dtype}"
    s = repr(obj)
    return s[:160]

out = sys.stdout
for c in cases:
    out.write("S %d\n" % c["id"]); out.flush()
    res = {"id": c["id"]}
    ns = dict(env)
    with warnings.catch_warnings(record=True) as wl:
        warnings.simplefilter("always")
        try:
            code = c["code"]
            if "\n" in code or code.lstrip().startswith(("_r =", "_r=")) or ";" in code:
                exec(compile(code, "<case>", "exec"), ns)
                r = ns.get("_r")
            else:
                r = eval(compile(code, "<case>", "eval"), ns)
                ns["_r"] = r
            if hasattr(r, "__next__") and not isinstance(r, (str, bytes)):     # lazy iterators: run them
                r = list(r)
            res["status"] = "ok"
            res["nonfinite"] = nonfinite(r)
            res["summary"] = summary(r)
            if "_same" in ns:
                res["same"] = bool(ns["_same"])
        except BaseException as e:   # noqa: BLE001 (MemoryError, SystemExit, KeyboardInterrupt too)
            if isinstance(e, KeyboardInterrupt):
                raise
            res["status"] = "exc"
            res["etype"] = type(e).__name__
            res["msg"] = str(e)[:600]
            tb = traceback.extract_tb(e.__traceback__)
            res["where"] = f"{tb[-1].filename.split('/src/')[-1]}:{tb[-1].lineno}" if tb else ""
        res["warnings"] = [f"{w.category.__name__}: {str(w.message)[:160]}" for w in wl][:3]
    out.write("R " + json.dumps(res) + "\n"); out.flush()
'''


# =====================================================================================================
# The calls
# =====================================================================================================

CASES: list = []


def case(mod, func, cls, code, names=(), kind="bad", fine=None):
    """kind: 'base' (valid: must succeed), 'bad' (nonsense: must raise a clear error naming one of
    names), 'overlap' (out= overlapping an input: a clear error, or the same answer as out=None, in
    which case the code sets _same)."""
    CASES.append(dict(id=len(CASES), mod=mod, func=func, cls=cls, code=code, names=list(names), kind=kind,
                      fine=fine))


def base(mod, func, code):
    case(mod, func, "baseline", code, kind="base")


ARRAY_VARIANTS = [
    ("None", "None"),
    ("string", "'abc'"),
    ("list", "({g}).tolist()"),
    ("dtype-float64", "np.asarray({g}).astype(np.float64)"),
    ("dtype-int", "np.asarray({g}).astype(np.int32)"),
    ("dtype-complex", "np.asarray({g}).astype(np.complex64)"),
    ("dtype-bool", "(np.asarray({g}) > 0)"),
    ("wrong-shape", "np.ascontiguousarray(np.asarray({g})[..., :-1])"),
    ("wrong-ndim", "np.asarray({g})[None]"),
    ("non-contiguous", "nc({g})"),
    ("NaN", "nan_({g}).astype(np.asarray({g}).dtype)"),
    ("inf", "inf_({g}).astype(np.asarray({g}).dtype)"),
    ("0-d", "np.array(1.0, np.asarray({g}).dtype)"),
    ("empty", "np.zeros((0,), np.asarray({g}).dtype)"),
]


def arrays(mod, func, tmpl, name, good, *, nonneg=False, counts=False, skip=(), names=None, only=None):
    """Baseline tmpl.format(A=good) plus every array variant of argument ``name``."""
    names = names or (name,)
    base(mod, func, tmpl.format(A=good))
    variants = list(ARRAY_VARIANTS)
    if nonneg or counts:
        variants.append(("negative", "neg_({g}).astype(np.asarray({g}).dtype)"))
    if counts:
        variants.append(("fractional-counts", "frac_({g}).astype(np.asarray({g}).dtype)"))
    for cls, expr in variants:
        if cls in skip or (only is not None and cls not in only):
            continue
        case(mod, func, cls, tmpl.format(A=expr.format(g=good)), names)


def ints(mod, func, tmpl, name, good, *, lo=1, skip=(), names=None, huge=True, extra=()):
    """Integer argument: baseline and bad variants (lo: the smallest valid value)."""
    names = names or (name,)
    base(mod, func, tmpl.format(A=good))
    v = [("None", "None"), ("string", "'3'"), ("fractional", "2.5"), ("float-integral", "3.0"),
         ("bool", "True"), ("NaN", "float('nan')"), ("inf", "float('inf')"), ("0-d", f"np.array({good})"),
         ("list", f"[{good}]")]
    if lo >= 1:
        v.append(("zero", "0"))
    if lo >= 0:
        v.append(("negative", "-1"))
    if huge:
        v += [("huge-1e9", "10**9"), ("huge-2^31", "2**31"), ("huge-2^63", "2**63")]
    v += list(extra)
    for cls, expr in v:
        if cls not in skip:
            case(mod, func, cls, tmpl.format(A=expr), names,
                 fine="a NumPy 0-d integer array is an integer (_checks.integer takes them)" if cls == "0-d" else None)


def floats(mod, func, tmpl, name, good, *, positive=True, nonneg=False, skip=(), names=None, extra=()):
    names = names or (name,)
    base(mod, func, tmpl.format(A=good))
    v = [("None", "None"), ("string", "'1.0'"), ("bool", "True"), ("NaN", "float('nan')"),
         ("inf", "float('inf')"), ("0-d", f"np.array({good})"), ("list", f"[{good}]"), ("complex", "1j"),
         ("huge-1e300", "1e300")]
    if positive:
        v += [("zero", "0.0"), ("negative", "-1.0")]
    elif nonneg:
        v += [("negative", "-1.0")]
    v += list(extra)
    for cls, expr in v:
        if cls not in skip:
            case(mod, func, cls, tmpl.format(A=expr), names,
                 fine="a NumPy 0-d array is a number" if cls == "0-d" else None)


def threads(mod, func, tmpl):
    base(mod, func, tmpl.format(A="1"))
    for cls, expr in [("threads-0", "0"), ("threads-neg", "-1"), ("threads-100000", "100000"),
                      ("threads-frac", "2.5"), ("threads-str", "'2'"), ("threads-bool", "True")]:
        case(mod, func, cls, tmpl.format(A=expr), ["threads"])


def index(mod, func, tmpl, name, good, n, *, names=None):
    """An index argument valid in [0, n)."""
    names = names or (name,)
    base(mod, func, tmpl.format(A=good))
    for cls, expr in [("index-neg", "-1"), ("index-n", str(n)), ("index-huge", "2**63"), ("index-frac", "0.5"),
                      ("index-float-integral", "1.0"), ("index-bool", "True"), ("index-None", "None"),
                      ("index-str", "'0'"), ("index-list-of-frac", "[0.5]")]:
        case(mod, func, cls, tmpl.format(A=expr), names)


def outs(mod, func, tmpl, ref, good_out, *, in_expr, in_shape, out_shape, extra_inputs=()):
    """out= variants. tmpl has {X} (the input) and {O} (the out); ref is tmpl with out=None."""
    case(mod, func, "baseline-out", f"_r = {tmpl.format(X=in_expr, O=good_out)}", kind="base")
    for cls, expr in [("out-wrong-shape", f"np.zeros(({out_shape})[:-1] + (({out_shape})[-1] + 1,), np.float32)"),
                      ("out-float64", f"np.zeros({out_shape}, np.float64)"),
                      ("out-non-contiguous", f"nc(np.zeros({out_shape}, np.float32))"),
                      ("out-list", f"np.zeros({out_shape}, np.float32).tolist()"),
                      ("out-string", "'out'")]:
        case(mod, func, cls, f"_r = {tmpl.format(X=in_expr, O=expr)}", ["out"])
    # out overlapping the input: the same buffer (when shapes allow), or shifted by a few elements
    for shift in (1, 7):
        code = (f"x, o = overlap({in_shape}, {out_shape}, {shift})\n"
                f"ref = {ref.format(X='x.copy()')}\n"
                f"_r = {tmpl.format(X='x', O='o')}\n"
                f"_same = same(_r, ref)")
        case(mod, func, f"out-overlap-shift{shift}", code, ["out"], kind="overlap")
    if in_shape == out_shape:
        code = (f"x = np.ascontiguousarray(overlap({in_shape}, {in_shape}, 0)[0])\n"
                f"ref = {ref.format(X='x.copy()')}\n"
                f"_r = {tmpl.format(X='x', O='x')}\n"
                f"_same = same(_r, ref)")
        case(mod, func, "out-is-input", code, ["out"], kind="overlap")
    for ename, eshape, emake in extra_inputs:      # out overlapping another input (e.g. skip_zero)
        code = (f"e, o = overlap({eshape}, {out_shape}, 3)\n"
                f"x = {in_expr}\n"
                f"ref = {ref.format(X='x').replace('{E}', 'e.copy()')}\n"
                f"_r = {tmpl.format(X='x', O='o').replace('{E}', 'e')}\n"
                f"_same = same(_r, ref)")
        case(mod, func, f"out-overlap-{ename}", code, ["out"], kind="overlap")


def objects(mod, func, tmpl, name, alternatives, names=None):
    """Wrong objects for ``name``: each alternative (cls, expr)."""
    for cls, expr in alternatives:
        case(mod, func, cls, tmpl.format(A=expr), names or (name,))


# -----------------------------------------------------------------------------------------------------
# directpet (top level): ImageGrid, LinearOperator
# -----------------------------------------------------------------------------------------------------
M = "directpet"
ints(M, "ImageGrid", "ImageGrid(({A}, 12, 12), 4.0)", "shape", "4", names=("shape", "shape[0]"))
case(M, "ImageGrid", "huge-product", "ImageGrid((2**30, 2**30, 2**30), 1.0)", ["shape"])
case(M, "ImageGrid", "shape-2-entries", "ImageGrid((4, 12), 4.0)", ["shape"])
case(M, "ImageGrid", "shape-None", "ImageGrid(None, 4.0)", ["shape"])
case(M, "ImageGrid", "shape-ndarray-float", "ImageGrid(np.array([4.0, 12.0, 12.0]), 4.0)", ["shape", "shape[0]"])
case(M, "ImageGrid", "shape-dict", "ImageGrid({1: 2, 3: 4, 5: 6}, 4.0)", ["shape", "shape[0]"])
floats(M, "ImageGrid", "ImageGrid((4, 12, 12), {A})", "voxel_size", "4.0", names=("voxel_size", "voxel_size[0]"))
case(M, "ImageGrid", "voxel-size-4-entries", "ImageGrid((4, 12, 12), (1.0, 1.0, 1.0, 1.0))", ["voxel_size"])
case(M, "ImageGrid", "voxel-size-tiny", "ImageGrid((4, 12, 12), 1e-300)", ["voxel_size", "voxel_size[0]"])
case(M, "ImageGrid", "voxel-size-string-tuple", "ImageGrid((4, 12, 12), ('1', '1', '1'))", ["voxel_size", "voxel_size[0]"])
index(M, "ImageGrid.centres", "G.centres({A})", "axis", "1", 3)
base(M, "ImageGrid.index_of", "G.index_of(0.0, 1.0, -2.0)")
for cls, expr in [("None", "None"), ("string", "'1'"), ("NaN", "float('nan')"), ("inf", "float('inf')"),
                  ("complex", "1j")]:
    case(M, "ImageGrid.index_of", cls, f"G.index_of({expr}, 0.0, 0.0)", ["z_mm"])
base(M, "LinearOperator.adjointness_test", "HP().adjointness_test(rng=1)")
case(M, "LinearOperator.adjointness_test", "rng-string", "HP().adjointness_test(rng='x')", ["rng"])
case(M, "LinearOperator.adjointness_test", "dtype-int", "HP().adjointness_test(rng=1, dtype=np.int32)", ["dtype"])
case(M, "LinearOperator.adjointness_test", "dtype-float64", "HP().adjointness_test(rng=1, dtype=np.float64)", ["dtype"])

# -----------------------------------------------------------------------------------------------------
# directpet.direct
# -----------------------------------------------------------------------------------------------------
M = "direct"
ints(M, "ViewSet", "D.ViewSet({A}, 1)", "n_phi", "2")
ints(M, "ViewSet", "D.ViewSet(2, {A})", "n_theta", "1", skip=("huge-1e9", "huge-2^31"))
floats(M, "ViewSet", "D.ViewSet(2, 3, {A})", "theta_max_deg", "10.0", extra=[("90-deg", "90.0")])
floats(M, "View", "D.View({A})", "phi", "0.3", positive=False, names=("phi",),
       extra=[("negative", "-0.1"), ("pi", "np.pi")])
floats(M, "View.from_degrees", "D.View.from_degrees(20.0, {A})", "theta_deg", "2.0", positive=False,
       extra=[("theta-90", "90.0")], names=("theta_deg", "theta"))
index(M, "ViewSet.__getitem__", "V[{A}]", "view", "1", "NV", names=("view", "v"))
index(M, "ViewSet.index", "V.index({A}, 0)", "k", "1", 2)
index(M, "ViewSet.cell_views", "V.cell_views({A}, 2)", "v", "1", "NV", names=("v", "view"))
ints(M, "ViewSet.cell_views", "V.cell_views(0, {A})", "n_sub", "2", skip=("huge-2^31", "huge-2^63"),
     extra=[("n_sub-1e5", "10**5")])
arrays(M, "ViewSet.bin_directions", "V.bin_directions({A})", "u", "np.array([[1.0, 0.2, 0.0], [0.0, 1.0, 0.1]])",
       skip=("0-d",))
# SRKernel / tof_fwhm_mm / CylindricalScanner
floats(M, "SRKernel", "D.SRKernel(tof_fwhm_ps={A})", "tof_fwhm_ps", "400.0")
floats(M, "SRKernel", "D.SRKernel(radial_fwhm={A})", "radial_fwhm", "5.8", skip=("string", "list"),
       extra=[("tuple-bad", "('linear', -1.0, 2.0)"), ("callable-nan", "lambda s: np.full_like(s, np.nan)")])
floats(M, "SRKernel", "D.SRKernel(epsilon={A})", "epsilon", "2.0")
floats(M, "SRKernel", "D.SRKernel(narrow_weight={A}, asymmetric=True)", "narrow_weight", "0.5",
       extra=[("above-1", "1.5")])
case(M, "SRKernel", "truncation-tiny", "D.build_lut(G, V[0], D.SRKernel(truncation=1e-9))", ["truncation", "kernel"])
case(M, "SRKernel", "callable-radial-nan", "D.build_lut(G, V[0], D.SRKernel(radial_fwhm=lambda s: np.full_like(s, np.nan)))",
     ["radial_fwhm", "kernel"])
case(M, "SRKernel", "callable-radial-neg", "D.build_lut(G, V[0], D.SRKernel(radial_fwhm=lambda s: -np.ones_like(s)))",
     ["radial_fwhm", "kernel"])
case(M, "SRKernel", "callable-radial-string", "D.build_lut(G, V[0], D.SRKernel(radial_fwhm=lambda s: 'x'))",
     ["radial_fwhm", "kernel"])
case(M, "SRKernel.clinical", "model-unknown", "D.SRKernel.clinical('variant9')", ["model", "radial_fwhm"])
case(M, "SRKernel.clinical", "model-None", "D.SRKernel.clinical(None)", ["model", "radial_fwhm"])
case(M, "SRKernel.radial_fwhm_at", "s_max-zero", "D.SRKernel.clinical().radial_fwhm_at(np.array([1.0]), 0.0)", ["s_max"])
case(M, "SRKernel.radial_fwhm_at", "s_max-nan", "D.SRKernel.clinical().radial_fwhm_at(np.array([1.0]), float('nan'))", ["s_max"])
case(M, "SRKernel.radial_fwhm_at", "s-nan", "D.SRKernel.clinical().radial_fwhm_at(np.array([np.nan]), 100.0)", ["s"])
case(M, "SRKernel.radial_fwhm_at", "s-string", "D.SRKernel.clinical().radial_fwhm_at('x', 100.0)", ["s"])
base(M, "SRKernel.radial_fwhm_at", "D.SRKernel.clinical().radial_fwhm_at(np.array([1.0]), 100.0)")
floats(M, "tof_fwhm_mm", "D.tof_fwhm_mm({A})", "tof_fwhm_ps", "400.0")
floats(M, "CylindricalScanner", "D.CylindricalScanner(radius_mm={A})", "radius_mm", "465.0")
floats(M, "CylindricalScanner", "D.CylindricalScanner(intrinsic_fwhm_mm={A})", "intrinsic_fwhm_mm", "5.8",
       positive=False, nonneg=True)
ints(M, "CylindricalScanner.viewset", "CS.viewset({A}, 1)", "n_phi", "4")
# build_lut / DirectLUT / local_coordinates
base(M, "build_lut", "D.build_lut(G, V[0], KER)")
objects(M, "build_lut", "D.build_lut({A}, V[0], KER)", "grid",
        [("None", "None"), ("tuple-grid", "(4, 12, 12)"), ("first-scanner", "FS")])
objects(M, "build_lut", "D.build_lut(G, {A}, KER)", "view",
        [("None", "None"), ("viewset", "V"), ("float", "0.3"), ("int", "0")])
objects(M, "build_lut", "D.build_lut(G, V[0], {A})", "kernel",
        [("None", "None"), ("number", "5.8"), ("scanner", "CS")])
index(M, "DirectLUT.kernel_volume", "LUT().kernel_volume({A})", "identifier", "0", "LUT().n_kernels")
arrays(M, "DirectLUT.with_values", "LUT().with_values({A})", "values", "LUT().values * 2",
       nonneg=True, skip=("0-d",))
case(M, "DirectLUT.with_values", "normalize-string", "LUT().with_values(LUT().values, normalize='no')", ["normalize"])
arrays(M, "local_coordinates", "D.local_coordinates(G, V[0], {A})", "offsets", "LUT().offsets",
       skip=("NaN", "inf"))
case(M, "local_coordinates", "offsets-huge", "D.local_coordinates(G, V[0], np.full((2, 3), 2**40, np.int64))", ["offsets"])
# projectors: construction
base(M, "HistoImageProjector", "D.HistoImageProjector(G, V, backend='cpu')")
objects(M, "HistoImageProjector", "D.HistoImageProjector({A}, V, backend='cpu')", "grid",
        [("None", "None"), ("tuple-grid", "(4, 12, 12)"), ("first-scanner-grid-object", "FS")])
objects(M, "HistoImageProjector", "D.HistoImageProjector(G, {A}, backend='cpu')", "views",
        [("None", "None"), ("empty-list", "[]"), ("list-of-floats", "[0.1, 0.2]"), ("string", "'views'"),
         ("first-scanner", "FS"), ("int", "3")])
objects(M, "HistoImageProjector", "D.HistoImageProjector(G, V, {A}, backend='cpu')", "kernel",
        [("number", "5.8"), ("string", "'variant1'"), ("dualhead-model", "PM()")])
objects(M, "HistoImageProjector", "D.HistoImageProjector(G, V, backend={A})", "backend",
        [("None", "None"), ("unknown", "'gpu'"), ("int", "0")])
objects(M, "HistoImageProjector", "D.HistoImageProjector(G, V, backend='cpu', method={A})", "method",
        [("None", "None"), ("unknown", "'fast'"), ("cuda-only-on-cpu", "'tlp'"), ("cuda-only-on-cpu-ilp", "'ilp'")])
objects(M, "HistoImageProjector", "D.HistoImageProjector(G, V, backend='cpu', luts={A})", "luts",
        [("list", "[LUT()]"), ("wrong-lut", "{0: 'x'}"), ("key-out-of-range", "{5: LUT()}"),
         ("key-string", "{'0': LUT()}"), ("string", "'luts'")])
objects(M, "HistoImageProjector", "D.HistoImageProjector(G, V, backend='cpu', check_finite={A})", "check_finite",
        [("None", "None"), ("string", "'yes'"), ("int", "1")])
threads(M, "HistoImageProjector", "D.HistoImageProjector(G, V, backend='cpu', threads={A})")
threads(M, "FFTProjector", "D.FFTProjector(G, V, backend='cpu', planner='estimate', threads={A})")
objects(M, "FFTProjector", "D.FFTProjector(G, V, backend='cpu', planner='estimate', padding={A})", "padding",
        [("None", "None"), ("string", "'big'"), ("two", "(8, 24)"), ("small", "(1, 1, 1)"), ("float", "(8.5, 24, 24)"),
         ("negative", "(-8, 24, 24)"), ("huge", "(2**40, 24, 24)"), ("bool", "(True, 24, 24)")])
objects(M, "FFTProjector", "D.FFTProjector(G, V, backend='cpu', planner={A})", "planner",
        [("None", "None"), ("unknown", "'fast'")])
objects(M, "FFTProjector", "D.FFTProjector(G, V, backend='cpu', planner='estimate', mode={A})", "mode",
        [("None", "None"), ("unknown", "'exact'")])
floats(M, "LowRankProjector", "D.LowRankProjector(G, V, backend='cpu', planner='estimate', tol={A})", "tol", "1e-3",
       extra=[("one", "1.0")])
ints(M, "LowRankProjector", "D.LowRankProjector(G, V, backend='cpu', planner='estimate', rank={A})", "rank", "2",
     skip=("None",))
ints(M, "LowRankProjector", "D.LowRankProjector(G, V, backend='cpu', planner='estimate', max_rank={A})", "max_rank", "4")
threads(M, "LowRankProjector", "D.LowRankProjector(G, V, backend='cpu', planner='estimate', threads={A})")
SEL = "D.select_projector(G, V, backend='cpu', repeat=1, {A})"
floats(M, "select_projector", SEL.format(A="accuracy={A}"), "accuracy", "1e-4", extra=[("one", "1.0")])
floats(M, "select_projector", SEL.format(A="margin={A}"), "margin", "1.25", extra=[("below-one", "0.5")])
ints(M, "select_projector", SEL.format(A="repeat={A}").replace("repeat=1, ", ""), "repeat", "1")
objects(M, "select_projector", SEL.format(A="method={A}"), "method", [("None", "None"), ("unknown", "'fastest'")])
threads(M, "select_projector", SEL.format(A="threads={A}"))
for P, pname in (("HP()", "HistoImageProjector"), ("FP()", "FFTProjector"), ("LP()", "LowRankProjector")):
    arrays(M, f"{pname}.forward", P + ".forward({A}, 0)", "image", "gimg()")
    arrays(M, f"{pname}.adjoint", P + ".adjoint({A})", "histo", "stack()", names=("histo", "histo_images"))
    index(M, f"{pname}.forward", P + ".forward(gimg(), {A})", "subset", "1", "NV")
    outs(M, f"{pname}.forward", P + ".forward({X}, 0, out={O})", P + ".forward({X}, 0)",
         "np.zeros((1,) + G.shape, np.float32)", in_expr="gimg()", in_shape="G.shape", out_shape="(1,) + G.shape")
    outs(M, f"{pname}.forward(all views)", P + ".forward({X}, out={O})", P + ".forward({X})",
         "np.zeros(STACK, np.float32)", in_expr="gimg()", in_shape="G.shape", out_shape="STACK")
    outs(M, f"{pname}.adjoint(all views)", P + ".adjoint({X}, out={O})", P + ".adjoint({X})",
         "np.zeros(G.shape, np.float32)", in_expr="stack()", in_shape="STACK", out_shape="G.shape")
arrays(M, "HistoImageProjector.forward(subset)", "HP().forward(gimg(), {A})", "subset", "[0, 1]",
       only=("string", "dtype-float64", "dtype-bool", "0-d", "empty"))
case(M, "HistoImageProjector.forward(subset)", "subset-repeated-huge", "HP().forward(gimg(), [0] * 10**7)", ["subset"])
case(M, "HistoImageProjector.forward(subset)", "subset-repeated-impossible",
     "g = ImageGrid((8, 24, 24), 4.0)\n_r = D.HistoImageProjector(g, V, backend='cpu').forward("
     "np.ones(g.shape, np.float32), [0] * 10**7)", ["subset"])
case(M, "HistoImageProjector.forward(subset)", "subset-out-of-range", "HP().forward(gimg(), [0, 5])", ["subset"])
index(M, "HistoImageProjector.subset", "HP().subset({A})", "subset", "0", "NV")
index(M, "HistoImageProjector.lut", "HP().lut({A})", "v", "0", "NV", names=("v", "view"))
index(M, "LowRankProjector.rank", "LP().rank({A})", "v", "0", "NV", names=("v", "view"))
case(M, "HistoImageProjector.launcher", "cpu-backend", "HP().launcher(True, 0)", ["backend", "launcher"])
# events
base(M, "EventBatch", "EV()")
arrays(M, "EventBatch", "D.EventBatch({A}, -P1(), np.zeros(6, np.float32))", "p1", "P1()", skip=("0-d",))
arrays(M, "EventBatch", "D.EventBatch(P1(), -P1(), {A})", "dt_ps", "np.zeros(6, np.float32)")
arrays(M, "EventBatch", "D.EventBatch(P1(), -P1(), np.zeros(6, np.float32), weights={A})", "weights",
       "np.ones(6, np.float32)", nonneg=True)
case(M, "EventBatch", "is_random-int", "D.EventBatch(P1(), -P1(), np.zeros(6, np.float32), is_random=np.ones(6, np.int32))",
     ["is_random"])
case(M, "EventBatch", "is_random-wrong-shape", "D.EventBatch(P1(), -P1(), np.zeros(6, np.float32), is_random=np.ones(5, bool))",
     ["is_random"])
ints(M, "EventBatch", "D.EventBatch(P1(), -P1(), np.zeros(6, np.float32), n_in_band={A})", "n_in_band", "6", lo=0,
     skip=("huge-1e9", "huge-2^31"))
objects(M, "EventBatch.concatenate", "D.EventBatch.concatenate({A})", "batches",
        [("None", "None"), ("empty", "[]"), ("not-batches", "[1, 2]"), ("string", "'ab'")])
base(M, "EventBatch.concatenate", "D.EventBatch.concatenate([EV(), EV(3)])")
base(M, "deposit", "D.deposit(EV(), G, V)")
objects(M, "deposit", "D.deposit({A}, G, V)", "events",
        [("None", "None"), ("string", "'ev'"), ("array", "P1()"), ("list-of-int", "[1, 2]")])
objects(M, "deposit", "D.deposit(EV(), {A}, V)", "grid", [("None", "None"), ("tuple", "(4, 12, 12)")])
objects(M, "deposit", "D.deposit(EV(), G, {A})", "viewset",
        [("None", "None"), ("list-of-views", "list(V)"), ("view", "V[0]"), ("int", "2")])
objects(M, "deposit", "D.deposit(EV(), G, V, mode={A})", "mode", [("None", "None"), ("unknown", "'cubic'")])
objects(M, "deposit", "D.deposit(EV(), G, V, return_stats={A})", "return_stats", [("string", "'yes'"), ("None", "None")])
arrays(M, "deposit", "D.deposit(EV(), G, V, out={A})", "out", "np.zeros(STACK, np.float32)",
       only=("string", "list", "dtype-float64", "wrong-shape", "non-contiguous", "NaN", "0-d"))
case(M, "deposit", "weights-nan", "D.deposit(dataclasses.replace(EV(), weights=nan_(np.ones(6, np.float32)).astype(np.float32)), G, V)",
     ["weights"])
case(M, "deposit", "weights-negative", "D.deposit(dataclasses.replace(EV(), weights=-np.ones(6, np.float32)), G, V)",
     ["weights"])
arrays(M, "bin_views", "D.bin_views({A}, -P1(), V)", "p1", "P1()", skip=("0-d",))
case(M, "bin_views", "viewset-None", "D.bin_views(P1(), -P1(), None)", ["viewset"])
ints(M, "simulate_randoms", "D.simulate_randoms(CS, {A}, seed=1)", "n", "5", lo=0, skip=("huge-1e9", "huge-2^31"))
objects(M, "simulate_randoms", "D.simulate_randoms({A}, 5, seed=1)", "scanner",
        [("None", "None"), ("first-scanner", "FS"), ("dualhead-scanner", "DS")])
objects(M, "simulate_randoms", "D.simulate_randoms(CS, 5, seed={A})", "seed",
        [("string", "'seed'"), ("negative", "-1"), ("float", "1.5"), ("bool", "True")])
base(M, "simulate_events", "list(D.simulate_events(CS, PHI()[1], 20, seed=1, progress=False))")
ints(M, "simulate_events", "list(D.simulate_events(CS, PHI()[1], {A}, seed=1, progress=False))", "n_events", "20",
     lo=1, skip=("huge-1e9",))
ints(M, "simulate_events", "list(D.simulate_events(CS, PHI()[1], 20, seed=1, progress=False, chunk_size={A}))",
     "chunk_size", "7", skip=("huge-1e9", "huge-2^31"))
objects(M, "simulate_events", "list(D.simulate_events(CS, {A}, 20, seed=1, progress=False))", "activity",
        [("None", "None"), ("image", "gimg()"), ("first-scanner", "FS")])
objects(M, "simulate_events", "list(D.simulate_events({A}, PHI()[1], 20, seed=1, progress=False))", "scanner",
        [("None", "None"), ("first-scanner", "FS")])
floats(M, "simulate_events", "list(D.simulate_events(CS, PHI()[1], 20, seed=1, progress=False, randoms_fraction={A}))",
       "randoms_fraction", "0.2", positive=False, nonneg=True, extra=[("one", "1.0")])
objects(M, "simulate_events", "list(D.simulate_events(CS, PHI()[1], 20, seed=1, progress={A}))", "progress",
        [("string", "'yes'"), ("int", "3")])
objects(M, "simulate_events", "list(D.simulate_events(CS, PHI()[1], 20, seed=1, progress=False, count={A}))", "count",
        [("None", "None"), ("unknown", "'events'")])
objects(M, "simulate_events", "list(D.simulate_events(CS, PHI()[1], 20, seed=1, progress=False, blur={A}))", "blur",
        [("string", "'no'"), ("None", "None")])
# simulate (compiled, fused with deposition)
SIM = "D.simulate(CS, PHI()[1], n_trues={N}, grid=G, viewset=V, backend='cpu'{K})"
base(M, "simulate", SIM.format(N="200", K=", threads=1"))
ints(M, "simulate", SIM.format(N="{A}", K=", threads=1"), "n_trues", "200", lo=0, skip=("huge-1e9", "huge-2^31"))
objects(M, "simulate", "D.simulate(CS, PHI()[1], {A}, grid=G, viewset=V, backend='cpu')", "n_decays",
        [("decays", "200"), ("decays-and-trues", "200, n_trues=50")])
objects(M, "simulate", "D.simulate(CS, PHI()[1], grid=G, viewset=V, backend='cpu'{A})", "n_trues",
        [("neither", "")])
threads(M, "simulate", SIM.format(N="50", K=", threads={A}"))
objects(M, "simulate", SIM.format(N="50", K=", seed={A}"), "seed",
        [("negative", "-1"), ("float", "1.5"), ("string", "'1'"), ("huge", "2**64"), ("bool", "True")])
arrays(M, "simulate", SIM.format(N="50", K=", out={A}"), "out",
       "np.zeros(STACK, np.float32)", only=("string", "list", "dtype-float64", "wrong-shape", "non-contiguous", "NaN",
                                             "0-d"))
objects(M, "simulate", "D.simulate(CS, {A}, n_trues=50, grid=G, viewset=V, backend='cpu')", "activity",
        [("None", "None"), ("image", "gimg()")])
objects(M, "simulate", "D.simulate({A}, PHI()[1], n_trues=50, grid=G, viewset=V, backend='cpu')", "scanner",
        [("None", "None"), ("first-scanner", "FS")])
objects(M, "simulate", SIM.format(N="50", K="").replace("viewset=V", "viewset={A}"), "viewset",
        [("None", "None"), ("list", "list(V)")])
objects(M, "simulate", SIM.format(N="50", K=", progress={A}"), "progress", [("string", "'yes'"), ("int", "3")])
objects(M, "simulate", SIM.format(N="50", K=", tof={A}"), "tof", [("string", "'no'"), ("None", "None")])
# simulate_histo_images
base(M, "simulate_histo_images", "D.simulate_histo_images(CS, PHI()[1], 50, grid=G, viewset=V, seed=1, progress=False, engine='python')")
ints(M, "simulate_histo_images", "D.simulate_histo_images(CS, PHI()[1], {A}, grid=G, viewset=V, seed=1, progress=False)", "n_events",
     "50", lo=0, skip=("huge-1e9", "huge-2^31"))
ints(M, "simulate_histo_images", "D.simulate_histo_images(CS, PHI()[1], 50, grid=G, viewset=V, seed=1, progress=False, n_quad={A})",
     "n_quad", "2", skip=("huge-1e9", "huge-2^31"))
objects(M, "simulate_histo_images", "D.simulate_histo_images(CS, PHI()[1], 50, grid=G, viewset=V, seed=1, progress=False, engine={A})",
        "engine", [("None", "None"), ("unknown", "'gpu'")])
threads(M, "simulate_histo_images", "D.simulate_histo_images(CS, PHI()[1], 50, grid=G, viewset=V, seed=1, progress=False, threads={A})")
floats(M, "simulate_histo_images", "D.simulate_histo_images(CS, PHI()[1], 50, grid=G, viewset=V, seed=1, progress=False, randoms_fraction={A})",
       "randoms_fraction", "0.1", positive=False, nonneg=True)
objects(M, "simulate_histo_images", "D.simulate_histo_images(CS, PHI()[1], 50, grid=G, viewset=V, seed=1, progress=False, kernel={A})",
        "kernel", [("number", "5.8"), ("string", "'k'")])
objects(M, "simulate_histo_images", "D.simulate_histo_images(CS, PHI()[1], 50, grid=G, viewset=V, seed=1, progress=False, bogus_kw=1)",
        "bogus_kw", [("unknown-keyword", "")])
# corrections
base(M, "sensitivity_attenuation", "D.sensitivity_attenuation(G, V, PHI()[1], n_quad=2)")
ints(M, "sensitivity_attenuation", "D.sensitivity_attenuation(G, V, PHI()[1], n_quad={A})", "n_quad", "2",
     skip=("huge-1e9", "huge-2^31"))
objects(M, "sensitivity_attenuation", "D.sensitivity_attenuation(G, V, {A}, n_quad=2)", "phantom_info",
        [("string", "'phantom'"), ("image", "gimg()"), ("int", "3")])
objects(M, "sensitivity_attenuation", "D.sensitivity_attenuation(G, V, PHI()[1], n_quad=2, attenuation={A})",
        "attenuation", [("string", "'yes'"), ("image", "gimg()"), ("int", "3")])
objects(M, "sensitivity_attenuation", "D.sensitivity_attenuation(G, V, PHI()[1], {A}, n_quad=2)", "scanner",
        [("first-scanner", "FS"), ("string", "'s'")])
base(M, "randoms_background", "D.randoms_background(G, V, total=10.0)")
floats(M, "randoms_background", "D.randoms_background(G, V, total={A})", "total", "10.0", positive=False, nonneg=True)
ints(M, "randoms_background", "D.randoms_background(G, V, total=10.0, n_quad={A})", "n_quad", "2",
     skip=("huge-1e9", "huge-2^31"))
base(M, "randoms_from_delayeds", "D.randoms_from_delayeds(EV(), G, V)")
objects(M, "randoms_from_delayeds", "D.randoms_from_delayeds({A}, G, V)", "delayeds",
        [("None", "None"), ("histo-stack", "stack()"), ("string", "'d'")], names=("delayeds", "events"))
floats(M, "randoms_from_delayeds", "D.randoms_from_delayeds(EV(), G, V, smooth_fwhm_mm={A})", "smooth_fwhm_mm", "4.0",
       positive=False, nonneg=True, extra=[("two-values", "(1.0, 2.0)")])
floats(M, "randoms_from_delayeds", "D.randoms_from_delayeds(EV(), G, V, scale={A})", "scale", "1.0",
       positive=False, nonneg=True)
objects(M, "sensitivity_attenuation", "D.sensitivity_attenuation(G, V, PHI()[1], n_quad=2, engine={A})", "engine",
        [("None", "None"), ("unknown", "'gpu'")])
case(M, "sensitivity_attenuation", "viewset-no-tilt", "D.sensitivity_attenuation(G, D.ViewSet(3, 1, 0.0))", ["viewset"])
base(M, "smooth_randoms", "D.smooth_randoms(stack(), G, smooth_fwhm_mm=4.0)")
arrays(M, "smooth_randoms", "D.smooth_randoms({A}, G, smooth_fwhm_mm=4.0)", "deposited", "stack()", nonneg=True)
floats(M, "smooth_randoms", "D.smooth_randoms(stack(), G, smooth_fwhm_mm={A})", "smooth_fwhm_mm", "4.0",
       positive=False, nonneg=True, extra=[("two-values", "(1.0, 2.0)")])
floats(M, "smooth_randoms", "D.smooth_randoms(stack(), G, scale={A})", "scale", "1.0", positive=False, nonneg=True)
objects(M, "smooth_randoms", "D.smooth_randoms(stack(), {A})", "grid", [("None", "None"), ("tuple", "(4, 12, 12)")])
base(M, "attenuation_histo_images", "D.attenuation_histo_images(np.full(G.shape, 0.0096, np.float32), G, G, V)")
arrays(M, "attenuation_histo_images", "D.attenuation_histo_images({A}, G, G, V)", "mu",
       "np.full(G.shape, 0.0096, np.float32)", nonneg=True)
ints(M, "attenuation_histo_images", "D.attenuation_histo_images(np.full(G.shape, 0.0096, np.float32), G, G, V, n_sub={A})",
     "n_sub", "2", skip=("huge-1e9", "huge-2^31"))
floats(M, "attenuation_histo_images", "D.attenuation_histo_images(np.full(G.shape, 0.0096, np.float32), G, G, V, step_mm={A})",
       "step_mm", "2.0", extra=[("tiny", "1e-9")])
ints(M, "attenuation_histo_images", "D.attenuation_histo_images(np.full(G.shape, 0.0096, np.float32), G, G, V, chunk={A})",
     "chunk", "4", skip=("huge-1e9",))
case(M, "attenuation_histo_images", "mu-huge", "D.attenuation_histo_images(np.full(G.shape, 1e30, np.float32), G, G, V)",
     ["mu"])
base(M, "normalisation_histo_images", "D.normalisation_histo_images(D.petsird.scanner_header(CS), G, V, n_sub=1)")
objects(M, "normalisation_histo_images", "D.normalisation_histo_images({A}, G, V, n_sub=1)", "header",
        [("None", "None"), ("string", "'header'"), ("dualhead-header", "dh_header(DS)")])
arrays(M, "normalisation_histo_images",
       "D.normalisation_histo_images(D.petsird.scanner_header(CS), G, V, {A}, n_sub=1)", "efficiencies",
       "np.ones(D.petsird.ring_shape(D.petsird.scanner_header(CS)), np.float32)", nonneg=True)
ints(M, "normalisation_histo_images", "D.normalisation_histo_images(D.petsird.scanner_header(CS), G, V, n_sub={A})",
     "n_sub", "1", skip=("huge-1e9", "huge-2^31"))
objects(M, "normalisation_histo_images", "D.normalisation_histo_images(D.petsird.scanner_header(CS), G, V, engine={A})",
        "engine", [("None", "None"), ("unknown", "'gpu'")])
# list-mode files into histo-images
base(M, "deposit_file", "D.petsird.deposit_file(PFILE(), G, V, xp=np, progress=False)")
objects(M, "deposit_file", "D.petsird.deposit_file({A}, G, V, xp=np, progress=False)", "path",
        [("None", "None"), ("missing", "'/nonexistent.petsird'"), ("garbage", "garbage('g.petsird', b'x' * 100)"),
         ("directory", "TMP"), ("npz", "HDFILE()")])
objects(M, "deposit_file", "D.petsird.deposit_file(PFILE(), G, V, xp=np, progress=False, kind={A})", "kind",
        [("None", "None"), ("unknown", "'randoms'")])
objects(M, "deposit_file", "D.petsird.deposit_file(PFILE(), G, V, xp=np, progress=False, engine={A})", "engine",
        [("None", "None"), ("unknown", "'gpu'")])
ints(M, "deposit_file", "D.petsird.deposit_file(PFILE(), G, V, xp=np, progress=False, chunk_bytes={A})", "chunk_bytes",
     "65536", skip=("huge-1e9",))
objects(M, "deposit_file", "D.petsird.deposit_file(PFILE(), {A}, V, xp=np, progress=False)", "grid",
        [("None", "None"), ("tuple", "(4, 12, 12)")])
objects(M, "deposit_file", "D.petsird.deposit_file(PFILE(), G, {A}, xp=np, progress=False)", "viewset",
        [("None", "None"), ("list", "list(V)")])
base(M, "deposit_prompts_and_delayeds", "D.petsird.deposit_prompts_and_delayeds(PFILE(), G, V, xp=np, progress=False)")
objects(M, "deposit_prompts_and_delayeds", "D.petsird.deposit_prompts_and_delayeds({A}, G, V, xp=np, progress=False)",
        "path", [("None", "None"), ("missing", "'/nonexistent.petsird'"), ("truncated", "truncated(PFILE())")])
objects(M, "deposit_prompts_and_delayeds", "D.petsird.deposit_prompts_and_delayeds(PFILE(), G, V, xp=np, progress={A})",
        "progress", [("string", "'yes'"), ("int", "3")])
# data
base(M, "HistoImageData", "HD()")
arrays(M, "HistoImageData", "D.HistoImageData({A}, G, V)", "prompts", "stack()", counts=True)
arrays(M, "HistoImageData", "D.HistoImageData(stack(), G, V, factors={A})", "factors", "stack()", nonneg=True)
arrays(M, "HistoImageData", "D.HistoImageData(stack(), G, V, background={A})", "background", "stack()", nonneg=True)
objects(M, "HistoImageData", "D.HistoImageData(stack(), G, V, meta={A})", "meta", [("list", "['a']"), ("string", "'m'")])
objects(M, "HistoImageData", "D.HistoImageData(stack(), G, {A})", "viewset",
        [("list-of-views", "list(V)"), ("wrong-count", "D.ViewSet(3, 1)"), ("string", "'v'")])
objects(M, "HistoImageData", "D.HistoImageData(stack(), G, V, scanner={A})", "scanner",
        [("first-scanner", "FS"), ("string", "'s'")])
objects(M, "HistoImageData.save", "HD().save({A})", "path",
        [("None", "None"), ("int", "3"), ("directory", "TMP"), ("missing-dir", "'/nonexistent/dir/x.npz'")])
objects(M, "HistoImageData.save", "HD().save(os.path.join(TMP, 'x.npz'), compress={A})", "compress",
        [("string", "'yes'"), ("None", "None")])
base(M, "HistoImageData.load", "D.HistoImageData.load(HDFILE())")
objects(M, "HistoImageData.load", "D.HistoImageData.load({A})", "path",
        [("None", "None"), ("missing", "'/nonexistent.npz'"), ("garbage", "garbage()"), ("nifti", "NIFTI()"),
         ("directory", "TMP"), ("int", "3")])
objects(M, "HistoImageData.load", "D.HistoImageData.load(HDFILE(), xp={A})", "xp",
        [("string", "'torch'"), ("module-math", "math"), ("int", "3")])
objects(M, "HistoImageData.to", "HD().to({A})", "xp", [("string", "'torch'"), ("module-math", "math")])
# model data
base(M, "expected_data", "D.expected_data(HP(), gimg())")
arrays(M, "expected_data", "D.expected_data(HP(), {A})", "image", "gimg()", nonneg=True)
arrays(M, "expected_data", "D.expected_data(HP(), gimg(), factors={A})", "factors", "stack()", nonneg=True)
arrays(M, "expected_data", "D.expected_data(HP(), gimg(), background={A})", "background", "stack()", nonneg=True)
objects(M, "expected_data", "D.expected_data({A}, gimg())", "projector",
        [("None", "None"), ("first-projector", "FPJ()"), ("dualhead-projector", "DP()"), ("string", "'p'")])
base(M, "model_consistent_data", "D.model_consistent_data(HP(), gimg(), seed=1)")
arrays(M, "model_consistent_data", "D.model_consistent_data(HP(), {A}, seed=1)", "image", "gimg()", nonneg=True)
arrays(M, "model_consistent_data", "D.model_consistent_data(HP(), gimg(), factors={A}, seed=1)", "factors", "stack()",
       nonneg=True)
arrays(M, "model_consistent_data", "D.model_consistent_data(HP(), gimg(), background={A}, seed=1)", "background",
       "stack()", nonneg=True)
floats(M, "model_consistent_data", "D.model_consistent_data(HP(), gimg(), counts={A}, seed=1)", "counts", "1e4",
       extra=[("huge", "1e30")])
objects(M, "model_consistent_data", "D.model_consistent_data(HP(), gimg(), seed={A})", "seed",
        [("string", "'seed'"), ("negative", "-1"), ("float", "0.5")])
objects(M, "model_consistent_data", "D.model_consistent_data(HP(), gimg(), seed=1, noise={A})", "noise",
        [("string", "'no'"), ("None", "None")])
objects(M, "model_consistent_data", "D.model_consistent_data({A}, gimg(), seed=1)", "projector",
        [("first-projector", "FPJ()"), ("dualhead-projector", "DP()")])
objects(M, "model_consistent_data", "D.model_consistent_data(HP(), gimg(), seed=1, viewset={A})", "viewset",
        [("other-views", "D.ViewSet(1, 2)"), ("string", "'v'")])
objects(M, "model_consistent_data", "D.model_consistent_data(HP(), gimg(), seed=1, kernel={A})", "kernel",
        [("number", "5.8")])
# subsets
base(M, "ViewSubsets", "D.ViewSubsets(HP(), HD(), 2)")
ints(M, "ViewSubsets", "D.ViewSubsets(HP(), HD(), {A})", "subsets", "2", skip=("None",),
     extra=[("above-n-views", "3")])
case(M, "ViewSubsets", "n_subsets-keyword", "D.ViewSubsets(HP(), HD(), n_subsets=2)", ["n_subsets"])
objects(M, "ViewSubsets", "D.ViewSubsets(HP(), HD(), subsets={A})", "subsets",
        [("empty", "[]"), ("missing-view", "[[0]]"), ("repeated", "[[0, 0], [1]]"), ("out-of-range", "[[0], [1, 2]]"),
         ("negative", "[[0], [-1, 1]]"), ("floats", "[[0.0], [1.0]]"), ("string", "'ab'"), ("flat", "[0, 1]"),
         ("empty-subset", "[[0, 1], []]")])
objects(M, "ViewSubsets", "D.ViewSubsets(HP(), {A})", "data",
        [("None", "None"), ("first-data", "SD()"), ("dualhead-data", "DD()"), ("list", "stack().tolist()"),
         ("wrong-stack", "u((3,) + G.shape)")])
objects(M, "ViewSubsets", "D.ViewSubsets({A}, HD())", "projector",
        [("first-projector", "FPJ()"), ("dualhead-projector", "DP()"), ("string", "'p'")])
index(M, "ViewSubsets.forward", "VS().forward(gimg(), {A})", "subset", "1", 2)
index(M, "ViewSubsets.data", "VS().data({A})", "subset", "1", 2)
arrays(M, "ViewSubsets.forward", "VS().forward({A}, 0)", "x", "gimg()", names=("x", "image"))
outs(M, "ViewSubsets.forward", "VS().forward({X}, 0, out={O})", "VS().forward({X}, 0)",
     "np.zeros((1,) + G.shape, np.float32)", in_expr="gimg()", in_shape="G.shape", out_shape="(1,) + G.shape")
outs(M, "ViewSubsets.adjoint", "VS().adjoint({X}, 0, out={O})", "VS().adjoint({X}, 0)",
     "np.zeros(G.shape, np.float32)", in_expr="u((1,) + G.shape)", in_shape="(1,) + G.shape", out_shape="G.shape")
outs(M, "ViewSubsets.forward_units", "VS().forward_units({X}, [0, 1], out={O})", "VS().forward_units({X}, [0, 1])",
     "np.zeros(STACK, np.float32)", in_expr="gimg()", in_shape="G.shape", out_shape="STACK")
objects(M, "ViewSubsets.forward_units", "VS().forward_units(gimg(), {A})", "units",
        [("None", "None"), ("empty", "[]"), ("floats", "[0.5]"), ("out-of-range", "[7]"), ("negative", "[-1]"),
         ("string", "'0'")])
base(M, "ViewSubsets.forward_units", "VS().forward_units(gimg(), [1, 0])")
objects(M, "ViewSubsets.take_units", "VS().take_units(VS().data(0), 0, {A})", "positions",
        [("floats", "[0.5]"), ("out-of-range", "[3]"), ("negative", "[-1]"), ("None", "None")])
ints(M, "make_blocks", "D.make_blocks(4, {A})", "n_subsets", "2", extra=[("above-n-views", "5")])
ints(M, "make_blocks", "D.make_blocks({A}, 2)", "n_views", "4", skip=("huge-1e9",))
case(M, "make_blocks", "viewset-mismatch", "D.make_blocks(4, 2, V)", ["viewset", "n_views"])
# detector geometry helpers
base(M, "detector_hits", "D.detector_hits(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, CS)")
case(M, "detector_hits", "direction-not-unit", "D.detector_hits(0.0, 0.0, 0.0, 5.0, 0.0, 0.0, CS)", ["ux", "u"])
case(M, "detector_hits", "direction-zero", "D.detector_hits(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, CS)", ["ux", "u"])
case(M, "detector_hits", "x-nan", "D.detector_hits(float('nan'), 0.0, 0.0, 1.0, 0.0, 0.0, CS)", ["x"])
case(M, "detector_hits", "x-string", "D.detector_hits('0', 0.0, 0.0, 1.0, 0.0, 0.0, CS)", ["x"])
case(M, "detector_hits", "scanner-first", "D.detector_hits(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, FS)", ["scanner"])
case(M, "detector_exits", "point-outside", "D.detector_exits(1e4, 0.0, 0.0, 1.0, 0.0, 0.0, CS)", ["x"])
case(M, "to_numpy", "string", "D.to_numpy('abc')", ["a"])

# -----------------------------------------------------------------------------------------------------
# directpet.first
# -----------------------------------------------------------------------------------------------------
M = "first"
ints(M, "RotatingScanner", "F.RotatingScanner.small(n_rows={A})", "n_rows", "6", skip=("huge-1e9",))
ints(M, "RotatingScanner", "F.RotatingScanner.small(n_angles={A})", "n_angles", "12")
ints(M, "RotatingScanner", "F.RotatingScanner.small(n_radial={A})", "n_radial", "21")
floats(M, "RotatingScanner", "F.RotatingScanner.small(pitch_mm={A})", "pitch_mm", "1.6")
floats(M, "RotatingScanner", "F.RotatingScanner.small(mu_per_mm={A})", "mu_per_mm", "0.087", positive=False,
       nonneg=True)
floats(M, "RotatingScanner", "F.RotatingScanner.small(head_distance_mm={A})", "head_distance_mm", "160.0")
floats(M, "RotatingScanner", "F.RotatingScanner.small(acollinearity_fwhm_deg={A})", "acollinearity_fwhm_deg", "0.5",
       positive=False, nonneg=True)
case(M, "RotatingScanner", "crystal-larger-than-pitch", "F.RotatingScanner.small(crystal_mm=5.0)", ["crystal_mm"])
case(M, "RotatingScanner", "head-distance-inside-fov", "F.RotatingScanner.small(head_distance_mm=1.0)",
     ["head_distance_mm"])
objects(M, "RotatingScanner.from_dict", "F.RotatingScanner.from_dict({A})", "d",
        [("None", "None"), ("empty", "{}"), ("unknown-key", "dict(FS.to_dict(), bogus=1)"), ("string", "'{}'"),
         ("dualhead-dict", "DS.to_dict()")])
index(M, "RotatingScanner.row_z_mm", "FS.row_z_mm({A})", "r", "1", "FS.n_rows")
index(M, "RotatingScanner.radial_mm", "FS.radial_mm({A})", "rho", "1", "FS.n_radial")
arrays(M, "RotatingScanner.detection_probability", "FS.detection_probability({A})", "tan_alpha",
       "np.array([0.0, 0.1])", skip=("None",))
arrays(M, "RotatingScanner.depth_moments", "FS.depth_moments({A})", "tan_alpha", "np.array([0.0, 0.1])")
base(M, "build_super_lor_table", "F.build_super_lor_table(FS)")
objects(M, "build_super_lor_table", "F.build_super_lor_table({A})", "scanner",
        [("None", "None"), ("dualhead-scanner", "DS"), ("cylindrical", "CS")])
ints(M, "build_super_lor_table", "F.build_super_lor_table(FS, J={A})", "J", "2", lo=0, names=("J", "J, K"))
ints(M, "build_super_lor_table", "F.build_super_lor_table(FS, K={A})", "K", "1", lo=0, names=("K", "J, K"))
floats(M, "build_super_lor_table", "F.build_super_lor_table(FS, quasi_tolerance={A})", "quasi_tolerance", "0.05")
index(M, "SuperLORTable.tube", "TAB().tube({A})", "delta", "1", "FS.n_rows")
objects(M, "SuperLORTable.save", "TAB().save({A})", "path", [("None", "None"), ("missing-dir", "'/nonexistent/x.npz'")])
objects(M, "SuperLORTable.load", "F.SuperLORTable.load({A})", "path",
        [("None", "None"), ("missing", "'/nonexistent.npz'"), ("garbage", "garbage()"), ("other-kind", "HDFILE()")])
index(M, "analytic_tube", "F.analytic_tube(FS, {A})", "delta", "1", "FS.n_rows")
index(M, "lor_tube", "F.lor_tube(FS, {A}, 0, 0, 0)", "a", "1", "FS.n_angles")
index(M, "lor_tube", "F.lor_tube(FS, 0, {A}, 0, 0)", "r1", "1", "FS.n_rows")
base(M, "geometric_normalisation", "F.geometric_normalisation(FS, 64)")
ints(M, "geometric_normalisation", "F.geometric_normalisation(FS, {A})", "n_quad", "64", skip=("huge-1e9",))
objects(M, "geometric_normalisation", "F.geometric_normalisation({A}, 64)", "scanner",
        [("None", "None"), ("dualhead-scanner", "DS")])
ints(M, "interleaved_angle_subsets", "F.interleaved_angle_subsets(12, {A})", "n_subsets", "3",
     extra=[("above-n-angles", "13")])
base(M, "SuperLORProjector", "F.SuperLORProjector(TAB(), 'fast', backend='cpu')")
objects(M, "SuperLORProjector", "F.SuperLORProjector({A}, backend='cpu')", "table",
        [("None", "None"), ("dualhead-model", "PM()"), ("scanner", "FS"), ("direct-lut", "LUT()")])
objects(M, "SuperLORProjector", "F.SuperLORProjector(TAB(), {A}, backend='cpu')", "method",
        [("None", "None"), ("unknown", "'slow'"), ("int", "1")])
threads(M, "SuperLORProjector", "F.SuperLORProjector(TAB(), backend='cpu', threads={A})")
arrays(M, "SuperLORProjector.forward", "FPJ().forward({A})", "image", "fimg()")
arrays(M, "SuperLORProjector.adjoint", "FPJ().adjoint({A})", "sinogram", "fsino()")
objects(M, "SuperLORProjector.forward", "FPJ().forward(fimg(), {A})", "subset",
        [("empty", "[]"), ("out-of-range", "[12]"), ("negative", "[-1]"), ("floats", "[0.5]"), ("bool", "[True]"),
         ("string", "'0'"), ("2-d", "[[0, 1]]"), ("huge", "[2**63]"), ("float-integral", "[1.0]"),
         ("repeated-huge", "[0] * 10**7")])
base(M, "SuperLORProjector.forward", "FPJ().forward(fimg(), [0, 5])")
base(M, "SuperLORProjector.forward", "FPJ().forward(fimg(), np.int64(3))")
outs(M, "SuperLORProjector.forward", "FPJ().forward({X}, out={O})", "FPJ().forward({X})",
     "np.zeros(FSINO, np.float32)", in_expr="fimg()", in_shape="FG.shape", out_shape="FSINO")
outs(M, "SuperLORProjector.adjoint", "FPJ().adjoint({X}, out={O})", "FPJ().adjoint({X})",
     "np.zeros(FG.shape, np.float32)", in_expr="fsino()", in_shape="FSINO", out_shape="FG.shape")
outs(M, "SuperLORProjector.adjoint(angles)", "FPJ().adjoint({X}, [0, 5], out={O})", "FPJ().adjoint({X}, [0, 5])",
     "np.zeros(FG.shape, np.float32)", in_expr="fsino(2)", in_shape="(2,) + FSINO[1:]", out_shape="FG.shape")
base(M, "SuperLORProjector.back_with_sensitivity", "FPJfaith().back_with_sensitivity(fsino(), fsino())")
arrays(M, "SuperLORProjector.back_with_sensitivity", "FPJfaith().back_with_sensitivity(fsino(), {A})", "factors",
       "fsino()", nonneg=True, skip=("None",))
arrays(M, "SuperLORProjector.back_with_sensitivity", "FPJ().back_with_sensitivity(fsino(), {A})", "factors",
       "fsino()", only=("NaN", "wrong-shape", "negative"), nonneg=True)
base(M, "SuperLORProjector.subset.forward", "FPJ().subset([1, 2]).forward(fimg())")
objects(M, "SuperLORProjector.subset", "FPJ().subset({A})", "subset", [("empty", "[]"), ("out-of-range", "[99]")])
arrays(M, "SinogramData", "F.SinogramData(FS, {A})", "prompts", "fsino()", counts=True)
case(M, "SinogramData", "poisson-int64", "F.SinogramData(FS, np.random.default_rng(1).poisson(2.0, FSINO))",
     ["prompts"])
arrays(M, "SinogramData", "F.SinogramData(FS, fsino(), factors={A})", "factors", "fsino()", nonneg=True,
       skip=("None",))
arrays(M, "SinogramData", "F.SinogramData(FS, fsino(), background={A})", "background", "fsino()", nonneg=True,
       skip=("None",))
objects(M, "SinogramData", "F.SinogramData({A}, fsino())", "scanner",
        [("None", "None"), ("dualhead-scanner", "DS"), ("other-size", "F.RotatingScanner.small(n_angles=13)")])
base(M, "SinogramData.save+load", "p = os.path.join(TMP, 'sd.npz'); SD().save(p); _r = F.SinogramData.load(p)")
base(M, "SinogramData.save+load", "p = os.path.join(TMP, 'sd2.npz'); SD().save(p); _r = F.SinogramData.load(p, xp='numpy')")
objects(M, "SinogramData.load", "F.SinogramData.load({A})", "path",
        [("None", "None"), ("missing", "'/nonexistent.npz'"), ("garbage", "garbage()"), ("direct-file", "HDFILE()")])
objects(M, "SinogramData.load", "p = os.path.join(TMP, 'sd3.npz'); SD().save(p); _r = F.SinogramData.load(p, xp={A})",
        "xp", [("unknown", "'gpu'"), ("backend-name", "'cpu'"), ("int", "1"), ("math", "math")])
objects(M, "SinogramData.to", "SD().to({A})", "xp", [("unknown", "'gpu'"), ("int", "1"), ("math", "math")])
base(M, "model_consistent_data", "F.model_consistent_data(FPJ(), fimg(), seed=1)")
arrays(M, "model_consistent_data", "F.model_consistent_data(FPJ(), {A}, seed=1)", "image", "fimg()",
       nonneg=True)
arrays(M, "model_consistent_data", "F.model_consistent_data(FPJ(), fimg(), factors={A}, seed=1)", "factors",
       "fsino()", nonneg=True, skip=("None",))
arrays(M, "model_consistent_data", "F.model_consistent_data(FPJ(), fimg(), background={A}, seed=1)", "background",
       "fsino()", nonneg=True, skip=("None",))
floats(M, "model_consistent_data", "F.model_consistent_data(FPJ(), fimg(), counts={A}, seed=1)", "counts", "1e4",
       skip=("None",), extra=[("huge", "1e30")])
objects(M, "model_consistent_data", "F.model_consistent_data(FPJ(), fimg(), seed={A})", "seed",
        [("negative", "-1"), ("float", "1.5"), ("string", "'1'")])
objects(M, "model_consistent_data", "F.model_consistent_data({A}, fimg(), seed=1)", "projector",
        [("direct-projector", "HP()"), ("dualhead-projector", "DP()")])
base(M, "AngleSubsets", "F.AngleSubsets(FPJ(), SD(), 3)")
ints(M, "AngleSubsets", "F.AngleSubsets(FPJ(), SD(), {A})", "subsets", "3", extra=[("above-n-angles", "13")])
objects(M, "AngleSubsets", "F.AngleSubsets(FPJ(), SD(), subsets={A})", "subsets",
        [("empty", "[]"), ("missing", "[[0, 1]]"), ("repeated", "[list(range(12)), [0]]"), ("floats", "[[0.5]]"),
         ("empty-subset", "[list(range(12)), []]"), ("string", "'abc'"), ("None-entries", "[None]")])
objects(M, "AngleSubsets", "F.AngleSubsets({A}, SD(), 3)", "projector",
        [("direct-projector", "HP()"), ("dualhead-projector", "DP()"), ("None", "None")])
objects(M, "AngleSubsets", "F.AngleSubsets(FPJ(), {A}, 3)", "data",
        [("array", "fsino()"), ("direct-data", "HD()"), ("dualhead-data", "DD()"), ("None", "None")])
index(M, "AngleSubsets.forward", "AS().forward(fimg(), {A})", "subset", "1", 3)
index(M, "AngleSubsets.data", "AS().data({A})", "subset", "1", 3)
outs(M, "AngleSubsets.forward", "AS().forward({X}, 0, out={O})", "AS().forward({X}, 0)",
     "np.zeros((4,) + FSINO[1:], np.float32)", in_expr="fimg()", in_shape="FG.shape", out_shape="(4,) + FSINO[1:]")
objects(M, "AngleSubsets.forward_units", "AS().forward_units(fimg(), {A})", "units",
        [("None", "None"), ("empty", "[]"), ("floats", "[0.5, 1.7]"), ("out-of-range", "[99]"), ("huge", "[2**40]"),
         ("negative", "[-1]")])
base(M, "AngleSubsets.forward_units", "AS().forward_units(fimg(), [0, 3])")
case(M, "AngleSubsets.share", "rank-out-of-range", "AS().share(3, 2)", ["rank"])
case(M, "AngleSubsets.share", "n_ranks-zero", "AS().share(0, 0)", ["n_ranks"])
case(M, "AngleSubsets.share", "rank-float", "AS().share(0.0, 2)", ["rank"])
base(M, "AngleSubsets.share", "AS().share(0, 2)")
# the Monte Carlo: labelled first.simulate (DIRECT and dual-head have their own simulate)
FSIM = "F.simulate(FS, {act}, {n}, backend='cpu'{kw})"
base(M, "first.simulate", FSIM.format(act="fimg()", n="5000", kw=", threads=1"))
base(M, "first.simulate", FSIM.format(act="fimg()", n="5000", kw=", seed=None, grid=FG, progress=False"))
base(M, "first.simulate", FSIM.format(act="fimg()", n="5000", kw=", seed=np.random.default_rng(1)"))
arrays(M, "first.simulate", FSIM.format(act="{A}", n="500", kw=", threads=1"), "activity", "fimg()", nonneg=True)
case(M, "first.simulate", "activity-zero", FSIM.format(act="np.zeros(FG.shape, np.float32)", n="500", kw=""),
     ["activity"])
ints(M, "first.simulate", FSIM.format(act="fimg()", n="{A}", kw=", threads=1"), "n_decays", "500", skip=("huge-1e9",),
     extra=[("huge-2^62", "2**62")])
ints(M, "first.simulate", FSIM.format(act="fimg()", n="500", kw=", threads=1, chunk={A}"), "chunk", "100",
     skip=("huge-1e9", "None"))
objects(M, "first.simulate", FSIM.format(act="fimg()", n="500", kw=", threads=1, seed={A}"), "seed",
        [("string", "'1'"), ("negative", "-1"), ("float", "1.5"), ("huge", "2**64"), ("bool", "True")])
threads(M, "first.simulate", FSIM.format(act="fimg()", n="100", kw=", threads={A}"))
objects(M, "first.simulate", FSIM.format(act="fimg()", n="500", kw=", grid={A}"), "grid",
        [("tuple", "FG.shape"), ("other-grid", "G"), ("dualhead-grid", "DG")])
objects(M, "first.simulate", "F.simulate({A}, fimg(), 500, backend='cpu')", "scanner",
        [("None", "None"), ("dualhead", "DS"), ("cylindrical", "CS")])
objects(M, "first.simulate", FSIM.format(act="fimg()", n="500", kw=", progress={A}"), "progress",
        [("string", "'yes'"), ("int", "3")])
objects(M, "first.simulate", "F.simulate(FS, fimg(), 500, {A}, backend='cpu')", "simulate",
        [("seed-positional", "1")])
base(M, "trace_decays", "F.trace_decays(FS, fimg(), 100, seed=1)")
ints(M, "trace_decays", "F.trace_decays(FS, fimg(), {A}, seed=1)", "n_decays", "100")
objects(M, "trace_decays", "F.trace_decays(FS, fimg(), 100, seed={A})", "seed",
        [("string", "'1'"), ("negative", "-1"), ("huge", "2**64")])
objects(M, "trace_decays", "F.trace_decays(FS, fimg(), 100, seed=1, grid={A})", "grid",
        [("tuple", "FG.shape"), ("other-grid", "G")])

# -----------------------------------------------------------------------------------------------------
# directpet.dualhead
# -----------------------------------------------------------------------------------------------------
M = "dualhead"
ints(M, "DualHeadScanner", "H.DualHeadScanner.small(n_y={A})", "n_y", "8", skip=("huge-1e9",), names=("n_y", "n_y, n_z"))
ints(M, "DualHeadScanner", "H.DualHeadScanner.small(n_planes={A})", "n_planes", "15", names=("n_planes",),
     extra=[("even", "14")])
ints(M, "DualHeadScanner", "H.DualHeadScanner.small(voxels_per_crystal={A})", "voxels_per_crystal", "2")
floats(M, "DualHeadScanner", "H.DualHeadScanner.small(gap_mm={A})", "gap_mm", "60.0")
floats(M, "DualHeadScanner", "H.DualHeadScanner.small(acollinearity_fwhm_deg={A})", "acollinearity_fwhm_deg", "0.5",
       positive=False, nonneg=True)
floats(M, "DualHeadScanner", "H.DualHeadScanner.small(plane_mm={A})", "plane_mm", "2.0")
objects(M, "DualHeadScanner.from_dict", "H.DualHeadScanner.from_dict({A})", "d",
        [("None", "None"), ("empty", "{}"), ("unknown-key", "dict(DS.to_dict(), bogus=1)"),
         ("first-dict", "FS.to_dict()")])
index(M, "DualHeadScanner.class_of", "DS.class_of({A})", "k", "1", "DS.n_classes")
index(M, "DualHeadScanner.class_signs", "DS.class_signs({A})", "k", "1", "DS.n_classes")
index(M, "DualHeadScanner.crystal_y_mm", "DS.crystal_y_mm({A})", "c", "1", "DS.n_y")
index(M, "DualHeadScanner.plane_x_mm", "DS.plane_x_mm({A})", "p", "1", "DS.n_planes")
objects(M, "DualHeadScanner.class_list", "DS.class_list({A})", "classes",
        [("empty", "[]"), ("out-of-range", "[DS.n_classes]"), ("negative", "[-1]"), ("floats", "[0.5]"),
         ("bool", "[True]"), ("string", "'0'"), ("2-d", "[[0, 1]]"), ("huge", "[2**63]"), ("float-integral", "[1.0]")])
base(M, "DualHeadScanner.class_list", "DS.class_list([0, 3])")
objects(M, "DualHeadScanner.lor_index", "DS.lor_index({A}, 0, 0, 0)", "c_uy",
        [("out-of-range", "DS.n_y"), ("negative", "-1"), ("float", "0.5"), ("string", "'0'"), ("None", "None")])
base(M, "DualHeadScanner.lor_index", "DS.lor_index(1, 0, 2, 0)")
objects(M, "DualHeadScanner.lor_crystals", "DS.lor_crystals({A})", "classes", [("empty", "[]"), ("floats", "[0.5]")])
# model
base(M, "build_patch_model", "H.build_patch_model(DS, backend='cpu', classes=[0, 1])")
objects(M, "build_patch_model", "H.build_patch_model({A}, backend='cpu', classes=[0])", "scanner",
        [("None", "None"), ("first-scanner", "FS"), ("cylindrical", "CS")])
ints(M, "build_patch_model", "H.build_patch_model(DS, backend='cpu', classes=[0], angle_samples={A})", "angle_samples",
     "2", skip=("huge-1e9",))
floats(M, "build_patch_model", "H.build_patch_model(DS, backend='cpu', classes=[0], threshold={A})", "threshold", "1e-3",
       positive=False, nonneg=True, extra=[("one", "1.0")])
objects(M, "build_patch_model", "H.build_patch_model(DS, backend='cpu', classes={A})", "classes",
        [("empty", "[]"), ("out-of-range", "[10**6]"), ("floats", "[0.5]"), ("string", "'a'")])
ints(M, "build_patch_model", "H.build_patch_model(DS, backend='cpu', classes=[0], chunk={A})", "chunk", "1",
     skip=("None",))
threads(M, "build_patch_model", "H.build_patch_model(DS, backend='cpu', classes=[0], threads={A})")
objects(M, "build_patch_model", "H.build_patch_model(DS, backend='cpu', classes=[0], progress={A})", "progress",
        [("string", "'yes'"), ("int", "3")])
base(M, "lor_response", "H.lor_response(DS, (0, 0), (0, 0), (0, 0, 0))")
arrays(M, "lor_response", "H.lor_response(DS, {A}, (0, 0), (0, 0, 0))", "c_u", "np.array([0, 0])",
       skip=("NaN", "inf"))
arrays(M, "lor_response", "H.lor_response(DS, (0, 0), (0, 0), {A})", "voxel", "np.array([0, 0, 0])",
       skip=("NaN", "inf"))
case(M, "lor_response", "voxel-plane-out-of-range", "H.lor_response(DS, (0, 0), (0, 0), (0, 0, DS.n_planes))", ["voxel"])
case(M, "lor_response", "voxel-yz-out-of-range", "H.lor_response(DS, (0, 0), (0, 0), (10**6, 10**6, 0))", ["voxel"])
case(M, "lor_response", "c_u-out-of-range", "H.lor_response(DS, (10**6, 0), (0, 0), (0, 0, 0))", ["c_u"])
ints(M, "lor_response", "H.lor_response(DS, (0, 0), (0, 0), (0, 0, 0), voxel_samples={A})", "voxel_samples", "2",
     skip=("huge-1e9",))
base(M, "patch_candidate_counts", "H.patch_candidate_counts(DS, [0])")
objects(M, "patch_candidate_counts", "H.patch_candidate_counts(DS, {A})", "classes",
        [("empty", "[]"), ("out-of-range", "[10**6]"), ("floats", "[0.5]")])
objects(M, "patch_candidate_counts", "H.patch_candidate_counts({A}, [0])", "scanner", [("first", "FS"), ("None", "None")])
base(M, "PatchModel.from_taps", "H.PatchModel.from_taps(DS, [0], [0], [0], [0], [1.0])")
objects(M, "PatchModel.from_taps", "H.PatchModel.from_taps(DS, {A}, [0], [0], [0], [1.0])", "k",
        [("out-of-range", "[10**6]"), ("negative", "[-1]"), ("None", "None"), ("string", "['a']"), ("bool", "[True]")])
objects(M, "PatchModel.from_taps", "H.PatchModel.from_taps(DS, [0], {A}, [0], [0], [1.0])", "p",
        [("out-of-range", "[DS.n_planes]"), ("negative", "[-1]"), ("float", "[0.5]")])
objects(M, "PatchModel.from_taps", "H.PatchModel.from_taps(DS, [0], [0], {A}, [0], [1.0])", "dy",
        [("huge", "[2**40]"), ("float", "[0.5]"), ("int16-overflow", "[40000]"), ("None", "None")])
objects(M, "PatchModel.from_taps", "H.PatchModel.from_taps(DS, [0], [0], [0], [0], {A})", "w",
        [("inf", "[np.inf]"), ("complex", "[1j]"), ("length", "[1.0, 2.0]"), ("empty", "[]"), ("None", "None")])
objects(M, "PatchModel.from_taps", "H.PatchModel.from_taps({A}, [0], [0], [0], [0], [1.0])", "scanner",
        [("None", "None"), ("first", "FS")])
index(M, "PatchModel.row", "PM().row({A}, 0)", "k", "1", "DS.n_classes")
index(M, "PatchModel.patch", "PM().patch(0, {A})", "p", "1", "DS.n_planes")
objects(M, "PatchModel.load", "H.PatchModel.load({A})", "path",
        [("None", "None"), ("missing", "'/nonexistent.npz'"), ("garbage", "garbage()"), ("other-kind", "HDFILE()")])
base(M, "PatchModel.save+load", "p = os.path.join(TMP, 'pm.npz'); PM().save(p); _r = H.PatchModel.load(p)")
# symmetry
base(M, "seed_key", "H.seed_key(DS, (0, 0), (1, 0), (0, 0, 0))")
arrays(M, "seed_key", "H.seed_key(DS, {A}, (1, 0), (0, 0, 0))", "c_u", "np.array([0, 0])", skip=("NaN", "inf"))
case(M, "seed_key", "voxel-plane-out-of-range", "H.seed_key(DS, (0, 0), (1, 0), (0, 0, 99))", ["voxel"])
case(M, "seed_key", "voxel-float", "H.seed_key(DS, (0, 0), (1, 0), (0.5, 0, 0))", ["voxel"])
base(M, "build_seed_drf", "H.build_seed_drf(DS, planes=[0])")
objects(M, "build_seed_drf", "H.build_seed_drf(DS, planes={A})", "planes",
        [("empty", "[]"), ("out-of-range", "[99]"), ("negative", "[-1]"), ("string", "'0'")])
objects(M, "build_seed_drf", "H.build_seed_drf(DS, planes=[0], backend={A})", "backend",
        [("None", "None"), ("unknown", "'gpu'")])
base(M, "seed_lookup", "H.seed_lookup(SEEDS(), (0, 0), (1, 0), (0, 0, DS.n_planes // 2))")
objects(M, "seed_lookup", "H.seed_lookup({A}, (0, 0), (1, 0), (0, 0, 0))", "seeds",
        [("None", "None"), ("model", "PM()")])
case(M, "seed_lookup", "plane-not-built", "H.seed_lookup(SEEDS(), (0, 0), (1, 0), (0, 0, 0))", ["voxel"])
case(M, "seed_lookup", "c_u-float", "H.seed_lookup(SEEDS(), (0.5, 0), (1, 0), (0, 0, 7))", ["c_u"])
base(M, "storage_report", "H.storage_report(PM(), count_seed_candidates=False)")
objects(M, "storage_report", "H.storage_report({A})", "model", [("None", "None"), ("table", "TAB()")])
objects(M, "storage_report", "H.storage_report(PM(), {A})", "seeds", [("model", "PM()"), ("string", "'s'")])
objects(M, "storage_report", "H.storage_report(PM(), count_seed_candidates={A})", "count_seed_candidates",
        [("string", "'no'"), ("None", "None")])
# projector
base(M, "DualHeadProjector", "H.DualHeadProjector(PM(), backend='cpu')")
objects(M, "DualHeadProjector", "H.DualHeadProjector({A}, backend='cpu')", "model",
        [("None", "None"), ("first-table", "TAB()"), ("scanner", "DS")])
objects(M, "DualHeadProjector", "H.DualHeadProjector(PM(), {A}, backend='cpu')", "method",
        [("None", "None"), ("unknown", "'fast'"), ("cuda-only", "'alg1'")])
threads(M, "DualHeadProjector", "H.DualHeadProjector(PM(), backend='cpu', threads={A})")
arrays(M, "DualHeadProjector.forward", "DP().forward({A})", "image", "dimg()")
arrays(M, "DualHeadProjector.adjoint", "DP().adjoint({A})", "y", "dy()")
arrays(M, "DualHeadProjector.forward", "DP().forward(dimg(), skip_zero={A})", "skip_zero", "dy()", skip=("None",))
objects(M, "DualHeadProjector.forward", "DP().forward(dimg(), {A})", "subset",
        [("empty", "[]"), ("out-of-range", "[DS.n_classes]"), ("negative", "[-1]"), ("floats", "[0.5]"),
         ("bool", "[True]"), ("string", "'0'"), ("huge", "[2**63]"), ("repeated-huge", "[0] * 10**7")])
base(M, "DualHeadProjector.forward", "DP().forward(dimg(), [0, 0, 3])")
outs(M, "DualHeadProjector.forward", "DP().forward({X}, out={O})", "DP().forward({X})", "np.zeros(NL, np.float32)",
     in_expr="dimg()", in_shape="DG.shape", out_shape="(NL,)")
case(M, "DualHeadProjector.forward", "out-overlap-skip_zero(ref)", "e, o = overlap((NL,), (NL,), 3)\n"
     "x = dimg()\nref = DP().forward(x, skip_zero=e.copy())\n_r = DP().forward(x, out=o, skip_zero=e)\n_same = same(_r, ref)",
     ["out"], kind="overlap")
outs(M, "DualHeadProjector.adjoint", "DP().adjoint({X}, out={O})", "DP().adjoint({X})", "np.zeros(DG.shape, np.float32)",
     in_expr="dy()", in_shape="(NL,)", out_shape="DG.shape")
objects(M, "DualHeadProjector.subset", "DP().subset({A})", "subset", [("empty", "[]")])
base(M, "DualHeadProjector.subset.forward", "DP().subset([1, 2]).forward(dimg())")
# data
base(M, "DualHeadData", "DD()")
arrays(M, "DualHeadData", "H.DualHeadData(DS, {A})", "prompts", "dy()", counts=True)
case(M, "DualHeadData", "poisson-int64", "H.DualHeadData(DS, np.random.default_rng(1).poisson(2.0, NL))", ["prompts"])
arrays(M, "DualHeadData", "H.DualHeadData(DS, dy(), factors={A})", "factors", "dy()", nonneg=True, skip=("None",))
arrays(M, "DualHeadData", "H.DualHeadData(DS, dy(), background={A})", "background", "dy()", nonneg=True, skip=("None",))
objects(M, "DualHeadData", "H.DualHeadData({A}, dy())", "scanner", [("None", "None"), ("first", "FS")])
objects(M, "DualHeadData.load", "H.DualHeadData.load({A})", "path",
        [("None", "None"), ("missing", "'/nonexistent.npz'"), ("garbage", "garbage()"), ("direct-file", "HDFILE()")])
base(M, "DualHeadData.save+load", "p = os.path.join(TMP, 'dd.npz'); DD().save(p); _r = H.DualHeadData.load(p, xp=np)")
objects(M, "DualHeadData.load", "p = os.path.join(TMP, 'dd2.npz'); DD().save(p); _r = H.DualHeadData.load(p, xp={A})",
        "xp", [("unknown", "'gpu'"), ("backend-name", "'cpu'"), ("int", "1"), ("math", "math")])
objects(M, "DualHeadData.to", "DD().to({A})", "xp", [("unknown", "'gpu'"), ("backend-name", "'cuda'"), ("int", "1")])
base(M, "model_consistent_data", "H.model_consistent_data(DP(), dimg(), seed=1)")
arrays(M, "model_consistent_data", "H.model_consistent_data(DP(), {A}, seed=1)", "image", "dimg()", nonneg=True)
arrays(M, "model_consistent_data", "H.model_consistent_data(DP(), dimg(), seed=1, factors={A})", "factors", "dy()",
       nonneg=True, skip=("None",))
arrays(M, "model_consistent_data", "H.model_consistent_data(DP(), dimg(), seed=1, background={A})", "background",
       "dy()", nonneg=True, skip=("None",))
floats(M, "model_consistent_data", "H.model_consistent_data(DP(), dimg(), seed=1, counts={A})", "counts",
       "1e4", skip=("None",), extra=[("huge", "1e30")])
objects(M, "model_consistent_data", "H.model_consistent_data(DP(), dimg(), seed={A})", "seed",
        [("None", "None"), ("negative", "-1"), ("float", "1.5"), ("string", "'1'")])
objects(M, "model_consistent_data", "H.model_consistent_data({A}, dimg(), seed=1)", "projector",
        [("first-projector", "FPJ()"), ("direct-projector", "HP()")])
# subsets
base(M, "orientation_subsets", "H.orientation_subsets(DS, 4)")
ints(M, "orientation_subsets", "H.orientation_subsets(DS, {A})", "n_subsets", "4", extra=[("above", "10**4")])
objects(M, "orientation_subsets", "H.orientation_subsets(DS, 4, {A})", "seed",
        [("None", "None"), ("negative", "-1"), ("float", "1.5"), ("huge", "2**64")])
base(M, "DualHeadSubsets", "H.DualHeadSubsets(DP(), DD(), 4)")
ints(M, "DualHeadSubsets", "H.DualHeadSubsets(DP(), DD(), {A})", "subsets", "4")
objects(M, "DualHeadSubsets", "H.DualHeadSubsets(DP(), DD(), subsets={A})", "subsets",
        [("empty", "[]"), ("missing", "[[0]]"), ("floats", "[[0.5]]"), ("string", "'ab'"), ("None-entry", "[None]"),
         ("empty-subset", "[list(range(DS.n_classes)), []]")])
objects(M, "DualHeadSubsets", "H.DualHeadSubsets(DP(), DD(), 4, skip_zero_counts={A})", "skip_zero_counts",
        [("string", "'yes'"), ("None", "None"), ("int", "1")])
objects(M, "DualHeadSubsets", "H.DualHeadSubsets({A}, DD(), 4)", "projector",
        [("first-projector", "FPJ()"), ("direct-projector", "HP()"), ("None", "None")])
objects(M, "DualHeadSubsets", "H.DualHeadSubsets(DP(), {A}, 4)", "data",
        [("array", "dy()"), ("first-data", "SD()"), ("None", "None")])
index(M, "DualHeadSubsets.forward", "DSUB().forward(dimg(), {A})", "subset", "1", 4)
objects(M, "DualHeadSubsets.forward_units", "DSUB().forward_units(dimg(), {A})", "units",
        [("None", "None"), ("empty", "[]"), ("floats", "[0.5]"), ("out-of-range", "[10**6]"), ("negative", "[-1]")])
base(M, "DualHeadSubsets.forward_units", "DSUB().forward_units(dimg(), [0, 1])")
# Monte Carlo
# labelled dualhead.simulate (DIRECT and FIRST have their own simulate)
base(M, "dualhead.simulate", "H.simulate(DS, dimg(), 1000, seed=1, backend='cpu', threads=1)")
base(M, "dualhead.simulate", "H.simulate(DS, dimg(), 1000, backend='cpu', progress=False)")
base(M, "dualhead.simulate", "H.simulate(DS, dimg(), n_trues=10, seed=np.random.default_rng(1), backend='cpu')")
arrays(M, "dualhead.simulate", "H.simulate(DS, {A}, 1000, seed=1, backend='cpu', threads=1)", "activity", "dimg()",
       nonneg=True)
ints(M, "dualhead.simulate", "H.simulate(DS, dimg(), {A}, seed=1, backend='cpu', threads=1)", "n_decays", "1000",
     skip=("None", "huge-1e9"), extra=[("huge-2^62", "2**62")], names=("n_decays",))
ints(M, "dualhead.simulate", "H.simulate(DS, dimg(), None, n_trues={A}, seed=1, backend='cpu', threads=1)",
     "n_trues", "10", skip=("None", "huge-1e9", "huge-2^31"))
case(M, "dualhead.simulate", "n_trues-unreachable",
     "a = np.zeros(DG.shape, np.float32); a[0, 0, 0] = 1\n"
     "_r = H.simulate(DS, a, None, n_trues=10**6, seed=1, backend='cpu', threads=1)", ["n_trues", "activity"])
objects(M, "dualhead.simulate", "H.simulate(DS, dimg(), 1000, seed={A}, backend='cpu')", "seed",
        [("string", "'1'"), ("negative", "-1"), ("float", "1.5"), ("huge", "2**64"), ("bool", "True")])
ints(M, "dualhead.simulate", "H.simulate(DS, dimg(), 1000, seed=1, backend='cpu', chunk={A})", "chunk", "100",
     skip=("None", "huge-1e9"))
threads(M, "dualhead.simulate", "H.simulate(DS, dimg(), 200, seed=1, backend='cpu', threads={A})")
objects(M, "dualhead.simulate", "H.simulate({A}, dimg(), 100, seed=1, backend='cpu')", "scanner",
        [("None", "None"), ("first", "FS")])
objects(M, "dualhead.simulate", "H.simulate(DS, dimg(), 100, seed=1, backend='cpu', xp={A})", "xp",
        [("string", "'numpy'"), ("math", "math")])
objects(M, "dualhead.simulate", "H.simulate(DS, dimg(), 100, {A}, backend='cpu')", "simulate",
        [("seed-positional", "1")])
base(M, "trace_events", "H.trace_events(DS, dimg(), 100, seed=1)")
ints(M, "trace_events", "H.trace_events(DS, dimg(), {A}, seed=1)", "n_decays", "100", skip=("huge-1e9",))
ints(M, "trace_events", "H.trace_events(DS, dimg(), 100, seed=1, first={A})", "first", "5", lo=0,
     skip=("huge-1e9", "huge-2^31"), extra=[("huge-2^64", "2**64")])
arrays(M, "trace_events", "H.trace_events(DS, {A}, 100, seed=1)", "activity", "dimg()", nonneg=True,
       only=("None", "NaN", "negative", "wrong-shape", "dtype-float64"))
objects(M, "trace_events", "H.trace_events(DS, dimg(), 100, seed={A})", "seed",
        [("string", "'1'"), ("negative", "-1"), ("huge", "2**64")])

# -----------------------------------------------------------------------------------------------------
# directpet.recon
# -----------------------------------------------------------------------------------------------------
M = "recon"
for alg in ("mlem", "osem", "block_ramla"):
    base(M, alg, f"R.{alg}(VS(), 2, progress=False)")
    ints(M, alg, f"R.{alg}(VS(), {{A}}, progress=False)", "n_iter", "2", skip=("huge-1e9", "huge-2^31"))
    arrays(M, alg, f"R.{alg}(VS(), 2, x0={{A}}, progress=False)", "x0", "gimg()", nonneg=True, skip=("None",))
    objects(M, alg, f"R.{alg}({{A}}, 2, progress=False)", "problem",
            [("None", "None"), ("projector", "HP()"), ("data", "HD()"), ("string", "'p'")])
    ints(M, alg, f"R.{alg}(VS(), 2, progress=False, store_every={{A}})", "store_every", "1", skip=("None",))
    case(M, alg, "x0-huge-float64", f"R.{alg}(VS(), 2, x0=np.full(G.shape, 1e300), progress=False)", ["x0"])
    case(M, alg, "x0-tiny", f"R.{alg}(VS(), 2, x0=np.full(G.shape, 1e-45, np.float32), progress=False)", ["x0"])
    case(M, alg, "track-loglik-string", f"R.{alg}(VS(), 2, progress=False, track_loglik='yes')", ["track_loglik"])
    case(M, alg, "first-problem", f"R.{alg}(AS(), 1, progress=False)", [], kind="base")
    case(M, alg, "dualhead-problem", f"R.{alg}(DSUB(), 1, progress=False)", [], kind="base")
    case(M, alg, "first-problem-direct-x0", f"R.{alg}(AS(), 1, x0=gimg(), progress=False)", ["x0"])
    case(M, alg, "data-with-nan", f"R.{alg}(ToyProblem(nan_(np.ones(7, np.float32)).astype(np.float32)), 1, progress=False)",
         ["data"])
    case(M, alg, "data-negative", f"R.{alg}(ToyProblem(-np.ones(7, np.float32)), 1, progress=False)", ["data"])
    case(M, alg, "data-float64", f"R.{alg}(ToyProblem(np.ones(7)), 1, progress=False)", ["data"])
    case(M, alg, "data-wrong-length", f"R.{alg}(ToyProblem(np.ones(5, np.float32)), 1, progress=False)", ["data"])
    case(M, alg, "callback-raises", f"R.{alg}(VS(), 2, progress=False, callback=lambda *a: 1/0)", ["callback"])
objects(M, "osem", "R.osem(VS(), 2, progress=False, order={A})", "order",
        [("empty", "[]"), ("repeated", "[0, 0]"), ("out-of-range", "[0, 5]"), ("floats", "[0.0, 1.0]"),
         ("string", "'01'"), ("negative", "[-1, 0]"), ("bool", "[True, False]")])
floats(M, "block_ramla", "R.block_ramla(VS(), 2, lambda0={A}, progress=False)", "lambda0", "0.03",
       extra=[("above-1", "5.0")])
floats(M, "ramla_lambda", "R.ramla_lambda(3, {A})", "lambda0", "0.03")
ints(M, "ramla_lambda", "R.ramla_lambda({A})", "n", "3", skip=("huge-2^63",))
base(M, "poisson_loglik", "R.poisson_loglik(VS(), gimg())")
arrays(M, "poisson_loglik", "R.poisson_loglik(VS(), {A})", "x", "gimg()", nonneg=True)
objects(M, "poisson_loglik", "R.poisson_loglik({A}, gimg())", "problem", [("None", "None"), ("projector", "HP()")])
base(M, "sensitivity_image", "R.sensitivity_image(VS())")
objects(M, "sensitivity_image", "R.sensitivity_image(VS(), {A})", "subsets",
        [("empty", "[]"), ("out-of-range", "[5]"), ("negative", "[-1]"), ("floats", "[0.5]"), ("string", "'0'"),
         ("int", "1"), ("repeated", "[0, 0]")])
objects(M, "sensitivity_image", "R.sensitivity_image({A})", "problem", [("None", "None"), ("projector", "HP()")])
ints(M, "spread_order", "R.spread_order({A})", "n", "5", skip=("huge-2^63",), extra=[("huge-2^62", "2**62")])
base(M, "check_nonnegative", "R.check_nonnegative(np.ones(3, np.float32), 'a', None, np, (3,))")
objects(M, "check_nonnegative", "R.check_nonnegative(np.ones(3, np.float32), 'a', None, {A}, (3,))", "xp",
        [("None", "None"), ("string", "'numpy'")])
case(M, "check_nonnegative", "name-None", "R.check_nonnegative(-np.ones(3, np.float32), None, None, np, (3,))", ["name", "None"])
base(M, "ViewSubsets.totals", "VS().totals()")
base(M, "SubsetProblem.check", "VS().check()")
case(M, "SubsetProblem.check", "n_subsets-zero", "p = ToyProblem(); p.n_subsets = 0; _r = p.check()", ["n_subsets"])
case(M, "SubsetProblem.check", "n_subsets-string", "p = ToyProblem(); p.n_subsets = 'x'; _r = p.check()", ["n_subsets"])
case(M, "SubsetProblem.check", "n_subsets-None", "p = ToyProblem(); p.n_subsets = None; _r = p.check()", ["n_subsets"])
case(M, "StoredSubsets.share", "rank-negative", "VS().share(-1, 2)", ["rank"])
case(M, "StoredSubsets.share", "n_ranks-too-many", "VS().share(0, 3)", ["n_ranks"])
case(M, "StoredSubsets.share", "xp-string", "VS().share(0, 1, xp='numpy')", ["xp"])

# the priors (the float32 images take the compiled pass) and the penalised algorithms
RDP = "R.RelativeDifferencePrior(0.5, G, epsilon=0.01)"
for meth in ("value", "gradient", "hessian_diagonal"):
    arrays(M, f"RelativeDifferencePrior.{meth}", f"{RDP}.{meth}({{A}})", "x", "gimg()", nonneg=True,
           skip=("list",))
arrays(M, "RelativeDifferencePrior.add_gradient", f"{RDP}.add_gradient(gimg(), {{A}}, -0.5)", "out", "gimg()",
       skip=("NaN", "inf", "negative", "list"))
case(M, "RelativeDifferencePrior.add_gradient", "out-read-only",
     f"o = gimg(); o.setflags(write=False); _r = {RDP}.add_gradient(gimg(), o, -0.5)", ["out"])
floats(M, "RelativeDifferencePrior", "R.RelativeDifferencePrior({A}, G, epsilon=0.01)", "beta", "0.5",
       positive=False, nonneg=True)
floats(M, "RelativeDifferencePrior", "R.RelativeDifferencePrior(0.5, G, epsilon={A})", "epsilon", "0.01")
floats(M, "RelativeDifferencePrior", "R.RelativeDifferencePrior(0.5, G, gamma={A}, epsilon=0.01)", "gamma", "2.0",
       positive=False, nonneg=True)
floats(M, "LogCoshPrior", "R.LogCoshPrior(0.5, G, delta={A})", "delta", "0.1")
objects(M, "RelativeDifferencePrior", "R.RelativeDifferencePrior(0.5, {A}, epsilon=0.01)", "voxel_size",
        [("None", "None"), ("string", "'1'"), ("two", "(1.0, 1.0)"), ("zero", "(1.0, 0.0, 1.0)"),
         ("nan", "(1.0, float('nan'), 1.0)"), ("number", "2.0")])
objects(M, "QuadraticPrior", "R.QuadraticPrior(0.5, G, neighbourhood={A})", "neighbourhood",
        [("18", "18"), ("string", "'26'"), ("float", "26.5"), ("None", "None")])
arrays(M, "QuadraticPrior", "R.QuadraticPrior(0.5, G, kappa={A}).gradient(gimg())", "kappa", "gimg()", nonneg=True,
       skip=("None", "list", "string"))
base(M, "bsrem", f"R.bsrem(VS(), {RDP}, 2, progress=False)")
ints(M, "bsrem", f"R.bsrem(VS(), {RDP}, {{A}}, progress=False)", "n_iter", "2", skip=("huge-1e9", "huge-2^31"))
floats(M, "bsrem", f"R.bsrem(VS(), {RDP}, 2, lambda0={{A}}, progress=False)", "lambda0", "1.0",
       extra=[("above-1", "5.0")])
objects(M, "bsrem", "R.bsrem(VS(), {A}, 2, progress=False)", "prior",
        [("None", "None"), ("number", "0.5"), ("string", "'rdp'"), ("projector", "HP()"),
         ("wrong-kappa-shape", "R.QuadraticPrior(0.5, G, kappa=np.ones((2, 2, 2)))")])
objects(M, "bsrem", f"R.bsrem(VS(), {RDP}, 2, preconditioner={{A}}, progress=False)", "preconditioner",
        [("unknown", "'min'"), ("None", "None"), ("number", "1")])
arrays(M, "bsrem", f"R.bsrem(VS(), {RDP}, 2, x0={{A}}, progress=False)", "x0", "gimg()", nonneg=True, skip=("None",))
base(M, "svrg", f"R.svrg(VS(), {RDP}, 2, progress=False)")
floats(M, "svrg", f"R.svrg(VS(), {RDP}, 2, step={{A}}, progress=False)", "step", "1.0")
ints(M, "svrg", f"R.svrg(VS(), {RDP}, 2, snapshot_every={{A}}, progress=False)", "snapshot_every", "2",
     skip=("huge-1e9", "huge-2^31", "huge-2^63"))
ints(M, "svrg", f"R.svrg(VS(), {RDP}, 2, seed={{A}}, progress=False)", "seed", "1", lo=0,
     skip=("huge-1e9", "huge-2^31", "huge-2^63"))
base(M, "map_em", "R.map_em(VS(), R.QuadraticPrior(0.05, G), 2, progress=False)")
case(M, "map_em", "prior-rdp", f"R.map_em(VS(), {RDP}, 2, progress=False)", ["prior"])
base(M, "penalised_objective", f"R.penalised_objective(VS(), gimg(), {RDP})")
arrays(M, "penalised_objective", f"R.penalised_objective(VS(), {{A}}, {RDP})", "x", "gimg()", nonneg=True,
       skip=("list",))
base(M, "sqrt_hessian_row_sum", "R.sqrt_hessian_row_sum(VS(), gimg())")
arrays(M, "sqrt_hessian_row_sum", "R.sqrt_hessian_row_sum(VS(), {A})", "x", "gimg()", nonneg=True,
       skip=("None", "list"))
case(M, "sqrt_hessian_row_sum", "no-x", "R.sqrt_hessian_row_sum(VS())", ["x"])
case(M, "sqrt_hessian_row_sum", "approximate-with-x", "R.sqrt_hessian_row_sum(VS(), gimg(), approximate=True)", ["x"])
base(M, "rdp_beta_sweep", "R.rdp_beta_sweep(VS(), G, [0.01], 1, gimg(), np.mean)")
objects(M, "rdp_beta_sweep", "R.rdp_beta_sweep(VS(), G, {A}, 1, gimg(), np.mean)", "betas",
        [("negative", "[-0.1]"), ("nan", "[float('nan')]"), ("string", "['a']"), ("None", "None"),
         ("number", "0.1")])
objects(M, "rdp_beta_sweep", "R.rdp_beta_sweep(VS(), G, [0.01], 1, gimg(), {A})", "measure",
        [("None", "None"), ("string", "'noise'")])
arrays(M, "rdp_beta_sweep", "R.rdp_beta_sweep(VS(), G, [0.01], 1, gimg(), np.mean, kappa={A})", "kappa", "gimg()",
       nonneg=True, skip=("None", "list", "string"), only=("NaN", "inf", "negative", "wrong-shape", "0-d", "empty"))
ints(M, "rdp_beta_sweep", "R.rdp_beta_sweep(VS(), G, [0.01], {A}, gimg(), np.mean)", "n_passes", "1",
     skip=("huge-1e9", "huge-2^31", "huge-2^63"))

# -----------------------------------------------------------------------------------------------------
# directpet.analysis
# -----------------------------------------------------------------------------------------------------
M = "analysis"
base(M, "rod_noise", "A.rod_noise(DERIMG(), *DER())")
arrays(M, "rod_noise", "A.rod_noise({A}, *DER())", "image", "DERIMG()",
       only=("None", "string", "wrong-shape", "wrong-ndim", "NaN", "inf", "empty"))
floats(M, "rod_noise", "A.rod_noise(DERIMG(), *DER(), core_fraction={A})", "core_fraction", "0.5",
       extra=[("above-1", "1.5")])
objects(M, "rod_noise", "A.rod_noise(DERIMG(), DER()[0], {A})", "info",
        [("None", "None"), ("phantom-info", "PHI()[1]"), ("string", "'derenzo'")])
case(M, "rod_noise", "diameter-unknown", "A.rod_noise(DERIMG(), *DER(), diameter_mm=3.3)",
     ["diameter_mm"])
base(M, "crc", "A.crc(*PHI())")
arrays(M, "crc", "A.crc({A}, PHI()[1])", "image", "PHI()[0]")
objects(M, "crc", "A.crc(PHI()[0], {A})", "phantom_info",
        [("None", "None"), ("derenzo-info", "DER()[1]"), ("grid", "G"), ("string", "'info'")])
objects(M, "crc", "A.crc(*PHI(), axial={A})", "axial", [("None", "None"), ("unknown", "'cubic'")])
ints(M, "crc", "A.crc(*PHI(), supersample={A})", "supersample", "4", skip=("huge-2^31", "huge-2^63"))
objects(M, "crc", "A.crc(*PHI(), rois={A})", "rois", [("string", "'r'"), ("list", "[1, 2]")])
case(M, "crc", "image-zero", "A.crc(np.zeros(G.shape, np.float32), PHI()[1])", ["image"])
case(M, "crc", "image-negative-everywhere", "A.crc(-PHI()[0], PHI()[1])", ["image"])
base(M, "noise", "A.noise(PHI()[0], PHI()[1], 20.0)")
arrays(M, "noise", "A.noise({A}, PHI()[1], 20.0)", "image", "PHI()[0]")
floats(M, "noise", "A.noise(PHI()[0], PHI()[1], {A})", "diameter_mm", "20.0")
objects(M, "noise", "A.noise(PHI()[0], {A}, 20.0, grid=G)", "where",
        [("None", "None"), ("two-coords", "(0.0, 0.0)"), ("nan-coord", "(0.0, float('nan'), 0.0)"),
         ("string", "'centre'"), ("far-away", "(1e6, 0.0, 0.0)"), ("z-outside", "(0.0, 0.0, 1e3)")])
ints(M, "noise", "A.noise(PHI()[0], PHI()[1], 20.0, half_slices={A})", "half_slices", "1", lo=0,
     skip=("huge-2^31", "huge-2^63"))
case(M, "noise", "image-zero", "A.noise(np.zeros(G.shape, np.float32), PHI()[1], 20.0)", ["image"])
base(M, "contrast_noise_curve", "CURVE()")
objects(M, "contrast_noise_curve", "A.contrast_noise_curve({A}, PHI()[1])", "images",
        [("None", "None"), ("empty", "[]"), ("single-image", "PHI()[0]"), ("string", "'imgs'"),
         ("wrong-shape", "[np.ones((2, 2), np.float32)]"), ("nan-image", "[nan_(PHI()[0])]")])
objects(M, "contrast_noise_curve", "A.contrast_noise_curve([PHI()[0]] * 2, PHI()[1], iterations={A})", "iterations",
        [("wrong-length", "[1]"), ("strings", "['a', 'b']"), ("nan", "[1, float('nan')]"), ("string", "'12'")])
base(M, "pick_matched_noise", "A.pick_matched_noise([CURVE()], 0.05)")
floats(M, "pick_matched_noise", "A.pick_matched_noise([CURVE()], {A})", "target", "0.05")
objects(M, "pick_matched_noise", "A.pick_matched_noise({A}, 0.05)", "curves",
        [("None", "None"), ("empty", "[]"), ("string", "'c'"), ("list-of-int", "[1]")])
objects(M, "ContrastNoiseCurve", "A.ContrastNoiseCurve({A}, [0.5, 0.6], [0.1, 0.2])", "iterations",
        [("nan", "[1, float('nan')]"), ("strings", "['a', 'b']"), ("wrong-length", "[1, 2, 3]"), ("None", "None")])
objects(M, "ContrastNoiseCurve", "A.ContrastNoiseCurve([1, 2], [0.5, 0.6], {A})", "noise",
        [("nan", "[0.1, float('nan')]"), ("negative", "[-0.1, 0.2]"), ("strings", "['a', 'b']")])
base(M, "circle_weights", "A.circle_weights(G, (0.0, 0.0), 10.0)")
floats(M, "circle_weights", "A.circle_weights(G, (0.0, 0.0), {A})", "diameter_mm", "10.0")
objects(M, "circle_weights", "A.circle_weights(G, {A}, 10.0)", "centre_xy_mm",
        [("None", "None"), ("three", "(0.0, 0.0, 0.0)"), ("nan", "(float('nan'), 0.0)"), ("string", "'00'"),
         ("inf", "(float('inf'), 0.0)")])
ints(M, "circle_weights", "A.circle_weights(G, (0.0, 0.0), 10.0, supersample={A})", "supersample", "4",
     skip=("huge-2^31", "huge-2^63"))
objects(M, "circle_weights", "A.circle_weights({A}, (0.0, 0.0), 10.0)", "grid", [("None", "None"), ("tuple", "(4, 12, 12)")])
base(M, "annulus_weights", "A.annulus_weights(G, (0.0, 0.0), 10.0, 20.0)")
floats(M, "annulus_weights", "A.annulus_weights(G, (0.0, 0.0), {A}, 20.0)", "inner_diameter_mm", "10.0",
       positive=False, nonneg=True)
floats(M, "annulus_weights", "A.annulus_weights(G, (0.0, 0.0), 10.0, {A})", "outer_diameter_mm", "20.0")
base(M, "slice_weights", "A.slice_weights(G, 0.0)")
floats(M, "slice_weights", "A.slice_weights(G, {A})", "z_mm", "1.0", positive=False, names=("z_mm",))
objects(M, "slice_weights", "A.slice_weights(G, 0.0, {A})", "axial", [("None", "None"), ("unknown", "'cubic'")])
base(M, "roi_mean", "A.roi_mean(gimg(), A.circle_weights(G, (0.0, 0.0), 10.0), A.slice_weights(G, 0.0))")
arrays(M, "roi_mean", "A.roi_mean({A}, A.circle_weights(G, (0.0, 0.0), 10.0), A.slice_weights(G, 0.0))", "image",
       "gimg()")
arrays(M, "roi_mean", "A.roi_mean(gimg(), {A}, A.slice_weights(G, 0.0))", "weights2d",
       "A.circle_weights(G, (0.0, 0.0), 10.0)", nonneg=True)
objects(M, "roi_mean", "A.roi_mean(gimg(), A.circle_weights(G, (0.0, 0.0), 10.0), {A})", "slices",
        [("None", "None"), ("empty", "[]"), ("out-of-range", "[(99, 1.0)]"), ("negative-index", "[(-1, 1.0)]"),
         ("nan-weight", "[(0, float('nan'))]"), ("negative-weight", "[(0, -1.0)]"), ("float-index", "[(0.5, 1.0)]"),
         ("string", "'s'")])
base(M, "SphereROIs.from_info", "A.SphereROIs.from_info(PHI()[1], supersample=4)")
objects(M, "SphereROIs.from_info", "A.SphereROIs.from_info({A})", "info",
        [("None", "None"), ("derenzo", "DER()[1]"), ("string", "'i'")])
floats(M, "SphereROIs.from_info", "A.SphereROIs.from_info(PHI()[1], supersample=4, annulus_gap_mm={A})",
       "annulus_gap_mm", "14.0", positive=False, nonneg=True)
arrays(M, "SphereROIs.means", "A.SphereROIs.from_info(PHI()[1], supersample=4).means({A})", "image", "gimg()")
base(M, "line_profile", "A.line_profile(gimg(), G, (-10.0, 0.0), (10.0, 0.0))")
arrays(M, "line_profile", "A.line_profile({A}, G, (-10.0, 0.0), (10.0, 0.0))", "image", "gimg()")
objects(M, "line_profile", "A.line_profile(gimg(), G, {A}, (10.0, 0.0))", "start_xy_mm",
        [("None", "None"), ("nan", "(float('nan'), 0.0)"), ("three", "(0.0, 0.0, 0.0)")])
ints(M, "line_profile", "A.line_profile(gimg(), G, (-10.0, 0.0), (10.0, 0.0), n_samples={A})", "n_samples", "5",
     skip=("huge-2^31", "huge-2^63"), extra=[("one", "1")])
floats(M, "line_profile", "A.line_profile(gimg(), G, (-10.0, 0.0), (10.0, 0.0), z_mm={A})", "z_mm", "0.0",
       positive=False, extra=[("outside", "1e3")])
base(M, "fwhm_1d", "A.fwhm_1d(profile(), 1.0)")
arrays(M, "fwhm_1d", "A.fwhm_1d({A}, 1.0)", "profile", "profile()")
floats(M, "fwhm_1d", "A.fwhm_1d(profile(), {A})", "spacing_mm", "1.0")
floats(M, "fwhm_1d", "A.fwhm_1d(profile(), 1.0, fraction={A})", "fraction", "0.5", extra=[("one", "1.0")])
base(M, "point_source_fwhm", "A.point_source_fwhm(blob(), BG, (0.0, 0.0, 0.0))")
arrays(M, "point_source_fwhm", "A.point_source_fwhm({A}, BG, (0.0, 0.0, 0.0))", "image", "blob()")
objects(M, "point_source_fwhm", "A.point_source_fwhm(blob(), BG, {A})", "position_mm",
        [("None", "None"), ("nan", "(float('nan'), 0.0, 0.0)"), ("string", "'000'"), ("far", "(1e6, 0.0, 0.0)")])
floats(M, "point_source_fwhm", "A.point_source_fwhm(blob(), BG, (0.0, 0.0, 0.0), half_width_mm={A})",
       "half_width_mm", "8.0")
floats(M, "point_source_fwhm", "A.point_source_fwhm(blob(), BG, (0.0, 0.0, 0.0), search_mm={A})", "search_mm", "2.0",
       positive=False, nonneg=True)
floats(M, "point_source_fwhm", "A.point_source_fwhm(blob(), BG, (0.0, 0.0, 0.0), sum_halfwidth_mm={A})",
       "sum_halfwidth_mm", "1.0", positive=False, nonneg=True)
ints(M, "point_source_fwhm", "A.point_source_fwhm(blob(), BG, (0.0, 0.0, 0.0), oversample={A})", "oversample", "2",
     skip=("huge-2^31", "huge-2^63"))
objects(M, "point_source_fwhm", "A.point_source_fwhm(blob(), BG, (0.0, 0.0, 0.0), axes={A})", "axes",
        [("string", "'radial'"), ("empty", "[]"), ("None", "None"), ("repeated", "('axial', 'axial')")])
base(M, "rod_profiles", "A.rod_profiles(DER()[1].analytic.image(DER()[0], 1), DER()[0], DER()[1])")
arrays(M, "rod_profiles", "A.rod_profiles({A}, DER()[0], DER()[1])", "image", "DER()[1].analytic.image(DER()[0], 1)")
objects(M, "rod_profiles", "A.rod_profiles(DER()[1].analytic.image(DER()[0], 1), DER()[0], {A})", "info",
        [("None", "None"), ("phantom-info", "PHI()[1]")])
floats(M, "rod_profiles", "A.rod_profiles(DER()[1].analytic.image(DER()[0], 1), DER()[0], DER()[1], step_mm={A})",
       "step_mm", "0.1", skip=("None",), extra=[("tiny", "1e-9")])
floats(M, "rod_profiles", "A.rod_profiles(DER()[1].analytic.image(DER()[0], 1), DER()[0], DER()[1], axial_fraction={A})",
       "axial_fraction", "0.5", extra=[("above-1", "1.5")])
base(M, "peak_to_valley", "A.peak_to_valley(A.rod_profiles(DER()[1].analytic.image(DER()[0], 1), DER()[0], DER()[1]))")
objects(M, "peak_to_valley", "A.peak_to_valley({A})", "profiles",
        [("None", "None"), ("empty", "{}"), ("list", "[1, 2]"), ("dict-of-int", "{1.0: 2}")])
floats(M, "peak_to_valley",
       "A.peak_to_valley(A.rod_profiles(DER()[1].analytic.image(DER()[0], 1), DER()[0], DER()[1]), window_fraction={A})",
       "window_fraction", "0.25", extra=[("above-1", "1.5")])
base(M, "plot_image_panels", "A.plot_image_panels([gimg()], ['a'], G)")
objects(M, "plot_image_panels", "A.plot_image_panels({A}, ['a'], G)", "images",
        [("None", "None"), ("empty", "[]"), ("nan", "[nan_(gimg())]"), ("wrong-shape", "[np.ones((3, 3), np.float32)]")])
objects(M, "plot_image_panels", "A.plot_image_panels([gimg()], {A}, G)", "titles",
        [("wrong-length", "['a', 'b']"), ("None", "None"), ("string", "'a'")])
objects(M, "plot_image_panels", "A.plot_image_panels([gimg()], ['a'], G, vmax={A})", "vmax",
        [("nan", "float('nan')"), ("negative", "-1.0"), ("string", "'1'")])
objects(M, "plot_image_panels", "A.plot_image_panels([gimg()], ['a'], G, ncols={A})", "ncols",
        [("zero", "0"), ("negative", "-1"), ("float", "1.5")])
base(M, "plot_contrast_noise", "A.plot_contrast_noise([CURVE()])")
objects(M, "plot_contrast_noise", "A.plot_contrast_noise({A})", "curves",
        [("None", "None"), ("empty", "[]"), ("list-of-int", "[1]")])
objects(M, "plot_contrast_noise", "A.plot_contrast_noise([CURVE()], annotate_every={A})", "annotate_every",
        [("negative", "-1"), ("float", "1.5"), ("string", "'1'")])
objects(M, "plot_contrast_noise_errorbars", "A.plot_contrast_noise_errorbars({A})", "aggregated_rows",
        [("None", "None"), ("list-of-int", "[1]"), ("dicts-missing-keys", "[{'a': 1}]")])
objects(M, "plot_line_profiles", "A.plot_line_profiles([PHI()[0]], ['a'], PHI()[1], sphere={A})", "sphere",
        [("out-of-range", "99"), ("negative", "-1"), ("float", "0.5")])
objects(M, "plot_line_profiles", "A.plot_line_profiles([PHI()[0]], ['a'], PHI()[1], half_length_mm={A})", "half_length_mm",
        [("negative", "-1.0"), ("nan", "float('nan')"), ("zero", "0.0")])

# -----------------------------------------------------------------------------------------------------
# directpet.sim
# -----------------------------------------------------------------------------------------------------
M = "sim"
base(M, "sphere_phantom", "PHI()")
floats(M, "sphere_phantom", "S.sphere_phantom(G, cylinder_diameter_mm={A}, length_mm=16.0, n_spheres=2, sphere_diameter_mm=8.0, sphere_radius_mm=10.0, supersample=2)",
       "cylinder_diameter_mm", "40.0")
ints(M, "sphere_phantom", "S.sphere_phantom(G, cylinder_diameter_mm=40.0, length_mm=16.0, n_spheres={A}, sphere_diameter_mm=8.0, sphere_radius_mm=10.0, supersample=2)",
     "n_spheres", "2", skip=("huge-2^31", "huge-2^63"))
floats(M, "sphere_phantom", "S.sphere_phantom(G, cylinder_diameter_mm=40.0, length_mm=16.0, n_spheres=2, sphere_diameter_mm=8.0, sphere_radius_mm=10.0, supersample=2, contrast={A})",
       "contrast", "4.0", positive=False, nonneg=True)
floats(M, "sphere_phantom", "S.sphere_phantom(G, cylinder_diameter_mm=40.0, length_mm=16.0, n_spheres=2, sphere_diameter_mm=8.0, sphere_radius_mm=10.0, supersample=2, background={A})",
       "background", "1.0", positive=False, nonneg=True)
floats(M, "sphere_phantom", "S.sphere_phantom(G, cylinder_diameter_mm=40.0, length_mm=16.0, n_spheres=2, sphere_diameter_mm=8.0, sphere_radius_mm=10.0, supersample=2, mu_per_mm={A})",
       "mu_per_mm", "0.0096", positive=False, nonneg=True)
ints(M, "sphere_phantom", "S.sphere_phantom(G, cylinder_diameter_mm=40.0, length_mm=16.0, n_spheres=2, sphere_diameter_mm=8.0, sphere_radius_mm=10.0, supersample={A})",
     "supersample", "2", skip=("huge-1e9", "huge-2^31"))
objects(M, "sphere_phantom", "S.sphere_phantom({A})", "grid", [("None", "None"), ("tuple", "(4, 12, 12)"),
                                                                 ("scanner", "FS")])
base(M, "uniform_cylinder", "S.uniform_cylinder(G, 40.0, 16.0, supersample=2)")
floats(M, "uniform_cylinder", "S.uniform_cylinder(G, 40.0, 16.0, activity={A}, supersample=2)", "activity", "1.0",
       positive=False, nonneg=True)
floats(M, "uniform_cylinder", "S.uniform_cylinder(G, {A}, 16.0, supersample=2)", "diameter_mm", "40.0")
base(M, "point_source_phantom", "S.point_source_phantom(G, [(0.0, 0.0, 0.0), (4.0, 4.0, 0.0)])")
objects(M, "point_source_phantom", "S.point_source_phantom(G, {A})", "points_mm",
        [("None", "None"), ("empty", "[]"), ("two-coords", "[(0.0, 0.0)]"), ("nan", "[(float('nan'), 0.0, 0.0)]"),
         ("string", "'p'"), ("outside-grid", "[(1e4, 0.0, 0.0)]")])
objects(M, "point_source_phantom", "S.point_source_phantom(G, [(0.0, 0.0, 0.0)], {A})", "activity",
        [("negative", "-1.0"), ("nan", "float('nan')"), ("string", "'1'"), ("wrong-length", "[1.0, 2.0]"),
         ("zero", "0.0")])
base(M, "point_sources", "S.point_sources(G, [(0.0, 0.0, 0.0)])")
objects(M, "point_sources", "S.point_sources(G, {A})", "positions_mm",
        [("None", "None"), ("nan", "[(float('nan'), 0.0, 0.0)]"), ("two-coords", "[(0.0, 0.0)]"),
         ("outside-grid", "[(1e4, 0.0, 0.0)]")])
objects(M, "point_sources", "S.point_sources(G, [(0.0, 0.0, 0.0)], {A})", "activity",
        [("negative", "-1.0"), ("nan", "float('nan')")])
base(M, "radial_point_positions", "S.radial_point_positions(10.0, 3)")
floats(M, "radial_point_positions", "S.radial_point_positions({A}, 3)", "max_radius_mm", "10.0", positive=False,
       nonneg=True)
ints(M, "radial_point_positions", "S.radial_point_positions(10.0, {A})", "n", "3", skip=("huge-1e9",))
base(M, "derenzo_phantom", "DER()")
objects(M, "derenzo_phantom", "S.derenzo_phantom(DER()[0], diameters_mm={A}, supersample=2)",
        "diameters_mm", [("empty", "()"), ("negative", "(-1.0, 2.0, 1.7, 1.35, 1.0, 0.75)"), ("nan", "(float('nan'), 2.0, 1.7, 1.35, 1.0, 0.75)"),
                         ("huge", "(100.0, 2.0, 1.7, 1.35, 1.0, 0.75)"), ("string", "'2.4'"), ("None", "None"),
                         ("zero", "(0.0, 2.0, 1.7, 1.35, 1.0, 0.75)"), ("repeated", "(2.0, 2.0, 1.7, 1.35, 1.0, 0.75)")])
floats(M, "derenzo_phantom", "S.derenzo_phantom(DER()[0], radius_mm={A}, supersample=2)",
       "radius_mm", "16.0")
objects(M, "derenzo_phantom", "S.derenzo_phantom(DER()[0], supersample=2, axis={A})",
        "axis", [("None", "None"), ("unknown", "'w'"), ("int", "2")])
objects(M, "derenzo_phantom", "S.derenzo_phantom(DER()[0], supersample=2, centre_mm={A})",
        "centre_mm", [("None", "None"), ("two", "(0.0, 0.0)"), ("nan", "(float('nan'), 0.0, 0.0)")])
floats(M, "derenzo_phantom", "S.derenzo_phantom(DER()[0], supersample=2, background={A})",
       "background", "0.0", positive=False, nonneg=True)
floats(M, "CylinderSource", "S.CylinderSource({A}, 10.0)", "radius_mm", "5.0")
floats(M, "CylinderSource", "S.CylinderSource(5.0, 10.0, {A})", "concentration", "1.0", positive=False,
       skip=("zero",))
floats(M, "SphereSource", "S.SphereSource((0.0, 0.0, 0.0), {A}, 1.0)", "radius_mm", "5.0")
objects(M, "SphereSource", "S.SphereSource({A}, 5.0, 1.0)", "centre_mm",
        [("None", "None"), ("two", "(0.0, 0.0)"), ("nan", "(float('nan'), 0.0, 0.0)"), ("string", "'000'")])
floats(M, "PointSource", "S.PointSource((0.0, 0.0, 0.0), {A})", "activity", "1.0", positive=False, nonneg=True)
objects(M, "PointSource", "S.PointSource({A}, 1.0)", "position_mm",
        [("None", "None"), ("two", "(0.0, 0.0)"), ("inf", "(float('inf'), 0.0, 0.0)")])
floats(M, "RodSource", "S.RodSource((0.0, 0.0, 0.0), {A}, 10.0)", "radius_mm", "1.0")
objects(M, "RodSource", "S.RodSource((0.0, 0.0, 0.0), 1.0, 10.0, axis={A})", "axis",
        [("None", "None"), ("unknown", "'w'")])
floats(M, "WaterCylinder", "S.WaterCylinder(20.0, 10.0, {A})", "mu_per_mm", "0.0096", positive=False, nonneg=True)
objects(M, "AnalyticPhantom", "S.AnalyticPhantom({A})", "sources",
        [("None", "None"), ("string", "'s'"), ("list-of-int", "[1, 2]"), ("single-source", "S.SphereSource((0, 0, 0), 5.0, 1.0)")])
objects(M, "AnalyticPhantom", "S.AnalyticPhantom([S.SphereSource((0, 0, 0), 5.0, 1.0)], {A})", "attenuation",
        [("string", "'water'"), ("number", "0.0096"), ("sphere", "S.SphereSource((0, 0, 0), 5.0, 1.0)")])
base(M, "AnalyticPhantom.image", "S.AnalyticPhantom([S.SphereSource((0, 0, 0), 5.0, 1.0)]).image(G, 2)")
ints(M, "AnalyticPhantom.image", "S.AnalyticPhantom([S.SphereSource((0, 0, 0), 5.0, 1.0)]).image(G, {A})", "supersample",
     "2", skip=("huge-1e9", "huge-2^31"))
case(M, "AnalyticPhantom.image", "negative-total", "S.AnalyticPhantom([S.SphereSource((0, 0, 0), 5.0, -1.0)]).image(G, 2)",
     ["sources", "concentration"])
case(M, "AnalyticPhantom.sample", "negative-total", "S.AnalyticPhantom([S.SphereSource((0, 0, 0), 5.0, -1.0)]).sample(10, np.random.default_rng(1))",
     ["sources", "concentration"])
base(M, "AnalyticPhantom.sample", "S.AnalyticPhantom([S.SphereSource((0, 0, 0), 5.0, 1.0)]).sample(10, np.random.default_rng(1))")
ints(M, "AnalyticPhantom.sample", "S.AnalyticPhantom([S.SphereSource((0, 0, 0), 5.0, 1.0)]).sample({A}, np.random.default_rng(1))", "n", "10",
     lo=0, skip=("huge-1e9",))
objects(M, "AnalyticPhantom.sample", "S.AnalyticPhantom([S.SphereSource((0, 0, 0), 5.0, 1.0)]).sample(10, {A})", "rng",
        [("string", "'s'"), ("negative", "-1"), ("float", "0.5")])
case(M, "AnalyticPhantom.sample", "empty-phantom", "S.AnalyticPhantom([]).sample(10, np.random.default_rng(1))", ["sources", "phantom"])
base(M, "chord_length", "S.chord_length(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 10.0, 5.0)")
floats(M, "chord_length", "S.chord_length(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, {A}, 5.0)", "radius", "10.0")
case(M, "chord_length", "direction-zero", "S.chord_length(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 10.0, 5.0)", ["ux", "u"])
case(M, "chord_length", "x-nan", "S.chord_length(float('nan'), 0.0, 0.0, 1.0, 0.0, 0.0, 10.0, 5.0)", ["x"])
case(M, "chord_length", "x-string", "S.chord_length('0', 0.0, 0.0, 1.0, 0.0, 0.0, 10.0, 5.0)", ["x"])
case(M, "cylinder_interval", "direction-zero", "S.cylinder_interval(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 10.0, 5.0)", ["ux", "u"])
case(M, "cylinder_interval", "radius-negative", "S.cylinder_interval(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, -10.0, 5.0)", ["radius"])
base(M, "make_rng", "S.make_rng(1)")
objects(M, "make_rng", "S.make_rng({A})", "rng", [("string", "'s'"), ("negative", "-1"), ("float", "1.5"), ("bool", "True")])
objects(M, "make_rng", "S.make_rng(1, xp={A})", "xp", [("string", "'numpy'"), ("math", "math"), ("None", "None")])
objects(M, "check_seed", "S.check_seed('seed', {A})", "seed", [("negative", "-1"), ("huge", "2**64"), ("float", "1.0")])
objects(M, "seed_from_rng", "S.seed_from_rng({A})", "rng", [("string", "'s'"), ("negative", "-1"), ("float", "1.5"),
                                                             ("bool", "True")])

# -----------------------------------------------------------------------------------------------------
# directpet.io.nifti
# -----------------------------------------------------------------------------------------------------
M = "io.nifti"
base(M, "save_nifti", "NI.save_nifti(os.path.join(TMP, 'a.nii'), gimg(), G)")
arrays(M, "save_nifti", "NI.save_nifti(os.path.join(TMP, 'a.nii'), {A}, G)", "image", "gimg()")
case(M, "save_nifti", "image-float64-beyond-float32", "NI.save_nifti(os.path.join(TMP, 'a.nii'), np.full(G.shape, 1e300), G)",
     ["image"])
objects(M, "save_nifti", "NI.save_nifti({A}, gimg(), G)", "path",
        [("None", "None"), ("int", "3"), ("missing-dir", "'/nonexistent/a.nii'"), ("directory", "TMP"),
         ("wrong-extension", "os.path.join(TMP, 'a.txt')")])
objects(M, "save_nifti", "NI.save_nifti(os.path.join(TMP, 'a.nii'), gimg(), {A})", "grid",
        [("None", "None"), ("tuple", "(4, 12, 12)"), ("other-grid", "FG")])
objects(M, "save_nifti", "NI.save_nifti(os.path.join(TMP, 'a.nii'), gimg(), G, description={A})", "description",
        [("None", "None"), ("int", "3"), ("too-long", "'x' * 200")])
base(M, "load_nifti", "NI.load_nifti(NIFTI())")
objects(M, "load_nifti", "NI.load_nifti({A})", "path",
        [("None", "None"), ("missing", "'/nonexistent.nii'"), ("garbage", "garbage('g.nii')"), ("npz", "HDFILE()"),
         ("directory", "TMP"), ("int", "3")])
floats(M, "load_nifti", "NI.load_nifti(NIFTI(), atol_mm={A})", "atol_mm", "1e-3", positive=False, nonneg=True)
base(M, "nifti_affine", "NI.nifti_affine(G)")
objects(M, "nifti_affine", "NI.nifti_affine({A})", "grid", [("None", "None"), ("tuple", "(4, 12, 12)")])

# -----------------------------------------------------------------------------------------------------
# directpet.io.petsird
# -----------------------------------------------------------------------------------------------------
M = "io.petsird"
CO = "PI.Coincidences(np.array([1, 2]), np.array([0, 0]), np.array([0, 0]))"
base(M, "Coincidences", CO)
arrays(M, "Coincidences", "PI.Coincidences({A}, np.array([0, 0]), np.array([0, 0]))", "bin0", "np.array([1, 2])",
       skip=("NaN", "inf"), counts=True)
case(M, "Coincidences", "bin0-huge", "PI.Coincidences(np.array([2**40, 1]), np.array([0, 0]), np.array([0, 0]))", ["bin0"])
case(M, "Coincidences", "length-mismatch", "PI.Coincidences(np.array([1, 2, 3]), np.array([0, 0]), np.array([0, 0]))",
     ["bin0", "bin1"])
ints(M, "Coincidences.ordered", CO + ".ordered({A})", "n_tof_bins", "2", skip=("huge-1e9",))
SWAP = "PI.Coincidences(np.array([0]), np.array([5]), np.array([1]))"      # needs a swap: its TOF bin is mirrored
base(M, "Coincidences.ordered", SWAP + ".ordered(3)")
for cls, expr in [("too-few-bins", "1"), ("zero", "0"), ("huge-2^31", "2**31"), ("string", "'3'"), ("fractional", "2.5"),
                  ("None", "None")]:
    case(M, "Coincidences.ordered", f"swap-{cls}", SWAP + f".ordered({expr})", ["n_tof_bins"])
base(M, "PetsirdScanner", "PI.PetsirdScanner(dh_header(DS).scanner)")
objects(M, "PetsirdScanner", "PI.PetsirdScanner({A})", "scanner_information",
        [("None", "None"), ("header", "dh_header(DS)"), ("string", "'s'")])
base(M, "PetsirdScanner.tof_edges_mm", "PI.PetsirdScanner(dh_header(DS).scanner).tof_edges_mm(0, 0)")
objects(M, "PetsirdScanner.tof_edges_mm", "PI.PetsirdScanner(dh_header(DS).scanner).tof_edges_mm({A}, 0)", "t0",
        [("out-of-range", "5"), ("negative", "-1"), ("float", "0.5"), ("None", "None")])
base(M, "PetsirdScanner.positions", "PI.PetsirdScanner(dh_header(DS).scanner).positions(0, np.array([0, 1]))")
objects(M, "PetsirdScanner.positions", "PI.PetsirdScanner(dh_header(DS).scanner).positions(0, {A})", "bins",
        [("out-of-range", "np.array([10**6])"), ("negative", "np.array([-1])"), ("float", "np.array([0.5])"),
         ("None", "None")])
objects(M, "PetsirdScanner.positions", "PI.PetsirdScanner(dh_header(DS).scanner).positions({A}, np.array([0]))",
        "module_type", [("out-of-range", "5"), ("negative", "-1"), ("float", "0.5")])
base(M, "PetsirdScanner.pair_efficiency", "PI.PetsirdScanner(dh_header(DS).scanner).pair_efficiency((0, 0), np.array([0]), np.array([50]))")
objects(M, "PetsirdScanner.pair_efficiency",
        "PI.PetsirdScanner(dh_header(DS).scanner).pair_efficiency((0, 0), {A}, np.array([50]))", "bin0",
        [("out-of-range", "np.array([10**6])"), ("negative", "np.array([-1])"), ("float", "np.array([0.5])")])
objects(M, "PetsirdScanner.pair_efficiency",
        "PI.PetsirdScanner(dh_header(DS).scanner).pair_efficiency({A}, np.array([0]), np.array([50]))", "pair",
        [("out-of-range", "(5, 0)"), ("None", "None"), ("one", "(0,)")])
objects(M, "PetsirdScanner.check", "PI.PetsirdScanner(dh_header(DS).scanner).check((0, 0), {A})", "events",
        [("None", "None"), ("array", "np.array([1, 2])")])
objects(M, "PetsirdReader", "PI.PetsirdReader({A})", "path",
        [("None", "None"), ("missing", "'/nonexistent.bin'"), ("garbage", "garbage('g.bin', b'x' * 100)"),
         ("directory", "TMP"), ("int", "3"), ("npz", "HDFILE()")])
objects(M, "PetsirdWriter", "PI.PetsirdWriter({A}, dh_header(DS))", "path",
        [("None", "None"), ("missing-dir", "'/nonexistent/x.bin'"), ("int", "3")])
objects(M, "PetsirdWriter", "PI.PetsirdWriter(os.path.join(TMP, 'w.bin'), {A})", "header",
        [("None", "None"), ("string", "'h'"), ("scanner", "DS")])
objects(M, "PetsirdWriter", "PI.PetsirdWriter(os.path.join(TMP, 'w2.bin'), dh_header(DS), block_ms={A})", "block_ms",
        [("zero", "0"), ("negative", "-1"), ("float", "1.5"), ("string", "'1'")])

# -----------------------------------------------------------------------------------------------------
# directpet.reference
# -----------------------------------------------------------------------------------------------------
M = "reference"
base(M, "reference.direct.forward", "RD.forward(gimg(), LUT())")
arrays(M, "reference.direct.forward", "RD.forward({A}, LUT())", "image", "gimg()")
objects(M, "reference.direct.forward", "RD.forward(gimg(), {A})", "lut",
        [("None", "None"), ("table", "TAB()"), ("string", "'l'")])
arrays(M, "reference.direct.back", "RD.back({A}, LUT())", "histo", "gimg()")
base(M, "reference.direct.gaussian_kernel_values", "RD.gaussian_kernel_values(G, V[0], LUT().offsets[:5], 50.0, 2.5, np.full(LUT().n_kernels, 2.5))")
floats(M, "reference.direct.gaussian_kernel_values", "RD.gaussian_kernel_values(G, V[0], LUT().offsets[:5], {A}, 2.5, np.full(LUT().n_kernels, 2.5))",
       "sigma_tof", "50.0")
base(M, "reference.first.forward", "RF.forward(TAB(), fimg())")
arrays(M, "reference.first.forward", "RF.forward(TAB(), {A})", "image", "fimg()")
objects(M, "reference.first.forward", "RF.forward(TAB(), fimg(), {A})", "subset",
        [("empty", "[]"), ("out-of-range", "[99]"), ("negative", "[-1]"), ("floats", "[0.5]"), ("string", "'0'")])
objects(M, "reference.first.forward", "RF.forward({A}, fimg())", "table",
        [("None", "None"), ("dualhead-model", "PM()"), ("lut", "LUT()")])
arrays(M, "reference.first.back", "RF.back(TAB(), {A})", "sinogram", "fsino()")
arrays(M, "reference.first.faithful_back", "RF.faithful_back(TAB(), {A})", "sinogram", "fsino()",
       only=("None", "NaN", "wrong-shape", "dtype-complex", "list"))
objects(M, "reference.first.system_matrix", "RF.system_matrix(TAB(), {A})", "subset",
        [("out-of-range", "[99]"), ("floats", "[0.5]"), ("empty", "[]")])
base(M, "reference.first.lattice_footprints", "RF.lattice_footprints(FS, 2, 0)")
index(M, "reference.first.lattice_footprints", "RF.lattice_footprints(FS, 2, {A})", "angle", "1", "FS.n_angles")
ints(M, "reference.first.lattice_footprints", "RF.lattice_footprints(FS, {A}, 0)", "J", "2", lo=0, skip=("huge-1e9",))
base(M, "reference.first.cell_voxel_overlap", "RF.cell_voxel_overlap(np.array([0.1]), np.array([0.2]), 0.3)")
case(M, "reference.first.cell_voxel_overlap", "phi-nan", "RF.cell_voxel_overlap(np.array([0.1]), np.array([0.2]), float('nan'))", ["phi"])
case(M, "reference.first.cell_voxel_overlap", "dx-nan", "RF.cell_voxel_overlap(np.array([np.nan]), np.array([0.2]), 0.3)", ["dx"])
case(M, "reference.first.cell_voxel_overlap", "dx-string", "RF.cell_voxel_overlap('a', np.array([0.2]), 0.3)", ["dx"])
base(M, "reference.dualhead.forward", "RH.forward(PM(), dimg())")
arrays(M, "reference.dualhead.forward", "RH.forward(PM(), {A})", "image", "dimg()")
objects(M, "reference.dualhead.forward", "RH.forward(PM(), dimg(), {A})", "subset",
        [("empty", "[]"), ("out-of-range", "[10**6]"), ("negative", "[-1]"), ("floats", "[0.5]"), ("string", "'0'")])
objects(M, "reference.dualhead.forward", "RH.forward({A}, dimg())", "model",
        [("None", "None"), ("table", "TAB()")])
arrays(M, "reference.dualhead.adjoint", "RH.adjoint(PM(), {A})", "y", "dy()")
objects(M, "reference.dualhead.system_matrix", "RH.system_matrix(PM(), {A})", "subset",
        [("out-of-range", "[10**6]"), ("floats", "[0.5]"), ("empty", "[]")])
base(M, "reference.dualhead.random_model", "RH.random_model(DS, 1)")
objects(M, "reference.dualhead.random_model", "RH.random_model(DS, 1, taps={A})", "taps",
        [("negative", "(-1, 5)"), ("reversed", "(5, 0)"), ("floats", "(0.5, 2.5)"), ("None", "None"),
         ("huge", "(0, 10**9)")])
objects(M, "reference.dualhead.random_model", "RH.random_model({A}, 1)", "scanner", [("None", "None"), ("first", "FS")])
objects(M, "reference.dualhead.random_model", "RH.random_model(DS, {A})", "rng", [("string", "'s'"), ("negative", "-1")])


# =====================================================================================================
# Hand judgements: accepted / unclear outcomes that are legitimate (filled after inspecting the run).
# Keyed by (func, cls) or (func, '*') / ('*', cls) ; value: the one-line reason.
# =====================================================================================================

FINE: dict = {}


def fine(func, name, classes, reason):
    """Judge outcomes of ``func``'s argument ``name`` for these classes legitimate (hand-checked)."""
    for cls in classes.split():
        FINE[(func, cls, name)] = reason


ZERO_D = "a NumPy 0-d array is a number"
CONVERTED = "any real array is converted (float64 / int / non-contiguous inputs are legitimate)"
OPTIONAL_NONE = "None is the documented default of this optional argument"
BIG_FINITE = "a finite positive number; the object allocates nothing and nothing overflows here"
COORD = "a coordinate helper (arrays allowed, not bounds-checked by design): out-of-range / fractional indices " \
        "give extrapolated coordinates"
GENERIC = "a vectorised helper on arbitrary real arrays: float64 / int / lists / batch dimensions are legitimate"
LONG_JOB = "a valid but long Monte Carlo job (no memory growth, interruptible between chunks); hang = slow"

# directpet
fine("ImageGrid", "voxel_size", "0-d", ZERO_D)
fine("ImageGrid", "shape", "huge-1e9 huge-product",
     "a grid is a description; every consumer estimates its memory first (deposit refuses 'grid')")
fine("ImageGrid", "voxel_size", "huge-1e300 voxel-size-tiny", BIG_FINITE)
# direct
fine("ViewSet", "theta_max_deg", "0-d", ZERO_D)
fine("View", "phi", "0-d", ZERO_D)
fine("View.from_degrees", "theta_deg", "0-d", ZERO_D)
fine("ViewSet.bin_directions", "u", "list dtype-float64 dtype-int non-contiguous wrong-ndim", GENERIC)
for n in ("tof_fwhm_ps", "radial_fwhm", "epsilon", "narrow_weight"):
    fine("SRKernel", n, "0-d", ZERO_D)
fine("SRKernel", "tof_fwhm_ps", "huge-1e300", "refused when used: build_lut raises ValueError naming kernel")
fine("SRKernel", "radial_fwhm", "huge-1e300 callable-nan", "refused when used: build_lut raises ValueError naming "
     "kernel / radial_fwhm")
fine("SRKernel", "epsilon", "huge-1e300", "one identifier bin for the whole grid: a coarse but valid kernel model")
fine("SRKernel", "truncation", "truncation-tiny", "a one-voxel support: degenerate but a valid kernel")
fine("tof_fwhm_mm", "tof_fwhm_ps", "0-d", ZERO_D)
fine("CylindricalScanner", "radius_mm", "0-d huge-1e300", BIG_FINITE)
fine("CylindricalScanner", "intrinsic_fwhm_mm", "0-d huge-1e300", BIG_FINITE)
fine("DirectLUT.with_values", "values", "list dtype-float64 non-contiguous", CONVERTED)
fine("local_coordinates", "offsets", "dtype-float64 dtype-int non-contiguous wrong-ndim offsets-huge", GENERIC)
fine("LowRankProjector", "tol", "0-d", ZERO_D)
fine("select_projector", "margin", "huge-1e300", "a huge margin means: never the approximation (as margin=1e9 in the tests)")
fine("LowRankProjector", "max_rank", "huge-1e9 huge-2^31 huge-2^63", "max_rank is only a cap on the rank chosen by tol")
for P in ("HistoImageProjector", "FFTProjector", "LowRankProjector"):
    fine(f"{P}.forward", "subset", "index-None", "subset=None is documented: all views")
fine("HistoImageProjector.forward(subset)", "subset", "0-d", "a 0-d integer array is one index: a subset of one")
fine("HistoImageProjector.subset", "subset", "index-None", "A.subset(None) is A over all its units, as forward(x, None)")
fine("HistoImageProjector.launcher", "backend", "cpu-backend",
     "a state error (RuntimeError: 'launcher() needs the CUDA backend; this projector runs on cpu') is right here")
fine("EventBatch", "p1", "dtype-float64 dtype-int non-contiguous", CONVERTED)
fine("EventBatch", "dt_ps", "dtype-float64 dtype-int non-contiguous", CONVERTED)
fine("EventBatch", "weights", "dtype-float64 dtype-int non-contiguous", CONVERTED)
fine("EventBatch", "weights", "None", OPTIONAL_NONE)
for n in ("p1", "dt_ps", "weights"):
    fine("EventBatch", n, "NaN inf", "EventBatch is a container: deposit() refuses NaN / inf events (ValueError "
         "naming events) and weights (naming weights)")
fine("EventBatch", "n_in_band", "huge-2^63", "a bookkeeping count; nothing is allocated from it")
fine("deposit", "out", "non-contiguous", "checked: the events are added into the non-contiguous out correctly")
fine("bin_views", "p1", "dtype-float64 dtype-int non-contiguous wrong-ndim", GENERIC)
fine("simulate_events", "n_events", "huge-2^31", LONG_JOB)
fine("simulate_events", "chunk_size", "huge-2^63", "a chunk larger than the job: one chunk")
fine("simulate_events", "randoms_fraction", "0-d", ZERO_D)
fine("simulate_histo_images", "randoms_fraction", "0-d", ZERO_D)
fine("randoms_background", "total", "0-d", ZERO_D)
fine("randoms_from_delayeds", "smooth_fwhm_mm", "None", OPTIONAL_NONE)
fine("randoms_from_delayeds", "smooth_fwhm_mm", "0-d list", "a scalar or a (z, y, x) FWHM is documented; [4.0] broadcasts")
fine("randoms_from_delayeds", "scale", "0-d", ZERO_D)
fine("attenuation_histo_images", "mu", "dtype-float64 dtype-int non-contiguous", CONVERTED)
fine("attenuation_histo_images", "mu", "mu-huge", "finite mu: attenuation factors underflow to 0, a valid answer")
fine("attenuation_histo_images", "step_mm", "None", OPTIONAL_NONE)
fine("attenuation_histo_images", "step_mm", "0-d", ZERO_D)
fine("attenuation_histo_images", "step_mm", "huge-1e300", "a coarse step: checked, factors stay close to the default "
     "(0.55 vs 0.56 minimum)")
fine("normalisation_histo_images", "efficiencies", "None", OPTIONAL_NONE)
fine("normalisation_histo_images", "efficiencies", "list dtype-float64 dtype-int non-contiguous", CONVERTED)
fine("HistoImageData", "prompts", "non-contiguous fractional-counts",
     "non-contiguous data work (checked through mlem); fractional 'counts' are expected data (noise=False)")
for n in ("factors", "background"):
    fine("HistoImageData", n, "None", OPTIONAL_NONE)
    fine("HistoImageData", n, "non-contiguous", "checked: mlem runs with non-contiguous factor arrays")
    fine("expected_data", n, "None", OPTIONAL_NONE)
    fine("expected_data", n, "non-contiguous", CONVERTED)
fine("HistoImageData.save", "path", "missing-dir", "FileNotFoundError with the path is the standard, clear error")
fine("HistoImageData.save", "compress", "None", "documented: compress=None is the class's default (CountData.save; "
     "HistoImageData: uncompressed)")
fine("model_consistent_data", "background", "None", OPTIONAL_NONE)
fine("model_consistent_data", "factors", "None", OPTIONAL_NONE)
fine("model_consistent_data", "background", "non-contiguous", CONVERTED)
fine("model_consistent_data", "counts", "None", OPTIONAL_NONE)
fine("model_consistent_data", "counts", "0-d", ZERO_D)
fine("ViewSubsets.forward_units", "units", "None floats out-of-range negative string",
     "units are view indices: the message names views / view and says what came")
fine("ViewSubsets.forward_units", "units", "empty", "an empty list of units gives an empty stack")
fine("to_numpy", "a", "string", "a generic converter: np.asarray of anything is its documented behaviour")
# first
for n in ("pitch_mm", "mu_per_mm", "head_distance_mm", "acollinearity_fwhm_deg"):
    fine("RotatingScanner", n, "0-d", ZERO_D)
    fine("RotatingScanner", n, "huge-1e300", BIG_FINITE)
fine("RotatingScanner", "head_distance_mm", "head-distance-inside-fov",
     "names n_radial and says 'heads 1 mm apart': the conflict of the two arguments is explained")
for f_ in ("RotatingScanner.row_z_mm", "RotatingScanner.radial_mm"):
    fine(f_, "r" if "row" in f_ else "rho", "index-neg index-n index-huge index-frac index-float-integral index-bool "
         "index-list-of-frac", COORD)
for f_ in ("RotatingScanner.detection_probability", "RotatingScanner.depth_moments"):
    fine(f_, "tan_alpha", "list dtype-float64 dtype-int non-contiguous wrong-shape wrong-ndim 0-d empty inf", GENERIC)
fine("build_super_lor_table", "J", "0-d", ZERO_D)
fine("build_super_lor_table", "quasi_tolerance", "0-d zero", "0 demands exact equality of merged tubes: valid")
fine("SuperLORTable.tube", "delta", "index-neg", "delta is a signed ring difference in +-(n_rows-1)")
fine("analytic_tube", "delta", "index-neg", "delta is a signed ring difference in +-(n_rows-1)")
fine("SuperLORTable.save", "path", "missing-dir", "FileNotFoundError with the path is the standard, clear error")
fine("SinogramData", "prompts", "non-contiguous fractional-counts",
     "non-contiguous data work (checked through mlem); fractional prompts are expected data (noise=False)")
for n in ("factors", "background"):
    fine("SinogramData", n, "non-contiguous", "checked: mlem runs with non-contiguous factor arrays")
    fine("model_consistent_data", n, "dtype-float64 dtype-int non-contiguous", CONVERTED)
    fine("DualHeadData", n, "non-contiguous", "checked: mlem runs with non-contiguous factor arrays")
fine("SinogramData", "scanner", "other-size", "names prompts with the shape the scanner expects: the mismatch is explained")
fine("AngleSubsets", "subsets", "None-entries", "an entry None means every angle (as projector.units(None)): one "
     "subset of all angles, a valid partition")
fine("AngleSubsets.forward_units", "units", "empty out-of-range negative",
     "units are angle indices: the message names angles and says what came")
fine("first.simulate", "n_decays", "huge-2^31", LONG_JOB)
fine("first.simulate", "n_decays", "huge-2^62", LONG_JOB + " (below the documented 2**63 bound)")
fine("first.simulate", "chunk", "huge-2^31", "a chunk larger than the job: one chunk")
fine("first.simulate", "grid", "other-grid dualhead-grid",
     "names activity with the grid's shape: the mismatch of the two arguments is explained")
fine("trace_decays", "grid", "other-grid", "names activity with the grid's shape: the mismatch of the two arguments "
     "is explained")
# dualhead
for n in ("gap_mm", "acollinearity_fwhm_deg", "plane_mm"):
    fine("DualHeadScanner", n, "0-d", ZERO_D)
    fine("DualHeadScanner", n, "huge-1e300", BIG_FINITE)
fine("DualHeadScanner", "plane_mm", "huge-1e300", "names n_planes and says '15 planes of 1e+300 mm do not fit': explained")
for f_, n in (("DualHeadScanner.crystal_y_mm", "c"), ("DualHeadScanner.plane_x_mm", "p")):
    fine(f_, n, "index-neg index-n index-huge index-frac index-float-integral index-bool index-list-of-frac", COORD)
fine("build_patch_model", "threshold", "0-d", ZERO_D)
fine("build_patch_model", "chunk", "huge-1e9 huge-2^31", "a chunk larger than the job: one chunk")
fine("lor_response", "c_u", "list dtype-int wrong-ndim non-contiguous", "index arrays broadcast by design")
fine("lor_response", "voxel", "list dtype-int wrong-ndim non-contiguous", "index arrays broadcast by design")
fine("PatchModel.from_taps", "dy", "huge int16-overflow", "names tap_dy, the model field dy becomes: equivalent")
fine("seed_key", "c_u", "list dtype-int wrong-ndim non-contiguous", "index arrays broadcast by design")
fine("DualHeadProjector.forward", "subset", "repeated-huge",
     "4.8e8 LORs (1.9 GB) is feasible and passes the memory check: slow, not stuck")
fine("DualHeadData", "prompts", "non-contiguous fractional-counts",
     "non-contiguous data work; fractional prompts are expected data (noise=False)")
fine("orientation_subsets", "seed", "huge", "PCG64 takes any non-negative integer seed")
fine("model_consistent_data", "seed", "None", "documented: seed=None draws from fresh entropy")
fine("DualHeadSubsets", "subsets", "None-entry", "an entry None means all classes (as class_list(None))")
fine("DualHeadSubsets.forward_units", "units", "empty out-of-range negative",
     "units are class indices: the message names classes and says what came")
fine("dualhead.simulate", "n_decays", "huge-2^31 huge-2^62", LONG_JOB)
fine("dualhead.simulate", "n_trues", "n_trues-unreachable", LONG_JOB + " (a corner voxel: 1e6 trues take minutes)")
fine("dualhead.simulate", "chunk", "huge-2^31", "a chunk larger than the job: one chunk")
# recon
for alg in ("mlem", "osem", "block_ramla"):
    fine(alg, "x0", "dtype-float64 non-contiguous", "x0 is copied to a float32 image (documented, tested)")
    fine(alg, "store_every", "huge-1e9 huge-2^31 huge-2^63", "store_every beyond n_iter: only the last image")
    fine(alg, "x0", "x0-tiny", "a positive start image is valid")
    fine(alg, "data", "data-wrong-length", "the fuzz's own toy SubsetProblem breaks its contract (its forward gives 7 "
         "values for 5 data); families validate their data shapes")
    fine(alg, "callback", "callback-raises", "the user's own exception propagates unchanged")
for meth in ("value", "gradient", "hessian_diagonal"):
    fine(f"RelativeDifferencePrior.{meth}", "x", "dtype-float64 non-contiguous",
         "float64 and strided images take the vectorised path (documented); the result is the same sum")
    fine(f"RelativeDifferencePrior.{meth}", "x", "wrong-shape",
         "a prior has no image shape of its own: any (nz, ny, nx) image is valid (here one column fewer)")
fine("RelativeDifferencePrior.add_gradient", "out", "non-contiguous",
     "a strided out is updated through the vectorised path: the same numbers")
for n in ("beta", "epsilon", "gamma"):
    fine("RelativeDifferencePrior", n, "0-d", ZERO_D)
    fine("RelativeDifferencePrior", n, "huge-1e300",
         "a finite parameter; on a float32 image the compiled pass refuses it by name (tests: test_recon_priors)")
fine("LogCoshPrior", "delta", "0-d", ZERO_D)
fine("LogCoshPrior", "delta", "huge-1e300",
     "a finite parameter; on a float32 image the compiled pass refuses it by name (tests: test_recon_priors)")
fine("QuadraticPrior", "kappa", "dtype-float64 dtype-int non-contiguous", CONVERTED)
fine("bsrem", "lambda0", "above-1", "a relaxation above 1 is allowed (documented; the floor keeps the image positive)")
fine("bsrem", "x0", "dtype-float64 non-contiguous", CONVERTED)
fine("rod_noise", "core_fraction", "None", "None is the documented default (half the radius or one voxel)")
for n in ("penalised_objective", "sqrt_hessian_row_sum"):
    fine(n, "x", "dtype-float64 dtype-int non-contiguous", CONVERTED)
fine("block_ramla", "lambda0", "0-d", ZERO_D)
fine("block_ramla", "lambda0", "above-1", "a large relaxation is allowed (the floor keeps the image positive)")
fine("ramla_lambda", "lambda0", "0-d huge-1e300", "a pure formula of finite positive numbers")
fine("ramla_lambda", "n", "huge-1e9 huge-2^31", "a pure formula")
fine("poisson_loglik", "x", "dtype-float64 dtype-int non-contiguous", CONVERTED)
fine("spread_order", "n", "0-d", ZERO_D)
# analysis
for f_ in ("crc", "noise", "line_profile", "rod_profiles", "SphereROIs.means", "point_source_fwhm"):
    fine(f_, "image", "dtype-float64 dtype-int non-contiguous list", "real images of any dtype are documented")
fine("noise", "diameter_mm", "0-d huge-1e300", "a ROI larger than the grid covers the whole slice")
fine("noise", "where", "z-outside", "names z_mm (the z of where) and says it is outside the grid")
fine("noise", "half_slices", "huge-1e9", "clipped to the slices of the grid")
fine("contrast_noise_curve", "images", "wrong-shape nan-image", "names image (an entry of images): equivalent")
fine("pick_matched_noise", "target", "0-d", ZERO_D)
fine("pick_matched_noise", "target", "huge-1e300", "documented: NaN iteration / CRC with status 'not reached'")
fine("pick_matched_noise", "curves", "empty", "no curves, no picks")
fine("circle_weights", "diameter_mm", "0-d huge-1e300", "0-d is a number; a huge circle covers the grid")
fine("circle_weights", "centre_xy_mm", "three", "documented: an (x, y, z) centre whose z is not used")
fine("line_profile", "start_xy_mm", "three", "documented: an (x, y, z) centre whose z is not used")
fine("annulus_weights", "inner_diameter_mm", "0-d", ZERO_D)
fine("annulus_weights", "outer_diameter_mm", "0-d huge-1e300", "0-d is a number; a huge annulus covers the grid")
fine("slice_weights", "z_mm", "0-d", ZERO_D)
fine("roi_mean", "image", "list dtype-float64 dtype-int non-contiguous", CONVERTED)
fine("roi_mean", "weights2d", "dtype-float64 non-contiguous", CONVERTED)
fine("roi_mean", "slices", "empty", "no slices: a sum of nothing (0), as documented for the sum")
fine("SphereROIs.from_info", "annulus_gap_mm", "0-d huge-1e300", "0-d is a number; a far annulus is empty of "
     "nothing it should contain")
fine("line_profile", "z_mm", "0-d", ZERO_D)
fine("fwhm_1d", "profile", "list dtype-float64 dtype-int wrong-shape non-contiguous", GENERIC)
fine("fwhm_1d", "spacing_mm", "0-d huge-1e300", "0-d is a number; the width scales with the spacing")
fine("fwhm_1d", "fraction", "0-d", ZERO_D)
fine("point_source_fwhm", "image", "dtype-float64 non-contiguous dtype-int",
     "documented: an FWTM is NaN when the profile does not fall to a tenth within +-half_width_mm")
for n in ("half_width_mm", "search_mm", "sum_halfwidth_mm"):
    fine("point_source_fwhm", n, "0-d huge-1e300", "documented NaN FWTM (profile does not reach a tenth)")
fine("point_source_fwhm", "axes", "repeated", "duplicate axis names collapse; documented NaN FWTM")
fine("rod_profiles", "step_mm", "0-d huge-1e300", "0-d is a number; a huge step gives one sample per profile")
fine("rod_profiles", "axial_fraction", "0-d", ZERO_D)
fine("peak_to_valley", "profiles", "empty", "no profiles, no ratios")
fine("peak_to_valley", "window_fraction", "0-d", "documented: ratio inf where the valleys are exactly 0 (cold background)")
fine("plot_image_panels", "images", "empty", "names titles and says '1 for 0 image(s)': the mismatch is explained")
fine("plot_contrast_noise", "curves", "empty", "an empty plot")
# sim
for n in ("cylinder_diameter_mm", "contrast", "background", "mu_per_mm"):
    fine("sphere_phantom", n, "0-d", ZERO_D)
fine("sphere_phantom", "n_spheres", "zero", "n_spheres is 2 here; this is contrast 0 (cold spheres), valid")
fine("uniform_cylinder", "activity", "0-d", ZERO_D)
fine("uniform_cylinder", "diameter_mm", "0-d", ZERO_D)
fine("radial_point_positions", "max_radius_mm", "0-d huge-1e300", "0-d is a number; positions are only numbers")
fine("derenzo_phantom", "diameters_mm", "huge", "names radius_mm and says 'too small for a rod of 100.0 mm': explained")
fine("derenzo_phantom", "radius_mm", "0-d", ZERO_D)
fine("derenzo_phantom", "background", "0-d", ZERO_D)
for S_, n in (("CylinderSource", "radius_mm"), ("CylinderSource", "concentration"), ("SphereSource", "radius_mm"),
              ("PointSource", "activity"), ("RodSource", "radius_mm"), ("WaterCylinder", "mu_per_mm")):
    fine(S_, n, "0-d huge-1e300", BIG_FINITE)
fine("chord_length", "radius", "0-d huge-1e300 inf zero", "a vectorised geometric helper: finite / infinite radii give "
     "the exact chord")
# io
fine("save_nifti", "image", "dtype-float64 dtype-int non-contiguous", "real images are converted to float32 (checked)")
fine("save_nifti", "path", "missing-dir", "FileNotFoundError with the path is the standard, clear error")
fine("save_nifti", "description", "None int too-long", "documented: str(description), truncated to 79 characters")
fine("load_nifti", "atol_mm", "0-d huge-1e300", "0-d is a number; a huge tolerance accepts any centring")
fine("Coincidences", "bin0", "list dtype-int non-contiguous fractional-counts",
     "converted to uint32 (the 'fractional' variant of an int array is still integers)")
fine("PetsirdReader", "path", "missing", "FileNotFoundError naming path ('path: no such file ...')")
fine("deposit_file", "path", "missing", "FileNotFoundError naming path ('path: no such file ...')")
fine("deposit_prompts_and_delayeds", "path", "missing", "FileNotFoundError naming path ('path: no such file ...')")
fine("smooth_randoms", "deposited", "non-contiguous", "read, never written: any memory layout gives the same estimate")
fine("smooth_randoms", "smooth_fwhm_mm", "None", "documented: None means no smoothing")
fine("smooth_randoms", "smooth_fwhm_mm", "list", "a scalar or a (z, y, x) FWHM is documented; [4.0] broadcasts")
fine("PetsirdWriter", "path", "missing-dir", "FileNotFoundError with the path is the standard, clear error")
# reference
for f_, n in (("reference.direct.forward", "image"), ("reference.direct.back", "histo"),
              ("reference.first.forward", "image"), ("reference.first.back", "sinogram"),
              ("reference.dualhead.forward", "image"), ("reference.dualhead.adjoint", "y")):
    fine(f_, n, "dtype-float64 dtype-int non-contiguous", "the float64 references take any real array")
fine("reference.direct.gaussian_kernel_values", "sigma_tof", "0-d huge-1e300", "0-d is a number; a huge sigma is a flat kernel")
# round 2 (after the fixes of issue 16): inspected and judged legitimate
fine("HistoImageProjector.forward(subset)", "subset", "subset-repeated-huge", "the 21.5 GiB result is just under physical memory "
     "(require_memory refuses what exceeds it): the allocation's MemoryError states the size")
fine("tof_fwhm_mm", "tof_fwhm_ps", "huge-1e300", "a unit conversion of a finite number (SRKernel takes it too)")
fine("local_coordinates", "offsets", "list", CONVERTED)
fine("bin_views", "p1", "list", CONVERTED)
fine("roi_mean", "weights2d", "list", CONVERTED)
fine("AngleSubsets.forward_units", "units", "huge", "units are angle indices: the message names angles and says what came")
fine("chord_length", "x", "x-nan x-string", "a per-event vectorised helper (documented unchecked arrays): NaN in gives NaN out, "
     "a string fails inside NumPy, as a ufunc does")
fine("chord_length", "ux", "direction-zero", "a per-event vectorised helper (documented): a zero direction has no chord (NaN)")
fine("cylinder_interval", "ux", "direction-zero", "a per-event vectorised helper (documented): a zero direction has no chord (NaN)")
fine("Coincidences.ordered", "n_tof_bins", "huge-2^31 swap-huge-2^31", "the list does not know its scanner: any count in "
     "uint32 above every tof_idx is a valid mirror (the writer passes the scanner's own count)")


def fine_reason(c):
    if c.get("fine"):
        return c["fine"]
    name = c["names"][0] if c["names"] else ""
    for key in ((c["func"], c["cls"], name), (c["func"], c["cls"]), (c["func"], "*")):
        if key in FINE:
            return FINE[key]
    return None


# =====================================================================================================
# Running and classifying
# =====================================================================================================

def run_batch(batch, python, env, timeout):
    """Run a list of cases in worker processes; returns {id: result} (a crash or hang ends a worker,
    the rest of the batch goes on in a new one)."""
    results = {}
    todo = list(batch)
    while todo:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(todo, f)
            path = f.name
        script = "PRELUDE = " + repr(PRELUDE) + "\n" + WORKER
        errfile = tempfile.TemporaryFile()          # a file, not a pipe: a chatty worker never blocks
        proc = subprocess.Popen([python, "-c", script, path, str(MEM_LIMIT)], stdout=subprocess.PIPE,
                                stderr=errfile, env=env)
        fd = proc.stdout.fileno()
        current, started = None, time.monotonic()
        startup = timeout + 30.0          # the first call also pays the imports
        pending = b""                     # raw bytes read, not yet split into lines (no buffered reader:
        done_ids = set()                  # select() cannot see data a TextIOWrapper already holds)
        eof = False
        while True:
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                line = line.decode()
                if line.startswith("S "):
                    current, started = int(line.split()[1]), time.monotonic()
                elif line.startswith("R "):
                    res = json.loads(line[2:])
                    results[res["id"]] = res
                    done_ids.add(res["id"])
                    current, started = None, time.monotonic()
            if eof:
                rc = proc.wait()
                if current is not None and current not in done_ids:
                    errfile.seek(0)
                    err = errfile.read().decode(errors="replace")[-800:]
                    results[current] = {"id": current, "status": "crash", "rc": rc, "stderr": err}
                    done_ids.add(current)
                elif rc != 0 and not done_ids:
                    errfile.seek(0)
                    raise RuntimeError(f"worker failed before the first call: {errfile.read()[-3000:]}")
                break
            limit = (startup if current is None and not done_ids else timeout)
            left = limit - (time.monotonic() - started)
            if left <= 0:
                proc.kill()
                proc.wait()
                if current is not None:
                    results[current] = {"id": current, "status": "hang"}
                    done_ids.add(current)
                break
            r, _, _ = select.select([fd], [], [], min(left, 1.0))
            if r:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    eof = True
                pending += chunk
        os.unlink(path)
        errfile.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        todo = [c for c in todo if c["id"] not in results]
    return results


def name_in(msg, names):
    for n in names:
        if not n:
            continue
        if re.search(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", msg):
            return True
    return False


def classify(c, res):
    s = res.get("status")
    if s == "crash":
        return "crash"
    if s == "hang":
        return "hang"
    if c["kind"] == "base":
        return "ok" if s == "ok" else "baseline-fail"
    if s == "exc":
        if res["etype"] in ("ValueError", "TypeError") and name_in(res["msg"], c["names"]):
            return "clear"
        return "unclear"
    # accepted
    if c["kind"] == "overlap":
        if res.get("same") is False:
            return "wrong-answer"
        return "accepted"
    if res.get("nonfinite"):
        return "silent-nan"
    return "accepted"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="run cases whose module/func contains this")
    ap.add_argument("--report", default="/tmp/fuzz_report.txt")
    ap.add_argument("--timeout", type=float, default=TIMEOUT)
    ap.add_argument("--kind", default=None, help="only cases of this kind (base, bad, overlap)")
    args = ap.parse_args()
    cases = [c for c in CASES if (args.only is None or args.only in c["mod"] + "." + c["func"])
             and (args.kind is None or c["kind"] == args.kind)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"),
               MPLBACKEND="Agg")
    python = sys.executable
    batches = [cases[i:i + BATCH] for i in range(0, len(cases), BATCH)]
    t0 = time.time()
    results = {}
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(args.jobs) as pool:
        for k, r in enumerate(pool.map(lambda b: run_batch(b, python, env, args.timeout), batches)):
            results.update(r)
            print(f"\r{k + 1}/{len(batches)} batches, {time.time() - t0:.0f} s", end="", flush=True)
    print()
    rows = []
    for c in cases:
        res = results.get(c["id"], {"status": "missing"})
        outcome = classify(c, res)
        reason = fine_reason(c) if outcome in ("accepted", "unclear", "hang", "silent-nan") else None
        if reason is not None:
            outcome = {"accepted": "accepted-but-fine", "silent-nan": "accepted-but-fine",
                       "unclear": "unclear-but-fine", "hang": "hang-but-fine"}[outcome]
        if outcome == "accepted":
            outcome = "accepted-wrongly"
        rows.append((c, res, outcome, reason))
    write_report(rows, args.report, time.time() - t0)
    with open("/tmp/fuzz_results.json", "w") as f:
        json.dump([dict(case=c, result=r, outcome=o, reason=why) for c, r, o, why in rows], f, indent=1)


ORDER = ["ok", "baseline-fail", "clear", "unclear-but-fine", "unclear", "crash", "hang-but-fine", "hang",
         "accepted-but-fine", "accepted-wrongly", "silent-nan", "wrong-answer"]


def describe(res):
    s = res.get("status")
    if s == "exc":
        return f"{res['etype']}: {res['msg'][:300]}  [{res.get('where', '')}]"
    if s == "crash":
        return f"killed (rc {res.get('rc')}): {res.get('stderr', '')[-300:]!r}"
    if s == "hang":
        return "no answer within the timeout"
    if s == "ok":
        extra = f"; non-finite at {res['nonfinite']}" if res.get("nonfinite") else ""
        if "same" in res:
            extra += f"; same as out=None: {res['same']}"
        w = f"; warnings {res['warnings']}" if res.get("warnings") else ""
        return f"returned {res.get('summary', '')}{extra}{w}"
    return s


def write_report(rows, path, seconds):
    total = Counter(o for _, _, o, _ in rows)
    lines = [f"directpet bad-input fuzz: {len(rows)} calls in {seconds:.0f} s", ""]
    lines.append("Totals: " + ", ".join(f"{k} {total[k]}" for k in ORDER if total[k]))
    lines.append("")
    per_mod = defaultdict(Counter)
    per_cls = defaultdict(Counter)
    for c, _, o, _ in rows:
        per_mod[c["mod"]][o] += 1
        if c["kind"] != "base":
            cl = re.sub(r"^(threads|index|out)-.*", r"\1-*", c["cls"])
            per_cls[cl][o] += 1
    cols = [k for k in ORDER if total[k]]
    def table(title, d):
        lines.append(title)
        if not d:
            return
        w = max(len(k) for k in d) + 2
        lines.append(" " * w + "".join(f"{k[:14]:>15}" for k in cols))
        for k in sorted(d):
            lines.append(f"{k:<{w}}" + "".join(f"{d[k][o]:>15}" for o in cols))
        lines.append("")
    table("Per module:", per_mod)
    table("Per class of bad input:", per_cls)
    lines.append("Non-clear cases (module | function | class | call | outcome | what happened | judgement):")
    for c, res, o, why in rows:
        if o in ("ok", "clear"):
            continue
        lines.append(f"- [{o}] {c['mod']} | {c['func']} | {c['cls']} | names {c['names']}")
        lines.append(f"      call: {c['code']}")
        lines.append(f"      got:  {describe(res)}")
        if why:
            lines.append(f"      fine: {why}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:4]))
    print(f"report: {path}")
    problems = sum(n for o, n in total.items() if o not in ("ok", "clear") and not o.endswith("-but-fine"))
    if problems:
        print(f"{problems} call(s) neither clear nor judged fine: see the report")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
