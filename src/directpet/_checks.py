"""Argument checks and array plumbing shared by every layer: errors name the argument, the expectation
and what came."""

from __future__ import annotations

import os

import numpy as np


def array_module(x):
    """numpy for NumPy arrays, cupy for CuPy arrays; PyTorch CUDA tensors are handled by the caller."""
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        import cupy  # optional dependency, present because x is a CuPy array

        return cupy
    return np


def synchronize(xp) -> None:
    """Wait for the device of array library ``xp`` so that wall times mean something (no-op for NumPy)."""
    if xp is not np:
        xp.cuda.Device().synchronize()


def to_numpy(a):
    """A NumPy array from a NumPy or CuPy array (None passes through)."""
    if a is None or isinstance(a, np.ndarray):
        return a
    if hasattr(a, "get"):                 # CuPy
        return a.get()
    return np.asarray(a)


def is_device_array(x) -> bool:
    """True for CUDA arrays (CuPy, PyTorch CUDA tensors, anything with __cuda_array_interface__)."""
    if isinstance(x, np.ndarray):
        return False
    return _is_cupy(x) or _is_torch_cuda(x) or hasattr(x, "__cuda_array_interface__")


def _is_cupy(x) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


def _is_torch_cuda(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch" and getattr(x, "is_cuda", False)


def like(x, shape):
    """A new float32 array of ``shape`` living where x lives (NumPy, CuPy or PyTorch)."""
    if type(x).__module__.split(".")[0] == "torch":
        import torch  # optional dependency, present because x is a tensor

        return torch.empty(shape, dtype=torch.float32, device=x.device)
    xp = array_module(x)
    try:
        return xp.empty(shape, dtype=xp.float32)
    except MemoryError:
        raise MemoryError(f"out: the result {tuple(shape)} float32 needs {format_bytes(4.0 * np.prod(shape))}, "
                          "more than this machine can allocate now") from None


def output_array(like_array, out, shape, *, inputs=()):
    """The caller's ``out`` (checked: float32, C-contiguous, ``shape``, sharing no memory with the
    input ``like_array`` nor with the other ``inputs``) or a new array of ``shape`` living where
    ``like_array`` lives.

    The kernels read their input while they write ``out``, so an ``out`` that overlaps an input (the
    same buffer, or a view of it shifted by a few elements) would silently give a wrong result.
    """
    if out is None:
        return like(like_array, shape)
    out = check_volume(out, "out", shape, check_finite=False)
    for a in (like_array,) + tuple(inputs):
        if a is not None and shares_memory(a, out):
            raise ValueError(f"out: overlaps the input (an array of shape {tuple(a.shape)}): the projection "
                             "reads its input while it writes out; pass a separate array, or out=None")
    return out


def shares_memory(a, b) -> bool:
    """True when arrays a and b (NumPy, CuPy, PyTorch or __cuda_array_interface__) share any byte.

    Both are C-contiguous here (check_volume), so comparing their byte ranges ``[ptr, ptr + nbytes)``
    is exact and O(1); ``np.shares_memory`` (exact but possibly slow for odd strides) is kept for NumPy
    arrays that are not contiguous. Arrays on different sides (host / device) never share memory.
    """
    if is_device_array(a) != is_device_array(b):
        return False
    ra, rb = _byte_range(a), _byte_range(b)
    if ra is None or rb is None:                      # not an array we can locate: no claim of overlap
        return False
    if ra[1] <= ra[0] or rb[1] <= rb[0] or ra[1] <= rb[0] or rb[1] <= ra[0]:
        return False
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and not (
            a.flags.c_contiguous and b.flags.c_contiguous):
        return bool(np.shares_memory(a, b))
    return True


def _byte_range(x):
    """``(first, end)`` byte addresses spanned by an array's elements (None when x has no buffer we know)."""
    if isinstance(x, np.ndarray) or _is_cupy(x):
        ptr = x.__array_interface__["data"][0] if isinstance(x, np.ndarray) else int(x.data.ptr)
        if x.flags.c_contiguous:                 # the projectors' arrays (checked): one span, quickly
            return (ptr, ptr + x.nbytes)
        shape, strides, itemsize = x.shape, x.strides, x.itemsize
    elif _is_torch_cuda(x):
        ptr, shape, itemsize = int(x.data_ptr()), tuple(x.shape), x.element_size()
        strides = tuple(s * itemsize for s in x.stride())
    elif hasattr(x, "__cuda_array_interface__"):
        iface = x.__cuda_array_interface__
        ptr, shape, itemsize = int(iface["data"][0]), tuple(iface["shape"]), np.dtype(iface["typestr"]).itemsize
        strides = iface.get("strides") or _c_strides(shape, itemsize)
    else:
        return None
    if any(n == 0 for n in shape):
        return (ptr, ptr)
    lo = ptr + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = ptr + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) + itemsize
    return (lo, hi)


def check_volume(x, name: str, shape: tuple, check_finite: bool = True):
    """A float32, C-contiguous, finite array of the given shape (NumPy or CUDA array)."""
    if not (isinstance(x, np.ndarray) or _is_cupy(x)):  # both checked by attribute below
        if is_device_array(x):
            return _check_device_volume(x, name, shape, check_finite)
        raise TypeError(f"{name}: expected a numpy.ndarray (or a CuPy/PyTorch CUDA array), got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"{name}: expected dtype float32, got {x.dtype} (use .astype(np.float32))")
    if x.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name}: array must be C-contiguous (use np.ascontiguousarray)")
    if check_finite and not bool(array_module(x).isfinite(x).all()):
        raise ValueError(f"{name}: contains NaN or inf")
    return x


def _check_device_volume(x, name, shape, check_finite):
    """PyTorch CUDA tensors and other __cuda_array_interface__ arrays (CuPy goes through check_volume)."""
    if _is_torch_cuda(x):
        import torch  # optional dependency, present because x is a torch tensor

        if x.dtype != torch.float32:
            raise TypeError(f"{name}: expected dtype float32, got {x.dtype}")
        if tuple(x.shape) != tuple(shape):
            raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(x.shape)}")
        if not x.is_contiguous():
            raise ValueError(f"{name}: tensor must be contiguous (use .contiguous())")
        if check_finite and not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name}: contains NaN or inf")
        return x
    iface = x.__cuda_array_interface__
    if np.dtype(iface["typestr"]) != np.float32:
        raise TypeError(f"{name}: expected dtype float32, got {np.dtype(iface['typestr'])}")
    if tuple(iface["shape"]) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(iface['shape'])}")
    strides = iface.get("strides")
    if strides is not None and tuple(strides) != _c_strides(shape, 4):
        raise ValueError(f"{name}: array must be C-contiguous")
    if check_finite:
        xp = array_module(x)
        if xp is not np and not bool(xp.isfinite(x).all()):
            raise ValueError(f"{name}: contains NaN or inf")
    return x


def _c_strides(shape, itemsize):
    strides, acc = [], itemsize
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def device_pointer(x) -> int:
    """Raw device pointer of a CUDA array (CuPy / PyTorch / __cuda_array_interface__)."""
    if _is_cupy(x):
        return int(x.data.ptr)
    if _is_torch_cuda(x):
        return int(x.data_ptr())
    return int(x.__cuda_array_interface__["data"][0])


def require_host_arrays(*arrays) -> None:
    """TypeError unless every array given (None skipped) is a NumPy array: the CPU backends' inputs."""
    for a in arrays:
        if a is not None and not isinstance(a, np.ndarray):
            raise TypeError("the CPU backend takes NumPy arrays; use backend='cuda' for GPU arrays")


def integer(name: str, value, lo=None, hi=None) -> int:
    """value as an int (a Python or NumPy integer, not a bool, float or string) in ``[lo, hi]``
    (either bound may be None; NumPy 0-d integer arrays accepted), else a TypeError / ValueError
    naming it."""
    if type(value) is int and (lo is None or value >= lo) and (hi is None or value <= hi):
        return value                             # the common case, first (this runs per projection call)
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):      # NumPy 0-d arrays
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        want = (f"in [{lo}, {hi}]" if lo is not None and hi is not None else
                f">= {lo}" if lo is not None else f"<= {hi}")
        raise ValueError(f"{name}: expected an integer {want}, got {value}")
    return value


def integer_array(name: str, value) -> np.ndarray:
    """value as an int64 C-contiguous NumPy array, else a TypeError naming it: floats are refused
    rather than truncated (an empty list, float64 to NumPy, gives an empty int64 array)."""
    a = np.asarray(value) if value is not None else np.asarray(None, dtype=object)
    if a.size == 0 and a.dtype != object:
        return np.zeros(a.shape, np.int64)
    if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name}: expected an integer array, got {type(value).__name__} (dtype {a.dtype})")
    if a.dtype == np.uint64 and a.size and int(a.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name}: values beyond 2**63 - 1, got {int(a.max())}")
    return np.array(a, dtype=np.int64, order="C")          # keeps 0-d (ascontiguousarray would not)


def real_values(name: str, value, xp=None, *, finite: bool = True):
    """value as an array of real numbers (integers or floats, dtype kept; NumPy, CuPy, or an array-like
    that ``xp.asarray`` takes) in namespace ``xp`` (default: that of value), else a TypeError naming
    it: None, strings, objects, booleans and complex numbers are not real numbers (a complex array
    would lose its imaginary part, booleans would count as 0 / 1). ``finite``: NaN / inf are a
    ValueError (a NaN coordinate or value is corrupt data, never something to bin or sum)."""
    xp = array_module(value) if xp is None else xp
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name}: expected an array of real numbers, got {type(value).__name__}")
    try:
        arr = xp.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected an array of real numbers, got {type(value).__name__}") from None
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name}: expected real numbers, got {type(value).__name__} (dtype {arr.dtype})")
    if finite and arr.dtype.kind == "f" and not bool(xp.isfinite(arr).all()):
        raise ValueError(f"{name}: expected finite values, got NaN or inf")
    return arr


def real_array(name: str, value) -> np.ndarray:
    """value as a finite float64 NumPy array (any shape; a number gives a 0-d array), else a
    TypeError (not numbers: None, strings, objects, booleans, complex) or ValueError (NaN, inf)
    naming it."""
    return real_values(name, value, np).astype(np.float64, copy=False)


def array_namespace(xp, name: str = "xp"):
    """xp when it is an array module (numpy or cupy), else a TypeError naming it."""
    import types

    if not isinstance(xp, types.ModuleType) or not all(hasattr(xp, a) for a in ("asarray", "float32", "isfinite")):
        raise TypeError(f"{name}: expected an array module (numpy or cupy), got {type(xp).__name__} {xp!r}")
    return xp


def dataclass_from_dict(cls, d, name: str = "d"):
    """``cls(**d)`` for a dataclass record (a scanner read back from a file): d must be a mapping
    holding every field of cls and nothing else (TypeError / ValueError naming ``name`` otherwise),
    so that a damaged or foreign record (another family's scanner) is refused rather than filled
    with defaults. Every file directpet writes holds the whole ``to_dict()``."""
    from collections.abc import Mapping
    from dataclasses import fields

    if not isinstance(d, Mapping):
        raise TypeError(f"{name}: expected a mapping of {cls.__name__} fields, got {type(d).__name__}")
    names = [f.name for f in fields(cls)]
    unknown = [k for k in d if k not in names]
    missing = [k for k in names if k not in d]
    if unknown or missing:
        problems = ([f"unknown keys {unknown}"] if unknown else []) + ([f"missing keys {missing}"] if missing else [])
        raise ValueError(f"{name}: not a {cls.__name__} record ({'; '.join(problems)})")
    return cls(**d)


class DictRecord:
    """``to_dict`` / ``from_dict`` / ``to_json`` of a dataclass record, as files store it (the
    families' scanners): ``from_dict`` takes exactly a ``to_dict()`` mapping
    (:func:`dataclass_from_dict`)."""

    def to_dict(self) -> dict:
        """Every field, by name."""
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict):
        """The record of a :meth:`to_dict` mapping (every field, nothing else)."""
        return dataclass_from_dict(cls, d)

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON (keys sorted)."""
        import json

        return json.dumps(self.to_dict(), sort_keys=True)


def read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of a NumPy array (the caller's array stays writable): what a validated object
    keeps, so that its checked values cannot be changed behind its back."""
    v = a.view()
    v.flags.writeable = False
    return v


def flag(name: str, value) -> bool:
    """value as a bool (True / False, or NumPy's), else a TypeError naming it (no truthiness of
    strings, None or numbers)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def meta_dict(value, name: str = "meta") -> dict:
    """A provenance mapping as a new dict (None gives {}), else a TypeError naming it: it is stored
    as a JSON object, so anything else would make the saved file unreadable."""
    from collections.abc import Mapping

    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{name}: expected a dict, got {type(value).__name__}")
    return dict(value)


def check_path(path, name: str = "path", *, writing: bool = False) -> str:
    """A filesystem path (str, bytes or os.PathLike) as str, else a TypeError naming ``name``; a
    ValueError when it names a directory (where a file is read or written)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{name}: expected a file path (str or os.PathLike), got {type(path).__name__}")
    p = os.fsdecode(os.fspath(path))
    if os.path.isdir(p):
        raise ValueError(f"{name}: {p} is a directory; expected a file {'to write' if writing else 'to read'}")
    return p


def expect_attributes(value, attributes, name: str, what: str):
    """value, or a TypeError naming the argument when it lacks any of ``attributes`` (duck typing:
    ``what`` says what was expected, e.g. "a PhantomInfo (directpet.sim.sphere_phantom)")."""
    missing = [a for a in attributes if not hasattr(value, a)]
    if missing:
        raise TypeError(f"{name}: expected {what}, got {type(value).__name__} (no {', '.join(missing)})")
    return value


def expect_instance(value, cls, name: str):
    """value, or a TypeError naming the argument when it is not a ``cls``."""
    if not isinstance(value, cls):
        raise TypeError(f"{name}: expected {cls.__name__}, got {type(value).__name__}")
    return value


def positive_int(name, value) -> int:
    """value as an int >= 1: a TypeError naming it for a non-integer (a float such as 3.0, a string,
    a bool), a ValueError for one below 1."""
    return integer(name, value, lo=1)


def real_number(name, value, *, positive: bool = False, nonnegative: bool = False) -> float:
    """value as a finite float (``positive``: > 0, ``nonnegative``: >= 0; NumPy 0-d arrays accepted),
    else a TypeError (not a number: a string, None, an array) or ValueError (NaN, inf, out of range)
    naming it."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):      # NumPy 0-d arrays
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    try:
        finite = bool(np.isfinite(value))
    except (TypeError, OverflowError):           # a Python int beyond float64 (10**400)
        finite = False
    if not finite:
        raise ValueError(f"{name}: expected a finite value, got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{name}: expected a positive finite value, got {value!r}")
    if nonnegative and not value >= 0:
        raise ValueError(f"{name}: expected a finite value >= 0, got {value!r}")
    return float(value)


def normalise_fields(obj, *, counts=(), positive=(), nonnegative=()):
    """Check and normalise fields of a frozen dataclass in ``__post_init__``: ``counts`` become
    positive ints, ``positive`` finite floats > 0, ``nonnegative`` finite floats >= 0; errors name
    the field (TypeError for a non-number, ValueError otherwise)."""
    for name in counts:
        object.__setattr__(obj, name, positive_int(name, getattr(obj, name)))
    for name in positive:
        object.__setattr__(obj, name, real_number(name, getattr(obj, name), positive=True))
    for name in nonnegative:
        object.__setattr__(obj, name, real_number(name, getattr(obj, name), nonnegative=True))


def normalise_head_fields(obj, *, counts=(), positive=(), nonnegative=()):
    """:func:`normalise_fields` for a scanner of crystal heads (FIRST RotatingScanner, dual-head
    DualHeadScanner): their shared physics fields, ``pitch_mm``, ``crystal_mm``, ``depth_mm``,
    ``mu_per_mm`` (> 0) and ``positron_range_fwhm_mm``, ``acollinearity_fwhm_deg`` (>= 0), then the
    scanner's own fields, then ``crystal_mm <= pitch_mm`` (a crystal fits its pitch)."""
    normalise_fields(obj, counts=counts, positive=("pitch_mm", "crystal_mm", "depth_mm", "mu_per_mm") + tuple(positive),
                     nonnegative=("positron_range_fwhm_mm", "acollinearity_fwhm_deg") + tuple(nonnegative))
    if obj.crystal_mm > obj.pitch_mm:
        raise ValueError(f"crystal_mm: {obj.crystal_mm} mm crystals do not fit a {obj.pitch_mm} mm pitch")


def max_threads() -> int:
    """The most CPU threads a compiled entry point accepts: 4 x the hardware threads (OpenMP
    oversubscription beyond that only costs, and an absurd count crashes the runtime)."""
    return 4 * (os.cpu_count() or 1)


def check_threads(threads, name: str = "threads") -> int:
    """CPU thread count for a compiled entry point: None -> 0 (OpenMP's default), else a positive
    int no larger than :func:`max_threads`; errors name the argument."""
    if threads is None:
        return 0
    n = positive_int(name, threads)
    if n > max_threads():
        raise ValueError(f"{name}: expected at most {max_threads()} (4 x the {os.cpu_count()} hardware "
                         f"threads), got {n}")
    return n


def physical_memory_bytes() -> int:
    """This machine's physical memory in bytes (0 when the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return 0


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} PiB"


def require_memory(name: str, n_bytes, what: str) -> None:
    """ValueError naming ``name`` when ``what`` would need more than this machine's physical
    memory: called with an estimate *before* allocating, so an impossible size is a clear error
    rather than a MemoryError, an overflow or a killed interpreter."""
    n_bytes = float(n_bytes)
    total = physical_memory_bytes()
    if total and n_bytes > total:
        raise ValueError(f"{name}: {what} would need {format_bytes(n_bytes)}, more than this machine's "
                         f"{format_bytes(total)} of memory")
