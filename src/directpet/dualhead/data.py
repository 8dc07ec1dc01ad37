"""Dual-head LOR data: prompts, multiplicative factors and background, with ``.npz`` storage.

Model of the mean prompts, per LOR ``i``: ``ybar_i = f_i (H x)_i + b_i`` with ``f`` the multiplicative
factors (normalisation, attenuation; None = 1) and ``b`` the additive background (randoms, scatter;
None = 0). All arrays are flat float32 vectors of length ``scanner.n_lors`` in the class-major LOR
layout of :mod:`directpet.dualhead.geometry` (NumPy or CuPy, all in one namespace).

Honest data come from the event Monte Carlo (:func:`directpet.dualhead.simulate_events`);
:func:`model_consistent_data` draws Poisson data from the reconstruction model itself, for unit
tests of the reconstruction machinery (an inverse crime by construction).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .._checks import array_module, to_numpy
from .._storage import check_format, json_object, read_npz
from ..recon.problem import check_nonnegative
from ..sim import make_rng
from .geometry import DualHeadScanner

_FORMAT = "directpet.dualhead.DualHeadData"
_VERSION = 1


@dataclass
class DualHeadData:
    """Prompts of a dual-head scan with their corrections.

    Attributes
    ----------
    scanner : the DualHeadScanner the LORs belong to.
    prompts : (n_lors,) float32 counts (NumPy or CuPy), finite and >= 0.
    factors : multiplicative factors ``f`` (same shape and namespace) or None.
    background : additive background ``b`` in counts (same shape and namespace) or None.
    meta : provenance (source, counts, seed, ...).
    """

    scanner: DualHeadScanner
    prompts: object
    factors: Optional[object] = None
    background: Optional[object] = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.scanner, DualHeadScanner):
            raise TypeError(f"scanner: expected a DualHeadScanner, got {type(self.scanner).__name__}")
        if not hasattr(self.prompts, "dtype") or not hasattr(self.prompts, "shape"):
            raise TypeError(f"prompts: expected a NumPy or CuPy array, got {type(self.prompts).__name__}")
        xp = array_module(self.prompts)
        shape = (self.scanner.n_lors,)
        check_nonnegative(self.prompts, "prompts", None, xp, shape)
        for name in ("factors", "background"):
            if getattr(self, name) is not None:
                check_nonnegative(getattr(self, name), name, None, xp, shape)
        self.meta = dict(self.meta)

    @property
    def xp(self):
        """The arrays' namespace (numpy or cupy)."""
        return array_module(self.prompts)

    def to(self, backend) -> "DualHeadData":
        """The same data in another namespace: ``numpy`` / ``'cpu'`` / ``'numpy'`` or ``cupy`` /
        ``'cuda'`` / ``'cupy'`` (copies only when the namespace changes)."""
        xp = _namespace(backend)

        def conv(a):
            if a is None:
                return None
            return xp.asarray(to_numpy(a) if xp is np else a, dtype=xp.float32)

        return DualHeadData(self.scanner, conv(self.prompts), conv(self.factors), conv(self.background),
                            dict(self.meta))

    @property
    def total_counts(self) -> float:
        """Sum of the prompts (float64)."""
        return float(self.prompts.sum(dtype=self.xp.float64))

    def save(self, path) -> None:
        """``.npz`` with ``format``, ``version``, ``prompts``, optional ``factors`` / ``background``,
        ``scanner`` (JSON) and ``meta`` (JSON); arrays are stored as NumPy float32."""
        host = self.to(np)
        arrays = {k: v for k, v in (("factors", host.factors), ("background", host.background)) if v is not None}
        np.savez_compressed(path, format=np.array(_FORMAT), version=np.array(_VERSION), prompts=host.prompts,
                            scanner=np.array(self.scanner.to_json()),
                            meta=np.array(json.dumps(self.meta, sort_keys=True, default=str)), **arrays)

    @classmethod
    def load(cls, path, backend=np) -> "DualHeadData":
        """Read a file written by :meth:`save`; arrays in ``backend``'s namespace (as :meth:`to`)."""
        xp = _namespace(backend)

        def parse(f):
            check_format(f["format"], _FORMAT, f["version"], _VERSION, path)
            scanner = DualHeadScanner.from_dict(json_object(f["scanner"]))
            get = lambda k: f[k] if k in f.files else None  # noqa: E731
            meta = json_object(f["meta"]) if "meta" in f.files else {}
            return cls(scanner, f["prompts"], get("factors"), get("background"), meta)

        data = read_npz(path, "dual-head data", ("format", "version", "prompts", "scanner"), parse)
        return data if xp is np else data.to(xp)


def _namespace(backend):
    """numpy or cupy from a namespace or a name ('cpu', 'numpy', 'cuda', 'cupy')."""
    if backend is np or backend in ("cpu", "numpy"):
        return np
    if backend in ("cuda", "cupy") or getattr(backend, "__name__", None) == "cupy":
        import cupy  # optional: asked for by name, so it must be installed

        return cupy
    raise TypeError(f"backend: expected numpy, cupy, 'cpu' or 'cuda', got {backend!r}")


def _scanner_of(projector) -> DualHeadScanner:
    """The projector's scanner (``projector.scanner`` or ``projector.model.scanner``)."""
    scanner = getattr(projector, "scanner", None)
    if scanner is None:
        scanner = getattr(getattr(projector, "model", None), "scanner", None)
    if not isinstance(scanner, DualHeadScanner):
        raise TypeError(f"projector: expected a dual-head projector (with a DualHeadScanner), got "
                        f"{type(projector).__name__}")
    return scanner


def model_consistent_data(projector, image, *, seed, total_counts: Optional[float] = None, factors=None,
                          background=None, noise: bool = True) -> DualHeadData:
    """Prompts drawn from the reconstruction model itself: ``Poisson(f * H x + b)`` (unit tests).

    Parameters
    ----------
    projector : a DualHeadProjector (its ``forward(image)`` gives the full (n_lors,) vector).
    image : float32 image of ``scanner.grid.shape`` (NumPy or CuPy, matching the projector's backend).
    seed : seed or Generator of the Poisson draws (NumPy, or CuPy for CuPy images; None: fresh entropy).
    total_counts : scale ``f H x + b`` by one factor so that the expected total is ``total_counts``
        (image and background scaled together); ``meta['image_scale']`` records the factor.
    factors, background : optional (n_lors,) f and b.
    noise : False returns the expected data.
    """
    scanner = _scanner_of(projector)
    xp = array_module(image)
    ybar = projector.forward(image)
    if factors is not None:
        ybar = ybar * factors
    if background is not None:
        ybar = ybar + background
    total = float(ybar.sum(dtype=xp.float64))
    if not total > 0:
        raise ValueError("image: the expected data are all zero; nothing to simulate")
    if total_counts is None:
        alpha = 1.0
    else:
        if isinstance(total_counts, (bool, np.bool_)) or not isinstance(total_counts, (int, float, np.integer,
                                                                                       np.floating)):
            raise TypeError(f"total_counts: expected a number, got {type(total_counts).__name__}")
        alpha = float(total_counts) / total
        if not (np.isfinite(alpha) and alpha > 0):
            raise ValueError(f"total_counts: expected a positive finite number, got {total_counts!r}")
    ybar = (ybar * np.float32(alpha)).astype(xp.float32)
    prompts = make_rng(seed, xp).poisson(ybar).astype(xp.float32) if noise else ybar
    bg = None if background is None else (background * np.float32(alpha)).astype(xp.float32)
    meta = {"source": "model_consistent_data", "image_scale": alpha, "expected_counts": total * alpha,
            "noise": bool(noise), "method": getattr(projector, "method", None)}
    return DualHeadData(scanner, prompts, factors, bg, meta)


__all__ = ["DualHeadData", "model_consistent_data"]
