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
    return xp.empty(shape, dtype=xp.float32)


def output_array(like_array, out, shape):
    """The caller's ``out`` (checked: float32, C-contiguous, ``shape``) or a new array of ``shape``
    living where ``like_array`` lives."""
    if out is None:
        return like(like_array, shape)
    return check_volume(out, "out", shape, check_finite=False)


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


def expect_instance(value, cls, name: str):
    """value, or a TypeError naming the argument when it is not a ``cls``."""
    if not isinstance(value, cls):
        raise TypeError(f"{name}: expected {cls.__name__}, got {type(value).__name__}")
    return value


def positive_int(name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def real_number(name, value) -> float:
    """value as a finite float, else a TypeError (not a number) or ValueError (NaN, inf) naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    if not np.isfinite(value):
        raise ValueError(f"{name}: expected a finite value, got {value!r}")
    return float(value)


def normalise_fields(obj, *, counts=(), positive=(), nonnegative=()):
    """Check and normalise fields of a frozen dataclass in ``__post_init__``: ``counts`` become
    positive ints, ``positive`` finite floats > 0, ``nonnegative`` finite floats >= 0; errors name
    the field (TypeError for a non-number, ValueError otherwise)."""
    for name in counts:
        object.__setattr__(obj, name, positive_int(name, getattr(obj, name)))
    for names, ok, want in ((positive, lambda v: v > 0, "a positive finite value"),
                            (nonnegative, lambda v: v >= 0, "a finite value >= 0")):
        for name in names:
            v = real_number(name, getattr(obj, name))
            if not ok(v):
                raise ValueError(f"{name}: expected {want}, got {v!r}")
            object.__setattr__(obj, name, v)


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
