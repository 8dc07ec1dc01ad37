"""ViewSubsets: DIRECT views and blocks of views as the reconstruction layer's subsets."""

import numpy as np
import pytest

from directpet.direct import HistoImageData, HistoImageProjector, SRKernel, ViewSet, ViewSubsets, make_blocks
from directpet.geometry import ImageGrid
from directpet.recon import block_ramla, mlem, osem

GRID = ImageGrid((4, 16, 16), 8.0)
VIEWS = ViewSet(6, 3)
SHAPE = (len(VIEWS),) + GRID.shape


@pytest.fixture
def proj():
    return HistoImageProjector(GRID, VIEWS, SRKernel.invariant(), backend="cpu", threads=1)


@pytest.fixture
def data(rng):
    return HistoImageData(rng.uniform(1, 5, SHAPE).astype(np.float32), GRID, VIEWS,
                          rng.uniform(0.5, 1.5, SHAPE).astype(np.float32),
                          rng.uniform(0.1, 0.5, SHAPE).astype(np.float32))


def test_one_view_per_subset_by_default(proj, data, volume):
    p = ViewSubsets(proj, data)
    assert p.n_subsets == len(VIEWS) and p.subsets == [[v] for v in range(len(VIEWS))]
    assert p.order() == VIEWS.geometric_order() and p.image_shape == GRID.shape
    x = volume(GRID.shape)
    for v in (0, 7, 17):
        one = slice(v, v + 1)                   # a one-view subset's arrays are (1, nz, ny, nx) stacks
        assert p.subset_shape(v) == p.data(v).shape == (1,) + GRID.shape
        assert np.shares_memory(p.data(v), data.prompts)                   # a view, no copy
        np.testing.assert_array_equal(p.data(v), data.prompts[one])
        np.testing.assert_array_equal(p.factors(v), data.factors[one])
        np.testing.assert_array_equal(p.background(v), data.background[one])
        np.testing.assert_array_equal(p.forward(x, v), proj.forward(x, v))
        np.testing.assert_array_equal(p.adjoint(p.data(v), v), proj.adjoint(data.prompts[one], v))
    # Without a ViewSet (a bare array, no corrections) the views are visited in index order.
    bare = ViewSubsets(proj, data.prompts)
    assert bare.order() == list(range(len(VIEWS))) and bare.factors(3) is None and bare.background(3) is None


def test_blocks_of_views_are_contiguous_stacks(proj, data, volume):
    p = ViewSubsets(proj, data, 3)
    assert p.subsets == make_blocks(len(VIEWS), 3, VIEWS) and p.order() == [0, 1, 2]
    assert ViewSubsets(proj, data, np.int64(3)).subsets == p.subsets
    x = volume(GRID.shape)
    for s, views in enumerate(p.subsets):
        shape = (len(views),) + GRID.shape
        for got, stack in ((p.data(s), data.prompts), (p.factors(s), data.factors),
                           (p.background(s), data.background)):
            assert got.shape == shape and got.flags.c_contiguous and not np.shares_memory(got, stack)
            np.testing.assert_array_equal(got, stack[views])
        np.testing.assert_array_equal(p.forward(x, s), np.concatenate([proj.forward(x, v) for v in views]))
        y = volume(shape)
        ref = sum(proj.adjoint(y[k:k + 1], v).astype(np.float64) for k, v in enumerate(views))
        np.testing.assert_allclose(p.adjoint(y, s), ref, rtol=1e-6)


def test_explicit_subsets_mix_shapes(proj, data):
    subsets = [[4], [0, 1, 2, 3], list(range(5, 18))]
    p = ViewSubsets(proj, data, subsets=subsets)
    assert p.subsets == subsets and p.order() == [0, 1, 2]
    assert [p.subset_shape(s) for s in range(3)] == [(1,) + GRID.shape, (4,) + GRID.shape, (13,) + GRID.shape]
    res = block_ramla(p, 2, progress=False)             # work buffers for three shapes
    assert res.image.shape == GRID.shape and np.all(np.isfinite(res.image))


def test_osem_with_one_view_subsets_follows_the_given_order(proj, data):
    """OSEM over single views in geometric order equals OSEM over explicit one-view subsets listed in
    that order: the order, not the indexing, decides the iterates."""
    geo = VIEWS.geometric_order()
    a = osem(ViewSubsets(proj, data), 2, progress=False).image
    b = osem(ViewSubsets(proj, data, subsets=[[v] for v in geo]), 2, progress=False).image
    np.testing.assert_array_equal(a, b)
    c = osem(ViewSubsets(proj, data), 2, order=list(range(len(VIEWS))), progress=False).image
    assert np.abs(c - a).max() > 1e-4 * np.abs(a).max()


def test_totals_and_check_use_the_whole_stacks(proj, data):
    p = ViewSubsets(proj, data, 2)
    d_sum, b_sum, size = p.totals()
    assert d_sum == pytest.approx(float(data.prompts.sum(dtype=np.float64)), rel=1e-12)
    assert b_sum == pytest.approx(float(data.background.sum(dtype=np.float64)), rel=1e-12)
    assert size == data.prompts.size
    generic = super(ViewSubsets, p).totals()                 # subset by subset
    assert generic == pytest.approx((d_sum, b_sum, size), rel=1e-12)
    assert p.check() is p


def test_argument_errors(proj, data):
    with pytest.raises(TypeError, match="n_subsets"):
        ViewSubsets(proj, data, n_subsets=2)           # the number of blocks is the third argument
    with pytest.raises(ValueError, match="subsets: expected non-empty"):
        ViewSubsets(proj, data, subsets=[list(range(18)), []])
    with pytest.raises(ValueError, match="subsets"):
        ViewSubsets(proj, data, subsets=[list(range(17))])
    for bad in (5.0, True, "3"):
        with pytest.raises(TypeError, match="subsets"):
            ViewSubsets(proj, data, bad)
    with pytest.raises(ValueError, match="subsets"):
        ViewSubsets(proj, data, 0)
    with pytest.raises(ValueError, match="subsets: 19 blocks exceed the 18 views"):
        ViewSubsets(proj, data, 19)
    with pytest.raises(ValueError, match="grid"):
        ViewSubsets(proj, HistoImageData(np.ones((18, 4, 16, 8), np.float32), ImageGrid((4, 16, 8), 8.0)))


@pytest.mark.gpu
def test_reconstruction_stays_on_the_gpu(proj, data):
    """CuPy data and a CUDA projector: images stay on the device and agree with the CPU run (the
    projectors agree to float32 rounding, which two iterations do not amplify beyond 1e-4)."""
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    gpu = HistoImageProjector(GRID, VIEWS, SRKernel.invariant(), backend="cuda")
    data_gpu = data.to(cp)
    for kw in ({}, {"subsets": 3}):
        for algorithm in (mlem, osem, block_ramla):
            a = algorithm(ViewSubsets(proj, data, **kw), 2, progress=False).image
            b = algorithm(ViewSubsets(gpu, data_gpu, **kw), 2, progress=False).image
            assert isinstance(b, cp.ndarray)
            np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-4, atol=1e-4 * float(np.abs(a).max()))


def test_more_blocks_than_azimuths_deal_the_geometric_order():
    """6 blocks of ViewSet(4, 3): more than the 4 azimuths, so the 12 views of the geometric order are
    dealt to the blocks in turn: every view exactly once, 2 per block, no block of one azimuth only."""
    vs = ViewSet(4, 3)
    blocks = make_blocks(len(vs), 6, vs)
    assert sorted(v for b in blocks for v in b) == list(range(len(vs)))
    assert [len(b) for b in blocks] == [2] * 6
    with pytest.raises(ValueError, match="n_subsets"):
        make_blocks(len(vs), 13, vs)
