"""Every command says what it does, with an example; every option has help; errors speak
the user's units (GiB, node numbers, the user's own lines) (issue 29, item 12)."""

import argparse
import re

import pytest

from conftest import SMALL_NUMA02, numasim_cli
from numasim.cli import build_parser


def _commands(parser, prefix=""):
    """(name, subparser) of every command and subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                yield prefix + name, sp
                yield from _commands(sp, prefix + name + " ")


COMMANDS = list(_commands(build_parser()))


def test_the_top_level_help_says_what_numasim_is():
    text = build_parser().format_help()
    assert "The `numasim` command line" not in text
    assert "NUMA balancing" in text and "numasim run --workload numa02" in text
    names = {n for n, _ in COMMANDS}
    assert {"run", "reproduce", "compare", "plot", "report", "bench", "machines", "features",
            "scenario", "scenario show", "examples", "validate", "hostrun"} <= names


@pytest.mark.parametrize("name,sp", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_each_command_says_what_it_does_with_an_example(name, sp):
    assert sp.description and len(sp.description) > 40, name
    assert sp.epilog and f"numasim {name}" in sp.epilog, (name, sp.epilog)


@pytest.mark.parametrize("name,sp", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_option_has_help(name, sp):
    for action in sp._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        assert action.help, f"numasim {name}: {action.option_strings or action.dest} has no help"


def test_help_runs_for_every_command():
    for name, _ in COMMANDS:
        p = numasim_cli(*name.split(), "--help")
        assert p.returncode == 0 and "example" in p.stdout.split("options:")[-1], (name, p.stderr)


# ---------------------------------------------------------------- the user's units


def test_host_memory_is_reported_in_gib_or_mib_not_bytes():
    p = numasim_cli("run", SMALL_NUMA02, env={"NUMASIM_HOST_MEMORY_BYTES": str(50 << 20)})
    # the engine's estimate starts at 64 MiB of fixed state
    assert p.returncode == 2 and "bytes" not in p.stderr, p.stderr
    assert re.search(r"needs about \d+ MiB of host memory but only 50 MiB is available", p.stderr), p.stderr


def test_simulated_oom_names_nodes_not_bitmasks():
    p = numasim_cli("run", "--workload", "numa02_HARD_BIND", "--balancing", "off",
                    "--set", "machine.memory_gib_per_node=[0.25, 2.0]", "--set", "machine.cpus_per_node=4")
    assert p.returncode == 2
    assert "MPOL_BIND to node 0" in p.stderr and "node 0 (0.25 GiB) is full" in p.stderr, p.stderr
    assert "Bind(" not in p.stderr


def test_a_problem_with_a_profile_value_says_where_it_comes_from():
    p = numasim_cli("run", "--workload", "numa02", "--set", "machine.nodes=4")
    assert p.returncode == 2
    assert "machine.cost.stream_gibps: must be a 4x4 matrix; this value comes from profile " \
           "`xeon-platinum-2n-128c`" in p.stderr, p.stderr


TOO_BIG = "[[workload]]\nkind = \"numa02\"\n\nsize_mib = 99999999999999999999\n"


def test_with_set_a_syntax_error_points_at_the_users_own_line(tmp_path):
    f = tmp_path / "big.toml"
    f.write_text(TOO_BIG)
    plain = numasim_cli("run", f)
    assert "error: line 4, column 12:" in plain.stderr
    with_set = numasim_cli("run", f, "--set", "seed=3")
    # numasim wrote its own TOML for the engine (the override moves every line): still line 4
    assert "error: line 4, column 12 (workload[0].size_mib):" in with_set.stderr, with_set.stderr


def test_a_value_from_set_is_reported_at_the_set():
    p = numasim_cli("run", "--workload", "numa02", "--set", "workload.passes=99999999999999999999")
    assert p.returncode == 2
    assert "error: --set workload.passes (workload[0].passes):" in p.stderr, p.stderr


def test_scenario_show_prints_toml_that_run_accepts(tmp_path):
    shown = numasim_cli("scenario", "show", SMALL_NUMA02, "--set", "workload.passes=5")
    assert shown.returncode == 0 and shown.stdout.startswith("# The fully resolved scenario")
    f = tmp_path / "full.toml"
    f.write_text(shown.stdout)
    again = numasim_cli("run", f, "--json")
    direct = numasim_cli("run", SMALL_NUMA02, "--set", "workload.passes=5", "--json")
    assert again.returncode == 0 and again.stdout == direct.stdout
    as_json = numasim_cli("scenario", "show", SMALL_NUMA02, "--json")
    assert '"topology"' in as_json.stdout
