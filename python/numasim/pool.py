"""Worker processes for parallel runs (iterations, experiments), stopped at once on Ctrl-C,
and the runs themselves, reporting how far each is to a progress.RunsProgress."""

from __future__ import annotations

import contextlib
import multiprocessing
import queue as queue_module
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

_PROGRESS_QUEUE = None  # in a worker: where its runs send (key, fraction done)
REPORT_INTERVAL = 0.25  # s between two reports of one run
DRAIN_WAIT = 2.0  # s to wait for a finished run's last reports


@contextlib.contextmanager
def process_pool(jobs: int, progress_queue=None):
    """A ProcessPoolExecutor of ``jobs`` spawned processes. If the body raises (e.g.
    KeyboardInterrupt: SIGINT sent to this process only, or an error in one run), the workers
    are terminated rather than waited for, so the caller stops now, not after the runs.
    ``progress_queue``: the workers' runs report (key, fraction done) there."""
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(progress_queue,))
    try:
        yield pool
    except BaseException:
        workers = list((getattr(pool, "_processes", None) or {}).values())
        # shutdown() drops the executor's references to these: taken first
        manager, results = getattr(pool, "_executor_manager_thread", None), getattr(pool, "_result_queue", None)
        pool.shutdown(wait=False, cancel_futures=True)
        for w in workers:
            w.terminate()
        for w in workers:
            w.join(5)
        _end_manager_thread(manager, results)
        raise
    pool.shutdown(wait=True)


def _end_manager_thread(manager, result_queue) -> None:
    """Let the executor's manager thread finish now that its workers are gone; else the
    interpreter's exit waits for it, or races with it (OSError: Bad file descriptor). A
    worker terminated while it wrote a large result leaves that thread reading the rest
    of the message forever: closing this process's write end of the result pipe (the
    workers held the others) gives it end-of-file, and it ends as for a broken pool."""
    if manager is None:
        return
    manager.join(1)
    if manager.is_alive():
        writer = getattr(result_queue, "_writer", None)
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.close()
        manager.join(5)


def _init_worker(q) -> None:
    """In a new worker: Ctrl-C is the parent's to handle (it terminates the workers), so
    SIGINT is ignored here, and unblocked (see sigint_blocked) only once ignored."""
    import signal

    global _PROGRESS_QUEUE
    _PROGRESS_QUEUE = q
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def sigint_blocked():
    """SIGINT blocked in this thread while worker processes are spawned (ProcessPoolExecutor
    starts them in submit()): they inherit the mask, so a Ctrl-C during their start-up
    (imports, before _init_worker) cannot print a traceback there. A SIGINT that arrives
    meanwhile is delivered here on the way out, as KeyboardInterrupt."""
    import signal
    import threading

    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def run_one(toml_text: str, progress=None):
    """("ok", result JSON) or ("error", "Kind: message"): picklable (native exceptions may
    not pickle). ``progress``: the engine's progress callable."""
    from numasim import _engine
    from numasim.api import host_memory_bytes
    from numasim.exceptions import NumasimError, error_list

    try:
        if progress is None:
            return ("ok", _engine.run(toml_text, host_memory_bytes()))
        return ("ok", _engine.run(toml_text, host_memory_bytes(), progress=progress))
    except NumasimError as exc:
        msg = "; ".join(f"{e['loc']}: {e['msg']}" if e["loc"] else e["msg"] for e in error_list(exc))
        return ("error", f"{type(exc).__name__}: {msg}")


def _reporter(key, q, sent):
    """A progress callable that sends (key, fraction done) to ``q``, at most every
    REPORT_INTERVAL seconds; ``sent[0]`` counts the reports."""
    last = [0.0]

    def report(sim_ns, max_ns, events, done):
        now = time.monotonic()
        if now - last[0] >= REPORT_INTERVAL:
            last[0] = now
            q.put((key, done))
            sent[0] += 1

    return report


def _worker(key, toml_text: str):
    """run_one's pair and the number of progress reports sent: the parent reads them all
    before it marks the run finished (the queue and the result travel on different pipes)."""
    q = _PROGRESS_QUEUE
    if q is None:
        return run_one(toml_text), 0
    q.put((key, 0.0))  # started
    sent = [1]
    return run_one(toml_text, _reporter(key, q, sent)), sent[0]


def run_scenarios(scenarios: dict, jobs: int = 2, status=None, stop_on_error: bool = False,
                  on_result=None, pool=None) -> dict:
    """Run {key: scenario TOML} in ``jobs`` processes (in this one for a single job or run);
    returns {key: run_one's pair}. ``status`` (a progress.RunsProgress) hears each run start,
    advance and finish. ``stop_on_error``: stop at the first run that fails (the runs not done
    are left out). ``on_result(key, pair)`` is called as each run finishes, before ``status``
    hears of it. ``pool``: an open (process_pool, its progress queue) to use instead of new
    processes (their start-up is then paid once for several calls)."""
    keys = list(scenarios)
    out: dict = {}
    if pool is None and (jobs <= 1 or len(keys) <= 1):
        for k in keys:
            if status is not None:
                status.start(k)
            cb = (lambda s, m, e, d, k=k: status.update(k, d)) if status is not None else None
            out[k] = run_one(scenarios[k], cb)
            if on_result is not None:
                on_result(k, out[k])
            if status is not None:
                status.finish(k)
            if stop_on_error and out[k][0] != "ok":
                break
        return out
    if pool is None:
        q = multiprocessing.get_context("spawn").Queue() if status is not None else None
        opened = process_pool(min(jobs, len(keys)), q)
    else:
        opened, q = contextlib.nullcontext(pool[0]), pool[1]
    heard: dict = {}  # key -> reports received
    try:
        with opened as pool:
            with sigint_blocked():
                futures = {pool.submit(_worker, k, scenarios[k]): k for k in keys}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                _drain(q, status, out, heard)
                for f in done:
                    k = futures[f]
                    out[k], sent = f.result()
                    if on_result is not None:
                        on_result(k, out[k])
                    _drain(q, status, out, heard, until=(k, sent))
                    if status is not None:
                        status.finish(k)
                if stop_on_error and any(v[0] != "ok" for v in out.values()):
                    raise _Stop  # terminates the workers still running
    except _Stop:
        pass
    return out


class _Stop(Exception):
    """A run failed and the caller asked to stop there."""


def _drain(q, status, finished, heard, until=None) -> None:
    """Pass the workers' reports on to ``status``, but none about a run in ``finished``.
    ``until=(key, n)``: wait (up to DRAIN_WAIT seconds) for key's n-th report first."""
    if q is None:
        return
    deadline = time.monotonic() + DRAIN_WAIT
    while True:
        waiting = until is not None and heard.get(until[0], 0) < until[1]
        try:
            key, done = q.get(timeout=max(0.0, deadline - time.monotonic())) if waiting else q.get_nowait()
        except (queue_module.Empty, OSError, ValueError):
            return
        heard[key] = heard.get(key, 0) + 1
        if status is not None and (key not in finished or (until is not None and key == until[0])):
            status.update(key, done)
