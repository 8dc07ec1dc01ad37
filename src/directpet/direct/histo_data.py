"""DIRECT data: per-view histo-images with their corrections and metadata, and ``.npz`` storage.

:class:`HistoImageData` holds what a DIRECT reconstruction needs for the model
``ybar_v = s_v * H_v x + b_v`` (histo-images d_v, sensitivity s_v, background b_v) plus the grid,
views, SR kernel and scanner they belong to. :class:`~directpet.direct.subsets.ViewSubsets` turns
it and a projector into the reconstruction layer's :class:`~directpet.recon.SubsetProblem`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from .._checks import array_module, array_namespace, check_path, flag, meta_dict, require_memory, to_numpy
from .._storage import check_format, json_object, read_npz
from ..geometry import ImageGrid
from ..recon.problem import check_nonnegative
from .kernels import SRKernel
from .scanner import CylindricalScanner
from .views import ViewSet

_FORMAT = "directpet.HistoImageData"
_VERSION = 1


@dataclass
class HistoImageData:
    """DIRECT data: per-view histo-images plus corrections, for ``ybar_v = s_v * H_v x + b_v``.

    Attributes
    ----------
    histos : (n_views, nz, ny, nx) float32 measured (deposited) counts d_v.
    grid : the ImageGrid of every histo-image.
    viewset : the ViewSet (None if the views are not a regular ViewSet).
    sensitivity : (n_views, nz, ny, nx) float32 s_v, or None for ones.
    background : (n_views, nz, ny, nx) float32 b_v (expected randoms + scatter), or None for zeros.
    kernel : the SRKernel the data were simulated with / should be reconstructed with (optional).
    scanner : the CylindricalScanner of a simulation (optional).
    meta : free-form JSON-serialisable metadata (counts, seeds, ...).

    Arrays may be NumPy or CuPy (all the same kind).
    """

    histos: object
    grid: ImageGrid
    viewset: Optional[ViewSet] = None
    sensitivity: object = None
    background: object = None
    kernel: Optional[SRKernel] = None
    scanner: Optional[CylindricalScanner] = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        """Checked as the other families' data (``directpet._storage.CountData``): types first,
        then every array float32, of the histo-images' shape, finite and >= 0, one namespace."""
        if not isinstance(self.grid, ImageGrid):
            raise TypeError(f"grid: expected an ImageGrid, got {type(self.grid).__name__}")
        if not hasattr(self.histos, "dtype") or not hasattr(self.histos, "shape"):
            raise TypeError(f"histos: expected a NumPy or CuPy array, got {type(self.histos).__name__}")
        for name, cls in (("viewset", ViewSet), ("kernel", SRKernel), ("scanner", CylindricalScanner)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, cls):
                raise TypeError(f"{name}: expected a {cls.__name__} or None, got {type(value).__name__}")
        shape = tuple(self.histos.shape)
        if len(shape) != 4 or shape[1:] != self.grid.shape:
            raise ValueError(f"histos: expected shape (n_views,) + {self.grid.shape}, got {shape}")
        if self.viewset is not None and len(self.viewset) != shape[0]:
            raise ValueError(f"viewset: has {len(self.viewset)} views but histos has {shape[0]}")
        xp = array_module(self.histos)
        for name in ("histos", "sensitivity", "background"):
            if getattr(self, name) is not None:
                check_nonnegative(getattr(self, name), name, None, xp, shape)
        self.meta = meta_dict(self.meta)

    @property
    def n_views(self) -> int:
        return int(self.histos.shape[0])

    @property
    def xp(self):
        return array_module(self.histos)

    @property
    def total_counts(self) -> float:
        return float(self.histos.sum(dtype=self.xp.float64))

    def to(self, xp) -> "HistoImageData":
        """A copy with the arrays moved to namespace xp (numpy or cupy)."""
        array_namespace(xp)
        conv = (lambda a: None if a is None else to_numpy(a)) if xp is np else \
               (lambda a: None if a is None else xp.asarray(a))
        return HistoImageData(conv(self.histos), self.grid, self.viewset, conv(self.sensitivity),
                              conv(self.background), self.kernel, self.scanner, dict(self.meta))

    # --- storage -------------------------------------------------------------------------------------
    def metadata_json(self) -> str:
        vs = self.viewset
        doc = {
            "format": _FORMAT, "version": _VERSION,
            "grid": {"shape": list(self.grid.shape), "voxel_size": list(self.grid.voxel_size)},
            "viewset": None if vs is None else {"n_phi": vs.n_phi, "n_theta": vs.n_theta,
                                                "theta_max_deg": vs.theta_max_deg},
            "kernel": _kernel_to_dict(self.kernel),
            "scanner": None if self.scanner is None else self.scanner.to_dict(),
            "meta": self.meta,
        }
        return json.dumps(doc, default=str)

    def save(self, path, compress: bool = False):
        """Write a ``.npz`` with the arrays (as NumPy) and a JSON ``metadata`` string.

        Kernels with callable parts (custom radial models / values) cannot be stored: their
        metadata entry is null with a ``note`` and :meth:`load` returns ``kernel=None``.
        """
        path = check_path(path, "path", writing=True)
        compress = flag("compress", compress)
        arrays = {"histos": to_numpy(self.histos), "metadata": np.array(self.metadata_json())}
        for name in ("sensitivity", "background"):
            a = getattr(self, name)
            if a is not None:
                arrays[name] = to_numpy(a)
        (np.savez_compressed if compress else np.savez)(path, **arrays)

    @classmethod
    def load(cls, path, xp=np) -> "HistoImageData":
        """Read a file written by :meth:`save` (arrays moved to namespace xp). A missing, damaged or
        foreign file, or one of another format version, is a ValueError naming ``path``."""
        array_namespace(xp)

        def parse(f):
            doc = json_object(f["metadata"])
            check_format(doc.get("format"), _FORMAT, doc.get("version", -1), _VERSION, path)
            arrays = {k: f[k] for k in ("histos", "sensitivity", "background") if k in f.files}
            g = doc["grid"]
            grid = ImageGrid(tuple(g["shape"]), tuple(g["voxel_size"]))
            v = doc["viewset"]
            viewset = None if v is None else ViewSet(v["n_phi"], v["n_theta"], v["theta_max_deg"])
            scanner = None if doc["scanner"] is None else CylindricalScanner(**doc["scanner"])
            conv = (lambda a: a) if xp is np else xp.asarray
            return cls(conv(arrays["histos"]), grid, viewset,
                       None if "sensitivity" not in arrays else conv(arrays["sensitivity"]),
                       None if "background" not in arrays else conv(arrays["background"]),
                       _kernel_from_dict(doc["kernel"]), scanner, doc.get("meta", {}))

        return read_npz(path, "HistoImageData", ("histos", "metadata"), parse)


def require_stack_memory(name: str, n_views: int, grid: ImageGrid, copies: float = 1.0) -> None:
    """ValueError naming ``name`` unless ``copies`` float32 stacks of ``n_views`` histo-images on
    ``grid`` fit in this machine's memory (called before allocating them)."""
    buffers = "" if copies == 1 else f" (x {copies:g} buffers)"
    require_memory(name, 4.0 * copies * n_views * grid.n_voxels,
                   f"{n_views} histo-images of {grid.shape} voxels{buffers}")


def _kernel_to_dict(kernel: Optional[SRKernel]):
    if kernel is None:
        return None
    if kernel.values is not None or (callable(kernel.radial_fwhm) and not isinstance(kernel.radial_fwhm, str)):
        return {"note": "kernel with callable parts; not stored"}
    d = asdict(kernel)
    if isinstance(d["radial_fwhm"], tuple):
        d["radial_fwhm"] = {"tuple": list(d["radial_fwhm"])}
    return d


def _kernel_from_dict(d):
    if d is None or "note" in d:
        return None
    d = dict(d)
    if isinstance(d["radial_fwhm"], dict):
        d["radial_fwhm"] = tuple(d["radial_fwhm"]["tuple"])
    return SRKernel(**d)


__all__ = ["HistoImageData", "require_stack_memory", "to_numpy"]
