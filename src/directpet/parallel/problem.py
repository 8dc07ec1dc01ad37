"""A SubsetProblem shared by several processes: one reconstruction on several GPUs.

Every process holds its share of every subset (``StoredSubsets.share``: the subset's views,
angles or orientation classes dealt round-robin), keeps that share's data resident on its GPU and
projects it; the back projections of a subset are summed over the processes by the communicator
(an NCCL all-reduce). Wrapped in :class:`DistributedSubsets`, the share runs the ordinary
:func:`directpet.recon.osem` / :func:`~directpet.recon.mlem` unchanged, and every process computes
the same image (the updates see the same summed back projections).
"""

from __future__ import annotations

from ..recon.problem import SubsetProblem
from .comm import Communicator


class DistributedSubsets(SubsetProblem):
    """This process's share of a problem split across ``comm.size`` processes.

    Parameters
    ----------
    local : the share (typically ``problem.share(comm.rank, comm.size, xp=cupy)`` of a family's
        subsets: ``ViewSubsets``, ``AngleSubsets``, ``DualHeadSubsets``), with the same number of
        subsets, image shape and visiting order on every process.
    comm : a :class:`~directpet.parallel.Communicator` (NCCL, torch.distributed, ...).

    ``forward(x, s)`` projects onto the share's part of subset s; ``adjoint(y, s)`` returns the
    back projection summed over all processes (the whole subset's ``A_s^T y``); ``totals()`` and
    ``reduce_sum`` are sums over the processes. ``check()`` fails on every process when any
    share fails (so that no process waits in a sum for one that stopped).
    """

    def __init__(self, local: SubsetProblem, comm: Communicator):
        if not isinstance(local, SubsetProblem):
            raise TypeError(f"local: expected a SubsetProblem (e.g. ViewSubsets(...).share(rank, size)), "
                            f"got {type(local).__name__}")
        if not isinstance(comm, Communicator):
            raise TypeError(f"comm: expected a directpet.parallel.Communicator, got {type(comm).__name__}")
        self.local, self.comm = local, comm
        self.n_subsets = local.n_subsets
        self.image_shape = tuple(local.image_shape)
        self.n_ranks = comm.size

    def forward(self, x, subset: int, out=None):
        return self.local.forward(x, subset, out=out)

    def adjoint(self, y, subset: int, out=None):
        return self.comm.allreduce(self.local.adjoint(y, subset, out=out))

    def data(self, subset: int):
        return self.local.data(subset)

    def factors(self, subset: int):
        return self.local.factors(subset)

    def background(self, subset: int):
        return self.local.background(subset)

    def order(self):
        return self.local.order()

    @property
    def xp(self):
        return self.local.xp

    def subset_shape(self, subset: int) -> tuple:
        """Shape of this process's part of subset ``subset``'s data."""
        return self.local.subset_shape(subset)

    def reduce_sum(self, value: float) -> float:
        return self.comm.allreduce_scalar(value)

    def totals(self):
        d, b, n = self.local.totals()
        return self.comm.allreduce_scalar(d), self.comm.allreduce_scalar(b), int(round(self.comm.allreduce_scalar(n)))

    def check(self) -> "DistributedSubsets":
        error = None
        try:
            self.local.check()
        except (TypeError, ValueError) as e:
            error = e
        failed = self.comm.allreduce_scalar(1.0 if error is not None else 0.0)
        if error is not None:
            raise type(error)(f"{error} [process {self.comm.rank} of {self.comm.size}]") from error
        if failed:
            raise ValueError(f"data: the share of {int(failed)} other process(es) failed its check "
                             f"(see their errors); process {self.comm.rank} stops with them")
        return self


__all__ = ["DistributedSubsets"]
