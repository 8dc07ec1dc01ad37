"""Model-consistent data d_v = Poisson(f_v * H_v x + b_v)."""

import numpy as np
import pytest

from directpet.direct import HistoImageProjector, SRKernel, ViewSet, expected_data, model_consistent_data
from directpet.geometry import ImageGrid

GRID = ImageGrid((8, 32, 32), 8.0)
VS = ViewSet(6, 3)


@pytest.fixture(scope="module")
def projector():
    return HistoImageProjector(GRID, VS, SRKernel.invariant(), backend="cpu", threads=1)


def test_expected_data_is_the_model(projector):
    rng = np.random.default_rng(0)
    x = rng.random(GRID.shape, dtype=np.float32)
    s = rng.uniform(0.2, 1.0, (len(VS),) + GRID.shape).astype(np.float32)
    b = rng.uniform(0.0, 0.1, (len(VS),) + GRID.shape).astype(np.float32)
    y = expected_data(projector, x, factors=s, background=b)
    for v in (0, 7, 17):
        np.testing.assert_allclose(y[v], s[v] * projector.forward(x, v)[0] + b[v], rtol=1e-6)
    d = model_consistent_data(projector, x, factors=s, background=b, noise=False, viewset=VS)
    np.testing.assert_array_equal(d.prompts, y)
    np.testing.assert_array_equal(d.factors, s)
    assert d.meta["image_scale"] == 1.0 and d.viewset is VS


def test_counts_scaling_and_poisson(projector):
    rng = np.random.default_rng(1)
    x = rng.random(GRID.shape, dtype=np.float32) + 0.5
    b = np.full((len(VS),) + GRID.shape, 0.01, np.float32)
    d = model_consistent_data(projector, x, background=b, counts=2e6, seed=2)
    alpha = d.meta["image_scale"]
    assert d.meta["expected_counts"] == pytest.approx(2e6)
    assert d.prompts.sum() == pytest.approx(2e6, rel=5 * np.sqrt(2e6) / 2e6)
    assert np.all(d.prompts == np.round(d.prompts)) and d.prompts.dtype == np.float32
    np.testing.assert_allclose(d.background, alpha * b, rtol=1e-6)
    # Poisson: variance of (d - mean) / sqrt(mean) is about 1.
    mean = expected_data(projector, (alpha * x).astype(np.float32), background=d.background)
    z = (d.prompts - mean) / np.sqrt(mean)
    assert float(z.mean()) == pytest.approx(0.0, abs=0.01)
    assert float(z.var()) == pytest.approx(1.0, rel=0.02)
    again = model_consistent_data(projector, x, background=b, counts=2e6, seed=2)
    np.testing.assert_array_equal(again.prompts, d.prompts)
