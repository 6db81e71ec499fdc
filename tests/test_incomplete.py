"""Runs that stop at run.max_sim_s are never reported as finished (issue 29, item 1)."""

import json
import warnings

import pytest

from conftest import SMALL_NUMA02, numasim_cli

# the small numa02 needs ~0.3 s of simulated time: 0.1 s stops it half-way
CUT = ["--set", "run.max_sim_s=0.1"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """An incomplete and a complete run, saved."""
    d = tmp_path_factory.mktemp("incomplete")
    cut = numasim_cli("run", SMALL_NUMA02, *CUT, "--save", d / "cut.json")
    full = numasim_cli("run", SMALL_NUMA02, "--save", d / "full.json")
    assert full.returncode == 0, full.stderr
    return d, cut


def test_cli_run_warns_and_exits_3(saved):
    _, p = saved
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert p.stderr.startswith("warning: the run stopped at run.max_sim_s = 0.1 s"), p.stderr
    assert "INCOMPLETE" in p.stdout


def test_cli_run_json_is_marked_and_exits_3():
    p = numasim_cli("run", SMALL_NUMA02, *CUT, "--json")
    assert p.returncode == 3, p.stderr
    assert json.loads(p.stdout)["completed"] is False
    assert "warning: " in p.stderr


def test_cli_iterations_count_incomplete_runs():
    p = numasim_cli("run", SMALL_NUMA02, *CUT, "--iterations", "2", "--jobs", "1")
    assert p.returncode == 3, p.stderr
    assert "warning: 2 of 2 iterations" in p.stderr
    assert "INCOMPLETE runs included" in p.stdout and "run: 2 of 2" in p.stdout


def test_python_repr_and_warning():
    import numasim

    with pytest.warns(numasim.IncompleteRunWarning, match="run.max_sim_s = 0.1 s"):
        r = numasim.run(SMALL_NUMA02, overrides={"run.max_sim_s": 0.1})
    assert not r.completed
    assert "INCOMPLETE" in repr(r)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a finished run warns nothing
        full = numasim.run(SMALL_NUMA02)
    assert full.completed and "INCOMPLETE" not in repr(full)


@pytest.mark.parametrize("command", ["compare", "plot", "report"])
def test_reports_refuse_incomplete_runs(saved, command):
    d, _ = saved
    extra = [] if command == "compare" else ["--out", d / f"out-{command}"]
    p = numasim_cli(command, d / "full.json", d / "cut.json", *extra)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr.startswith(f"error: {d / 'cut.json'}: stopped at run.max_sim_s"), p.stderr
    assert "--allow-incomplete" in p.stderr
    assert not (d / f"out-{command}").exists()


def test_compare_allow_incomplete_marks_the_column(saved):
    d, _ = saved
    p = numasim_cli("compare", d / "full.json", d / "cut.json", "--allow-incomplete")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("INCOMPLETE runs included") and "cut: 1 of 1" in p.stdout.splitlines()[0]
    p = numasim_cli("compare", d / "full.json", d / "cut.json", "--allow-incomplete", "--json")
    cols = json.loads(p.stdout)["columns"]
    assert [c["incomplete"] for c in cols] == [0, 1]


def test_report_and_plot_allow_incomplete_mark_it(saved):
    from numasim import plot, storage

    d, _ = saved
    p = numasim_cli("report", d / "full.json", d / "cut.json", "--allow-incomplete", "--out", d / "rep")
    assert p.returncode == 0, p.stderr
    page = (d / "rep" / "index.html").read_text()
    assert "1 INCOMPLETE" in page and 'class="incomplete"' in page
    cut = storage.load_result(d / "cut.json")
    assert "INCOMPLETE" in plot._title(cut)
    assert "INCOMPLETE" not in plot._title(storage.load_result(d / "full.json"))
    p = numasim_cli("plot", d / "cut.json", "--allow-incomplete", "--out", d / "img")
    assert p.returncode == 0, p.stderr
    assert (d / "img" / "cut-memory.png").exists()
