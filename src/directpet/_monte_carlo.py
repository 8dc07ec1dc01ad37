"""What the compiled event Monte Carlos of FIRST (:mod:`directpet.first.monte_carlo`) and the dual-head
scanner (:mod:`directpet.dualhead.monte_carlo`) share around their engines: the statistics every run
reports, the counts buffer the engines add to on either backend, and the progress reporting of a run.

The run options (seed, threads, backend, result namespace, chunk) are checked by
:func:`directpet._device.monte_carlo_options`; the decays themselves are simulated in C++
(``csrc/first``, ``csrc/dualhead``, ``csrc/common/emission.hpp``).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ._backend import cuda_module
from ._progress import progress_callback


@dataclass(frozen=True)
class MonteCarloStatsBase:
    """The counters every event Monte Carlo reports (each family's ``MonteCarloStats`` adds its own).

    ``n_decays`` counts ALL decays of the activity (isotropic pair axes); ``n_in_band`` of them had
    their pair axis inside the direction band (``band_fraction`` of all directions), the only ones
    that can give a coincidence and so the only ones followed through the detectors.
    """

    n_decays: int          # every decay of the activity, isotropic
    n_in_band: int         # pair axis inside the direction band (the rest cannot reach both heads)
    band_fraction: float   # share of isotropic pair axes inside the band
    backend: str           # 'cpu' or 'cuda'
    seed: int              # the integer seed of the Philox streams (reproduces the run)
    seconds: float         # the simulation, after the activity's alias table was built

    @property
    def decays_per_second(self) -> float:
        """All decays (``n_decays``) per second of simulation."""
        return self.n_decays / self.seconds if self.seconds > 0 else float("inf")


class CountsBuffer:
    """Zeroed float32 counts of ``shape`` where a compiled Monte Carlo adds its coincidences.

    On the CPU ``host`` is the NumPy array the engine writes. On CUDA ``ptr`` is the device address
    the engine writes on ``stream``: a CuPy array's (``want_cupy``), else a directpet-owned device
    buffer (no CuPy needed), copied to the host by :meth:`result`. :meth:`result` returns the counts
    as NumPy, or as CuPy when ``want_cupy``.
    """

    def __init__(self, shape, backend: str, want_cupy: bool):
        self.want_cupy = bool(want_cupy)
        self.host = self.device = self._buffer = None
        self.ptr, self.stream = 0, 0
        if backend == "cpu":
            self.host = np.zeros(shape, np.float32)
        elif self.want_cupy:
            import cupy  # importable: checked by wants_cupy

            from ._device import stream_of

            self.device = cupy.zeros(shape, dtype=cupy.float32)
            self.ptr, self.stream = int(self.device.data.ptr), stream_of(self.device)
        else:
            # zeroed by uploading zeros; the legacy stream (0)
            self.host = np.zeros(shape, np.float32)
            self._buffer = cuda_module().DeviceBuffer(int(self.host.nbytes))
            self._buffer.upload(self.host)
            self.ptr = self._buffer.ptr

    def result(self):
        """The counts: NumPy, or CuPy when ``want_cupy`` (the CUDA engines have returned: synchronised)."""
        if self.device is not None:
            return self.device
        if self._buffer is not None:
            self._buffer.download(self.host)
        if self.want_cupy:
            import cupy  # requested through xp, so it is installed

            return cupy.asarray(self.host)
        return self.host


@contextmanager
def reporting(progress, total: int, *, unit: str, desc: str):
    """``with reporting(progress, total, unit=..., desc=...) as update:`` -- ``update(done)`` (None when
    ``progress`` is False / None) moves a tqdm bar (``progress=True``, closed on exit, also on an
    error or Ctrl-C) or calls the user's ``progress(done)``."""
    bar, update = progress_callback(progress, total, unit=unit, desc=desc)
    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


__all__ = ["CountsBuffer", "MonteCarloStatsBase", "reporting"]
