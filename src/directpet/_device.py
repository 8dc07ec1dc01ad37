"""GPU-side plumbing shared by the CUDA engines: staging NumPy data, pointers and streams.

NumPy inputs are copied into directpet-owned device buffers (no CuPy or PyTorch needed); CuPy and
PyTorch CUDA arrays are used in place, on their library's current stream.
"""

from __future__ import annotations

import numpy as np

from ._backend import cuda_module
from ._checks import _is_cupy, _is_torch_cuda, check_volume, device_pointer, is_device_array


class Staging:
    """Reusable device buffers for NumPy round trips, keyed by role, and the GPU of the engine that
    owns them (the current device when the engine, and its resident model, were made)."""

    def __init__(self):
        self._buffers = {}
        self.device = cuda_module().cuda_current_device()

    def check_device(self, arrays) -> None:
        """Every CUDA array of ``arrays`` (None and NumPy skipped) must live on this engine's GPU, and
        that GPU must be the current one: the kernels run on the current device and read the
        resident model there (another GPU's pointer is a silent wrong answer or a fault)."""
        current = cuda_module().cuda_current_device()
        if current != self.device:
            raise RuntimeError(f"device: this projector's model lives on GPU {self.device}, but GPU {current} is "
                               f"current; call it inside that GPU's context (e.g. cupy.cuda.Device({self.device}))")
        for a in arrays:
            if a is not None and is_device_array(a):
                d = array_device(a)
                if d != self.device:
                    raise ValueError(f"device: an array lives on GPU {d}, this projector's model on GPU "
                                     f"{self.device}; move the array or make a projector on GPU {d}")

    def buffer(self, role: str, nbytes: int):
        b = self._buffers.get(role)
        if b is None or b.nbytes < nbytes:
            self._buffers[role] = None  # free the old one before allocating the larger
            b = self._buffers[role] = cuda_module().DeviceBuffer(int(nbytes))
        return b

    def upload(self, role: str, array: np.ndarray):
        b = self.buffer(role, array.nbytes)
        b.upload(array)
        return b


def stream_of(x) -> int:
    """The cudaStream_t (as int) that x's library is currently issuing work on (0: legacy default)."""
    if _is_torch_cuda(x):
        import torch  # optional dependency, present because x is a torch tensor

        return int(torch.cuda.current_stream(x.device).cuda_stream)
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy  # optional dependency, present because x is a CuPy array

        return int(cupy.cuda.get_current_stream().ptr)
    return 0


def array_device(x) -> int:
    """The GPU a CUDA array (CuPy, PyTorch, __cuda_array_interface__) lives on."""
    if _is_cupy(x):
        return int(x.device.id)
    if _is_torch_cuda(x):
        return int(x.device.index)
    return int(cuda_module().cuda_pointer_device(device_pointer(x)))


def run_on_device(kernel, src, out, staging: Staging):
    """Call ``kernel(src_ptr, out_ptr, stream)`` with src/out on the device.

    NumPy src and out are staged through device buffers and out is filled on return; device arrays
    are used in place (asynchronously, on their current stream). Mixing the two is an error.
    """
    if _is_cupy(src) and _is_cupy(out):  # the common GPU case, kept short: it runs once per view
        import cupy  # optional dependency, present because src is a CuPy array

        if not src.device.id == out.device.id == cupy.cuda.runtime.getDevice() == staging.device:
            staging.check_device([src, out])
        kernel(src.data.ptr, out.data.ptr, cupy.cuda.get_current_stream().ptr)
        return out
    src_dev, out_dev = is_device_array(src), is_device_array(out)
    if src_dev != out_dev:
        raise TypeError("out: must live where the input lives (both NumPy or both CUDA arrays)")
    staging.check_device([src, out])
    if src_dev:
        kernel(device_pointer(src), device_pointer(out), stream_of(src))
        return out
    s = staging.upload("src", src)
    d = staging.buffer("out", out.nbytes)
    kernel(s.ptr, d.ptr, 0)
    d.download(out)  # synchronous copy on the legacy stream: waits for the kernel
    return out


def run_on_device_arrays(kernel, inputs, outputs, staging: Staging):
    """Call ``kernel(*input_ptrs, *output_ptrs, stream)`` with several arrays (None passes a null pointer).

    Like :func:`run_on_device`: NumPy arrays are staged through device buffers (outputs are copied
    back on return), device arrays are used in place on their library's current stream; all
    arrays must live on the same side.
    """
    arrays = [a for a in list(inputs) + list(outputs) if a is not None]
    on_device = {is_device_array(a) for a in arrays}
    if len(on_device) != 1:
        raise TypeError("out: must live where the inputs live (all NumPy or all CUDA arrays)")
    staging.check_device(arrays)
    if on_device.pop():
        ptrs = [0 if a is None else device_pointer(a) for a in list(inputs) + list(outputs)]
        kernel(*ptrs, stream_of(arrays[0]))
        return outputs
    in_ptrs = [0 if a is None else staging.upload(f"in{k}", a).ptr for k, a in enumerate(inputs)]
    out_bufs = [None if a is None else staging.buffer(f"out{k}", a.nbytes) for k, a in enumerate(outputs)]
    kernel(*in_ptrs, *[0 if b is None else b.ptr for b in out_bufs], 0)
    for a, b in zip(outputs, out_bufs):
        if a is not None:
            b.download(a)    # synchronous copy on the legacy stream: waits for the kernels
    return outputs

def host_volume(a, name: str, shape) -> np.ndarray:
    """A float32 C-contiguous NumPy copy (CuPy) or view (NumPy) of ``a`` with ``shape``, for code that
    reads it on the host (the Monte Carlos' alias tables); values are not checked here."""
    if _is_cupy(a):
        check_volume(a, name, shape, check_finite=False)
        return a.get()
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy.ndarray (or a CuPy array), got {type(a).__name__}")
    return check_volume(a, name, shape, check_finite=False)


def wants_cupy(xp, backend: str) -> bool:
    """Whether a result should come back as CuPy: ``xp`` None means 'when the backend is CUDA and CuPy
    is importable'; numpy / cupy say it explicitly."""
    if xp is None:
        return backend == "cuda" and _cupy_importable()
    if xp is np:
        return False
    if getattr(xp, "__name__", None) == "cupy":
        return True
    raise TypeError(f"xp: expected None, numpy or cupy, got {xp!r}")


def array_namespace(backend: str):
    """The array library a run on ``backend`` keeps its data in: CuPy on 'cuda' when importable (data
    and images stay on the GPU), NumPy otherwise."""
    if wants_cupy(None, backend):
        import cupy  # optional dependency, importable (wants_cupy checked)

        return cupy
    return np


def _cupy_importable() -> bool:
    try:
        import cupy  # noqa: F401  (optional: results stay on the GPU when CuPy is there)
    except ImportError:
        return False
    return True



# --- the event Monte Carlos' run options (FIRST and dual-head) -------------------------------------------
MAX_CHUNK_CUDA = 1 << 31      # the Monte Carlo kernels' per-warp counters are 32 bits
MAX_DECAYS = 1 << 62          # decay numbers are 64-bit Philox counters; the bindings take int64


def decay_count(name: str, value) -> int:
    """A positive decay count (at most 2**62), else an error naming it."""
    from ._checks import positive_int

    value = positive_int(name, value)
    if value > MAX_DECAYS:
        raise ValueError(f"{name}: at most 2**62, got {value}")
    return value


def monte_carlo_options(seed, threads, backend, xp, chunk, chunk_name: str, default_chunks):
    """Checked run options of an event Monte Carlo: ``(seed, threads (0: all), backend ('cpu' /
    'cuda'), want_cupy, chunk)``; ``seed`` an int in [0, 2**64), a Generator (one draw) or None
    (fresh entropy), returned as the int the compiled generator takes; ``default_chunks`` = (CPU,
    CUDA) decays per chunk when ``chunk`` is None."""
    from ._backend import resolve_backend
    from ._checks import check_threads
    from .sim.random import seed_from_rng

    seed = seed_from_rng(seed, "seed")
    nthreads = check_threads(threads)
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected 'auto', 'cpu' or 'cuda', got {type(backend).__name__}")
    chosen = resolve_backend(backend)
    want = wants_cupy(xp, chosen)
    if chunk is None:
        chunk = default_chunks[0] if chosen == "cpu" else default_chunks[1]
    else:
        chunk = decay_count(chunk_name, chunk)
        if chosen == "cuda" and chunk > MAX_CHUNK_CUDA:
            raise ValueError(f"{chunk_name}: at most 2**31 on the CUDA backend, got {chunk}")
    return seed, nthreads, chosen, want, chunk
