"""Reading directpet's ``.npz`` files: one place that turns a missing, truncated, foreign or
corrupt file into a ``ValueError`` naming ``path`` (never a BadZipFile, KeyError or JSON error)."""

from __future__ import annotations

import dataclasses
import json
import struct
import tokenize
import zipfile
import zlib
from typing import Callable, Optional, Sequence, TypeVar

import numpy as np

from ._checks import array_module, check_path, meta_dict, to_numpy

T = TypeVar("T")


def read_npz(path, what: str, required: Sequence[str], parse: Callable[[object], T]) -> T:
    """Open ``path`` (no pickles), check that the ``required`` keys are there, decode every array and
    return ``parse(arrays)`` (``arrays[key]``, ``arrays.files``); a file that cannot be read or
    decoded, or whose contents ``parse`` refuses (ValueError, TypeError, LookupError), becomes
    ``ValueError('path: ...')``. Other errors of ``parse`` (building the object) pass unchanged.

    A damaged zip raises more than BadZipFile: zlib.error (a corrupt deflate stream),
    NotImplementedError (a flipped compression-method or version field), RuntimeError (an
    'encrypted' flag), struct.error / OverflowError / tokenize.TokenError / SyntaxError (garbled zip
    or array headers), MemoryError (a garbled array header asking for an absurd shape); all of them
    come from the decoding, done here before ``parse``, and name the path."""
    path = check_path(path)
    try:
        # our own handle: numpy leaves its file open when the zip directory cannot be read
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as f:
            missing = [k for k in required if k not in f.files]
            if missing:
                raise _NotOurs(f"path: {path} is not a {what} file (missing {missing})")
            arrays = _Arrays({k: f[k] for k in f.files})
    except _NotOurs as e:
        raise ValueError(str(e)) from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, struct.error,
            OverflowError, MemoryError, ValueError, SyntaxError, tokenize.TokenError) as e:
        raise ValueError(f"path: {path} is not a readable {what} file ({type(e).__name__}: {e})") from e
    try:
        return parse(arrays)
    except _NotOurs as e:
        raise ValueError(str(e)) from None
    except (ValueError, TypeError, LookupError) as e:
        raise ValueError(f"path: {path} is not a valid {what} file ({type(e).__name__}: {e})") from e


class _Arrays(dict):
    """The decoded arrays of an ``.npz`` file, read like NumPy's NpzFile (``files``, ``[key]``)."""

    @property
    def files(self):
        return list(self)


def check_format(found, expected: str, version, expected_version: int, path) -> None:
    """The file's format string and version number must be the ones this code writes."""
    if str(found) != expected:
        raise _NotOurs(f"path: {path} holds format {str(found)!r}, expected {expected!r}")
    if int(version) != expected_version:
        raise _NotOurs(f"path: {path} has version {int(version)}, this directpet reads version {expected_version}")


def json_object(text) -> dict:
    """A JSON object (dict) from a stored string; anything else is a decoding error."""
    doc = json.loads(str(text))
    if not isinstance(doc, dict):
        raise TypeError(f"expected a JSON object, got {type(doc).__name__}")
    return doc


class _NotOurs(Exception):
    """A readable file that is not the expected kind (its message is final)."""


def save_record(path, fmt: str, version: int, scanner, meta: dict, **arrays) -> None:
    """Write a model file (``.npz``, compressed): ``format``, ``version``, ``scanner`` (its
    ``to_json()``), ``meta`` (JSON) and ``arrays``. ``path``: a file path, not a directory."""
    path = check_path(path, writing=True)
    np.savez_compressed(path, format=np.array(fmt), version=np.array(version), scanner=np.array(scanner.to_json()),
                        meta=np.array(json.dumps(meta, sort_keys=True, default=str)), **arrays)


def read_record(path, what: str, fmt: str, version: int, scanner_cls, required: Sequence[str],
                build: Callable[[object, object, dict], T]) -> T:
    """Read a file of :func:`save_record`: the format and version checked, the scanner (a
    ``scanner_cls.from_dict``) and ``meta`` decoded, then ``build(arrays, scanner, meta)``; every
    failure a ValueError naming ``path`` (:func:`read_npz`). ``required``: the arrays it must hold."""
    def parse(f):
        check_format(f["format"], fmt, f["version"], version, path)
        scanner = scanner_cls.from_dict(json_object(f["scanner"]))
        meta = json_object(f["meta"]) if "meta" in f.files else {}
        return build(f, scanner, meta)

    return read_npz(path, what, ("format", "version", "scanner") + tuple(required), parse)


def expected_counts(projector, image, image_shape, *, factors=None, background=None):
    """The model's mean data ``f * A x + b`` (float32, the image's namespace), everything checked
    before the projection: ``projector`` a :class:`~directpet.operators.LinearOperator`
    (``A x = projector.forward(x)``, of ``projector.out_shape``); ``image`` of ``image_shape``,
    finite and >= 0; ``factors`` f / ``background`` b of ``out_shape``, finite and >= 0, or None."""
    from .operators import LinearOperator
    from .recon.problem import check_nonnegative

    if not isinstance(projector, LinearOperator):
        raise TypeError(f"projector: expected a directpet projector (a LinearOperator), got {type(projector).__name__}")
    xp = array_module(image)
    check_nonnegative(image, "image", None, xp, tuple(image_shape))
    for name, a in (("factors", factors), ("background", background)):
        if a is not None:
            check_nonnegative(a, name, None, xp, tuple(projector.out_shape))
    ybar = projector.forward(image)               # a fresh array: f and b are applied in place
    if factors is not None:
        ybar *= factors
    if background is not None:
        ybar += background
    return ybar


def model_consistent_counts(projector, image, image_shape, *, counts=None, factors=None, background=None,
                            noise: bool = True, seed=None, source: str = "model_consistent_data"):
    """Prompts drawn from the reconstruction model itself, ``Poisson(f * A x + b)``: the one
    implementation behind every family's ``model_consistent_data``.

    ``projector``: a :class:`~directpet.operators.LinearOperator` (``A x = projector.forward(x)``, of
    ``projector.out_shape``); ``image`` of ``image_shape``, finite and >= 0 (NumPy or CuPy, where the
    projector takes it); ``factors`` f / ``background`` b of ``out_shape``, finite and >= 0, or None;
    ``counts``: scale ``f A x + b`` by one factor so that the expected total is ``counts`` (image and
    background scaled together; ``meta['image_scale']`` records the factor); ``noise`` False returns
    the expected data; ``seed``: int, Generator or None (fresh entropy), NumPy or CuPy like the image.
    Everything is checked before the projection. Returns ``(prompts, factors, background, meta)``,
    factors as given (float32), the background scaled.
    """
    from ._checks import flag, real_number
    from .operators import LinearOperator
    from .sim.random import draw_counts, make_rng

    if not isinstance(projector, LinearOperator):
        raise TypeError(f"projector: expected a directpet projector (a LinearOperator), got {type(projector).__name__}")
    if counts is not None:
        counts = real_number("counts", counts, positive=True)
    noise = flag("noise", noise)
    xp = array_module(image)
    rng = make_rng(seed, xp, "seed") if noise else None      # a bad seed is refused before any projection
    ybar = expected_counts(projector, image, image_shape, factors=factors, background=background)
    prompts, bg, alpha, total = draw_counts(ybar, counts=counts, background=background, rng=rng, noise=noise)
    f = None if factors is None else factors.astype(np.float32, copy=False)
    meta = {"source": source, "image_scale": alpha, "expected_counts": total * alpha, "noise": noise,
            "method": getattr(projector, "method", None)}
    return prompts, f, bg, meta


__all__ = ["CountData", "ScannerCounts", "check_format", "data_namespace", "expected_counts", "json_object",
           "model_consistent_counts", "read_npz", "read_record", "save_record"]


def data_namespace(xp, name: str = "xp"):
    """The array module of stored data: None, ``numpy`` or ``'numpy'`` give NumPy; ``cupy`` or
    ``'cupy'`` give CuPy (imported: asked for, so it must be installed); anything else is a
    TypeError naming ``name``."""
    if xp is None or xp is np or (isinstance(xp, str) and xp == "numpy"):
        return np
    if (isinstance(xp, str) and xp == "cupy") or getattr(xp, "__name__", None) == "cupy":
        import cupy  # optional: asked for by name

        return cupy
    raise TypeError(f"{name}: expected None, numpy, cupy, 'numpy' or 'cupy', got {type(xp).__name__} {xp!r}")


class CountData:
    """prompts / factors / background of one scanner's measurement, shared by the families' data
    classes (DIRECT ``HistoImageData``, FIRST ``SinogramData``, dual-head ``DualHeadData``): checked
    the same way, stored in the same ``.npz`` layout (``format``, ``version``, ``prompts``, optional
    ``factors`` / ``background``, ``scanner`` and ``meta`` as JSON, and the subclass's
    ``JSON_FIELDS`` as JSON). A subclass is a dataclass; it sets ``FORMAT``, ``VERSION``, ``WHAT``
    (for error messages) and ``SCANNER`` (its scanner class); its fields are ``scanner``,
    ``prompts``, ``factors``, ``background`` and ``meta`` (built by keyword, in any order), plus any
    of its own (``JSON_FIELDS`` are written by ``_json_fields`` and read back by
    ``_from_json_fields``)."""

    FORMAT: str
    VERSION: int
    WHAT: str
    SCANNER: type
    #: whether ``scanner`` may be None (stored as JSON ``null``)
    SCANNER_OPTIONAL = False
    #: further fields stored as JSON next to ``scanner`` (required in a file)
    JSON_FIELDS: tuple = ()
    #: whether :meth:`save` compresses by default
    COMPRESS = True

    def _json_fields(self) -> dict:
        """The ``JSON_FIELDS`` as JSON-serialisable values."""
        return {}

    @classmethod
    def _from_json_fields(cls, docs: dict) -> dict:
        """Constructor keywords from the decoded ``JSON_FIELDS`` (a ValueError / TypeError /
        LookupError for a damaged record)."""
        return {}

    def _check_counts(self, shape_of):
        """The scanner's type, then every array: float32, ``shape_of(scanner)``, finite, >= 0, one
        namespace."""
        from .recon.problem import check_nonnegative

        if not isinstance(self.scanner, self.SCANNER) and not (self.SCANNER_OPTIONAL and self.scanner is None):
            alt = " or None" if self.SCANNER_OPTIONAL else ""
            raise TypeError(f"scanner: expected a {self.SCANNER.__name__}{alt}, got {type(self.scanner).__name__}")
        if not hasattr(self.prompts, "dtype") or not hasattr(self.prompts, "shape"):
            raise TypeError(f"prompts: expected a NumPy or CuPy array, got {type(self.prompts).__name__}")
        xp = array_module(self.prompts)
        shape = shape_of(self.scanner)
        check_nonnegative(self.prompts, "prompts", None, xp, shape)
        for name in ("factors", "background"):
            if getattr(self, name) is not None:
                check_nonnegative(getattr(self, name), name, None, xp, shape)
        self.meta = meta_dict(self.meta)

    @property
    def xp(self):
        """The arrays' namespace (numpy or cupy)."""
        return array_module(self.prompts)

    def _in(self, xp):
        """The same data with its arrays in namespace xp (copies only when the namespace changes)."""
        def conv(a):
            return None if a is None else xp.asarray(to_numpy(a) if xp is np else a, dtype=xp.float32)

        return dataclasses.replace(self, prompts=conv(self.prompts), factors=conv(self.factors),
                                   background=conv(self.background), meta=dict(self.meta))

    def to(self, xp):
        """The same data with its arrays in ``xp`` (None / ``numpy`` / ``'numpy'`` or ``cupy`` /
        ``'cupy'``); copies only when the namespace changes."""
        return self._in(data_namespace(xp))

    def save(self, path, compress: Optional[bool] = None) -> None:
        """``.npz`` with ``format``, ``version``, ``prompts``, optional ``factors`` / ``background``,
        ``scanner`` (JSON), ``meta`` (JSON) and the class's ``JSON_FIELDS``; arrays are stored as
        NumPy float32. ``path``: a file path, not a directory (NumPy appends ``.npz`` when it has no
        extension). ``compress``: True / False, None for the class's default (``COMPRESS``)."""
        from ._checks import flag

        path = check_path(path, writing=True)
        compress = self.COMPRESS if compress is None else flag("compress", compress)
        host = self._in(np)
        arrays = {k: v for k, v in (("factors", host.factors), ("background", host.background)) if v is not None}
        docs = {k: np.array(json.dumps(v, sort_keys=True)) for k, v in self._json_fields().items()}
        (np.savez_compressed if compress else np.savez)(
            path, format=np.array(self.FORMAT), version=np.array(self.VERSION), prompts=host.prompts,
            scanner=np.array("null" if self.scanner is None else self.scanner.to_json()),
            meta=np.array(json.dumps(self.meta, sort_keys=True, default=str)), **docs, **arrays)

    @classmethod
    def load(cls, path, *, xp=None):
        """Read a file written by :meth:`save`; arrays in ``xp`` (None / ``numpy`` / ``'numpy'`` or
        ``cupy`` / ``'cupy'``). A missing, damaged or foreign file, or one of another format version,
        is a ValueError naming ``path``."""
        return cls._read(path, data_namespace(xp))

    @classmethod
    def _read(cls, path, xp):
        """Read a file written by :meth:`save`, arrays in namespace xp."""
        def parse(f):
            check_format(f["format"], cls.FORMAT, f["version"], cls.VERSION, path)
            if cls.SCANNER_OPTIONAL and json.loads(str(f["scanner"])) is None:
                scanner = None
            else:
                scanner = cls.SCANNER.from_dict(json_object(f["scanner"]))
            extra = cls._from_json_fields({k: json.loads(str(f[k])) for k in cls.JSON_FIELDS})
            get = lambda k: f[k] if k in f.files else None  # noqa: E731
            meta = json_object(f["meta"]) if "meta" in f.files else {}
            return cls(scanner=scanner, prompts=f["prompts"], factors=get("factors"), background=get("background"),
                       meta=meta, **extra)

        data = read_npz(path, cls.WHAT, ("format", "version", "prompts", "scanner") + tuple(cls.JSON_FIELDS), parse)
        return data if xp is np else data._in(xp)



@dataclasses.dataclass
class ScannerCounts(CountData):
    """:class:`CountData` of a family whose data are the scanner's count arrays and nothing else
    (FIRST ``SinogramData``, dual-head ``DualHeadData``). Fields, in this order: ``scanner``,
    ``prompts``, ``factors`` (None: ones), ``background`` (None: zeros), ``meta``; checked on
    construction, every array of ``counts_shape(scanner)``. A subclass sets ``FORMAT``, ``VERSION``,
    ``WHAT``, ``SCANNER`` and ``counts_shape``."""

    scanner: object
    prompts: object
    factors: Optional[object] = None
    background: Optional[object] = None
    meta: dict = dataclasses.field(default_factory=dict)

    @staticmethod
    def counts_shape(scanner) -> tuple:
        """The shape of every array of this scanner's data (each family's data class defines it)."""
        raise NotImplementedError("counts_shape: a ScannerCounts subclass defines the shape of its data")

    def __post_init__(self):
        self._check_counts(self.counts_shape)
