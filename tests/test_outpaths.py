"""Output paths are checked before the work (issue 29, item 6): a bad --save or --out is one
`error:` line and exit 2, before any simulation or plot, never a traceback afterwards."""

import pytest

from conftest import SMALL_NUMA02, numasim_cli
from test_cli import assert_user_error


@pytest.fixture
def places(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    return tmp_path


BAD = [
    # (arguments after the command, the error's text)
    (["run", SMALL_NUMA02, "--save", "{t}/afile/r.json"], "afile is not a directory"),
    (["run", SMALL_NUMA02, "--save", "{t}/adir"], "is a directory; give a file name"),
    (["run", SMALL_NUMA02, "--save", "{t}/new/"], "names a directory; give a file name"),
    (["run", SMALL_NUMA02, "--save", "/proc/numasim/r.json"], "cannot write in /proc"),
    (["run", SMALL_NUMA02, "-n", "2", "--save", "{t}/afile"], "exists and is not a directory"),
    (["run", SMALL_NUMA02, "-n", "2", "--save", "{t}/afile/g"], "afile is not a directory"),
    (["plot", SMALL_NUMA02, "--out", "{t}/afile"], "exists and is not a directory"),
    (["plot", SMALL_NUMA02, "--out", "/proc/numasim-img"], "cannot write in /proc"),
    (["report", SMALL_NUMA02, "--out", "{t}/afile/rep"], "afile is not a directory"),
]


@pytest.mark.parametrize("args,needle", BAD, ids=[" ".join(map(str, a[2:])) for a, _ in BAD])
def test_bad_output_path_is_refused_before_the_work(places, args, needle):
    """The scenario or RESULT is fine (plot/report would still fail on a scenario file, so the
    path check must come first to give this message)."""
    args = [str(a).format(t=places) for a in args]
    p = numasim_cli(*args)
    assert_user_error(p, needle)  # stdout is empty: nothing ran
    assert len(p.stderr.strip().splitlines()) == 1
    opt = "--save" if "--save" in args else "--out"
    assert p.stderr.startswith(f"error: {opt} {args[args.index(opt) + 1]}: "), p.stderr
