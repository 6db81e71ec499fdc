"""The progress bar (numasim.progress) with a fake stream and clock, and its wiring
through numasim.run(progress=...)."""

import io

import numasim
from conftest import SMALL_NUMA02
from numasim.progress import Progress

NS = 1_000_000_000


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_render_shows_sim_time_event_rate_and_eta():
    bar = Progress(stream=io.StringIO(), width=10, clock=Clock())
    text = bar.render(25 * NS, 100 * NS, 2_500_000, elapsed=5.0)
    assert text.startswith("[##........] sim 25.00/100 s")
    assert "2.5M events" in text and "500.0k ev/s" in text
    assert "ETA ≤ 15s" in text  # 5 s for a quarter of the limit: at most 15 s more
    done = bar.render(100 * NS, 100 * NS, 10, elapsed=5.0)
    assert "ETA" not in done and "[##########]" in done


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
    assert bar.last == (20 * NS, 60 * NS, 50_000)
    text = out.getvalue()
    assert text.count("\r") == 2 and "\n" not in text  # one line, rewritten
    assert "sim 20.00/60 s" in text.split("\r")[-1]
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
    assert all(isinstance(x, int) for c in calls for x in c)
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
    assert last.startswith("iteration 2 [") and "1.0k ev/s" in last and "ETA ≤ 1m39s" in last
