"""Worker processes for parallel runs (iterations, experiments), stopped at once on Ctrl-C."""

from __future__ import annotations

import contextlib
import multiprocessing
from concurrent.futures import ProcessPoolExecutor


@contextlib.contextmanager
def process_pool(jobs: int):
    """A ProcessPoolExecutor of ``jobs`` spawned processes. If the body raises (e.g.
    KeyboardInterrupt: SIGINT sent to this process only, or an error in one run), the workers
    are terminated rather than waited for, so the caller stops now, not after the runs."""
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
    try:
        yield pool
    except BaseException:
        workers = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for w in workers:
            w.terminate()
        for w in workers:
            w.join(5)
        raise
    pool.shutdown(wait=True)
