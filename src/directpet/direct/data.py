"""DIRECT data: per-view histo-images with their corrections and metadata, ``.npz`` storage, and
model-consistent data (the quick test mode of :ref:`physics-data`).

:class:`HistoImageData` holds what a DIRECT reconstruction needs for the model
``ybar_v = f_v * H_v x + b_v`` (prompts d_v, factors f_v -- the sensitivity s_v of the DIRECT paper
[HA] -- and background b_v) plus the grid, views, SR kernel and scanner they belong to. It is a
:class:`~directpet._storage.CountData`, checked and stored as the other families' data.
:class:`~directpet.direct.subsets.ViewSubsets` turns it and a projector into the reconstruction
layer's :class:`~directpet.recon.SubsetProblem`. :func:`model_consistent_data` draws
``d_v = Poisson(f_v * H_v x + b_v)`` from a projector (an inverse crime by construction, for tests
of the reconstruction machinery).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from .._checks import check_volume, require_memory
from .._storage import CountData, expected_counts, model_consistent_counts
from ..geometry import ImageGrid
from .geometry import CylindricalScanner, ViewSet, check_views_match
from .model import SRKernel


@dataclass
class HistoImageData(CountData):
    """DIRECT data: per-view histo-images plus corrections, for ``ybar_v = f_v * H_v x + b_v``.

    Attributes
    ----------
    prompts : (n_views, nz, ny, nx) float32 measured (deposited) counts d_v.
    grid : the ImageGrid of every histo-image.
    viewset : the ViewSet (None if the views are not a regular ViewSet).
    factors : (n_views, nz, ny, nx) float32 multiplicative factors f_v -- the sensitivity s_v of the
        DIRECT paper [HA] (geometric sensitivity x attenuation x normalisation) -- or None for ones.
    background : (n_views, nz, ny, nx) float32 b_v in counts (expected randoms + scatter), or None
        for zeros.
    kernel : the SRKernel the data were simulated with / should be reconstructed with (optional).
    scanner : the CylindricalScanner of a simulation (optional).
    meta : free-form JSON-serialisable metadata (counts, seeds, ...).

    Arrays may be NumPy or CuPy (all the same kind). Stored with :meth:`save` and read back with
    :meth:`load` (``HistoImageData.load(path, *, xp=None)``) in the layout shared with the other
    families (:class:`~directpet._storage.CountData`), plus ``grid``, ``viewset`` and ``kernel`` as
    JSON; uncompressed by default (``save(path, compress=True)`` compresses).
    """

    prompts: object
    grid: ImageGrid
    viewset: Optional[ViewSet] = None
    factors: object = None
    background: object = None
    kernel: Optional[SRKernel] = None
    scanner: Optional[CylindricalScanner] = None
    meta: dict = field(default_factory=dict)

    FORMAT, VERSION, WHAT, SCANNER = "directpet.HistoImageData", 2, "HistoImageData", CylindricalScanner
    SCANNER_OPTIONAL, JSON_FIELDS, COMPRESS = True, ("grid", "viewset", "kernel"), False

    def __post_init__(self):
        """Checked as the other families' data (``directpet._storage.CountData``): types first,
        then every array float32, of the histo-images' shape, finite and >= 0, one namespace."""
        if not isinstance(self.grid, ImageGrid):
            raise TypeError(f"grid: expected an ImageGrid, got {type(self.grid).__name__}")
        for name, cls in (("viewset", ViewSet), ("kernel", SRKernel)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, cls):
                raise TypeError(f"{name}: expected a {cls.__name__} or None, got {type(value).__name__}")
        self._check_counts(lambda _: self._stack_shape())

    def _stack_shape(self) -> tuple:
        """(n_views,) + grid.shape, n_views from the prompts (and the ViewSet, which must agree)."""
        shape = tuple(self.prompts.shape)
        if len(shape) != 4 or shape[1:] != self.grid.shape:
            raise ValueError(f"prompts: expected shape (n_views,) + {self.grid.shape}, got {shape}")
        if self.viewset is not None and len(self.viewset) != shape[0]:
            raise ValueError(f"viewset: has {len(self.viewset)} views but prompts has {shape[0]}")
        return shape

    @property
    def n_views(self) -> int:
        """Number of views (histo-images) in the stack."""
        return int(self.prompts.shape[0])

    @property
    def total_counts(self) -> float:
        """Sum of the prompts (float64)."""
        return float(self.prompts.sum(dtype=self.xp.float64))

    # --- storage: the extra JSON fields of CountData's layout -------------------------------------------
    def _json_fields(self) -> dict:
        """grid, viewset and kernel as JSON. Kernels with callable parts (custom radial models /
        values) cannot be stored: their entry is a ``note`` and :meth:`load` gives ``kernel=None``."""
        vs = self.viewset
        return {"grid": {"shape": list(self.grid.shape), "voxel_size": list(self.grid.voxel_size)},
                "viewset": None if vs is None else {"n_phi": vs.n_phi, "n_theta": vs.n_theta,
                                                    "theta_max_deg": vs.theta_max_deg},
                "kernel": _kernel_to_dict(self.kernel)}

    @classmethod
    def _from_json_fields(cls, docs: dict) -> dict:
        g, v = docs["grid"], docs["viewset"]
        return {"grid": ImageGrid(tuple(g["shape"]), tuple(g["voxel_size"])),
                "viewset": None if v is None else ViewSet(v["n_phi"], v["n_theta"], v["theta_max_deg"]),
                "kernel": _kernel_from_dict(docs["kernel"])}


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


# --- model-consistent data -----------------------------------------------------------------------------

def _check_model_projector(projector):
    """A DIRECT projector (a LinearOperator with ``n_views`` and an ImageGrid ``grid``)."""
    from ..operators import LinearOperator

    if not isinstance(projector, LinearOperator) or not isinstance(getattr(projector, "grid", None), ImageGrid) \
            or not hasattr(projector, "n_views"):
        raise TypeError(f"projector: expected a DIRECT projector (HistoImageProjector, FFTProjector, LowRankProjector), "
                        f"got {type(projector).__name__}")
    return projector


def expected_data(projector, image, *, factors=None, background=None):
    """ybar = f_v * H_v x + b_v for every view: (n_views, nz, ny, nx) float32 (namespace of image).

    ``projector``: a DIRECT projector; ``image`` (nz, ny, nx) float32, finite and >= 0 (an
    activity); ``factors`` f_v (the sensitivity s_v of [HA]) and ``background`` b_v, when given,
    (n_views, nz, ny, nx) float32, finite and >= 0, in the image's namespace. Everything is checked
    before any projection.
    """
    projector = _check_model_projector(projector)
    image = check_volume(image, "image", projector.grid.shape)
    require_stack_memory("projector", projector.n_views, projector.grid)
    return expected_counts(projector, image, projector.grid.shape, factors=factors, background=background)


def model_consistent_data(projector, image, *, counts: Optional[float] = None, factors=None, background=None,
                          noise: bool = True, seed=None, viewset: Optional[ViewSet] = None,
                          kernel: Optional[SRKernel] = None) -> HistoImageData:
    """DIRECT data drawn from the reconstruction model itself: ``d_v = Poisson(f_v * H_v x + b_v)``
    (:func:`directpet._storage.model_consistent_counts`).

    Parameters
    ----------
    projector : a DIRECT projector (:class:`HistoImageProjector`, :class:`FFTProjector`,
        :class:`LowRankProjector`).
    image : (nz, ny, nx) float32 true image x (NumPy or CuPy), finite and >= 0.
    counts : if given, the mean ``f H x + b`` is scaled by one factor alpha so that the total
        expected counts equal ``counts`` (image and background scaled together, so the
        background fraction is kept).
    factors : (n_views, nz, ny, nx) f_v (the sensitivity s_v of [HA]), finite and >= 0, or None (ones).
    background : (n_views, nz, ny, nx) b_v in counts, finite and >= 0, or None (zeros).
    noise : False returns the expected (noise-free) data instead of a Poisson draw.
    seed : int, Generator or None (fresh entropy); NumPy, or CuPy for CuPy images.
    viewset, kernel : stored in the returned data (default: the projector's ``viewset`` /
        ``kernel``). Give ``viewset`` so that block-RAMLA can use its geometric order; it must be
        the projector's views.

    Returns
    -------
    HistoImageData with ``prompts = d``, ``factors``, ``background`` (scaled by alpha) and ``meta``
    keys ``image_scale`` (alpha: the image consistent with the data is ``alpha * image``),
    ``expected_counts``, ``noise`` and ``method``.
    """
    projector = _check_model_projector(projector)
    viewset = getattr(projector, "viewset", None) if viewset is None else viewset
    kernel = getattr(projector, "kernel", None) if kernel is None else kernel
    if viewset is not None and not isinstance(viewset, ViewSet):
        raise TypeError(f"viewset: expected a ViewSet or None, got {type(viewset).__name__}")
    if kernel is not None and not isinstance(kernel, SRKernel):
        raise TypeError(f"kernel: expected an SRKernel or None, got {type(kernel).__name__}")
    check_views_match(viewset, projector, "viewset")
    require_stack_memory("projector", projector.n_views, projector.grid)
    prompts, f, bg, meta = model_consistent_counts(projector, image, projector.grid.shape, counts=counts,
                                                   factors=factors, background=background, noise=noise,
                                                   seed=seed)
    return HistoImageData(prompts, projector.grid, viewset, f, bg, kernel, None, meta)


__all__ = ["HistoImageData", "expected_data", "model_consistent_data", "require_stack_memory"]
