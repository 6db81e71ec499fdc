"""The `numasim` command: JSON output, tables, and clean user errors."""

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import BAD, SMALL_NUMA02, SMALL_SETS, expectation, numasim_cli, one_json_object


def assert_user_error(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines and all(l.startswith("error: ") for l in lines), proc.stderr
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)
    assert proc.stdout == ""


def test_run_workload_json_small():
    p = numasim_cli("run", "--workload", "numa02", *SMALL_SETS, "--json")
    assert p.returncode == 0, p.stderr
    obj = one_json_object(p.stdout)
    assert obj["counters"]["numa_hint_faults"] > 0  # balancing defaults to on
    assert obj["times"]["elapsed_s"] > 0
    assert obj["scenario"]["kernel"]["numa_balancing"] is True
    assert obj["sim"]["nr_cpus"] == 8


def test_run_balancing_off_and_seed():
    p = numasim_cli("run", "--workload", "numa02", "--balancing", "off", "--seed", "3",
                    *SMALL_SETS, "--json")
    assert p.returncode == 0, p.stderr
    obj = one_json_object(p.stdout)
    assert obj["seed"] == 3
    assert obj["counters"]["numa_hint_faults"] == 0


def test_run_file_json_equals_api():
    import numasim

    p = numasim_cli("run", SMALL_NUMA02, "--json")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == numasim.run(SMALL_NUMA02).to_json().strip()


def test_run_human_table():
    p = numasim_cli("run", SMALL_NUMA02)
    assert p.returncode == 0, p.stderr
    for word in ("elapsed_s", "system_s", "numa_hint_faults_local", "numa_pages_migrated",
                 "hint local %"):
        assert word in p.stdout


def test_run_save(tmp_path):
    out = tmp_path / "r.json"
    p = numasim_cli("run", SMALL_NUMA02, "--save", out)
    assert p.returncode == 0, p.stderr
    assert "counters" in json.loads(out.read_text())


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_scenario_files_exit_2(path):
    want = expectation(path)
    p = numasim_cli("run", path)
    assert_user_error(p, want.get("loc", ""))


@pytest.mark.parametrize("sets, needle", [
    (["--set", "machine.nodes=0"], "machine.nodes"),
    (["--set", "machine.distances=[[10,21,21],[21,10,21],[21,21,10]]"], "distances"),
    (["--set", "workload.size_mib=1000000"], "error: workload: workloads need"),
    (["--set", "kernel.frobnicate=1"], "frobnicate"),
    (["--set", "novalue"], "KEY=VALUE"),
])
def test_bad_sets_exit_2(sets, needle):
    assert_user_error(numasim_cli("run", "--workload", "numa02", *sets), needle)


def test_missing_file_exit_2():
    assert_user_error(numasim_cli("run", "no/such/scenario.toml"), "no/such/scenario.toml", "no such file")


def test_nothing_to_run_exit_2():
    assert_user_error(numasim_cli("run"), "--workload")


def test_capacity_error_exit_2():
    p = numasim_cli("run", SMALL_NUMA02, env={"NUMASIM_HOST_MEMORY_BYTES": "4096"})
    assert_user_error(p)


def test_backtrace_env_shows_traceback():
    p = numasim_cli("run", BAD[0], env={"NUMASIM_BACKTRACE": "1"})
    assert p.returncode != 0 and "Traceback" in p.stderr


def test_machines_and_features():
    p = numasim_cli("machines")
    assert p.returncode == 0 and "xeon-platinum-2n-128c  (default)" in p.stdout
    p = numasim_cli("machines", "--show", "intel-4s-48c")
    assert p.returncode == 0 and "nodes = 4" in p.stdout.replace("  ", " ")
    p = numasim_cli("features", "--json")
    assert p.returncode == 0 and any(f["name"] == "numa-delay-map" for f in json.loads(p.stdout))
    p = numasim_cli("features")
    assert p.returncode == 0 and "numa-delay-map" in p.stdout and "modelled" in p.stdout


def test_kernels_lists_versions_and_shows_a_release():
    p = numasim_cli("kernels")
    assert p.returncode == 0 and "6.12  (default)" in p.stdout.splitlines()
    assert p.stdout.splitlines()[0] == "3.19"
    p = numasim_cli("kernels", "--json")
    listing = json.loads(p.stdout)
    assert listing["default"] == "6.12" and "6.1" in listing["versions"]
    p = numasim_cli("kernels", "--show", "6.1", "--json")
    assert p.returncode == 0, p.stderr
    prof = json.loads(p.stdout)
    by = {m["mechanism"]: m for m in prof["mechanisms"]}
    # 6.1 runs the 6.0 fork-placement rule (cb29a5c19d2d) and the 5.12 active-balance trigger
    assert (by["find_idlest_group"]["variant"], by["find_idlest_group"]["commit"]) == ("6.0", "cb29a5c19d2d")
    assert by["need_active_balance"]["variant"] == "5.12" and not by["need_active_balance"]["checked"]
    assert by["delay_dequeue"]["variant"] == "base", "DELAY_DEQUEUE is 6.12"
    assert prof["features"]["numa-delay-map"] is True and prof["features"]["migrate-batch-flush"] is False
    p = numasim_cli("kernels", "--show", "6.1")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    row = next(l for l in lines if l.startswith("need_active_balance "))
    assert "e9b9734b7465" in row and row.endswith("(commit not verified)")
    row = next(l for l in lines if l.startswith("find_idlest_group "))
    assert "cb29a5c19d2d" in row and "not verified" not in row
    assert any(l.split() == ["numa-delay-map", "on"] for l in lines)
    assert_user_error(numasim_cli("kernels", "--show", "2.6"), "2.6", "3.19", "6.12")


def test_scenario_show_resolves():
    p = numasim_cli("scenario", "show", SMALL_NUMA02, "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["seed"] == 7 and res["kernel"]["sysctl"]["numa_balancing_scan_period_max_ms"] == 60000
    assert_user_error(numasim_cli("scenario", "show", BAD[0]))


def test_reproduce_list():
    p = numasim_cli("reproduce", "--list")
    assert p.returncode == 0 and p.stdout.startswith("autonuma-balancing:")
    assert_user_error(numasim_cli("reproduce", "no-such-experiment"), "no-such-experiment")


def test_console_script_installed():
    script = Path(sys.executable).parent / "numasim"
    if not script.exists():
        pytest.skip("not running from the make-setup venv")
    import subprocess

    p = subprocess.run([script, "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("numasim ")


def test_simulated_oom_exit_2():
    p = numasim_cli("run", "--workload", "numa02_HARD_BIND",
                    "--set", "machine.memory_gib_per_node=[0.25, 2.0]")
    assert_user_error(p, "out-of-memory")


def test_unknown_profile_exit_2():
    assert_user_error(numasim_cli("machines", "--show", "nope"), "nope")
    assert_user_error(numasim_cli("run", "--workload", "numa02", "--machine", "nope"),
                      "machine.profile")


def test_internal_error_exits_1_without_traceback(monkeypatch, capsys):
    import numasim
    from numasim import cli

    def boom(*a, **k):
        raise numasim.InternalError("numasim bug: invariant pages_conserved violated")

    monkeypatch.setattr(numasim, "run", boom)
    monkeypatch.delenv("NUMASIM_BACKTRACE", raising=False)
    assert cli.main(["run", "--workload", "numa02"]) == 1
    err = capsys.readouterr().err
    assert "error: numasim bug: invariant pages_conserved violated" in err
    assert "Traceback" not in err


def test_broken_pipe_is_quiet():
    import subprocess

    # full-scale numa02 with 1 ms samples: ~250 KB of JSON (more than a pipe
    # buffer) into a reader that quits after 10 bytes
    cmd = (f"{sys.executable} -m numasim run --workload numa02 "
           "--set run.sample_interval_ms=1 --json | head -c 10")
    p = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], capture_output=True, text=True)
    assert len(p.stdout) == 10 and p.stdout.startswith("{"), p.stdout
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


def test_bench_reports_the_fastest_of_repeated_runs(capsys):
    """`bench --only W --repeat N`: one row, N timed runs, the minimum reported, and the
    speed ratios computed from it (the simulated time itself is deterministic)."""
    import numasim
    from numasim import cli

    assert cli.main(["bench", "--only", "numa02", "--repeat", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (run,) = out["runs"]
    assert run["workload"] == "numa02" and run["repeat"] == 2 and len(run["wall_s_all"]) == 2
    assert run["wall_s"] == min(run["wall_s_all"])
    assert run["x_real_time"] == pytest.approx(run["sim_s"] / run["wall_s"])
    assert run["x_real_time_cpu"] == pytest.approx(run["sim_s"] / run["cpu_s"])
    assert run["sim_s"] == numasim.run(cli._bench_scenario("numa02")[1]).elapsed_s
    # each run in its own process: its peak RSS over the touched pages (numa02: 8 B page entries)
    assert run["touched_pages"] > 200_000 and 4 < run["rss_bytes_per_page"] < 64
    assert cli.main(["bench", "--only", "numa02", "--repeat", "0"]) == 2


def test_bench_compare_gives_ratios_against_a_saved_bench(tmp_path, capsys):
    """`bench --compare REF.json`: new / saved x real time and RSS per page, per workload both
    have; a file that is not a saved bench is refused before anything runs."""
    from numasim import cli

    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"runs": [{"workload": "numa02", "sim_s": 9.0, "x_real_time": 200.0, "rss_bytes_per_page": 8.0}]}))
    new = [{"workload": "numa02", "sim_s": 9.0, "x_real_time": 100.0, "rss_bytes_per_page": 4.0},
           {"workload": "numa01", "sim_s": 1.0, "x_real_time": 1.0, "rss_bytes_per_page": 1.0}]
    (row,) = cli.bench_compare(new, str(ref))
    assert (row["speed_ratio"], row["rss_per_page_ratio"], row["same_sim_s"]) == (0.5, 0.5, True)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli.main(["bench", "--only", "numa02", "--compare", str(bad)]) == 2
    assert "not a saved `numasim bench --json`" in capsys.readouterr().err
