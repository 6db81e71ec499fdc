"""The progress bar (numasim.progress) with a fake stream and clock, and its wiring
through numasim.run(progress=...)."""

import io

import numasim
from conftest import SMALL_NUMA02
import pytest

from numasim.pool import run_scenarios
from numasim.progress import Progress, RunsProgress

NS = 1_000_000_000


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_render_shows_the_fraction_done_sim_time_event_rate_and_eta():
    bar = Progress(stream=io.StringIO(), width=10, clock=Clock())
    # a quarter of the planned work done at 2 s of a 7200 s limit: the bar follows the work
    text = bar.render(2 * NS, 7200 * NS, 2_500_000, done=0.25, elapsed=5.0)
    assert text.startswith("[##........]  25%  sim 2.00 s")
    assert "2.5M events" in text and "500.0k ev/s" in text
    assert "ETA 15s" in text  # 5 s for a quarter: 15 s more
    done = bar.render(100 * NS, 100 * NS, 10, done=1.0, elapsed=5.0)
    assert "ETA" not in done and "[##########] 100%" in done


def test_updates_are_throttled_and_redrawn_in_place():
    out, clock = io.StringIO(), Clock()
    bar = Progress(stream=out, max_rate=5.0, clock=clock)
    for i in range(10):  # ten calls within 0.09 s: one redraw
        clock.t += 0.01
        bar(i * NS, 60 * NS, i * 1000)
    assert bar.updates == 1
    clock.t += 0.25
    bar(20 * NS, 60 * NS, 50_000)
    assert bar.updates == 2
    assert bar.last == (20 * NS, 60 * NS, 50_000, 20 / 60)  # no fraction given: the limit's share
    text = out.getvalue()
    assert text.count("\r") == 2 and "\n" not in text  # one line, rewritten
    assert "sim 20.00 s" in text.split("\r")[-1] and " 33%" in text.split("\r")[-1]
    bar.close()
    assert out.getvalue().endswith("\r") and "\n" not in out.getvalue()


def test_close_without_updates_writes_nothing():
    out = io.StringIO()
    Progress(stream=out).close()
    assert out.getvalue() == ""


def test_run_calls_progress_and_the_result_is_unchanged():
    calls = []
    r = numasim.run(SMALL_NUMA02, progress=lambda *a: calls.append(a))
    assert calls, "the engine never called progress"
    sims = [c[0] for c in calls]
    assert sims == sorted(sims) and all(c[1] == calls[0][1] for c in calls)
    assert all(isinstance(x, int) for c in calls for x in c[:3]) and all(isinstance(c[3], float) for c in calls)
    # the last call is at the end of the run: all NUMA events (PTE updates + hint faults +
    # migrations + TLB shootdown IPIs)
    ev = r.sim["events"]
    assert calls[-1][0] >= round(r.elapsed_s * NS)
    assert calls[-1][2] == sum(ev.values()) + r.counters["nr_tlb_remote_flush_received"] > 0
    assert r.to_json() == numasim.run(SMALL_NUMA02).to_json()
    # a bar as the callback renders into its stream
    out = io.StringIO()
    numasim.run(SMALL_NUMA02, progress=Progress(stream=out, max_rate=0))
    assert "sim " in out.getvalue() and "events" in out.getvalue()


def test_a_broken_stream_does_not_stop_the_run():
    out = io.StringIO()
    out.close()  # writing raises ValueError
    bar = Progress(stream=out, max_rate=0)
    r = numasim.run(SMALL_NUMA02, progress=bar)
    assert r.completed and bar.updates == 0


def test_reset_restarts_the_clock_for_the_next_run():
    out, clock = io.StringIO(), Clock()
    bar = Progress(stream=out, max_rate=0, clock=clock)
    clock.t += 10
    bar(1 * NS, 100 * NS, 1000)
    assert "100 ev/s" in out.getvalue().split("\r")[-1]
    bar.reset("iteration 2")
    clock.t += 1
    bar(1 * NS, 100 * NS, 1000)
    last = out.getvalue().split("\r")[-1]
    assert last.startswith("iteration 2 [") and "1.0k ev/s" in last and "ETA 1m39s" in last


# ---------------------------------------------------------------- the work the run plans


def test_the_fraction_follows_the_workloads_plan_not_max_sim_s():
    """SMALL_NUMA02 runs ~0.3 s of its 7200 s limit: by time the bar would stay at 0%; by its
    planned passes it goes up steadily to 100%."""
    calls = []
    r = numasim.run(SMALL_NUMA02, progress=lambda *a: calls.append(a))
    fracs = [c[3] for c in calls]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0
    assert calls[0][1] == 7200 * NS  # the limit is far away
    mid = min(calls, key=lambda c: abs(c[0] - r.elapsed_s * NS / 2))
    assert 0.2 < mid[3] < 0.8, (mid, r.elapsed_s)  # half the run: about half the passes
    assert mid[0] / mid[1] < 0.001  # where the old bar stood


def test_a_three_argument_progress_callable_still_works():
    calls = []
    numasim.run(SMALL_NUMA02, progress=lambda sim_ns, max_ns, events: calls.append(events))
    assert calls and calls[-1] > 0


def test_a_time_limited_run_counts_by_its_limit():
    """A run that stops at run.max_sim_s: its fraction is the limit's share, up to 1."""
    calls = []
    numasim.run(SMALL_NUMA02, overrides={"run.max_sim_s": 0.1}, progress=lambda *a: calls.append(a))
    assert calls[-1][3] == 1.0
    assert all(c[3] >= c[0] / c[1] - 1e-9 for c in calls)


# ---------------------------------------------------------------- several runs


def test_runs_progress_says_which_run_of_how_many_and_how_far():
    out, clock = io.StringIO(), Clock()
    st = RunsProgress(["base", "patched", ("x", 3)], title="delay-mapping", stream=out, max_rate=0, clock=clock)
    st.start("base")
    st.update("patched", 0.4)
    clock.t += 10
    st.update("base", 0.6)
    line = out.getvalue().split("\r")[-1]
    assert line.startswith("delay-mapping: run 1/3 base 60%, run 2/3 patched 40%  [0/3 done]")
    assert "ETA 20s" in line  # a third of the set (1.0 of 3) in 10 s: 20 s more
    st.finish("base")
    st.update("base", 0.1)  # a late report of a finished run changes nothing
    line = out.getvalue().split("\r")[-1]
    assert "run 1/3" not in line and "run 2/3 patched 40%" in line and "[1/3 done]" in line
    st.update(("x", 3), 0.5)
    assert "run 3/3 x-3 50%" in out.getvalue().split("\r")[-1]
    st.close()
    assert out.getvalue().endswith("\r")


class Recorder:
    def __init__(self):
        self.events = []

    def start(self, key):
        self.events.append(("start", key, 0.0))

    def update(self, key, done):
        self.events.append(("update", key, done))

    def finish(self, key):
        self.events.append(("finish", key, 1.0))

    def close(self):
        self.events.append(("close", None, 0.0))


@pytest.mark.parametrize("jobs", [1, 2])
def test_parallel_runs_report_their_progress_from_the_workers(jobs):
    text = SMALL_NUMA02.read_text()
    rec = Recorder()
    out = run_scenarios({"a": text, "b": text.replace("seed = 7", "seed = 8")}, jobs=jobs, status=rec)
    assert {k for k, (state, _) in out.items() if state == "ok"} == {"a", "b"}
    for key in "ab":
        mine = [e for e in rec.events if e[1] == key]
        assert mine[-1][0] == "finish" and all(0.0 <= d <= 1.0 for _, _, d in mine)
        assert any(kind == "update" for kind, _, _ in mine), rec.events  # heard from the run itself


def test_an_experiment_closes_its_status_line_after_its_runs():
    from numasim.experiments.registry import Experiment

    text = SMALL_NUMA02.read_text()

    class Tiny(Experiment):
        name = "tiny"
        columns = ["a", "b"]

        def scenarios(self, overrides=None):
            return {"a": text, "b": text}

        def evaluate(self, outcomes):
            assert all(o.result is not None for o in outcomes.values())
            return []

    rec = Recorder()
    seen = []
    Tiny().run(max_workers=2, status=lambda keys: seen.append(keys) or rec)
    assert seen == [["a", "b"]] and rec.events[-1][0] == "close"
    assert sum(1 for e in rec.events if e[0] == "finish") == 2


def _stderr_on_a_terminal(*args) -> str:
    """Run `python -m numasim ARGS` with stderr on a pseudo-terminal; what it drew there."""
    import os
    import pty
    import subprocess
    import sys

    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "numasim", *map(str, args)], stdout=subprocess.DEVNULL,
                         stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_the_command_line_shows_which_iteration_is_going_on_a_terminal():
    drawn = _stderr_on_a_terminal("run", SMALL_NUMA02, "--iterations", "2", "--jobs", "2",
                                  "--set", "workload.passes=400")  # runs of a second or so
    assert "2 iterations: " in drawn and "/2 seed " in drawn and "done]" in drawn, drawn
    single = _stderr_on_a_terminal("run", SMALL_NUMA02)
    assert "%  sim " in single, single


def _tiny_experiments(monkeypatch):
    """Two tiny registered experiments (two small runs each) in place of the shipped ones."""
    from numasim.experiments import registry
    from numasim.experiments.registry import Experiment

    text = SMALL_NUMA02.read_text()

    def make(exp_name):
        class Tiny(Experiment):
            name = exp_name
            columns = ["base", "patched"]

            def scenarios(self, overrides=None):
                return {"base": text, "patched": text.replace("seed = 7", "seed = 8")}

            def evaluate(self, outcomes):
                return []

        return Tiny()

    monkeypatch.setattr(registry, "REGISTRY", {n: make(n) for n in ("tiny-a", "tiny-b")})
    monkeypatch.setattr(registry, "_load", lambda: None)


@pytest.mark.parametrize("jobs", [1, 2])
def test_reproduce_shows_which_run_of_how_many_is_going(monkeypatch, capsys, jobs):
    """`reproduce NAME` and `reproduce all` on a terminal: a status line naming the experiment
    (n/N of all), the run of how many and how far it is (issue 29, item 11)."""
    from argparse import Namespace

    from numasim import cli_reports

    _tiny_experiments(monkeypatch)
    monkeypatch.setattr(cli_reports, "interactive", lambda: True)
    args = Namespace(jobs=jobs, json=False, strict=False)
    from numasim.experiments import registry

    cli_reports.reproduce_one(registry.get("tiny-a"), args, None)
    err = capsys.readouterr().err
    assert "tiny-a: " in err and "run 1/2 base" in err and "[2/2 done]" in err, err
    assert cli_reports.reproduce_all(args, None) == 0
    captured = capsys.readouterr()
    assert "reproduce all: 1/2 tiny-a: " in captured.err and "reproduce all: 2/2 tiny-b: " in captured.err
    assert "run 2/2 patched" in captured.err and "[1/2 done]" in captured.err, captured.err
    assert "tiny-a" in captured.out and "tiny-b" in captured.out  # the summary table
    # without a terminal: no status line
    monkeypatch.setattr(cli_reports, "interactive", lambda: False)
    cli_reports.reproduce_all(args, None)
    assert "run 1/2" not in capsys.readouterr().err
