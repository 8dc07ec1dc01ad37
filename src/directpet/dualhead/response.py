"""The analytic detector response of the dual-head scanner and the patch model built from it
(:ref:`physics-dualhead`).

``h(c_u, c_l; v)`` is the probability that a decay uniformly distributed in voxel ``v`` is detected
as a front-layer coincidence on upper crystal ``c_u`` and lower crystal ``c_l``:

    h = (1/V) Int_v dr Int_{x > 0} dOmega / (2 pi)  P(c_u | r, w) P(c_l | r, -w),
    P(c | r, w) = exp(-mu l_pre) (1 - exp(-mu l_c)),

``V`` the voxel's volume, the pair axis isotropic, ``l_c`` the path inside crystal c's front-layer box (``crystal_mm`` square,
``depth_mm`` deep), ``l_pre`` the path through the other crystals' boxes crossed before entering c;
the gaps do not attenuate; no object attenuation, scatter, positron range or acollinearity. Crystals
lie on the *extended* (infinite) lattice of the same pitch, so ``h`` is exactly shift invariant, and
symmetric under the head swap with the x mirror, the y and z mirrors and the y-z interchange
(:ref:`physics-dualhead`).

Quadrature (``csrc/dualhead/response.hpp``, double precision, deterministic): ``voxel_samples**3``
midpoints in the voxel; for each, the directions are parameterised by their slopes ``ds/dx``
(``dOmega = ds_y ds_z / (1 + s^2)^{3/2}``; equivalent to a grid on the upper front plane) over the
intersection of the bounding boxes of the two crystals' shadows, in a frame turned to the LOR (the
shadows of oblique crystals are long thin bands along it). Each axis is cut where a photon starts
leaving a crystal through a side face (the integrand's kinks) and each piece gets
``ceil(angle_samples * width / total)`` midpoint nodes. A plain ``4 x 4`` grid over the boxes
overestimates the central LOR by ~28 % and misses the most oblique classes by a factor ~3; with
``angle_samples = 4`` this rule stays within ~4 % of a class's largest tap (median ~1 %) for every
class from (0, 0) to (103, 71), and converges as ``O(1/n^2)``. Each photon is walked through the crystal lattice (per-axis material intervals).

How exactly the computed h keeps the symmetries (the rule is mirrored with the geometry): shifts,
the head swap with the x mirror, the y and z mirrors and the y-z interchange hold to rounding
(measured: at most 6e-16 of the largest value over D = 2, 3, 4, ``angle_samples`` 1..7 and
``voxel_samples`` 1..3 for the mirrors, 3e-16 for the interchange at full size). The interchange
needs the response compiled without floating-point contraction (CMakeLists.txt: ``-ffp-contract=off``,
``--fmad=false``): with GCC's default ``-ffp-contract=fast`` the ray ``t = c_y e_y + c_z e_z`` became an
FMA whose rounding depends on which product is fused, the interchange swaps the two products, and a
last-bit change could move a quadrature cut or a piece's node count (differences up to 2.7e-3 of the
LOR's largest value were measured that way).

The patch model (:func:`build_patch_model`) evaluates ``h`` on the exact support of each class's
``(+,+)`` LOR in the planes ``x <= 0`` and fills the planes ``x > 0`` by the x-reflection identity
``patch(k, P-1-p)(dy, dz) = patch(k, p)(D-1 + D a_y - dy, D-1 + D a_z - dz)``.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from .. import _core
from .._backend import cuda_module
from .._backend import resolve_backend
from .._checks import check_threads, expect_instance, integer, positive_int, real_number, require_memory
from .._progress import progress_callback
from .geometry import DualHeadScanner
from .model import PatchModel

#: evaluations per batch of the patch builder (host memory: 24 bytes each)
DEFAULT_CHUNK_CPU = 1 << 18      # ~0.1-0.3 s per batch on two cores: progress and Ctrl-C stay responsive
DEFAULT_CHUNK_CUDA = 1 << 23     # ~200 MB of host queries and results per batch
MAX_SAMPLES = 64
#: host bytes per (LOR, voxel) pair of lor_response: the broadcast int32 inputs (28), the compiled
#: queries (16), the float64 result (8) and its copy (8)
PAIR_BYTES = 64
#: bytes per candidate tap of build_patch_model: the builder's taps (8), the model's arrays (8) and
#: the projectors' host copy (8)
TAP_BYTES = 24
#: bytes per evaluation of a build batch: the query (16) and its float64 result (8)
EVAL_BYTES = 24
#: bytes per pair of support_pairs: int64 temporaries (48) and the int32 (n, 2) results (16)
SUPPORT_PAIR_BYTES = 64


def scanner_parameters(scanner: DualHeadScanner) -> dict:
    """The compiled code's scanner dict (DualHeadScanner's fields)."""
    return expect_instance(scanner, DualHeadScanner, "scanner").to_dict()


def _samples(name, value) -> int:
    value = positive_int(name, value)
    if value > MAX_SAMPLES:
        raise ValueError(f"{name}: expected an integer in [1, {MAX_SAMPLES}], got {value}")
    return value


def _int_array(name, value, last: int) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{name}: expected an integer array, got dtype {a.dtype}")
    if a.ndim < 1 or a.shape[-1] != last:
        raise ValueError(f"{name}: expected shape (..., {last}), got {a.shape}")
    if a.size and (a.min() < -(2 ** 30) or a.max() >= 2 ** 30):
        raise ValueError(f"{name}: indices must lie in (-2**30, 2**30)")
    return a.astype(np.int32, copy=False)


def _backend(backend) -> str:
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected 'auto', 'cpu' or 'cuda', got {type(backend).__name__}")
    return resolve_backend(backend)


def lor_response(scanner: DualHeadScanner, c_u, c_l, voxel, *, angle_samples: int = 4, voxel_samples: int = 2,
                 backend: str = "cpu", threads: Optional[int] = None) -> np.ndarray:
    """The detector response ``h(c_u, c_l; voxel)`` (probability per decay in the voxel), vectorised.

    Parameters
    ----------
    scanner : the :class:`DualHeadScanner` (its pitch, crystal size, depth, gap, mu, D, planes).
    c_u, c_l : integer arrays ``(..., 2)``: upper and lower crystals ``(c_y, c_z)`` on the extended
        lattice (any integers: the detector's edges are ignored).
    voxel : integer array ``(..., 3)``: ``(v_z, v_y, p)`` on the image lattice extended in y and z
        (``0 <= p < n_planes``).
    angle_samples : nodes per slope axis (about; see the module docstring), 1..64.
    voxel_samples : ``voxel_samples**3`` midpoints per voxel, 1..64.
    backend : ``'cpu'`` (default: small batches), ``'cuda'`` or ``'auto'``.
    threads : CPU threads (None: OpenMP's default).

    Returns
    -------
    float64 array of the broadcast shape of the three arguments' leading axes.
    """
    scanner = expect_instance(scanner, DualHeadScanner, "scanner")
    na, nv = _samples("angle_samples", angle_samples), _samples("voxel_samples", voxel_samples)
    cu, cl, vox = _int_array("c_u", c_u, 2), _int_array("c_l", c_l, 2), _int_array("voxel", voxel, 3)
    try:
        shape = np.broadcast_shapes(cu.shape[:-1], cl.shape[:-1], vox.shape[:-1])
    except ValueError:
        raise ValueError(f"c_u, c_l, voxel: leading shapes {cu.shape[:-1]}, {cl.shape[:-1]}, {vox.shape[:-1]} "
                         "do not broadcast") from None
    n_pairs = float(np.prod(shape, dtype=np.float64))
    require_memory("c_u, c_l, voxel", PAIR_BYTES * n_pairs, f"the response of their broadcast {shape} "
                   f"({n_pairs:.3g} LOR-voxel pairs)")
    flat = [np.ascontiguousarray(np.broadcast_to(a, shape + a.shape[-1:]).reshape(-1, a.shape[-1]))
            for a in (cu, cl, vox)]
    p = flat[2][:, 2]
    if p.size and (p.min() < 0 or p.max() >= scanner.n_planes):
        raise ValueError(f"voxel: plane indices must lie in [0, {scanner.n_planes}), got {p.min()}..{p.max()}")
    nthreads = check_threads(threads)
    chosen = _backend(backend)
    params = scanner_parameters(scanner)
    if chosen == "cpu":
        h = _core.dualhead_response_cpu(params, *flat, na, nv, nthreads)
    else:
        h = cuda_module().dualhead_response_cuda(params, *flat, na, nv)
    return np.asarray(h).reshape(shape)


def patch_candidate_counts(scanner: DualHeadScanner, classes=None):
    """Candidate taps per class (the exact support of h), without evaluating anything.

    Returns ``(evaluated, all_planes)`` int64 arrays over the listed classes (all by default): the
    candidates of the planes ``x <= 0`` (where :func:`build_patch_model` evaluates h) and of all planes.
    """
    scanner = expect_instance(scanner, DualHeadScanner, "scanner")
    k = scanner.class_list(classes)
    ev, al = _core.dualhead_patch_candidates(scanner_parameters(scanner), k)
    return np.asarray(ev), np.asarray(al)


def build_patch_model(scanner: DualHeadScanner, *, angle_samples: int = 4, voxel_samples: int = 2,
                      threshold: float = 1e-3, backend: str = "auto", progress=False, classes=None,
                      chunk: Optional[int] = None, threads: Optional[int] = None) -> PatchModel:
    """The :class:`PatchModel` of the analytic response (:ref:`physics-dualhead`).

    For every class ``k = (a_y, a_z)`` and plane ``p`` the taps ``(dy, dz, w)`` are ``h`` of the
    class's ``(+,+)`` LOR ``c_u = (0, 0)``, ``c_l = (a_y, a_z)`` at voxel ``(v_z, v_y) = (dz, dy)``.
    Candidates are the voxels whose box meets the region swept by the lines joining the two crystals'
    boxes (exact support); h is evaluated on those of the planes ``x <= 0`` and mirrored to ``x > 0``;
    taps below ``threshold`` times the class's largest tap (over all planes: the per-LOR maximum) are
    dropped.

    Parameters
    ----------
    scanner : the :class:`DualHeadScanner`.
    angle_samples, voxel_samples : quadrature orders of :func:`lor_response` (1..64).
    threshold : relative cut in ``[0, 1)`` (0 keeps every positive tap).
    backend : ``'auto'`` (CUDA when usable, else CPU), ``'cpu'`` or ``'cuda'`` (an error without a GPU).
    progress : a tqdm bar (True), nothing (False), or a callable ``f(classes_done, classes_total)``.
    classes : build only these classes (the others get no taps; for tests and cost estimates);
        None: all.
    chunk : evaluations per batch (None: 2**18 on the CPU, 2**23 on the GPU); bounds the memory, does
        not change the result.
    threads : CPU threads for the candidates, the assembly and (CPU backend) the evaluation.

    Returns
    -------
    PatchModel whose ``meta`` records the parameters, the backend, the candidate and evaluation
    counts and the build seconds.
    """
    scanner = expect_instance(scanner, DualHeadScanner, "scanner")
    na, nv = _samples("angle_samples", angle_samples), _samples("voxel_samples", voxel_samples)
    threshold = real_number("threshold", threshold)
    if not 0.0 <= threshold < 1.0:
        raise ValueError(f"threshold: expected a value in [0, 1), got {threshold}")
    k = np.unique(scanner.class_list(classes)) if classes is not None else scanner.class_list(None)
    nthreads = check_threads(threads)
    chosen = _backend(backend)
    if chunk is None:
        chunk = DEFAULT_CHUNK_CPU if chosen == "cpu" else DEFAULT_CHUNK_CUDA
    chunk = positive_int("chunk", chunk)
    params = scanner_parameters(scanner)
    # the candidates are counted without evaluating anything (0.1 s at full size): the taps the
    # build may keep, and its largest batch, must fit before it starts
    ev, al = (np.asarray(c, dtype=np.float64) for c in _core.dualhead_patch_candidates(params, k))
    batch = max(min(chunk, ev.sum()), ev.max())          # a batch holds whole classes, at least one
    require_memory("scanner", TAP_BYTES * al.sum() + EVAL_BYTES * batch,
                   f"the patch model of {al.sum():.3g} candidate taps")
    # the builder reports (classes done, classes total); a user callable gets both, the bar the first
    user = progress if callable(progress) else None
    bar, update = progress_callback(None if user else progress, int(k.size), unit="class", desc="dual-head patches")
    callback = ((lambda done, tot: user(int(done), int(tot))) if user else
                None if update is None else (lambda done, _tot: update(done)))
    t0 = time.perf_counter()
    try:
        if chosen == "cpu":
            r = _core.dualhead_build_patches_cpu(params, na, nv, threshold, k, chunk, nthreads, callback)
        else:
            r = cuda_module().dualhead_build_patches_cuda(params, na, nv, threshold, k, chunk, callback)
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - t0
    meta = {
        "builder": "directpet.dualhead.build_patch_model",
        "response": "analytic multi-ray front-layer DRF on the extended detector (directpet docs: Physics, dual-head)",
        "angle_samples": na, "voxel_samples": nv, "threshold": threshold, "backend": chosen,
        "classes": "all" if classes is None else [int(c) for c in k],
        "candidates": int(r["candidates"]), "evaluated": int(r["evaluated"]),
        "dropped_below_threshold": int(r["dropped_below_threshold"]),
        "seconds": seconds, "seconds_generate": float(r["seconds_generate"]),
        "seconds_evaluate": float(r["seconds_evaluate"]), "seconds_assemble": float(r["seconds_assemble"]),
    }
    return PatchModel(scanner, r["tap_start"], r["tap_dy"], r["tap_dz"], r["tap_w"], meta)


def support_rows(scanner: DualHeadScanner, a: int, b: int, p: int, upper_range, lower_range):
    """The exact support of the voxel at sub-position ``(a, b)`` of crystal cell 0 in plane ``p``, as
    rows: for every upper offset ``o_u`` and lower y offset ``o_ly``, the inclusive range
    ``[l_z0, l_z1]`` of lower z offsets for which h can be positive (empty where ``l_z1 < l_z0``).

    ``upper_range`` / ``lower_range``: ``((y_lo, y_hi), (z_lo, z_hi))`` inclusive crystal offset
    ranges allowed for c_u and c_l. A pair responds only if some line joining c_u's box and c_l's
    box passes through the voxel. Such a line crosses x at the fraction t of the way from its upper
    to its lower point; across the voxel's slab t spans [t_min, t_max] (as in the patch candidates,
    response_api.hpp), and at fixed t the crossings fill the crystal-wide square centred on
    ``Y_u + t (Y_l - Y_u)``. So per row the y condition gives an interval of t, and the z offsets
    whose squares meet the voxel for some t in it form an interval. Boundary contacts are kept
    (their h is ~0). Returns ``(o_uy, o_uz, o_ly, l_z0, l_z1)`` int64 arrays.
    """
    s = expect_instance(scanner, DualHeadScanner, "scanner")
    a, b = integer("a", a, 0, s.D - 1), integer("b", b, 0, s.D - 1)
    p = integer("p", p, 0, s.n_planes - 1)
    upper_range = _offset_ranges("upper_range", upper_range)
    lower_range = _offset_ranges("lower_range", lower_range)
    g, d, hw, pitch, v = 0.5 * s.gap_mm, s.depth_mm, 0.5 * s.crystal_mm, s.pitch_mm, s.voxel_mm
    xp = float(s.plane_x_mm(p))
    span = 2 * g + d
    t_min = (g - xp - 0.5 * s.plane_mm) / span
    t_max = (g + d - xp + 0.5 * s.plane_mm) / span
    y0 = (a - 0.5 * s.D) * v - hw - 1e-9            # the voxel's ranges widened by the crystal half-width
    y1 = (a + 1 - 0.5 * s.D) * v + hw + 1e-9
    z0 = (b - 0.5 * s.D) * v - hw - 1e-9
    z1 = (b + 1 - 0.5 * s.D) * v + hw + 1e-9
    (uy0, uy1), (uz0, uz1) = upper_range
    (ly_lo, ly_hi), (lz_lo, lz_hi) = lower_range
    # y rows: Y(t) = Y_u + t (Y_l - Y_u) must reach [y0, y1] for some t in [t_min, t_max]
    ouy = np.arange(uy0, uy1 + 1)
    Yu = ouy * pitch
    # Y_l = Y_u + (Y - Y_u) / t over Y in [y0, y1], t in [t_min, t_max]: extremes at the corners
    cand = np.stack([Yu + (y - Yu) / t for y in (y0, y1) for t in (t_min, t_max)])
    ly0 = np.maximum(np.ceil(cand.min(axis=0) / pitch - 1e-9).astype(np.int64), ly_lo)
    ly1 = np.minimum(np.floor(cand.max(axis=0) / pitch + 1e-9).astype(np.int64), ly_hi)
    count = np.maximum(ly1 - ly0 + 1, 0)
    iy = np.repeat(np.arange(ouy.size), count)
    oly = ly0[iy] + np.arange(iy.size) - np.repeat(np.cumsum(count) - count, count)
    ouy = ouy[iy]
    dY = (oly - ouy) * pitch
    Yu = ouy * pitch
    with np.errstate(divide="ignore", invalid="ignore"):
        e0, e1 = (y0 - Yu) / dY, (y1 - Yu) / dY
    flat = dY == 0
    inside = (Yu >= y0) & (Yu <= y1)
    ta = np.where(flat, np.where(inside, t_min, np.inf), np.maximum(np.minimum(e0, e1), t_min))
    tb = np.where(flat, np.where(inside, t_max, -np.inf), np.minimum(np.maximum(e0, e1), t_max))
    keep = ta <= tb
    ouy, oly, ta, tb = ouy[keep], oly[keep], ta[keep], tb[keep]
    # z: for every upper z offset, Z_l - Z_u in the union over t in [ta, tb] of ((z0 - Z_u)/t, (z1 - Z_u)/t)
    ouz = np.arange(uz0, uz1 + 1)
    n_rows, n_z = ouy.size, ouz.size
    ouy, oly, ta, tb = (np.repeat(x, n_z) for x in (ouy, oly, ta, tb))
    ouz = np.tile(ouz, n_rows)
    Zu = ouz * pitch
    A, B = z0 - Zu, z1 - Zu
    lo = np.where(A >= 0, A / tb, A / ta)
    hi = np.where(B >= 0, B / ta, B / tb)
    lz0 = np.maximum(np.ceil((Zu + lo) / pitch - 1e-9).astype(np.int64), lz_lo)
    lz1 = np.minimum(np.floor((Zu + hi) / pitch + 1e-9).astype(np.int64), lz_hi)
    keep = lz1 >= lz0
    return ouy[keep], ouz[keep], oly[keep], lz0[keep], lz1[keep]


def support_pairs(scanner: DualHeadScanner, a: int, b: int, p: int, upper_range, lower_range):
    """Every (c_u, c_l) offset pair that can respond to the voxel at sub-position ``(a, b)`` of crystal
    cell 0 in plane ``p`` (:func:`support_rows` expanded). Returns ``(o_u, o_l)`` int32 arrays
    ``(n, 2)`` as ``(y, z)``."""
    ouy, ouz, oly, lz0, lz1 = support_rows(scanner, a, b, p, upper_range, lower_range)
    count = lz1 - lz0 + 1
    require_memory("upper_range, lower_range", SUPPORT_PAIR_BYTES * float(count.sum()),
                   f"{float(count.sum()):.3g} support pairs")
    idx = np.repeat(np.arange(ouy.size), count)
    within = np.arange(idx.size) - np.repeat(np.cumsum(count) - count, count)
    o_u = np.stack([ouy[idx], ouz[idx]], axis=1)
    o_l = np.stack([oly[idx], lz0[idx] + within], axis=1)
    return o_u.astype(np.int32), o_l.astype(np.int32)


def _offset_ranges(name, value):
    """``((y_lo, y_hi), (z_lo, z_hi))`` as ints, else an error naming the argument."""
    try:
        (y0, y1), (z0, z1) = value
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected ((y_lo, y_hi), (z_lo, z_hi)), got {value!r}") from None
    return ((integer(name, y0), integer(name, y1)), (integer(name, z0), integer(name, z1)))


def support_count(scanner: DualHeadScanner, a: int, b: int, p: int, upper_range, lower_range) -> int:
    """Number of pairs :func:`support_pairs` would return (without building them)."""
    _, _, _, lz0, lz1 = support_rows(scanner, a, b, p, upper_range, lower_range)
    return int((lz1 - lz0 + 1).sum())


def voxel_sensitivity(scanner: DualHeadScanner, voxel, *, angle_samples: int = 4, voxel_samples: int = 2,
                      backend: str = "cpu", threads: Optional[int] = None) -> float:
    """Sum of h over every front-layer LOR of the (finite) scanner for one voxel ``(v_z, v_y, p)``:
    the probability that a decay there is detected as a front-layer coincidence (the sensitivity
    image at that voxel, without normalisation)."""
    scanner = expect_instance(scanner, DualHeadScanner, "scanner")
    vox = _int_array("voxel", voxel, 3).reshape(3)
    vz, vy, p = (int(x) for x in vox)
    if not (0 <= vz < scanner.n_z * scanner.D and 0 <= vy < scanner.n_y * scanner.D and 0 <= p < scanner.n_planes):
        raise ValueError(f"voxel: {tuple(vox)} lies outside the image {scanner.grid.shape}")
    cy, a = divmod(vy, scanner.D)
    cz, b = divmod(vz, scanner.D)
    rng = ((-cy, scanner.n_y - 1 - cy), (-cz, scanner.n_z - 1 - cz))
    o_u, o_l = support_pairs(scanner, a, b, p, rng, rng)
    cell = np.array([cy, cz], np.int32)
    h = lor_response(scanner, o_u + cell, o_l + cell, np.array([vz, vy, p], np.int32), angle_samples=angle_samples,
                     voxel_samples=voxel_samples, backend=backend, threads=threads)
    return float(h.sum())



__all__ = ["build_patch_model", "lor_response", "patch_candidate_counts", "scanner_parameters", "support_count",
           "support_pairs", "support_rows", "voxel_sensitivity"]
