"""Differentiable projectors for PyTorch (directpet.autograd): gradcheck in float64 through the
references of all three families, the compiled float32 projectors against those references (values
and gradients), CUDA tensors in place, errors, and an unrolled-OSEM parameter fit."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch not installed (directpet.autograd is optional)")

import directpet  # noqa: E402
from directpet import reference  # noqa: E402
from directpet.autograd import TorchOperator  # noqa: E402
from directpet.direct import HistoImageProjector, SRKernel, ViewSet  # noqa: E402
from directpet.dualhead import DualHeadProjector, DualHeadScanner  # noqa: E402
from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table  # noqa: E402
from directpet.geometry import ImageGrid  # noqa: E402
from directpet.reference.dualhead import random_model  # noqa: E402
from directpet.reference.first import system_matrix as first_matrix  # noqa: E402


def _direct(backend="cpu"):
    grid = ImageGrid((3, 10, 10), 8.0)
    P = HistoImageProjector(grid, ViewSet(4, 3), SRKernel.clinical(), backend=backend)
    lut = P.lut(5)
    # view 5 as a subset of one: (nz, ny, nx) -> (1, nz, ny, nx)
    ref = TorchOperator.from_numpy(lambda x: reference.direct.forward(x, lut)[None],
                                   lambda y: reference.direct.back(y[0], lut), grid.shape, name="direct reference")
    return P, 5, ref


def _first(backend="cpu"):
    s = RotatingScanner(n_rows=3, n_angles=6, n_radial=9, n_columns=6)
    table = build_super_lor_table(s)
    P = SuperLORProjector(table, "matched", backend=backend)
    angles = np.array([1, 4], np.int32)
    H = first_matrix(table, angles)
    out_shape = (len(angles),) + s.sinogram_shape[1:]
    ref = TorchOperator.from_numpy(lambda x: (H @ x.ravel()).reshape(out_shape), lambda y: (H.T @ y.ravel()).reshape(
        s.grid.shape), s.grid.shape, out_shape, name="first reference")
    return P, angles, ref


def _dualhead(backend="cpu"):
    s = DualHeadScanner.small(n_y=5, n_z=4, voxels_per_crystal=2, n_planes=3)
    model = random_model(s, np.random.default_rng(5), taps=(1, 8))
    P = DualHeadProjector(model, "default", backend=backend)
    classes = np.array([0, 3, 7], np.int32)
    ref = TorchOperator.from_numpy(lambda x: reference.dualhead.forward(model, x, classes),
                                   lambda y: reference.dualhead.adjoint(model, y, classes), s.grid.shape,
                                   name="dual-head reference")
    return P, classes, ref


FAMILIES = {"direct": _direct, "first": _first, "dualhead": _dualhead}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_gradcheck_in_float64_through_the_references(family, rng):
    _, _, ref = FAMILIES[family]()
    x = torch.tensor(rng.uniform(0.1, 1.0, ref.in_shape), dtype=torch.float64, requires_grad=True)
    y = torch.tensor(rng.uniform(0.1, 1.0, ref.out_shape), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ref, (x,))
    assert torch.autograd.gradcheck(ref.T, (y,))
    assert torch.autograd.gradgradcheck(lambda t: ref(t) ** 2, (x,))     # second derivatives through A^T


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_compiled_projectors_give_the_references_values_and_gradients(family, rng):
    P, sel, ref = FAMILIES[family]()
    op = TorchOperator.from_operator(P, sel)
    assert op.in_shape == ref.in_shape and op.out_shape == ref.out_shape
    x = torch.tensor(rng.uniform(0.1, 1.0, op.in_shape), dtype=torch.float32, requires_grad=True)
    w = rng.uniform(0.5, 1.5, op.out_shape)
    loss = (op(x) * torch.tensor(w, dtype=torch.float32)).sum()
    loss.backward()
    x64 = x.detach().double()
    np.testing.assert_allclose(op(x.detach()).numpy(), ref(x64).numpy(), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), ref.T(torch.tensor(w)).numpy(), rtol=2e-5, atol=1e-6)


def test_unrolled_osem_learns_the_background_level(rng):
    """One parameter, the level of a uniform additive background in the model ybar = A x + b, is
    trained through 3 unrolled OSEM passes (4 one-view subsets) of the DIRECT view operators, against
    the image error: it moves from its wrong start towards the level the data were made with, and
    the image error falls."""
    P, _, _ = _direct()
    ops = [TorchOperator.from_operator(P, v) for v in range(4)]
    truth = torch.tensor(rng.uniform(0.5, 2.0, ops[0].in_shape), dtype=torch.float32)
    b_true = 0.3 * float(ops[0](truth).mean())
    torch.manual_seed(int(rng.integers(1 << 30)))
    data = [torch.poisson((op(truth) + b_true) * 200.0) / 200.0 for op in ops]
    sens = [op.T(torch.ones(op.out_shape)) for op in ops]
    log_b = torch.tensor(np.log(4.0 * b_true), dtype=torch.float32, requires_grad=True)
    opt = torch.optim.Adam([log_b], lr=0.15)
    losses = []
    for _ in range(25):
        x = torch.ones(ops[0].in_shape)
        for _ in range(3):
            for op, d, S in zip(ops, data, sens):
                x = x * op.T(d / (op(x) + torch.exp(log_b))) / S
        loss = ((x - truth) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        assert torch.isfinite(log_b.grad)
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.7 * losses[0]
    assert abs(float(torch.exp(log_b).detach()) - b_true) < 0.5 * abs(4.0 * b_true - b_true)


def test_bad_inputs_are_named(rng):
    P, v, _ = _direct()
    op = TorchOperator.from_operator(P, v)
    with pytest.raises(TypeError, match="x: expected a torch.Tensor"):
        op(np.zeros(op.in_shape, np.float32))
    with pytest.raises(ValueError, match="x: expected shape"):
        op(torch.zeros(2, 2))
    with pytest.raises(TypeError, match="forward, adjoint"):
        TorchOperator(None, None, (1,), (1,))
    with pytest.raises(TypeError, match="op: expected a directpet LinearOperator"):
        TorchOperator.from_operator(object(), 0)
    with pytest.raises(ValueError, match=r"subset: view indices must lie in \[0, 12\)"):
        TorchOperator.from_operator(P, [3, 12])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_any_operator_of_the_algebra_is_differentiable(family, rng):
    """The whole projector, and A^T of a subset made with the algebra (A.subset(s).H), through the
    same Function: values and gradients are the projector's forward and adjoint."""
    P, sel, _ = FAMILIES[family]()
    whole, back = TorchOperator.from_operator(P), TorchOperator.from_operator(P.subset(sel).H)
    assert whole.in_shape == P.in_shape and whole.out_shape == P.out_shape
    assert back.in_shape == P.output_shape(sel) and back.out_shape == P.in_shape
    x = torch.tensor(rng.uniform(0.1, 1.0, whole.in_shape), dtype=torch.float32, requires_grad=True)
    y = torch.tensor(rng.uniform(0.1, 1.0, back.in_shape), dtype=torch.float32, requires_grad=True)
    w = rng.uniform(0.5, 1.5, whole.out_shape).astype(np.float32)
    (whole(x) * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(whole(x.detach()).numpy(), P.forward(x.detach().numpy()))
    np.testing.assert_array_equal(x.grad.numpy(), P.adjoint(w))
    v = rng.uniform(0.5, 1.5, back.out_shape).astype(np.float32)
    (back(y) * torch.tensor(v)).sum().backward()
    np.testing.assert_array_equal(back(y.detach()).numpy(), P.adjoint(y.detach().numpy(), sel))
    np.testing.assert_array_equal(y.grad.numpy(), P.forward(v, sel))


@pytest.mark.gpu
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_cuda_tensors_go_to_the_compiled_projectors_in_place(family, rng):
    if directpet.cuda_device_count() == 0 or not torch.cuda.is_available():
        pytest.skip("needs a CUDA device visible to directpet and PyTorch")
    P, sel, ref = FAMILIES[family]("cuda")
    op = TorchOperator.from_operator(P, sel)
    x = torch.tensor(rng.uniform(0.1, 1.0, op.in_shape), dtype=torch.float32, device="cuda", requires_grad=True)
    w = torch.tensor(rng.uniform(0.5, 1.5, op.out_shape), dtype=torch.float32, device="cuda")
    y = op(x)
    assert y.is_cuda and y.dtype == torch.float32
    (y * w).sum().backward()
    assert x.grad.is_cuda
    np.testing.assert_allclose(y.detach().cpu().numpy(), ref(x.detach().cpu().double()).numpy(), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.cpu().numpy(), ref.T(w.cpu().double()).numpy(), rtol=2e-5, atol=1e-6)
