"""Where sweep and tune points run: local worker processes (pool.py), or a Dask cluster
(`--dask ADDRESS`, or `--dask local` for a distributed.LocalCluster). Every point is a
separate seeded simulation, so its result does not depend on where it ran."""

from __future__ import annotations

import contextlib
import logging

from numasim.scenario import UsageError

EXTRA = "pip install 'numasim[sweep]'  (or: pip install 'dask[distributed]' optuna)"


def require(module: str, what: str):
    """Import ``module`` (a dependency of the `sweep` extra), or a UsageError saying how to
    install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"{what} needs the Python package `{module.split('.')[0]}`; install the sweep "
                         f"extra: {EXTRA}") from None


class LocalRunner:
    """``jobs`` spawned worker processes (pool.py), started on the first run() of more than
    one point and kept for the next ones; a single job runs the points in this process."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self.stack = contextlib.ExitStack()
        self.pool = None  # (ProcessPoolExecutor, progress queue)

    def run(self, scenarios: dict, status=None, on_result=None) -> dict:
        import multiprocessing

        from numasim.pool import process_pool, run_scenarios

        if self.pool is None and self.jobs > 1 and len(scenarios) > 1:
            q = multiprocessing.get_context("spawn").Queue()
            self.pool = (self.stack.enter_context(process_pool(self.jobs, q)), q)
        try:
            return run_scenarios(scenarios, jobs=self.jobs, status=status, on_result=on_result, pool=self.pool)
        except BaseException as exc:  # e.g. Ctrl-C: stop the workers now, not after their runs
            self.stack.__exit__(type(exc), exc, exc.__traceback__)
            self.pool = None
            raise

    def close(self) -> None:
        self.stack.close()


class DaskRunner:
    """Runs points as tasks of a Dask cluster: an existing scheduler at ``address``, or a
    LocalCluster of ``jobs`` single-threaded worker processes for "local". The workers need
    numasim installed (the same version)."""

    def __init__(self, address: str, jobs: int):
        distributed = require("distributed", "--dask")
        self.cluster = None
        try:
            if address == "local":
                with _sigint_ignored():  # the workers leave Ctrl-C to this process, which stops them
                    self.cluster = distributed.LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                                            dashboard_address=None, silence_logs=logging.CRITICAL)
                self.client = distributed.Client(self.cluster)
            else:
                self.client = distributed.Client(address, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            self.close()
            raise UsageError(f"--dask {address}: cannot connect to a Dask scheduler there ({exc})") from None

    def run(self, scenarios: dict, status=None, on_result=None) -> dict:
        from distributed import as_completed

        from numasim.pool import run_one

        futures = {self.client.submit(run_one, toml, pure=False): k for k, toml in scenarios.items()}
        out: dict = {}
        try:
            for f in as_completed(futures):
                k = futures[f]
                try:
                    out[k] = f.result()
                except Exception as exc:  # the task failed on its worker (e.g. numasim missing there)
                    out[k] = ("error", f"DaskError: {type(exc).__name__}: {exc}")
                if on_result is not None:
                    on_result(k, out[k])
                if status is not None:
                    status.finish(k)
        except BaseException:
            self.client.cancel(list(futures), force=True)
            raise
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if getattr(self, "client", None) is not None:
                self.client.close()
        with contextlib.suppress(Exception):
            if self.cluster is not None:
                self.cluster.close()


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored while worker processes start (they inherit it); in the main thread only."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def runner(dask: str | None = None, jobs: int | None = None):
    """A LocalRunner, or a DaskRunner when ``dask`` (an address or "local") is given;
    closed (the LocalCluster stopped) on the way out."""
    from numasim.repeat import check_jobs, default_jobs

    jobs = check_jobs(default_jobs() if jobs is None else jobs)
    r = DaskRunner(dask, jobs) if dask else LocalRunner(jobs)
    try:
        yield r
    finally:
        r.close()
