"""One process per GPU: start them, give each a communicator, collect what they return.

:func:`run_on_gpus` starts ``n_gpus`` processes (``multiprocessing`` 'spawn'), process r with
``CUDA_VISIBLE_DEVICES`` rotated so that GPU r is its device 0 and the others follow
(:func:`rotated_devices`, shared with the Dask GPU workers), builds a
communicator for it (NCCL through CuPy, or torch.distributed) and calls
``fn(comm, *args, **kwargs)``. It returns the list of the processes' return values (rank order).
A process that raises makes the call raise RuntimeError with its rank and traceback; the other
processes, which may be waiting in a sum for it, are terminated.
"""

from __future__ import annotations

import os
import queue as queue_mod
import socket
import time
import traceback
from typing import Callable, List, Optional, Sequence

from .comm import NcclCommunicator, TorchCommunicator, nccl_available, nccl_unique_id


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def visible_gpus() -> List[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries: the variable's list when
    it is set (dask-cuda's rule), else ``0 .. count-1``."""
    from .._backend import cuda_device_count

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(cuda_device_count())]


def rotated_devices(ids: Sequence[str], first: int) -> str:
    """``CUDA_VISIBLE_DEVICES`` for the process of GPU ``ids[first]``: that GPU first (its device 0),
    then the others in order from there (the convention of dask-cuda; NCCL still sees every GPU)."""
    ids = [str(g) for g in ids]
    return ",".join(ids[first:] + ids[:first])


def resolve_comm_backend(backend: str) -> str:
    """'nccl' (CuPy's NCCL), 'torch' (torch.distributed over NCCL), or 'auto': nccl when CuPy has
    NCCL, else torch when PyTorch is installed."""
    if backend not in ("auto", "nccl", "torch"):
        raise ValueError(f"backend: expected 'auto', 'nccl' or 'torch', got {backend!r}")
    if backend != "auto":
        return backend
    if nccl_available():
        return "nccl"
    try:
        import torch.distributed  # noqa: F401

        return "torch"
    except ImportError:
        raise RuntimeError("backend: no NCCL engine found: install CuPy with NCCL (cupy-cuda12x / "
                           "cupy-cuda13x with nvidia-nccl) or PyTorch") from None


def _rank_main(fn, rank, size, spec, args, kwargs, results):
    comm = None
    try:
        if spec[0] == "nccl":
            import cupy

            cupy.cuda.Device(0).use()
            comm = NcclCommunicator(rank, size, spec[1])
        else:
            comm = TorchCommunicator(rank, size, spec[1], backend="nccl")
        value = fn(comm, *args, **kwargs)
        results.put((rank, "ok", value))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))
    finally:
        if comm is not None:
            try:
                comm.close()
            except Exception:
                pass


def run_on_gpus(fn: Callable, n_gpus: Optional[int] = None, args: Sequence = (), kwargs: Optional[dict] = None, *,
                backend: str = "auto", devices: Optional[Sequence[int]] = None, timeout_s: Optional[float] = None):
    """Run ``fn(comm, *args, **kwargs)`` in one process per GPU; returns their results in rank order.

    Parameters
    ----------
    fn : a top-level (importable, picklable) function; ``comm`` is its process's
        :class:`~directpet.parallel.Communicator` (``comm.rank``, ``comm.size``). Its return value
        must be picklable (NumPy arrays, numbers, dicts; not CuPy arrays).
    n_gpus : processes / GPUs (default: every visible GPU, or ``len(devices)``).
    devices : the GPU indices to use (default ``0 .. n_gpus-1``).
    backend : 'auto', 'nccl' (CuPy) or 'torch' (torch.distributed); see :func:`resolve_comm_backend`.
    timeout_s : give up (terminating the processes) after this many seconds.
    """
    import multiprocessing as mp

    physical = visible_gpus()
    available = len(physical)
    if devices is None:
        n = available if n_gpus is None else n_gpus
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n_gpus: expected a positive integer, got {n!r}")
        devices = list(range(n))
    devices = [int(d) for d in devices]
    if n_gpus is not None and n_gpus != len(devices):
        raise ValueError(f"n_gpus: {n_gpus} does not match the {len(devices)} devices given")
    if not devices or len(set(devices)) != len(devices) or min(devices) < 0 or max(devices) >= available:
        raise ValueError(f"devices: expected distinct GPU indices in [0, {available}), got {devices} "
                         f"({available} GPU(s) visible)")
    kind = resolve_comm_backend(backend)
    spec = ("nccl", nccl_unique_id()) if kind == "nccl" else ("torch", f"tcp://127.0.0.1:{_free_port()}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = []
    size = len(devices)
    try:
        for rank, dev in enumerate(devices):
            # the child reads the environment at start-up; the parent's CUDA state is unaffected
            os.environ["CUDA_VISIBLE_DEVICES"] = rotated_devices(physical, dev)
            p = ctx.Process(target=_rank_main, args=(fn, rank, size, spec, tuple(args), dict(kwargs or {}), results),
                            name=f"directpet-rank{rank}")
            p.start()
            procs.append(p)
    finally:
        if visible is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible
    out, errors = {}, []
    deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
    try:
        while len(out) + len(errors) < size:
            try:
                rank, status, value = results.get(timeout=1.0)
            except queue_mod.Empty:
                dead = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
                if dead and not errors:
                    errors.append((procs.index(dead[0]), f"process exited with code {dead[0].exitcode}"))
                if errors or (deadline is not None and time.monotonic() > deadline):
                    break
                continue
            if status == "ok":
                out[rank] = value
            else:
                errors.append((rank, value))
                break                     # the others may wait for it in a sum
    finally:
        if errors or len(out) < size:
            for p in procs:
                if p.is_alive():
                    p.terminate()
        for p in procs:
            p.join(timeout=30)
    if errors:
        rank, tb = errors[0]
        raise RuntimeError(f"process {rank} of {size} (GPU {devices[rank]}) failed:\n{tb}")
    if len(out) < size:
        raise RuntimeError(f"timeout_s: {len(out)} of {size} processes finished within {timeout_s} s")
    return [out[r] for r in range(size)]


__all__ = ["resolve_comm_backend", "rotated_devices", "run_on_gpus", "visible_gpus"]
