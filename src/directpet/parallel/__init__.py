"""Beyond one process: one reconstruction on several GPUs (NCCL), sweeps of many reconstructions.

* :class:`DistributedSubsets` -- a family's subsets shared by one process per GPU
  (``problem.share(rank, size, xp=cupy)``), for :func:`directpet.recon.osem` / ``mlem`` unchanged;
* :func:`run_on_gpus` -- start one process per GPU, each with its communicator;
* communicators over NCCL (CuPy) and ``torch.distributed`` (:mod:`directpet.parallel.comm`);
* :func:`run_sweep` -- many reconstruction jobs on a Dask cluster (:mod:`directpet.parallel.sweep`).
"""

from .comm import Communicator, NcclCommunicator, SingleProcess, TorchCommunicator, nccl_available
from .launch import resolve_comm_backend, run_on_gpus
from .problem import DistributedSubsets
from .sweep import FailedJob, SweepResult, aggregate, gpu_worker_environments, make_cluster, run_sweep

__all__ = ["Communicator", "DistributedSubsets", "FailedJob", "NcclCommunicator", "SingleProcess", "SweepResult",
           "TorchCommunicator", "aggregate", "gpu_worker_environments", "make_cluster", "nccl_available",
           "resolve_comm_backend", "run_on_gpus", "run_sweep"]
