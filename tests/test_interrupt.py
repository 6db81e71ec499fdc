"""Ctrl-C stops a run at once in every mode (issue 29, item 7): the binding runs the engine in
~20 ms slices of wall time with the GIL released and handles signals between them, so SIGINT
ends `numasim run` (no terminal, --json: no progress bar) with exit 130, and `numasim.run()`
with KeyboardInterrupt, within a fraction of a second instead of at the end of the run."""

import os
import signal
import subprocess
import sys
import time

# numa01 at 3000 passes runs ~25 s of wall time
LONG = ["--workload", "numa01", "--set", "workload.passes=3000"]
BOUND_S = 2.0  # the binding stops within ~0.1 s; the rest is slack for a loaded host


def _start(cmd):
    """Popen with SIGINT at its default, whatever this process inherited (a background job of
    a non-interactive shell ignores SIGINT, and Python then keeps it ignored), in its own
    process group like a job of a terminal."""
    def child():
        os.setpgrp()
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=child)


def _interrupt(p, group=False) -> float:
    """Send SIGINT (to the process, or its whole group as a terminal's Ctrl-C does); returns
    the seconds until it exited."""
    t0 = time.monotonic()
    if group:
        os.killpg(p.pid, signal.SIGINT)
    else:
        p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=30)
    finally:
        p.kill()
    return time.monotonic() - t0


def test_cli_run_json_without_terminal_exits_130():
    p = _start([sys.executable, "-m", "numasim", "run", *LONG, "--json"])
    time.sleep(3)  # imports done, the engine is running
    assert p.poll() is None
    took = _interrupt(p)
    out, err = p.communicate()
    assert p.returncode == 130, (p.returncode, err)
    assert took < BOUND_S, f"took {took:.2f} s to stop"
    assert out == "" and "Traceback" not in err


def test_cli_parallel_iterations_stop_without_waiting_for_workers():
    """SIGINT to the parent alone, and to the whole group: the worker processes are stopped too."""
    for group in (False, True):
        p = _start([sys.executable, "-m", "numasim", "run", *LONG, "-n", "2", "--jobs", "2", "--json"])
        time.sleep(4)
        took = _interrupt(p, group=group)
        _, err = p.communicate()
        assert p.returncode == 130 and took < BOUND_S, (group, p.returncode, took, err)
        assert "Traceback" not in err


SCRIPT = """
import sys, time, numasim
print("running", flush=True)
try:
    numasim.run(workload="numa01", passes=3000)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
"""


def test_python_run_raises_keyboard_interrupt():
    p = _start([sys.executable, "-c", SCRIPT])
    assert p.stdout.readline().strip() == "running"
    time.sleep(1.0)  # inside the engine
    assert p.poll() is None
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    line = p.stdout.readline().strip()
    took = time.monotonic() - t0
    p.wait(timeout=30)
    assert line == "KeyboardInterrupt", p.stderr.read()
    assert took < BOUND_S, f"took {took:.2f} s"
    assert p.returncode == 0
