"""select_projector: the DIRECT projector meeting a model accuracy, chosen by timing on the backend."""

import numpy as np
import pytest

import directpet as dp
from directpet.direct import (FFTProjector, HistoImageProjector, LowRankProjector, SRKernel, ViewSet,
                              select_projector)
from directpet.direct.select import pick

GRID = dp.ImageGrid((12, 28, 28), 4.0)
VIEWS = ViewSet(4, 3)


def rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(np.asarray(b, np.float64)))


@pytest.mark.parametrize("method, cls", [("spatial", HistoImageProjector), ("lowrank", LowRankProjector)])
def test_named_methods(method, cls):
    op = select_projector(GRID, VIEWS, SRKernel.clinical(), method=method, backend="cpu")
    assert isinstance(op, cls) and op.choice.method == method and op.choice.ms == {}
    if method == "lowrank":
        # every view's table is factored to the accuracy (the error reported is the largest)
        errors = [op.kernel_error(v) for v in range(op.n_views)]
        assert op.choice.model_error == max(errors) and 0.0 < max(errors) <= 1e-4
        assert op.choice.rank == op.rank(0) >= 2
    else:
        assert op.choice.model_error == 0.0 and op.choice.rank is None


def test_fft_needs_an_invariant_kernel():
    op = select_projector(GRID, VIEWS, SRKernel.invariant(), method="fft", backend="cpu")
    assert isinstance(op, FFTProjector)
    with pytest.raises(ValueError, match="invariant"):
        select_projector(GRID, VIEWS, SRKernel.clinical(), method="fft", backend="cpu")


@pytest.mark.parametrize("ms, margin, want", [
    ({"spatial": 2.0, "lowrank": 1.5}, 1.25, "lowrank"),      # 1.5 * 1.25 = 1.875 <= 2
    ({"spatial": 2.0, "lowrank": 1.7}, 1.25, "spatial"),      # faster, but not by the margin
    ({"spatial": 2.0, "lowrank": 1.7}, 1.0, "lowrank"),
    ({"spatial": 2.0, "fft": 1.0, "lowrank": 0.9}, 1.25, "fft"),
    ({"spatial": 2.0, "fft": 3.0}, 1.25, "spatial"),
    ({"lowrank": 5.0}, 1.25, "lowrank"),                      # no exact projector fitted
])
def test_the_choice_rule(ms, margin, want):
    assert pick(ms, margin) == want


@pytest.mark.parametrize("kernel, exact", [(SRKernel.clinical(), {"spatial"}),
                                           (SRKernel.invariant(), {"spatial", "fft"})])
def test_auto_follows_its_rule(kernel, exact, capsys):
    """'auto' times every candidate that meets the accuracy and takes the fastest exact one unless
    the low-rank one is at least `margin` times faster; the choice is printed with its error."""
    op = select_projector(GRID, VIEWS, kernel, backend="cpu", verbose=True)
    c = op.choice
    assert set(c.ms) == exact | {"lowrank"} and all(t > 0 for t in c.ms.values())
    assert c.method == pick(c.ms, 1.25)
    assert (0 < c.model_error <= 1e-4) if c.method == "lowrank" else c.model_error == 0.0
    if "fft" not in exact:
        assert "invariant" in c.skipped["fft"]
    printed = capsys.readouterr().out
    assert printed.startswith("DIRECT projector:") and printed.strip() == c.summary()
    # a margin nothing can beat: always an exact projector
    strict = select_projector(GRID, VIEWS, kernel, backend="cpu", margin=1e9, repeat=1)
    assert strict.choice.method in exact and strict.choice.model_error == 0.0


def test_lowrank_choice_projects_within_the_accuracy(rng):
    """The low-rank projector chosen for accuracy 1e-4 projects a random image as the exact one does,
    to an image error below the kernel error bound's scale (1e-3)."""
    kernel = SRKernel.clinical()
    approx = select_projector(GRID, VIEWS, kernel, method="lowrank", backend="cpu")
    exact = HistoImageProjector(GRID, VIEWS, kernel, backend="cpu")
    x = rng.random(GRID.shape, dtype=np.float32) + 0.05
    y = rng.random((2,) + GRID.shape, dtype=np.float32) + 0.05
    assert 0.0 < rel(approx.forward(x, [0, 7]), exact.forward(x, [0, 7])) < 1e-3
    assert 0.0 < rel(approx.adjoint(y, [3, 11]), exact.adjoint(y, [3, 11])) < 1e-3
    looser = select_projector(GRID, VIEWS, kernel, method="lowrank", accuracy=1e-2, backend="cpu")
    assert looser.choice.rank < approx.choice.rank and looser.choice.model_error <= 1e-2


@pytest.mark.parametrize("kw, name", [(dict(method="fastest"), "method"), (dict(accuracy=0.0), "accuracy"),
                                      (dict(accuracy=1.0), "accuracy"), (dict(accuracy=float("nan")), "accuracy"),
                                      (dict(margin=0.5), "margin"), (dict(repeat=0), "repeat"),
                                      (dict(backend="tpu"), "backend")])
def test_bad_arguments(kw, name):
    with pytest.raises(ValueError, match=name):
        select_projector(GRID, VIEWS, SRKernel.clinical(), **kw)


def test_argument_errors_of_the_projectors_are_raised():
    """An argument every candidate refuses is raised as the projector words it, not hidden as
    'no candidate'."""
    with pytest.raises(TypeError, match="grid"):
        select_projector((12, 28, 28), VIEWS)
    with pytest.raises(ValueError, match="threads"):
        select_projector(GRID, VIEWS, SRKernel.clinical(), backend="cpu", threads=-1)


def test_lowrank_that_cannot_meet_the_accuracy_is_no_candidate():
    """An accuracy the low-rank path cannot reach within its max_rank (32) leaves it out, with the
    reason; the exact projector is chosen."""
    op = select_projector(GRID, VIEWS, SRKernel.clinical(), accuracy=1e-12, backend="cpu", repeat=1)
    assert op.choice.method == "spatial" and op.choice.model_error == 0.0
    assert "lowrank" not in op.choice.ms and "max_rank" in op.choice.skipped["lowrank"]


@pytest.mark.gpu
def test_auto_on_the_gpu_times_device_arrays():
    """On the CUDA backend the candidates are timed on device arrays and the chosen projector runs there
    (skipped by the gpu marker without a device)."""
    pytest.importorskip("cupy", reason="CuPy not installed: the candidates would be timed from host arrays")
    op = select_projector(GRID, VIEWS, SRKernel.clinical(), backend="cuda")
    assert op.backend == "cuda" and set(op.choice.ms) == {"spatial", "lowrank"}
