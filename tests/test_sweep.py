"""The Dask sweep runner (directpet.parallel.sweep) and the [HA] noise-realisation job, on the CPU.

One LocalCluster of two worker processes (made by ``make_cluster``) serves the module; the DIRECT
jobs run at the ``tiny`` size with 300 k events and two block-RAMLA passes (a few seconds each).
They use the spatial ``invariant`` model: its projections are gathers, one thread per output
voxel, so a worker with one OpenMP thread computes bit for bit what this process computes with
several, and the rows must equal a direct call exactly. (The FFT model is not used for that
comparison: FFTW's measured plans may differ between processes, which moves the last float32 bits.)
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import directpet  # noqa: E402
from directpet.direct.experiment import KERNEL_MODELS, ha_noise_jobs, noise_realisation_job  # noqa: E402
from directpet.parallel import SweepResult, aggregate, gpu_worker_environments, make_cluster, run_sweep  # noqa: E402

TIMING_COLUMNS = {"seconds", "seconds_recon", "seconds_sim", "seconds_projector", "worker"}


@pytest.fixture(scope="module")
def client():
    cluster = make_cluster("local", 2)
    c = distributed.Client(cluster)
    c.wait_for_workers(2)
    yield c
    c.close()
    cluster.close()


def _direct_job(kernel, seed):
    return {"kernel": kernel, "seed": int(seed), "n_iter": 2, "size": "tiny", "n_events": 300_000, "backend": "cpu"}


def random_rows_job(params):
    """A cheap job for the runner itself: ``params['n']`` rows of numbers drawn from ``params['seed']``."""
    r = np.random.default_rng(params["seed"])
    return [{"row": k, "value": float(v)} for k, v in enumerate(r.normal(size=params["n"]))]


def not_rows_job(params):
    return {"value": params["seed"]}


def test_make_cluster_local_gives_two_worker_processes(client):
    nthreads = client.nthreads()
    assert len(nthreads) == 2
    assert set(nthreads.values()) == {1}
    pids = client.run(os.getpid)
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()


def test_direct_rows_match_direct_calls_and_a_failing_job_is_reported(client, rng):
    seeds = rng.choice(10**6, size=2, replace=False)
    jobs = [_direct_job("invariant", seeds[0]), _direct_job("no-such-kernel", seeds[0]),
            _direct_job("invariant", seeds[1])]
    res = run_sweep(noise_realisation_job, jobs, client=client, progress=False)

    assert [f.index for f in res.failed] == [1]
    fail = res.failed[0]
    assert fail.params == jobs[1]
    assert fail.error.startswith("ValueError") and "no-such-kernel" in fail.error
    assert "noise_realisation_job" in fail.traceback
    assert res.n_workers == 2 and res.wall_s > 0

    assert sorted({r["job"] for r in res.rows}) == [0, 2]
    workers = set(client.nthreads())
    for i in (0, 2):
        got = [r for r in res.rows if r["job"] == i]
        want = noise_realisation_job(dict(jobs[i]))
        assert len(got) == len(want) == jobs[i]["n_iter"]
        for g, w in zip(got, want):
            assert g["worker"] in workers and g["seconds"] > 0
            for k, v in jobs[i].items():
                assert g[k] == v
            for k in set(w) - TIMING_COLUMNS:
                assert g[k] == w[k], k             # exact: the same numbers as a direct call
    # the two realisations are different noise: their curves differ
    a = [r["noise"] for r in res.rows if r["job"] == 0]
    b = [r["noise"] for r in res.rows if r["job"] == 2]
    assert a != b


def test_runner_merges_params_in_job_order_and_reports_bad_rows(client, rng):
    jobs = [{"seed": int(s), "n": int(n), "tag": f"t{k}"}
            for k, (s, n) in enumerate(zip(rng.choice(10**6, 5, replace=False), rng.integers(1, 4, 5)))]
    res = run_sweep(random_rows_job, jobs, client=client, progress=False)
    assert not res.failed
    expected = [(i, {**j, **row}) for i, j in enumerate(jobs) for row in random_rows_job(j)]
    assert len(res.rows) == len(expected)
    for r, (i, e) in zip(res.rows, expected):
        assert r["job"] == i
        assert {k: r[k] for k in e} == e
    assert res.columns[:3] == ["seed", "n", "tag"] and {"job", "worker", "seconds"} <= set(res.columns)

    bad = run_sweep(not_rows_job, jobs[:2], client=client, progress=False)
    assert [f.index for f in bad.failed] == [0, 1] and not bad.rows
    assert all(f.error.startswith("TypeError") and "list of dict rows" in f.error for f in bad.failed)


def test_aggregate_against_numpy(rng):
    kernels, iterations, realisations = ["k1", "k2", "k3"], [1, 2, 3, 4], 7
    rows, ref = [], {}
    for k in kernels:
        for it in iterations:
            crc, noise = rng.normal(0.5, 0.1, realisations), rng.uniform(0.01, 0.2, realisations)
            extra = rng.normal(size=realisations)
            extra[rng.integers(realisations)] = np.nan           # skipped, and counted out
            ref[(k, it)] = (crc, noise, extra)
            rows += [{"kernel": k, "iteration": it, "crc": c, "noise": n, "extra": e, "realisation": r}
                     for r, (c, n, e) in enumerate(zip(crc, noise, extra))]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    out = SweepResult(rows=rows).aggregate(by=("kernel", "iteration"), values=("crc", "noise", "extra"))
    assert len(out) == len(kernels) * len(iterations)
    for g in out:
        crc, noise, extra = ref[(g["kernel"], g["iteration"])]
        assert g["n"] == realisations
        np.testing.assert_allclose([g["crc_mean"], g["crc_std"]], [crc.mean(), crc.std(ddof=1)], rtol=1e-12)
        np.testing.assert_allclose([g["noise_mean"], g["noise_std"]], [noise.mean(), noise.std(ddof=1)], rtol=1e-12)
        np.testing.assert_allclose([g["extra_mean"], g["extra_std"]], [np.nanmean(extra), np.nanstd(extra, ddof=1)],
                                   rtol=1e-12)
        assert g["crc_n"] == realisations and g["extra_n"] == realisations - 1
    one = aggregate(rows[:1], by=("kernel",), values=("crc",))
    assert one[0]["crc_mean"] == rows[0]["crc"] and math.isnan(one[0]["crc_std"])   # one value: no spread
    with pytest.raises(ValueError, match="by: .*'missing'"):
        aggregate(rows, by=("missing",), values=("crc",))


def test_to_csv_round_trip(tmp_path, rng):
    rows = [{"kernel": f"k{i % 3}", "iteration": int(i), "crc": float(c), "noise": float(n)}
            for i, (c, n) in enumerate(zip(rng.normal(size=6), rng.uniform(size=6)))]
    rows[2]["only_here"] = float(rng.normal())                 # a column only one row has
    rows[4]["gpus"] = [int(g) for g in rng.integers(0, 8, 3)]  # a JSON-like list parameter
    res = SweepResult(rows=rows)
    path = res.to_csv(tmp_path / "sub" / "rows.csv")
    with open(path, newline="") as f:
        back = list(csv.DictReader(f))
    assert list(back[0]) == res.columns
    for r, b in zip(rows, back):
        assert b["kernel"] == r["kernel"] and int(b["iteration"]) == r["iteration"]
        assert float(b["crc"]) == r["crc"] and float(b["noise"]) == r["noise"]     # repr round-trips
        if "only_here" not in r:
            assert b["only_here"] == ""
        assert (json.loads(b["gpus"]) if b["gpus"] else None) == r.get("gpus")
    assert float(back[2]["only_here"]) == rows[2]["only_here"]


def test_without_distributed_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)        # import distributed -> ImportError
    with pytest.raises(ImportError, match="pip install distributed"):
        run_sweep(random_rows_job, [{"seed": 1, "n": 1}], progress=False)
    with pytest.raises(ImportError, match="pip install distributed"):
        make_cluster("local", 1)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        SweepResult(rows=[{"a": 1}]).to_pandas()


def test_gpu_cluster_without_dask_cuda_gives_each_worker_its_gpu_first(monkeypatch):
    """The fallback GPU cluster (no dask-cuda) on a machine pretending to have 2 GPUs: each Nanny
    worker must start with CUDA_VISIBLE_DEVICES rotated to its own GPU (nothing here touches CUDA)."""
    monkeypatch.setattr(directpet._backend, "cuda_device_count", lambda: 2)
    monkeypatch.setitem(sys.modules, "dask_cuda", None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    env_before = dict(os.environ)
    cluster = make_cluster("gpu")
    try:
        assert dict(os.environ) == env_before             # the Nannies' pre-spawn variables undone here
        with distributed.Client(cluster) as c:
            c.wait_for_workers(2)
            seen = c.run(os.getenv, "CUDA_VISIBLE_DEVICES")
            assert sorted(seen.values()) == ["0,1", "1,0"]
            assert set(c.nthreads().values()) == {1}
    finally:
        cluster.close()


def test_gpu_worker_environments_and_bad_arguments(monkeypatch, rng):
    ids = [str(g) for g in rng.permutation(8)[:4]]
    envs = gpu_worker_environments(ids, 3)
    assert [e["CUDA_VISIBLE_DEVICES"].split(",") for e in envs] == [ids[i:] + ids[:i] for i in range(3)]
    with pytest.raises(ValueError, match="n_workers"):
        gpu_worker_environments(ids, 5)
    monkeypatch.setattr(directpet._backend, "cuda_device_count", lambda: 0)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        make_cluster("gpu")
    with pytest.raises(ValueError, match="kind"):
        make_cluster("cloud")
    with pytest.raises(TypeError, match="jobs"):
        run_sweep(random_rows_job, [("seed", 1)], progress=False)
    with pytest.raises(TypeError, match="job_fn"):
        run_sweep("random_rows_job", [{"seed": 1}], progress=False)


def test_ha_noise_jobs_pair_the_kernels_on_each_realisation(rng):
    seed0, realisations = int(rng.integers(10**6)), int(rng.integers(2, 5))
    kernels = list(rng.permutation(sorted(KERNEL_MODELS))[:3])
    jobs = ha_noise_jobs(kernels, realisations, "tiny", 3, seed0)
    assert len(jobs) == len(kernels) * realisations
    for r in range(realisations):
        mine = [j for j in jobs if j["realisation"] == r]
        assert [j["kernel"] for j in mine] == kernels
        assert {j["seed"] for j in mine} == {seed0 + r}
    assert len({j["seed"] for j in jobs}) == realisations
    assert all(j["size"] == "tiny" and j["n_iter"] == 3 for j in jobs)
    assert len(ha_noise_jobs(realisations=1)) == len(KERNEL_MODELS)
    with pytest.raises(ValueError, match="kernels"):
        ha_noise_jobs(["invariant", "nope"], 1, "tiny")
    with pytest.raises(ValueError, match="params"):
        noise_realisation_job({**_direct_job("invariant", 1), "n_iters": 3})


def test_errorbar_figure_has_one_curve_per_kernel(tmp_path, rng):
    from directpet.analysis import plot_contrast_noise_errorbars

    rows = [{"kernel": k, "iteration": it, "n": 3, "crc_mean": float(rng.uniform(0.2, 0.9)),
             "crc_std": float(rng.uniform(0, 0.05)), "noise_mean": float(rng.uniform(0.02, 0.2)),
             "noise_std": float(rng.uniform(0, 0.01))} for k in ("a", "b") for it in rng.permutation(5) + 1]
    fig = plot_contrast_noise_errorbars(rows, tmp_path / "cn.png")
    ax = fig.axes[0]
    assert len(ax.containers) == 2 and os.path.getsize(tmp_path / "cn.png") > 0
    line = ax.containers[0].lines[0]                      # joined in iteration order
    a = sorted((r for r in rows if r["kernel"] == "a"), key=lambda r: r["iteration"])
    np.testing.assert_allclose(line.get_xdata(), [100 * r["noise_mean"] for r in a])
    np.testing.assert_allclose(line.get_ydata(), [r["crc_mean"] for r in a])
    with pytest.raises(ValueError, match="aggregated_rows"):
        plot_contrast_noise_errorbars([{"kernel": "a"}], None)


@pytest.mark.gpu
def test_gpu_cluster_runs_direct_jobs_one_gpu_per_worker():
    """On a GPU machine: make_cluster('gpu') (dask-cuda or the Nanny fallback) gives one worker per
    GPU, each seeing its own GPU first, and the CUDA jobs agree with a direct call in this process.
    The tolerance allows float32 reductions that a GPU may order differently from run to run."""
    n = directpet.cuda_device_count()
    cluster = make_cluster("gpu")
    try:
        with distributed.Client(cluster) as c:
            c.wait_for_workers(n)
            first = [v.split(",")[0] for v in c.run(os.getenv, "CUDA_VISIBLE_DEVICES").values()]
            assert len(first) == n and len(set(first)) == n
            jobs = [{**_direct_job("invariant", s), "backend": "cuda"} for s in (11, 12)]
            res = run_sweep(noise_realisation_job, jobs, client=c, progress=False)
    finally:
        cluster.close()
    assert not res.failed, [f.error for f in res.failed]
    for i, job in enumerate(jobs):
        got = [r for r in res.rows if r["job"] == i]
        want = noise_realisation_job(dict(job))
        assert [r["backend_used"] for r in got] == ["cuda"] * len(want)
        np.testing.assert_allclose([r["crc"] for r in got], [w["crc"] for w in want], rtol=1e-5)
        np.testing.assert_allclose([r["noise"] for r in got], [w["noise"] for w in want], rtol=1e-5)
