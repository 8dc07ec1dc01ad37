"""Beyond one process: sweeps of many reconstructions on a Dask cluster (:mod:`directpet.parallel.sweep`)."""

from .sweep import FailedJob, SweepResult, aggregate, gpu_worker_environments, make_cluster, run_sweep

__all__ = ["FailedJob", "SweepResult", "aggregate", "gpu_worker_environments", "make_cluster", "run_sweep"]
