"""One reconstruction shared across processes: StoredSubsets.share, DistributedSubsets, the
communicators and the one-process-per-GPU launcher.

The multi-process logic is tested on the CPU with ranks as threads of this process joined by
``ThreadComm`` (a test double of a communicator: the same sums as NCCL, rank order fixed); the
real NCCL path runs on 2 GPUs in the gpu-marked test at the end.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import directpet
from directpet import recon
from directpet.direct import HistoImageData, HistoImageProjector, SRKernel, ViewSet, ViewSubsets
from directpet.dualhead import DualHeadData, DualHeadProjector, DualHeadScanner, DualHeadSubsets
from directpet.first import AngleSubsets, RotatingScanner, SinogramData, SuperLORProjector, build_super_lor_table
from directpet.geometry import ImageGrid
from directpet.parallel import Communicator, DistributedSubsets, SingleProcess, nccl_available, run_on_gpus
from directpet.reference.dualhead import random_model


class ThreadComm(Communicator):
    """Ranks as threads of one process: sums in rank order, the same result on every rank."""

    def __init__(self, rank, size, shared):
        self.rank, self.size, self._shared = rank, size, shared

    @staticmethod
    def group(size):
        shared = {"barrier": threading.Barrier(size, timeout=60), "slots": [None] * size}
        return [ThreadComm(r, size, shared) for r in range(size)]

    def allreduce(self, a):
        sh = self._shared
        sh["slots"][self.rank] = np.array(a, copy=True)
        sh["barrier"].wait()
        total = sh["slots"][0].copy()
        for part in sh["slots"][1:]:
            total += part
        sh["barrier"].wait()                       # everyone has read before the slots are reused
        a[...] = total
        return a

    def allreduce_scalar(self, value):
        return float(self.allreduce(np.array([value], np.float64))[0])


def run_ranks(size, fn):
    """fn(comm) in `size` threads; their results in rank order (the first exception re-raised)."""
    comms = ThreadComm.group(size)
    out, errors = [None] * size, [None] * size

    def body(r):
        try:
            out[r] = fn(comms[r])
        except BaseException as e:      # noqa: BLE001 - handed to the test thread
            errors[r] = e
            comms[r]._shared["barrier"].abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    first = next((e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)), None)
    if first is None:
        first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return out


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


# --- problems of the three families ---------------------------------------------------------------------

GRID = ImageGrid((4, 16, 16), 8.0)
VIEWS = ViewSet(6, 3)


def direct_problem(rng, n_subsets=3):
    proj = HistoImageProjector(GRID, VIEWS, SRKernel.invariant(), backend="cpu", threads=1)
    shape = (len(VIEWS),) + GRID.shape
    data = HistoImageData(rng.poisson(3.0, shape).astype(np.float32), GRID, VIEWS,
                          rng.uniform(0.5, 1.5, shape).astype(np.float32),
                          rng.uniform(0.1, 0.5, shape).astype(np.float32))
    return ViewSubsets(proj, data, n_subsets)


def first_problem(rng):
    s = RotatingScanner.small()
    P = SuperLORProjector(build_super_lor_table(s), "fast", backend="cpu")
    data = SinogramData(s, rng.poisson(2.0, s.sinogram_shape).astype(np.float32),
                        rng.uniform(0.5, 1.5, s.sinogram_shape).astype(np.float32))
    return AngleSubsets(P, data, 3)


def dualhead_problem(rng, skip=True):
    s = DualHeadScanner.small(n_y=8, n_z=6, voxels_per_crystal=2, n_planes=5)
    P = DualHeadProjector(random_model(s, rng, taps=(1, 10)), "default", backend="cpu")
    data = DualHeadData(s, rng.poisson(0.8, s.n_lors).astype(np.float32),
                        rng.uniform(0.5, 1.5, s.n_lors).astype(np.float32))
    return DualHeadSubsets(P, data, 4, skip_zero_counts=skip)


FAMILIES = {"direct": direct_problem, "first": first_problem, "dualhead": dualhead_problem}


# --- shares -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("size", [2, 3])
def test_shares_partition_every_subset_and_sum_to_its_back_projection(family, size, rng):
    """The shares' units partition each subset; their data are the parent's for those units, their
    forward projections the parent's values there, and their back projections sum to the parent's."""
    p = FAMILIES[family](rng)
    shares = [p.share(r, size) for r in range(size)]
    x = rng.uniform(0.5, 1.5, p.image_shape).astype(np.float32)
    for s in range(p.n_subsets):
        units = p.subset_units(s)
        got = sorted(u for sh in shares for u in sh.units[s])
        assert got == sorted(units) and sum(len(sh.units[s]) for sh in shares) == len(units)
        # every share's data are the parent's units' data: summing totals over the shares gives the parent's
        y_parts = [sh.forward(x, s) for sh in shares]
        assert sum(float(sh.data(s).sum(dtype=np.float64)) for sh in shares) == pytest.approx(
            float(p.data(s).sum(dtype=np.float64)), rel=1e-12)
        r = [rng.uniform(0.5, 1.5, sh.subset_shape(s)).astype(np.float32) for sh in shares]
        back = sum(sh.adjoint(ri, s).astype(np.float64) for sh, ri in zip(shares, r))
        # the same back projection through the parent: scatter the parts into the subset's layout
        full_r = np.zeros(p.subset_shape(s), np.float32)
        full_y = p.forward(x, s)
        for sh, ri, yi in zip(shares, r, y_parts):      # (dual-head: zero-count LORs are 0 in both)
            _scatter(p, s, sh.positions[s], ri, full_r)
            got = np.zeros(p.subset_shape(s), np.float32)
            _scatter(p, s, sh.positions[s], yi, got)
            mine = np.zeros(p.subset_shape(s), bool)
            _scatter(p, s, sh.positions[s], np.ones_like(yi, bool), mine)
            np.testing.assert_allclose(got[mine], full_y[mine], rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(back, p.adjoint(full_r, s), rtol=2e-5, atol=1e-4 * np.abs(back).max())


def _scatter(p, s, positions, part, out):
    """Write a share's array (the units at `positions`) into the subset-layout array `out`: the
    parent's take_units applied to the element indices says where each share element lives."""
    index = np.arange(int(np.prod(p.subset_shape(s)))).reshape(p.subset_shape(s))
    out.reshape(-1)[p.take_units(index, s, positions).ravel()] = np.asarray(part).ravel()


def test_share_rejects_bad_ranks_and_subsets_smaller_than_the_group(rng):
    p = direct_problem(rng, n_subsets=3)              # 6 views per subset
    with pytest.raises(ValueError, match="rank"):
        p.share(2, 2)
    with pytest.raises(ValueError, match="n_ranks"):
        p.share(0, 0)
    with pytest.raises(TypeError, match="rank"):
        p.share(0.5, 2)
    with pytest.raises(ValueError, match="n_ranks: subset 0 has 6"):
        p.share(0, 7)
    from directpet.recon import StoredSubsets

    class NoUnits(StoredSubsets):                       # a problem without the unit hooks
        def __init__(self):
            self.image_shape = (2, 2)
            self.store([np.ones(3, np.float32)], [None], [None], [0])

        def forward(self, x, subset, out=None):
            return np.ones(3, np.float32)

        def adjoint(self, y, subset, out=None):
            return np.ones((2, 2), np.float32)

    with pytest.raises(TypeError, match="cannot be shared.*subset_units, forward_units, adjoint_units"):
        NoUnits().share(0, 2)
    one_view = ViewSubsets(p.projector, p.histo_image_data)   # block-RAMLA subsets: one view each
    with pytest.raises(ValueError, match="block-RAMLA"):
        one_view.share(0, 2)


# --- reconstructions shared by ranks ----------------------------------------------------------------------

@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_osem_on_shared_subsets_equals_osem_on_one_process(family, rng):
    p = FAMILIES[family](rng)
    ref = recon.osem(p, 2, progress=False).image

    def rank(comm):
        return recon.osem(DistributedSubsets(p.share(comm.rank, comm.size), comm), 2, progress=False).image

    images = run_ranks(2, rank)
    assert np.array_equal(images[0], images[1])         # every rank computes the same update
    assert rel(images[0], ref) < 1e-5


def test_mlem_likelihood_and_sensitivity_are_sums_over_the_ranks(rng):
    p = direct_problem(rng)
    ref = recon.mlem(p, 3, track_loglik=True, progress=False)
    S_ref = recon.sensitivity_image(p)

    def rank(comm):
        q = DistributedSubsets(p.share(comm.rank, comm.size), comm)
        assert q.totals()[2] == p.totals()[2]
        res = recon.mlem(q, 3, track_loglik=True, progress=False)
        return res.image, res.loglik, recon.sensitivity_image(q), recon.poisson_loglik(q, res.image)

    for image, ll, S, ll_final in run_ranks(3, rank):
        assert rel(image, ref.image) < 1e-5 and rel(S, S_ref) < 1e-6
        np.testing.assert_allclose(ll, ref.loglik, rtol=1e-7)
        assert ll_final == pytest.approx(recon.poisson_loglik(p, ref.image), rel=1e-6)


PER_SUBSET = {
    "block_ramla": lambda q: recon.block_ramla(q, 2, lambda0=0.5, progress=False, track_loglik=True),
    "bsrem": lambda q: recon.bsrem(q, recon.RelativeDifferencePrior(0.5, GRID, epsilon=0.1), 2, progress=False,
                                   track_objective=True),
    "svrg": lambda q: recon.svrg(q, recon.RelativeDifferencePrior(0.5, GRID, epsilon=0.1), 3, seed=4,
                                 snapshot_every=2, progress=False, track_objective=True),
    "map_em": lambda q: recon.map_em(q, recon.QuadraticPrior(0.05, GRID), 2, progress=False,
                                     track_objective=True),
}


@pytest.mark.parametrize("algorithm", sorted(PER_SUBSET))
def test_per_subset_and_penalised_algorithms_on_shared_subsets_equal_one_process(algorithm, rng):
    """Block-RAMLA, BSREM, SVRG and MAP-EM over subsets split across 2 ranks: every rank holds the
    same image (the prior is evaluated on the full image in each; only projections are summed), and
    it is the one-process image, with the same objective per pass."""
    p = direct_problem(rng, n_subsets=3)               # 6 views per subset: 3 per rank
    run = PER_SUBSET[algorithm]
    ref = run(p)
    track = "loglik" if algorithm == "block_ramla" else "objective"

    def rank(comm):
        res = run(DistributedSubsets(p.share(comm.rank, comm.size), comm))
        return res.image, getattr(res, track)

    (im0, obj0), (im1, obj1) = run_ranks(2, rank)
    assert np.array_equal(im0, im1)
    assert rel(im0, ref.image) < 1e-5
    np.testing.assert_allclose(obj0, getattr(ref, track), rtol=1e-6)
    np.testing.assert_array_equal(obj0, obj1)
    if algorithm != "block_ramla":              # the penalised objective went down over the passes
        assert obj0[-1] < obj0[0]


def test_one_view_subsets_cannot_be_shared_and_the_error_says_what_to_do(rng):
    p = direct_problem(rng, n_subsets=3)
    one_view = ViewSubsets(p.projector, p.histo_image_data)
    with pytest.raises(ValueError, match="group the views into blocks of at least 2"):
        one_view.share(0, 2)


def test_a_share_failing_its_check_stops_every_rank(rng):
    """NaN in rank 1's data: rank 1 names the data, rank 0 stops too instead of waiting in a sum."""
    p = direct_problem(rng)

    def rank(comm):
        share = p.share(comm.rank, comm.size)
        if comm.rank == 1:
            share.data(0)[0, 0, 0, 0] = np.nan
        try:
            recon.osem(DistributedSubsets(share, comm), 1, progress=False)
        except ValueError as e:
            return str(e)
        return "no error"

    msgs = run_ranks(2, rank)
    assert "NaN" in msgs[1] and "process 1 of 2" in msgs[1]
    assert "other process" in msgs[0]


def test_single_process_communicator_and_argument_errors(rng):
    p = direct_problem(rng)
    q = DistributedSubsets(p.share(0, 1), SingleProcess())
    np.testing.assert_array_equal(recon.osem(q, 1, progress=False).image, recon.osem(p, 1, progress=False).image)
    with pytest.raises(TypeError, match="local"):
        DistributedSubsets(p.projector, SingleProcess())
    with pytest.raises(TypeError, match="comm"):
        DistributedSubsets(p, object())
    with pytest.raises(ValueError, match="n_gpus"):
        run_on_gpus(_rank_image, 0)
    with pytest.raises(ValueError, match="devices"):
        run_on_gpus(_rank_image, devices=[directpet.cuda_device_count()])


# --- real processes, one per GPU, summed over NCCL --------------------------------------------------------

def _gpu_problem(seed):
    import cupy as cp

    rng = np.random.default_rng(seed)
    grid = ImageGrid((8, 24, 24), 6.0)
    views = ViewSet(8, 3)
    proj = HistoImageProjector(grid, views, SRKernel.clinical(), backend="cuda")
    shape = (len(views),) + grid.shape
    data = HistoImageData(rng.poisson(3.0, shape).astype(np.float32), grid, views,
                          rng.uniform(0.5, 1.5, shape).astype(np.float32))
    return ViewSubsets(proj, data, 4), cp


def _reconstruct(q, algorithm):
    if algorithm == "bsrem":           # the prior on the full image in each process (CuPy kernel)
        prior = recon.RelativeDifferencePrior(0.2, (6.0, 6.0, 6.0), epsilon=0.05)
        return recon.bsrem(q, prior, 3, progress=False).image
    return recon.osem(q, 3, progress=False).image


def _rank_image(comm, seed, algorithm="osem"):
    p, cp = _gpu_problem(seed)
    q = DistributedSubsets(p.share(comm.rank, comm.size, xp=cp), comm)
    return cp.asnumpy(_reconstruct(q, algorithm))


@pytest.mark.gpu
@pytest.mark.parametrize("backend,algorithm", [("nccl", "osem"), ("torch", "osem"), ("nccl", "bsrem")])
def test_two_gpus_over_nccl_equal_one_gpu(backend, algorithm):
    """NCCL through CuPy's bindings and through torch.distributed: 2 processes give one image, for
    OSEM and for BSREM with the relative difference prior."""
    if directpet.cuda_device_count() < 2:
        pytest.skip("needs 2 GPUs (the NCCL path runs one process per GPU)")
    if backend == "torch":
        pytest.importorskip("torch.distributed", reason="PyTorch not installed")
    elif not nccl_available():
        pytest.skip("CuPy's NCCL bindings are not available")
    images = run_on_gpus(_rank_image, 2, args=(11, algorithm), backend=backend, timeout_s=300)
    p, cp = _gpu_problem(11)
    single = DistributedSubsets(p.share(0, 1, xp=cp), SingleProcess())
    ref = cp.asnumpy(_reconstruct(single, algorithm))
    assert np.array_equal(images[0], images[1])
    assert rel(images[0], ref) < 1e-5
