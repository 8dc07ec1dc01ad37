"""Shared fixtures for the directpet test suite.

* ``rng``: a NumPy Generator seeded from the test's node id, so every test gets its own fresh
  random stream and a failure is reproducible (the seed is printed, and pytest shows captured
  stdout of failing tests).
* ``volume``: a factory of random float32 volumes, uniform in [0.1, 1) -- never zero, so no
  product or ratio in a test can be trivially satisfied by an operator that returns zeros.
* the ``gpu`` marker: tests carrying it skip themselves, with a reason, when no CUDA device is
  usable.
* under pytest-xdist (``pytest -n 2``, the README's test command): each worker gets an equal share of
  the cores for its threads (OpenMP, hence FFTW's threads, and BLAS; the notebooks, README sessions and
  demo that a test starts inherit it), and the ``slow`` tests (the notebook and README tours, minutes
  each) are handed out first, longest first, one at a time, so that they run side by side from the start
  and the short tests fill in around them.
"""

from __future__ import annotations

import os
import zlib

# Before anything loads the OpenMP or BLAS runtime (they read these once): N xdist workers on C cores
# use C / N threads each rather than C each, which oversubscribed the cores (OpenMP's and OpenBLAS's
# spinning threads: a 2-worker run on 2 cores was no faster than 1 worker). A value already set is kept.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, str(max(1, _cores // _WORKERS)))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import directpet  # noqa: E402

# the tours that take longest on a CPU (minutes each on 2 cores), in the order an xdist worker should
# start them; the other ``slow`` tests follow them, then everything else in collection order
LONGEST_FIRST = ("test_reconstruction_notebook_runs", "test_quick_start_demo_runs", "test_dualhead_notebook_runs",
                 "test_readme_marked_block", "test_first_notebook_runs", "test_real_data_notebook_runs")


def pytest_configure(config):
    """Under xdist's default ``--dist load``, hand tests to the workers one at a time (instead of a
    quarter of each worker's share at once), so that the slow tests at the front of the order are
    spread over the workers; ``--maxschedchunk`` given on the command line is kept."""
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "maxschedchunk", 0) is None:
        config.option.maxschedchunk = 1


def _start_order(item):
    """Sort key under xdist: the longest tours, then the other ``slow`` tests, then the rest."""
    if item.get_closest_marker("slow") is None:
        return (2, 0)
    name = getattr(item, "originalname", item.name)
    return (0, LONGEST_FIRST.index(name)) if name in LONGEST_FIRST else (1, 0)


def pytest_collection_modifyitems(config, items):
    """Under xdist, start the long tests first (every worker sorts alike; the sort is stable). Skip
    ``@pytest.mark.gpu`` tests with a reason when no CUDA device can be used."""
    if hasattr(config, "workerinput"):
        items.sort(key=_start_order)
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
