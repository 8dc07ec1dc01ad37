"""Shared fixtures for the directpet test suite.

* ``rng``: a NumPy Generator seeded from the test's node id, so every test gets its own fresh
  random stream and a failure is reproducible (the seed is printed, and pytest shows captured
  stdout of failing tests).
* ``volume``: a factory of random float32 volumes, uniform in [0.1, 1) -- never zero, so no
  product or ratio in a test can be trivially satisfied by an operator that returns zeros.
* the ``gpu`` marker: tests carrying it skip themselves, with a reason, when no CUDA device is
  usable.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import directpet


def pytest_collection_modifyitems(config, items):
    """Skip ``@pytest.mark.gpu`` tests with a reason when no CUDA device can be used."""
    if directpet.cuda_device_count() > 0:
        return
    why = ("no usable CUDA device (directpet.has_cuda()=%s, cuda_device_count()=0)"
           % directpet.has_cuda())
    skip = pytest.mark.skip(reason=why)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    """np.random.default_rng seeded from a hash of the test's node id (reproducible per test)."""
    seed = zlib.crc32(request.node.nodeid.encode("utf-8"))
    request.node.user_properties.append(("rng_seed", seed))
    print(f"rng seed for {request.node.nodeid}: {seed}")
    return np.random.default_rng(seed)


def random_volume(rng, shape, low=0.1, high=1.0):
    """A C-contiguous float32 array, uniform in [low, high): strictly positive, never zeros."""
    return rng.uniform(low, high, size=shape).astype(np.float32)


@pytest.fixture
def volume(rng):
    """Factory ``volume(shape, low=0.1, high=1.0)`` of fresh random float32 volumes."""

    def make(shape, low=0.1, high=1.0):
        return random_volume(rng, shape, low, high)

    return make
