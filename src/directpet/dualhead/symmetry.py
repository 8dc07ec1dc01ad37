"""The paper's symmetry reduction of the dual-head system matrix to seed DRFs (:ref:`physics-dualhead`), and
its storage figures.

On the extended detector the response ``h(c_u, c_l; v)`` is invariant under

* shifts: ``h(c_u + m, c_l + m; v + D m) = h(c_u, c_l; v)`` (``m`` in y and z);
* the head swap with the x mirror: ``h(c_l, c_u; R_x v) = h(c_u, c_l; v)`` (``p -> P-1-p``);
* the y and z mirrors (``c -> -c``, ``v -> -1 - v``: a voxel's sub-position ``a -> D-1-a``);
* the y-z interchange (same pitch in y and z).

So every (LOR, voxel) pair maps to a *seed*: its plane folded to ``p - (P-1)/2 >= 0``, its
sub-position ``(a, b) = (v_y mod D, v_z mod D)`` folded to ``a' = min(a, D-1-a)``,
``b' = min(b, D-1-b)`` and sorted (``a' <= b'``), and the crystal offsets ``o_u = c_u - c_v``,
``o_l = c_l - c_v`` from the voxel's crystal cell transformed alike. With D = 4 that leaves 3 seed
voxels per folded plane ((0,0), (0,1), (1,1)) and 60 folded planes: the paper's 180 seed DRFs. The
offsets range over ``[-(n-1), n-1]^2`` with ``n = max(n_y, n_z)``: the paper's extended
208 x 208 detector. Seed index of ``(a', b')``: ``b' (b' + 1) / 2 + a'``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .._checks import expect_instance, flag, integer_array, meta_dict, read_only, real_array
from .geometry import DualHeadScanner
from .model import PatchModel
from .response import _int_array, lor_response, support_count, support_pairs

#: bytes per seed entry: plane int16, seed int16, o_u and o_l 2 x int16 each, weight float32
SEED_ENTRY_BYTES = 2 + 2 + 4 + 4 + 4


def folded_subpositions(D: int) -> int:
    """Sub-positions per axis after the mirror fold: ``ceil(D / 2)``."""
    return (int(D) + 1) // 2


def seed_subpositions(D: int):
    """The seeds' ``(a', b')`` in seed-index order (``a' <= b'``): D = 4 gives (0,0), (0,1), (1,1)."""
    m = folded_subpositions(D)
    return [(a, b) for b in range(m) for a in range(b + 1)]


def extended_size(scanner: DualHeadScanner) -> int:
    """``n = max(n_y, n_z)``: offsets lie in ``[-(n-1), n-1]`` (the paper's 2n = 208 extension)."""
    return max(scanner.n_y, scanner.n_z)


def seed_key(scanner: DualHeadScanner, c_u, c_l, voxel):
    """The seed of (LOR, voxel) pairs: ``(folded_plane, seed, o_u, o_l)``.

    Parameters
    ----------
    c_u, c_l : integer arrays ``(..., 2)`` of crystals ``(c_y, c_z)``; voxel : ``(..., 3)`` ``(v_z, v_y, p)``.

    Returns
    -------
    folded_plane : int64 ``p - (P-1)/2`` after the x fold (``>= 0``), shape ``(...)``;
    seed : int64 seed index (``b'(b'+1)/2 + a'``);
    o_u, o_l : int64 ``(..., 2)`` crystal offsets ``(y, z)`` from the voxel's cell, after the same
        mirrors, interchange and head swap.
    ``h(c_u, c_l; voxel) = h(o_u, o_l; seed voxel)`` with the seed voxel ``(b', a', (P-1)/2 + folded_plane)``
    in cell 0.
    """
    s = expect_instance(scanner, DualHeadScanner, "scanner")
    cu, cl, vox = _int_array("c_u", c_u, 2), _int_array("c_l", c_l, 2), _int_array("voxel", voxel, 3)
    try:
        shape = np.broadcast_shapes(cu.shape[:-1], cl.shape[:-1], vox.shape[:-1])
    except ValueError:
        raise ValueError("c_u, c_l, voxel: leading shapes do not broadcast") from None
    cu, cl, vox = (np.broadcast_to(x, shape + x.shape[-1:]).astype(np.int64) for x in (cu, cl, vox))
    p = vox[..., 2]
    if p.size and (p.min() < 0 or p.max() >= s.n_planes):
        raise ValueError(f"voxel: plane indices must lie in [0, {s.n_planes})")
    D, pc = s.D, (s.n_planes - 1) // 2
    cvy, a = np.divmod(vox[..., 1], D)
    cvz, b = np.divmod(vox[..., 0], D)
    ouy, ouz = cu[..., 0] - cvy, cu[..., 1] - cvz
    oly, olz = cl[..., 0] - cvy, cl[..., 1] - cvz
    # y and z mirrors about the cell centre: a -> D-1-a, offsets negated
    fy = a > D - 1 - a
    a = np.where(fy, D - 1 - a, a)
    ouy, oly = np.where(fy, -ouy, ouy), np.where(fy, -oly, oly)
    fz = b > D - 1 - b
    b = np.where(fz, D - 1 - b, b)
    ouz, olz = np.where(fz, -ouz, ouz), np.where(fz, -olz, olz)
    # y-z interchange so that a' <= b'
    sw = a > b
    a, b = np.where(sw, b, a), np.where(sw, a, b)
    ouy, ouz = np.where(sw, ouz, ouy), np.where(sw, ouy, ouz)
    oly, olz = np.where(sw, olz, oly), np.where(sw, oly, olz)
    # head swap with the x mirror for the planes x < 0
    fx = p < pc
    o_u = np.stack([np.where(fx, oly, ouy), np.where(fx, olz, ouz)], axis=-1)
    o_l = np.stack([np.where(fx, ouy, oly), np.where(fx, ouz, olz)], axis=-1)
    folded = np.where(fx, s.n_planes - 1 - p, p) - pc
    seed = b * (b + 1) // 2 + a
    return folded, seed, o_u, o_l


def _encode(scanner, folded, seed, o_u, o_l):
    """One int64 per (folded plane, seed, o_u, o_l) (offsets shifted to [0, 2n - 1))."""
    n = extended_size(scanner)
    E = 2 * n - 1
    m = len(seed_subpositions(scanner.D))
    key = np.asarray(folded, np.int64) * m + np.asarray(seed, np.int64)
    for c in (o_u[..., 0], o_u[..., 1], o_l[..., 0], o_l[..., 1]):
        key = key * E + (np.asarray(c, np.int64) + n - 1)
    return key


def _in_extension(scanner, o_u, o_l):
    lim = extended_size(scanner) - 1
    return np.all(np.abs(o_u) <= lim, axis=-1) & np.all(np.abs(o_l) <= lim, axis=-1)


@dataclass(frozen=True)
class SeedDRF:
    """Seed DRFs: ``w = h(o_u, o_l; seed voxel)`` for every stored (folded plane, seed, o_u, o_l).

    Arrays of one length: ``plane`` (int16, folded plane ``>= 0``), ``seed`` (int16), ``o_u`` / ``o_l``
    (int16 ``(n, 2)``, ``(y, z)``), ``w`` (float32 > 0), sorted by their key; pairs not stored have
    ``h = 0`` (outside the support). ``planes``: the folded planes that were built.
    """

    scanner: DualHeadScanner
    plane: np.ndarray
    seed: np.ndarray
    o_u: np.ndarray
    o_l: np.ndarray
    w: np.ndarray
    planes: tuple
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        s = expect_instance(self.scanner, DualHeadScanner, "scanner")
        plane, seed = integer_array("plane", self.plane).reshape(-1), integer_array("seed", self.seed).reshape(-1)
        o_u, o_l = integer_array("o_u", self.o_u), integer_array("o_l", self.o_l)
        w = real_array("w", self.w).reshape(-1)
        n = w.size
        for name, a, shape in (("plane", plane, (n,)), ("seed", seed, (n,)), ("o_u", o_u, (n, 2)),
                               ("o_l", o_l, (n, 2))):
            if a.shape != shape:
                raise ValueError(f"{name}: expected shape {shape} (one entry per weight), got {a.shape}")
        if np.any(w <= 0):
            raise ValueError("w: expected positive weights (pairs outside the support are not stored)")
        pc, m, lim = (s.n_planes - 1) // 2, len(seed_subpositions(s.D)), extended_size(s) - 1
        if n and (plane.min() < 0 or plane.max() > pc or seed.min() < 0 or seed.max() >= m):
            raise ValueError(f"plane, seed: expected folded planes in [0, {pc}] and seeds in [0, {m})")
        if not np.all(_in_extension(s, o_u, o_l)):
            raise ValueError(f"o_u, o_l: offsets beyond the extended detector (|offset| <= {lim})")
        key = _encode(s, plane, seed, o_u, o_l)
        order = np.argsort(key, kind="stable")
        for name, a, dtype in (("plane", plane, np.int16), ("seed", seed, np.int16), ("o_u", o_u, np.int16),
                               ("o_l", o_l, np.int16), ("w", w, np.float32)):
            object.__setattr__(self, name, read_only(np.ascontiguousarray(a[order], dtype=dtype)))
        object.__setattr__(self, "_key", key[order])
        object.__setattr__(self, "planes", tuple(int(p) for p in self.planes))
        object.__setattr__(self, "meta", meta_dict(self.meta))
        if key.size > 1 and np.any(np.diff(self._key) == 0):
            raise ValueError("o_u, o_l: duplicate seed entries")

    @property
    def n_entries(self) -> int:
        """Stored seed entries (weights)."""
        return int(self.w.size)

    @property
    def nbytes(self) -> int:
        """Bytes of the stored entries (16 per entry; the int64 lookup keys are not counted)."""
        return int(self.plane.nbytes + self.seed.nbytes + self.o_u.nbytes + self.o_l.nbytes + self.w.nbytes)


def build_seed_drf(scanner: DualHeadScanner, *, angle_samples: int = 4, voxel_samples: int = 2,
                   backend: str = "cpu", planes=None, threads: Optional[int] = None) -> SeedDRF:
    """Evaluate the seed DRFs: for each folded plane (``planes``, default all ``(P+1)/2``) and seed
    voxel, ``h`` at every ``(o_u, o_l)`` with support on the extended detector (offsets in
    ``[-(n-1), n-1]^2``, ``n = max(n_y, n_z)``), stored where positive.

    Cost: at full size a seed voxel has ~10^6 support pairs (see :func:`storage_report`'s
    ``seed_candidate_entries``): use ``backend='cuda'`` there, or a few ``planes``; small scanners
    take seconds on the CPU.
    """
    s = expect_instance(scanner, DualHeadScanner, "scanner")
    pc = (s.n_planes - 1) // 2
    plist = list(range(pc + 1)) if planes is None else sorted({int(p) for p in integer_array("planes", planes).ravel()})
    if not plist or any(p < 0 or p > pc for p in plist):
        raise ValueError(f"planes: folded plane indices must lie in [0, {pc}]")
    lim = extended_size(s) - 1
    rng = ((-lim, lim), (-lim, lim))
    parts = []
    for pf in plist:
        for k, (a, b) in enumerate(seed_subpositions(s.D)):
            o_u, o_l = support_pairs(s, a, b, pc + pf, rng, rng)
            h = lor_response(s, o_u, o_l, np.array([b, a, pc + pf], np.int32), angle_samples=angle_samples,
                             voxel_samples=voxel_samples, backend=backend, threads=threads)
            keep = h.astype(np.float32) > 0
            parts.append((np.full(keep.sum(), pf), np.full(keep.sum(), k), o_u[keep], o_l[keep], h[keep]))
    cat = [np.concatenate([p[i] for p in parts]) for i in range(5)]
    meta = {"angle_samples": int(angle_samples), "voxel_samples": int(voxel_samples), "backend": backend}
    return SeedDRF(s, cat[0], cat[1], cat[2].reshape(-1, 2), cat[3].reshape(-1, 2), cat[4], tuple(plist), meta)


def seed_lookup(seeds: SeedDRF, c_u, c_l, voxel) -> np.ndarray:
    """``h(c_u, c_l; voxel)`` read from the seed DRFs (float64 of the broadcast shape; 0 outside the
    support). Raises ValueError when a pair's folded plane was not built or its offsets leave the
    extended detector. The fold uses the shifts, mirrors and the y-z interchange, all of which the
    response keeps to rounding (:mod:`directpet.dualhead.response`), so a looked-up value equals
    :func:`~directpet.dualhead.lor_response` of the pair to rounding."""
    expect_instance(seeds, SeedDRF, "seeds")
    folded, seed, o_u, o_l = seed_key(seeds.scanner, c_u, c_l, voxel)
    if not np.all(np.isin(folded, np.asarray(seeds.planes))):
        raise ValueError(f"voxel: folded planes {np.setdiff1d(folded, seeds.planes)} were not built")
    if not np.all(_in_extension(seeds.scanner, o_u, o_l)):
        raise ValueError("c_u, c_l: crystal offsets beyond the extended detector")
    key = _encode(seeds.scanner, folded, seed, o_u, o_l)
    i = np.clip(np.searchsorted(seeds._key, key), 0, max(seeds.n_entries - 1, 0))
    found = seeds._key[i] == key if seeds.n_entries else np.zeros(key.shape, bool)
    return np.where(found, seeds.w[i].astype(np.float64), 0.0)


def seed_candidate_entries(scanner: DualHeadScanner, planes=None) -> int:
    """Support pairs of every seed voxel (an upper bound of the seed entries; no evaluation)."""
    s = expect_instance(scanner, DualHeadScanner, "scanner")
    pc = (s.n_planes - 1) // 2
    lim = extended_size(s) - 1
    rng = ((-lim, lim), (-lim, lim))
    total = 0
    for pf in (range(pc + 1) if planes is None else planes):
        for a, b in seed_subpositions(s.D):
            total += support_count(s, a, b, pc + int(pf), rng, rng)
    return int(total)


def storage_report(model: PatchModel, seeds: Optional[SeedDRF] = None, *, count_seed_candidates: bool = True) -> dict:
    """Storage of the system matrix in its three forms (entries and bytes).

    Keys: ``n_lors`` (front layer), ``n_voxels``, ``unreduced_entries`` (``n_lors x n_voxels``),
    ``paper_unreduced_entries`` (both layers, ``(2 n_y n_z)^2 x n_voxels``: the paper's
    (2.2e8) x (1.4e7)), ``full_matrix_nonzeros`` (the model expanded to every LOR),
    ``full_matrix_csr_bytes`` (float32 value + int32 column per nonzero), ``patch_taps``,
    ``patch_bytes`` (``model.nbytes``), ``seed_voxels`` (folded planes x seeds),
    ``seed_candidate_entries`` (support pairs of the seeds, when ``count_seed_candidates``) and, when
    ``seeds`` is given, ``seed_entries`` / ``seed_bytes``.
    """
    model = expect_instance(model, PatchModel, "model")
    count_seed_candidates = flag("count_seed_candidates", count_seed_candidates)
    s = model.scanner
    n_vox = int(np.prod(s.grid.shape))
    nnz = model.nonzeros()
    out = {
        "n_lors": s.n_lors,
        "n_voxels": n_vox,
        "unreduced_entries": s.n_lors * n_vox,
        "paper_unreduced_entries": (2 * s.n_crystals) ** 2 * n_vox,
        "full_matrix_nonzeros": nnz,
        "full_matrix_csr_bytes": 8 * nnz,
        "patch_taps": model.n_taps,
        "patch_bytes": model.nbytes,
        "seed_voxels": ((s.n_planes + 1) // 2) * len(seed_subpositions(s.D)),
    }
    if count_seed_candidates:
        out["seed_candidate_entries"] = seed_candidate_entries(s)
    if seeds is not None:
        expect_instance(seeds, SeedDRF, "seeds")
        out["seed_entries"] = seeds.n_entries
        out["seed_bytes"] = seeds.nbytes
        out["seed_planes_built"] = len(seeds.planes)
    return out


__all__ = ["SEED_ENTRY_BYTES", "SeedDRF", "build_seed_drf", "extended_size", "folded_subpositions",
           "seed_candidate_entries", "seed_key", "seed_lookup", "seed_subpositions", "storage_report"]
