"""Many independent reconstructions on a Dask cluster: a sweep runner, family independent.

A sweep is a list of jobs, each a dict of JSON-like parameters, and one top-level (importable)
function ``job_fn(params) -> list of dict rows`` that runs one job. :func:`run_sweep` submits every
job to a :class:`distributed.Client` -- a user's own (for example a SLURM cluster through
dask-jobqueue) or one from :func:`make_cluster` (a local CPU cluster, or one worker process per
GPU) -- gathers the rows as jobs finish, and returns them as a tidy table (:class:`SweepResult`):
every row carries its job's parameters and the columns ``job`` (index in ``jobs``), ``worker``
(address) and ``seconds`` (the job's wall time on its worker). A job that raises is reported in
``SweepResult.failed`` and costs only its own rows.

``distributed`` (and ``dask_cuda`` for :func:`make_cluster`'s preferred GPU cluster) are optional
dependencies: they are imported when a function here is called, never at import time.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import time
import traceback as _traceback
import uuid
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

from .launch import rotated_devices, visible_gpus

#: Columns the runner adds to every row (a job's own rows may not use these names).
RUNNER_COLUMNS = ("job", "worker", "seconds")


def _import_distributed(what: str):
    try:
        import distributed  # optional: only the sweep runner needs it
    except ImportError as err:
        raise ImportError(f"{what} needs dask.distributed: pip install distributed "
                          "(and pip install dask-cuda for one worker per GPU through dask-cuda)") from err
    return distributed


@dataclass
class FailedJob:
    """A job that raised: its index in ``jobs``, its parameters, ``error`` as ``'Type: message'``
    and the traceback text (from the worker when available)."""

    index: int
    params: dict
    error: str
    traceback: str = ""


@dataclass
class SweepResult:
    """Rows of a sweep (one dict per row: the job's parameters, its own columns, ``job``,
    ``worker``, ``seconds``), sorted by job index and then the job's row order; the jobs that
    failed; ``wall_s`` from the first submission to the last result (cluster start excluded,
    it is ``startup_s``); the number of workers and a description of the cluster."""

    rows: List[dict] = field(default_factory=list)
    failed: List[FailedJob] = field(default_factory=list)
    wall_s: float = 0.0
    n_workers: int = 0
    cluster: str = ""
    startup_s: float = 0.0

    @property
    def columns(self) -> List[str]:
        """The union of the rows' keys, in order of first appearance."""
        cols = {}
        for r in self.rows:
            cols.update(dict.fromkeys(r))
        return list(cols)

    def to_pandas(self):
        """The rows as a ``pandas.DataFrame`` (pandas is optional)."""
        try:
            import pandas  # optional: only this method needs it
        except ImportError as err:
            raise ImportError("SweepResult.to_pandas needs pandas: pip install pandas "
                              "(or use .rows, .to_csv or .aggregate)") from err
        return pandas.DataFrame(self.rows, columns=self.columns)

    def to_csv(self, path) -> str:
        """Write the rows to ``path`` as CSV (header: :attr:`columns`; a value a row lacks is an
        empty field; lists and dicts are written as JSON). Returns the path."""
        cols = self.columns
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, restval="")
            w.writeheader()
            for r in self.rows:
                w.writerow({k: json.dumps(v) if isinstance(v, (list, tuple, dict)) else v for k, v in r.items()})
        return str(path)

    def aggregate(self, by: Sequence[str] = ("kernel", "iteration"), values: Sequence[str] = ("crc", "noise"),
                  ddof: int = 1) -> List[dict]:
        """Mean and standard deviation of ``values`` over the rows that share the keys ``by``
        (for example over noise realisations): see :func:`aggregate`."""
        return aggregate(self.rows, by, values, ddof)


def _number(v) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return math.nan
    return x


def aggregate(rows: Sequence[dict], by: Sequence[str], values: Sequence[str], ddof: int = 1) -> List[dict]:
    """Group ``rows`` by the columns ``by`` and summarise each column of ``values``.

    Returns one dict per group, groups in order of first appearance: the ``by`` keys, then for each
    value ``<v>_mean``, ``<v>_std`` (standard deviation with ``ddof``, default 1: the sample
    standard deviation over realisations; NaN when fewer than ``ddof + 1`` values) and ``<v>_n``
    (how many finite values entered: missing, None and NaN values are skipped), and ``n``, the
    number of rows in the group.
    """
    if isinstance(by, str) or isinstance(values, str):
        raise TypeError("by, values: expected sequences of column names (e.g. ('kernel',)), not one string")
    by, values = tuple(by), tuple(values)
    groups = {}
    for i, r in enumerate(rows):
        try:
            key = tuple(r[k] for k in by)
        except KeyError as err:
            raise ValueError(f"by: row {i} has no column {err.args[0]!r}") from None
        groups.setdefault(key, []).append(r)
    out = []
    for key, members in groups.items():
        g = dict(zip(by, key))
        for v in values:
            x = [_number(r.get(v)) for r in members]
            x = [a for a in x if math.isfinite(a)]
            m = math.fsum(x) / len(x) if x else math.nan
            s = math.sqrt(math.fsum((a - m) ** 2 for a in x) / (len(x) - ddof)) if len(x) > ddof else math.nan
            g[f"{v}_mean"], g[f"{v}_std"], g[f"{v}_n"] = m, s, len(x)
        g["n"] = len(members)
        out.append(g)
    return out


# ----------------------------------------------------------------------------------------------------
# clusters

def gpu_worker_environments(gpu_ids: Sequence[str], n_workers: Optional[int] = None) -> List[dict]:
    """The environment of each GPU worker: worker i sees GPU i first, then the others in order
    (``CUDA_VISIBLE_DEVICES`` rotated by i, the convention of dask-cuda), so its device 0 is its own
    GPU. ``n_workers`` (default: one per GPU) uses the first ``n_workers`` GPUs."""
    ids = [str(g) for g in gpu_ids]
    n = len(ids) if n_workers is None else int(n_workers)
    if not 1 <= n <= len(ids):
        raise ValueError(f"n_workers: expected 1 to {len(ids)} (the GPUs available: {ids}), got {n_workers!r}")
    return [{"CUDA_VISIBLE_DEVICES": rotated_devices(ids, i)} for i in range(n)]


@contextlib.contextmanager
def _keep_environ():
    """Restore os.environ after starting workers: a Nanny writes its pre-spawn variables
    (OMP_NUM_THREADS=1, ...) into the calling process's environment before it spawns."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        for k in set(os.environ) - set(saved):
            del os.environ[k]
        os.environ.update(saved)


def make_cluster(kind: str = "auto", n_workers: Optional[int] = None, threads_per_worker: int = 1,
                 **cluster_kw):
    """Start a Dask cluster on this machine and return it (the caller makes the ``Client`` and
    closes both).

    Parameters
    ----------
    kind : ``'local'`` -- ``distributed.LocalCluster`` of ``n_workers`` worker processes
        (default ``min(2, os.cpu_count())``), each with ``threads_per_worker`` threads;
        ``'gpu'`` -- one worker process per GPU (default every GPU; ``n_workers`` takes the first
        ones): ``dask_cuda.LocalCUDACluster`` when dask-cuda is installed, else a
        ``distributed.SpecCluster`` of ``distributed.Nanny`` workers, each started with its own
        ``CUDA_VISIBLE_DEVICES`` (:func:`gpu_worker_environments`); ``'auto'`` -- ``'gpu'`` when
        ``directpet.cuda_device_count() > 0``, else ``'local'``.
    n_workers : worker processes (see ``kind``).
    threads_per_worker : one by default: a job already uses the whole GPU or its OpenMP threads,
        and jobs of one process share cached projectors.
    **cluster_kw : passed to the cluster class (for example ``dashboard_address``).
    """
    from .._backend import cuda_device_count, cuda_status

    distributed = _import_distributed("make_cluster")
    if kind not in ("auto", "local", "gpu"):
        raise ValueError(f"kind: expected 'auto', 'local' or 'gpu', got {kind!r}")
    if int(threads_per_worker) < 1:
        raise ValueError(f"threads_per_worker: expected >= 1, got {threads_per_worker!r}")
    if n_workers is not None and int(n_workers) < 1:
        raise ValueError(f"n_workers: expected >= 1, got {n_workers!r}")
    if kind == "auto":
        kind = "gpu" if cuda_device_count() > 0 else "local"
    cluster_kw.setdefault("dashboard_address", ":0")     # any free port: two clusters never clash
    with _keep_environ():
        if kind == "local":
            n = min(2, os.cpu_count() or 1) if n_workers is None else int(n_workers)
            return distributed.LocalCluster(n_workers=n, threads_per_worker=int(threads_per_worker),
                                            processes=True, **cluster_kw)
        if cuda_device_count() == 0:
            raise RuntimeError(f"kind='gpu' but no CUDA device is usable: {cuda_status()}")
        envs = gpu_worker_environments(visible_gpus(), n_workers)
        try:
            from dask_cuda import LocalCUDACluster  # optional: the reference way to run one worker per GPU
        except ImportError:
            LocalCUDACluster = None
        if LocalCUDACluster is not None:
            return LocalCUDACluster(n_workers=len(envs), threads_per_worker=int(threads_per_worker),
                                    CUDA_VISIBLE_DEVICES=envs[0]["CUDA_VISIBLE_DEVICES"], **cluster_kw)
        return _gpu_spec_cluster(distributed, envs, int(threads_per_worker), cluster_kw)


def _gpu_spec_cluster(distributed, envs, threads_per_worker, cluster_kw):
    """dask-cuda's layout without dask-cuda: a Nanny per GPU, its worker spawned with its own
    CUDA_VISIBLE_DEVICES (set before the worker process first touches CUDA)."""
    scheduler = {"cls": distributed.Scheduler,
                 "options": {"dashboard_address": cluster_kw.pop("dashboard_address")}}
    workers = {f"gpu-{env['CUDA_VISIBLE_DEVICES'].split(',')[0]}":
               {"cls": distributed.Nanny, "options": {"nthreads": threads_per_worker, "env": dict(env)}}
               for env in envs}
    return distributed.SpecCluster(workers=workers, scheduler=scheduler, **cluster_kw)


# ----------------------------------------------------------------------------------------------------
# the runner

def _run_job(job_fn: Callable, params: dict):
    """Runs on a worker: the job, its wall time and the worker's address; the rows checked."""
    from distributed import get_worker

    try:
        worker = get_worker().address
    except ValueError:          # not inside a worker (a client's local "synchronous" scheduler)
        worker = "local"
    t0 = time.perf_counter()
    try:
        rows = job_fn(params)
        if not isinstance(rows, (list, tuple)) or not all(isinstance(r, dict) for r in rows):
            raise TypeError(f"job_fn: expected a list of dict rows, got {type(rows).__name__}")
        clash = sorted({k for r in rows for k in r} & set(RUNNER_COLUMNS))
        if clash:
            raise ValueError(f"job_fn: rows use the runner's column names {clash}")
    except BaseException as err:
        # Keep the worker's traceback as text: it travels with the exception (its __dict__ is
        # pickled), even where the traceback object itself does not survive serialisation.
        try:
            err.sweep_traceback = _traceback.format_exc()
        except Exception:   # exceptions with __slots__ cannot take the attribute
            pass
        raise
    return list(rows), worker, time.perf_counter() - t0


def _failure(index: int, params: dict, future) -> FailedJob:
    if future.status == "cancelled":
        return FailedJob(index, params, "CancelledError: the job was cancelled", "")
    try:
        err = future.exception()
    except Exception as e:      # the exception could not be retrieved (e.g. not deserialisable)
        return FailedJob(index, params, f"{type(e).__name__}: {e}", "")
    tb = getattr(err, "sweep_traceback", "")
    if not tb:
        try:
            tb = "".join(_traceback.format_exception(type(err), err, future.traceback()))
        except Exception:
            tb = ""
    return FailedJob(index, params, f"{type(err).__name__}: {err}", tb)


def _check_jobs(jobs) -> List[dict]:
    if isinstance(jobs, dict) or not hasattr(jobs, "__iter__"):
        raise TypeError(f"jobs: expected a list of parameter dicts, got {type(jobs).__name__}")
    jobs = list(jobs)
    for i, j in enumerate(jobs):
        if not isinstance(j, dict):
            raise TypeError(f"jobs: item {i} is a {type(j).__name__}, expected a dict of parameters")
        clash = sorted(set(j) & set(RUNNER_COLUMNS))
        if clash:
            raise ValueError(f"jobs: item {i} uses the runner's column names {clash}")
    return jobs


def run_sweep(job_fn: Callable, jobs: Sequence[dict], *, client=None, cluster="auto",
              n_workers: Optional[int] = None, progress: bool = True, retries: int = 0) -> SweepResult:
    """Run ``job_fn(params)`` for every ``params`` in ``jobs`` on a Dask cluster and gather the rows.

    Parameters
    ----------
    job_fn : a top-level function (workers import it by name) ``params -> list of dict rows``.
    jobs : list of dicts of JSON-like parameters, one per job.
    client : a ``distributed.Client`` to use as it is (e.g. a SLURM cluster through
        dask-jobqueue); it is not closed here.
    cluster : without ``client``: a kind for :func:`make_cluster` (``'auto'``, ``'local'``,
        ``'gpu'``; with ``n_workers``), or a running cluster object; what is made here is closed
        here, a cluster passed in is not.
    progress : a tqdm bar over the jobs.
    retries : times a failing job is resubmitted (a job that fails on every try is reported).

    Returns a :class:`SweepResult`: every row of every job with the job's parameters merged in
    (a job's own column of the same name wins) and the columns ``job``, ``worker``, ``seconds``;
    failed jobs (index, parameters, error, traceback) in ``failed``.
    """
    distributed = _import_distributed("run_sweep")
    if not callable(job_fn):
        raise TypeError(f"job_fn: expected a function params -> rows, got {type(job_fn).__name__}")
    jobs = _check_jobs(jobs)
    if int(retries) < 0:
        raise ValueError(f"retries: expected >= 0, got {retries!r}")
    made_cluster = made_client = None
    t_start = time.perf_counter()
    try:
        if client is None:
            if isinstance(cluster, str):
                made_cluster = cluster = make_cluster(cluster, n_workers)
            made_client = client = distributed.Client(cluster)
            if made_cluster is not None:
                client.wait_for_workers(len(made_cluster.workers))
        startup = time.perf_counter() - t_start
        result = _gather(distributed, client, job_fn, jobs, progress, int(retries))
        result.startup_s = startup
        return result
    finally:
        if made_client is not None:
            made_client.close()
        if made_cluster is not None:
            made_cluster.close()


def _describe(client) -> str:
    cluster = getattr(client, "cluster", None)
    return type(cluster).__name__ if cluster is not None else f"Client({client.scheduler.address})"


def _gather(distributed, client, job_fn, jobs, progress, retries) -> SweepResult:
    from tqdm.auto import tqdm

    n_workers = len(client.nthreads())
    token = uuid.uuid4().hex[:8]
    t0 = time.perf_counter()
    futures = {}
    for i, params in enumerate(jobs):
        f = client.submit(_run_job, job_fn, params, key=f"sweep-{token}-{i}", pure=False, retries=retries)
        futures[f] = i
    done_rows, failed = {}, []
    bar = tqdm(total=len(jobs), desc="sweep", unit="job", disable=not progress)
    try:
        for f in distributed.as_completed(futures):
            i = futures[f]
            if f.status == "finished":
                rows, worker, seconds = f.result()
                done_rows[i] = [{**jobs[i], **r, "job": i, "worker": worker, "seconds": seconds} for r in rows]
            else:
                failed.append(_failure(i, jobs[i], f))
            bar.update(1)
            bar.set_postfix(failed=len(failed), refresh=False)
    except BaseException:
        client.cancel(list(futures))            # interrupted: do not leave jobs running
        raise
    finally:
        bar.close()
    wall = time.perf_counter() - t0
    rows = [r for i in sorted(done_rows) for r in done_rows[i]]
    failed.sort(key=lambda fj: fj.index)
    return SweepResult(rows, failed, wall, n_workers, f"{_describe(client)} with {n_workers} workers")
