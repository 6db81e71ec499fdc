"""Every bad input is one `error:` line and exit 2 (issue 29, items 8 and 9): bounds on
--iterations and --jobs, files that are not UTF-8, results of the wrong shape."""

import json
import os
import sys

import pytest

from conftest import SMALL_NUMA02, numasim_cli
from test_cli import assert_user_error

TINY = ["--workload", "numa02", "--set", "machine.cpus_per_node=2", "--set", "workload.size_mib=16",
        "--set", "workload.passes=2"]


# ---------------------------------------------------------------- item 8


@pytest.mark.parametrize("args,needle", [
    (["run", *TINY, "--iterations", "1000000000"], "--iterations must be in 1..100, got 1000000000"),
    (["run", *TINY, "--iterations", "0"], "--iterations must be in 1..100, got 0"),
    (["run", *TINY, "-n", "2", "--jobs", "0"], "--jobs must be in 1..64, got 0"),
    (["run", *TINY, "-n", "2", "--jobs", "65"], "--jobs must be in 1..64, got 65"),
    (["reproduce", "autonuma-balancing", "--iterations", "0"], "--iterations must be in 1..100, got 0"),
    (["reproduce", "autonuma-balancing", "--iterations", "101"], "--iterations must be in 1..100"),
    (["reproduce", "autonuma-balancing", "--jobs", "0"], "--jobs must be in 1..64, got 0"),
    (["bench", "--repeat", "1000"], "--repeat must be in 1..100"),
])
def test_iterations_and_jobs_are_bounded(args, needle):
    p = numasim_cli(*args, timeout=60)  # before: 10^9 iterations grew memory without output
    assert_user_error(p, needle)


def test_more_jobs_than_cpus_warns(monkeypatch, capsys):
    from numasim import cli, repeat

    monkeypatch.setattr(repeat, "cpu_cores", lambda: 1)
    assert cli.main(["run", *TINY, "-n", "2", "--jobs", "2"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: --jobs 2 is more than the 1 CPUs this process may use"), err
    monkeypatch.setattr(repeat, "cpu_cores", lambda: 2)
    assert cli.main(["run", *TINY, "-n", "2", "--jobs", "2"]) == 0
    assert capsys.readouterr().err == ""


def test_python_api_bounds():
    from numasim.repeat import run_iterations
    from numasim.scenario import UsageError

    with pytest.raises(UsageError, match="--jobs"):
        run_iterations(SMALL_NUMA02, 2, jobs=0)
    with pytest.raises(UsageError, match="--iterations"):
        run_iterations(SMALL_NUMA02, 10**9)


# ---------------------------------------------------------------- item 9


@pytest.fixture
def files(tmp_path):
    text = SMALL_NUMA02.read_text()
    (tmp_path / "binary.toml").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "latin1.toml").write_bytes(("# Réglage: numa02\n" + text).encode("latin-1"))
    (tmp_path / "latin1.json").write_bytes('{"counters": {}, "note": "é"}'.encode("latin-1"))
    (tmp_path / "shape.json").write_text(json.dumps({"counters": {}, "times": {"elapsed_s": "x"},
                                                     "series": {}}))
    (tmp_path / "lists.json").write_text(json.dumps({"counters": [], "times": {}, "series": {}}))
    return tmp_path


@pytest.mark.parametrize("args,needle", [
    (["run", "{t}/binary.toml"], "binary.toml: not UTF-8 TOML (byte 0x80 at offset 128)"),
    (["run", "{t}/latin1.toml"], "latin1.toml: not UTF-8 TOML (byte 0xe9 at offset 3)"),
    (["scenario", "show", "{t}/latin1.toml"], "latin1.toml: not UTF-8 TOML"),
    (["run", "{t}/binary.toml", "-n", "2"], "binary.toml: not UTF-8 TOML"),
    (["compare", "{t}/binary.toml"], "binary.toml: not a numasim result (not UTF-8: byte 0x80"),
    (["compare", "{t}/latin1.json"], "latin1.json: not a numasim result (not UTF-8: byte 0xe9"),
    (["plot", "{t}/latin1.json", "--out", "{t}/img"], "latin1.json: not a numasim result"),
    (["compare", "{t}/shape.json"], "shape.json: not a numasim result (times.elapsed_s is missing"),
    (["report", "{t}/lists.json", "--out", "{t}/rep"], "lists.json: not a numasim result (counters is not"),
    (["validate", "{t}/binary.toml"], "binary.toml: not UTF-8 TOML"),
    (["hostrun", "{t}/latin1.toml"], "latin1.toml: not UTF-8 TOML"),
    (["scenario", "show", "/dev/zero"], "/dev/zero: larger than 64 MiB"),
])
def test_unreadable_input_is_one_error_line(files, args, needle):
    p = numasim_cli(*[a.format(t=files) for a in args], timeout=60)
    assert_user_error(p, needle)
    assert len(p.stderr.strip().splitlines()) == 1


def test_non_utf8_argument_is_one_error_line():
    """A byte that is not UTF-8 in argv (Python keeps it as a lone surrogate)."""
    arg = os.fsdecode(b"workload.size_mib=\xff")
    p = numasim_cli("run", "--workload", "numa02", "--set", arg)
    assert_user_error(p, "argument 'workload.size_mib=\\udcff' is not valid UTF-8")


def test_python_api_names_the_file(files):
    import numasim
    from numasim.scenario import UsageError

    with pytest.raises(UsageError, match="latin1.toml: not UTF-8 TOML"):
        numasim.run(files / "latin1.toml")
