"""numasim sweep (issue 31, item 1): a spec's points run on the local process pool or a real
Dask scheduler (`--dask local`, 2 worker processes) give the same dataset, row for row and
byte for byte; an interrupted sweep resumes with the missing points only; bad specs say where."""

import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import numasim
from conftest import numasim_cli
from numasim import sweep_data

# 2 knobs x 4 values x 2 kernels x 2 seeds of a small numa01: 64 points, ~0.1 s each
SPEC = """
[base]
workload = "numa01"

[base.set]
"machine.cpus_per_node" = 4
"workload.size_mib" = 64
"workload.image" = "none"

[axes]
"kernel.sysctl.numa_balancing_scan_delay_ms" = [100, 400, 1000, 4000]
"kernel.sysctl.numa_balancing_scan_period_min_ms" = [100, 400, 1000, 4000]
kernel = ["6.1", "6.12"]
seed = [1, 2]
"""
N_POINTS = 64
DELAY = "kernel.sysctl.numa_balancing_scan_delay_ms"


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    f = tmp_path_factory.mktemp("sweep") / "knobs.toml"
    f.write_text(SPEC)
    return f


@pytest.fixture(scope="module")
def pool_dataset(spec):
    """The sweep on the local process pool (2 processes), through the command line."""
    out = spec.parent / "pool.parquet"
    p = numasim_cli("sweep", spec, "--out", out, "--jobs", "2")
    assert p.returncode == 0, p.stderr
    assert f"{N_POINTS} points; {N_POINTS} to run locally, 0 already" in p.stderr
    return out


def _files(d) -> dict:
    return {Path(f).name: os.stat(f) for f in glob.glob(f"{d}/run-*.parquet")}


class StopAfter:
    """A status that interrupts the sweep (as Ctrl-C would) once ``n`` points have finished."""

    def __init__(self, n):
        self.n, self.finished, self.started_with = n, [], None

    def __call__(self, keys):
        self.started_with = list(keys)
        return self

    def start(self, key):
        pass

    def update(self, key, done):
        pass

    def finish(self, key):
        self.finished.append(key)
        if len(self.finished) == self.n:
            raise KeyboardInterrupt


def test_dask_local_sweep_equals_the_pool_sweep_and_resumes_with_the_missing_points(spec, pool_dataset):
    out = spec.parent / "dask.parquet"
    stop = StopAfter(10)
    with pytest.raises(KeyboardInterrupt):
        numasim.sweep(spec, out, dask="local", jobs=2, status=stop)
    before = _files(out)
    assert len(before) == 10 and len(stop.started_with) == N_POINTS  # each finished point was saved
    assert not [f for f in os.listdir(out) if f.startswith(".")]  # no half-written file

    p = numasim_cli("sweep", spec, "--out", out, "--dask", "local", "--jobs", "2")
    assert p.returncode == 0, p.stderr
    assert f"{N_POINTS} points; {N_POINTS - 10} to run on a local Dask cluster, 10 already in" in p.stderr
    after = _files(out)
    assert len(after) == N_POINTS
    for name, st in before.items():  # the finished points were not run (nor written) again
        assert (after[name].st_ino, after[name].st_mtime_ns) == (st.st_ino, st.st_mtime_ns), name

    dask_df, pool_df = sweep_data.read(out), sweep_data.read(pool_dataset)
    pd.testing.assert_frame_equal(dask_df, pool_df)
    for name in after:  # the very same files, whichever executor ran the point
        assert (out / name).read_bytes() == (pool_dataset / name).read_bytes(), name

    # one tidy row per point: every axis value, counters, times, completed, hash, version
    assert len(pool_df) == N_POINTS and pool_df["point"].is_unique and pool_df["scenario_hash"].is_unique
    assert list(pool_df.columns[:4]) == [DELAY, "kernel.sysctl.numa_balancing_scan_period_min_ms", "kernel", "seed"]
    assert {"completed", "elapsed_s", "system_s", "numa_hint_faults", "numa_pages_migrated"} <= set(pool_df.columns)
    assert pool_df["completed"].all() and (pool_df["numasim_version"] == numasim.__version__).all()
    # the knob reaches the engine: a 4 s delay on a ~4 s run leaves almost no scanning
    by_delay = pool_df.groupby(DELAY)["numa_pte_updates"].mean()
    assert by_delay[100] > 5 * by_delay[4000]


def test_a_row_is_the_run_of_its_point(spec, pool_dataset):
    """The row's figures are those of numasim.run on the base with the point's values."""
    df = sweep_data.read(pool_dataset)
    row = df[(df[DELAY] == 400) & (df["kernel"] == "6.1") & (df["seed"] == 2)].iloc[0]
    r = numasim.run(workload="numa01", balancing=True, seed=2, overrides={
        "machine.cpus_per_node": 4, "workload.size_mib": 64, "workload.image": "none",
        DELAY: 400, "kernel.sysctl.numa_balancing_scan_period_min_ms": int(row["kernel.sysctl.numa_balancing_scan_period_min_ms"]),
        "kernel.version": "6.1"})
    assert row["elapsed_s"] == r.elapsed_s and row["system_s"] == r.times["system_s"]
    assert all(row[c] == v for c, v in r.counters.items())


def test_sigint_stops_a_sweep_and_the_rerun_runs_only_the_missing_points(spec, pool_dataset, tmp_path):
    out = tmp_path / "int.parquet"

    def child():
        os.setpgrp()
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    p = subprocess.Popen([sys.executable, "-m", "numasim", "sweep", str(spec), "--out", str(out), "--jobs", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=child)
    deadline = time.monotonic() + 120
    while len(_files(out)) < 3 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the workers get it too
    _, err = p.communicate(timeout=60)
    done = len(_files(out))
    assert p.returncode == 130 and "Traceback" not in err, err
    assert 3 <= done < N_POINTS
    again = numasim_cli("sweep", spec, "--out", out, "--jobs", "2")
    assert again.returncode == 0 and f"{N_POINTS - done} to run locally, {done} already" in again.stderr
    pd.testing.assert_frame_equal(sweep_data.read(out), sweep_data.read(pool_dataset))


def test_listed_points_cross_the_axes_and_come_back_in_spec_order(tmp_path):
    spec = tmp_path / "points.toml"
    spec.write_text("""
[base]
workload = "numa02"
set = { "machine.cpus_per_node" = 4, "workload.size_mib" = 64, "workload.passes" = 20, "workload.image" = "none" }

[[points]]
kernel = "6.12"
"kernel.features.numa-delay-map" = true

[[points]]
kernel = "6.1"
"kernel.features.numa-delay-map" = false

[axes]
seed = [3, 1]
""")
    df = numasim.sweep(spec, jobs=1)  # no dataset: the rows only
    assert list(zip(df["kernel"], df["seed"])) == [("6.12", 3), ("6.12", 1), ("6.1", 3), ("6.1", 1)]
    assert list(df.columns[:3]) == ["kernel", "kernel.features.numa-delay-map", "seed"]
    r = numasim.run(workload="numa02", balancing=True, seed=1, overrides={
        "machine.cpus_per_node": 4, "workload.size_mib": 64, "workload.passes": 20, "workload.image": "none",
        "kernel.version": "6.1", "kernel.features.numa-delay-map": False})
    assert df.iloc[3]["pgfault"] == r.counters["pgfault"] and df.iloc[3]["elapsed_s"] == r.elapsed_s


def test_a_dataset_of_another_spec_is_refused(spec, pool_dataset, tmp_path):
    changed = tmp_path / "changed.toml"
    changed.write_text(SPEC.replace('"workload.size_mib" = 64', '"workload.size_mib" = 32'))
    p = numasim_cli("sweep", changed, "--out", pool_dataset)
    assert p.returncode == 2
    assert f"error: {pool_dataset}: holds {N_POINTS} rows that are not points of this spec" in p.stderr


def test_incomplete_points_are_marked_and_not_plotted_without_leave(tmp_path):
    spec = tmp_path / "short.toml"
    spec.write_text('[base]\nworkload = "numa02"\nset = { "machine.cpus_per_node" = 4, "workload.size_mib" = 64, '
                    '"workload.image" = "none", "run.max_sim_s" = 0.5 }\n[axes]\n"workload.passes" = [20, 400]\n')
    p = numasim_cli("sweep", spec, "--out", tmp_path / "short.parquet")
    assert p.returncode == 3 and "warning: 1 points stopped at run.max_sim_s" in p.stderr, p.stderr
    df = sweep_data.read(tmp_path / "short.parquet")
    assert list(df["completed"]) == [True, False]
    plot = numasim_cli("sweep", "plot", tmp_path / "short.parquet", "--x", "passes", "--out", tmp_path / "s.png")
    assert plot.returncode == 2 and "1 points stopped at run.max_sim_s" in plot.stderr
    plot = numasim_cli("sweep", "plot", tmp_path / "short.parquet", "--x", "passes", "--out", tmp_path / "s.png",
                       "--allow-incomplete")
    assert plot.returncode == 0 and (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"


def test_sweep_plot_draws_lines_and_a_heatmap(pool_dataset, tmp_path):
    lines = numasim_cli("sweep", "plot", pool_dataset, "--x", "scan_delay_ms", "--y", "system_s", "--hue", "kernel",
                        "--out", tmp_path / "lines.png")
    heat = numasim_cli("sweep", "plot", pool_dataset, "--x", "scan_delay_ms", "--y", "scan_period_min_ms",
                       "--z", "numa_pages_migrated", "--out", tmp_path / "heat.svg")
    assert lines.returncode == 0 and heat.returncode == 0, (lines.stderr, heat.stderr)
    assert (tmp_path / "lines.png").read_bytes()[:4] == b"\x89PNG"
    svg = (tmp_path / "heat.svg").read_text()
    assert "numa_pages_migrated" in svg and "scan_period_min_ms" in svg
    bad = numasim_cli("sweep", "plot", pool_dataset, "--x", "ms")
    assert bad.returncode == 2 and "error: --x ms: names several of the dataset's axes" in bad.stderr


@pytest.mark.parametrize("text,message", [
    ("[axes]\nseed = [1]\n", "base: missing"),
    ('[base]\nworkload = "numa02"\n[axes]\nseed = []\n', "axes.seed: give a non-empty list"),
    ('[base]\nworkload = "numa02"\n[axes]\nkernel = ["6.1", "9.9"]\n', "point kernel=9.9: kernel.version: unknown kernel version"),
    ('[base]\nworkload = "numa02"\n[axes]\n"workload.passes" = [1, "x"]\n', "axes.workload.passes: values must be"),
    ('[base]\nexperiment = "autonuma-balancing"\nrun = "x"\n', "base.run: give one of the experiment's runs: numa01-off"),
    ('[base]\nworkload = "numa02"\n[axes\n', "line 3, column 6"),
])
def test_a_bad_spec_says_where_and_exits_2(tmp_path, text, message):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    p = numasim_cli("sweep", f, "--out", tmp_path / "out.parquet")
    assert p.returncode == 2 and p.stderr.startswith(f"error: {f}: ") and message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "out.parquet").exists()


def test_an_experiment_run_is_a_base(tmp_path):
    f = tmp_path / "exp.toml"
    f.write_text('[base]\nexperiment = "autonuma-balancing"\nrun = "numa02-on"\nset = { "workload.size_mib" = 64, '
                 '"machine.cpus_per_node" = 4, "workload.passes" = 5 }\n[axes]\nseed = [1, 2]\n')
    df = numasim.sweep(f, jobs=1)
    assert len(df) == 2 and df["numa_hint_faults"].ge(0).all() and df["scenario_hash"].is_unique


def test_without_the_extra_dask_says_which_pip_command_installs_it(spec, tmp_path):
    code = ("import sys; sys.modules['distributed'] = None\n"
            "from numasim.cli import main\n"
            f"sys.exit(main(['sweep', {str(spec)!r}, '--out', {str(tmp_path / 'x.parquet')!r}, '--dask', 'local']))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 2 and "pip install 'numasim[sweep]'" in p.stderr and "Traceback" not in p.stderr
