"""Beyond one process: one reconstruction on several GPUs (NCCL), sweeps of many reconstructions.

* :class:`DistributedSubsets` -- a family's subsets shared by one process per GPU
  (``problem.share(rank, size, xp=cupy)``), for :func:`directpet.recon.osem` / ``mlem`` unchanged;
* :func:`run_on_gpus` -- start one process per GPU, each with its communicator;
* communicators over NCCL (CuPy) and ``torch.distributed`` (:mod:`directpet.parallel.comm`).
"""

from .comm import Communicator, NcclCommunicator, SingleProcess, TorchCommunicator, nccl_available
from .launch import resolve_comm_backend, run_on_gpus
from .problem import DistributedSubsets

__all__ = ["Communicator", "DistributedSubsets", "NcclCommunicator", "SingleProcess", "TorchCommunicator",
           "nccl_available", "resolve_comm_backend", "run_on_gpus"]
