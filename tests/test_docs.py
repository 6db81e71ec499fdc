"""Every code block of README.md and docs/*.md runs as written (issue 29, item 10).

Each markdown file is one session in its own temporary directory, its blocks run in order (a
later block may read what an earlier one saved, as a reader following along would):

- ```sh: the block is a bash script (`set -euo pipefail`) with the venv's `numasim` first on
  PATH; it must exit 0.
- ```python: the block is saved as a script and run with this Python (so a missing
  `if __name__ == "__main__":` guard around worker processes fails, as it would for a reader);
  it must exit 0.
- ```toml: a scenario fragment; it must parse and resolve with a small numa02 workload added.
- ```text: output or a file layout; not run.

A block without a language is an error: every block says what it is.

Files the docs name as the reader's own are provided in the session directory:
`my-scenario.toml` and `my.toml` hold the small numa02 scenario of tests/fixtures/good, and
`my-sweep.toml` a sweep spec over it (MY_SWEEP: 2 scan delays x 2 kernels).

A command line ending in the visible marker `(skipped by tests/test_docs.py: REASON)` is left
out (with its continuation lines). They are kept to those that cannot run here or quickly,
and SKIPPED below lists them, so a new one fails this test until it is justified here:

- `make run`, `make test` (README): the first builds the engine, the second is this suite.
- `numasim reproduce all` (15-30 min on 2 cores), `reproduce delay-mapping` (~40 s), `reproduce
  vma-flags-grouping` (~40 s) (README): full-scale experiments; tests/test_tlb_experiments.py,
  tests/test_vma_flags_grouping.py and tests/test_experiments.py run them scaled down.
- `numasim fidelity` (README): runs every experiment first, as `reproduce all`;
  tests/test_fidelity.py gives it saved results (`--from`), and `fidelity --only vm` runs here.
- `numasim validate ... --kernel` and `numasim calibrate` (README, docs/realkernel.md) and `make
  test-vm`: boot Debian kernels in QEMU (`make test-vm`); `validate --vm-result` re-reads that
  boot's console log (tests/test_calibrate.py does so with `--calibrate`).
- `numasim hostrun` (README, docs/realkernel.md): needs a NUMA host (it refuses one node).
- `pip install 'numasim[sweep]'` (docs/sweeps.md): installs packages (the test venv has them, from
  requirements-dev.txt); its `dask scheduler`/`dask worker`/`numasim sweep --dask tcp://...` lines
  and the Slurm script need a cluster (tests/test_sweep.py runs `--dask local`, a real scheduler).
- `make fuzz` (docs/fuzzing.md): 10^6 fuzzing inputs, ~12 min; tests/test_fuzz.py runs 25 s of it.
- The `validate --trace-faults` boot and the `numasim trace` of its files (docs/traces.md): boot
  QEMU; `numasim trace` runs on a run.trace_faults result here and on a trimmed vm.json in
  tests/test_trace_export.py.

No command is substituted: the rest runs at the size the docs give (~1 min in all).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SMALL_NUMA02

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)
MARKER = re.compile(r"\(skipped by tests/test_docs\.py: ([^)]+)\)\s*$")
LANGS = {"sh", "python", "toml", "text"}

SKIPPED = {
    "README.md": ["make run", "make test", "numasim reproduce all",
                  "numasim reproduce delay-mapping", "numasim reproduce vma-flags-grouping", "numasim reproduce tiering-hot-selection", "numasim fidelity",
                  "numasim validate remote-toucher-4k",
                  "numasim calibrate --kernel", "numasim validate two-processes-4k",
                  "numasim validate reader-writer-4k", "numasim validate shared-processes-4k",
                  "numasim hostrun my-scenario.toml"],
    "docs/realkernel.md": ["numasim validate remote-toucher-4k", "numasim validate my.toml",
                           "numasim validate migratepages-4k", "numasim validate two-processes-4k",
                           "numasim validate two-processes-4k", "numasim calibrate --kernel",
                           "numasim validate two-processes-4k", "numasim validate two-processes-4k",
                           "numasim validate tiering-promote-4k", "numasim hostrun my.toml", "make test-vm"],
    "docs/fuzzing.md": ["make fuzz"],
    "docs/traces.md": ["numasim validate reader-writer-4k",
                       "numasim trace out/v/reader-writer-4k-6.1/vm.json",
                       "numasim trace out/v/reader-writer-4k-6.1/sim.json"],
    "docs/sweeps.md": ["pip install 'numasim[sweep]'", "dask scheduler --port", "dask worker tcp://head:8786",
                       "numasim sweep knobs.toml", "python slurm_sweep.py"],
}
MY_SWEEP = """[base]
scenario = "my-scenario.toml"

[axes]
"kernel.sysctl.numa_balancing_scan_delay_ms" = [100, 1000]
kernel = ["6.1", "6.12"]
"""


def blocks(path: Path) -> list:
    """[(line, language, code)] of the fenced blocks of a markdown file."""
    text = path.read_text(encoding="utf-8")
    return [(text[: m.start()].count("\n") + 1, m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def logical_lines(code: str) -> list:
    """Shell lines with their `\\` continuations joined (each keeps its newlines)."""
    out, cur = [], ""
    for line in code.splitlines(keepends=True):
        cur += line
        if not line.rstrip("\n").endswith("\\"):
            out.append(cur)
            cur = ""
    return out + ([cur] if cur else [])


def without_skipped(code: str) -> tuple:
    """(the script without marked lines, [first words of each marked line])."""
    kept, skipped = [], []
    for line in logical_lines(code):
        if MARKER.search(line.rstrip("\n")):
            skipped.append(" ".join(line.split("#")[0].split()[:3]))
        else:
            kept.append(line)
    return "".join(kept), skipped


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_every_block_says_what_it_is():
    for path in DOCS:
        for line, lang, _ in blocks(path):
            assert lang in LANGS, f"{rel(path)}:{line}: a code block needs one of {sorted(LANGS)}"


def test_skip_markers_are_the_listed_few():
    found = {}
    for path in DOCS:
        for _, lang, code in blocks(path):
            if lang == "sh":
                found.setdefault(rel(path), []).extend(without_skipped(code)[1])
            else:
                assert not MARKER.search(code), f"{rel(path)}: skip markers are for sh lines only"
    found = {k: v for k, v in found.items() if v}
    assert found == SKIPPED


def _session(tmp_path: Path) -> dict:
    for name in ("my-scenario.toml", "my.toml"):
        (tmp_path / name).write_text(SMALL_NUMA02.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "my-sweep.toml").write_text(MY_SWEEP, encoding="utf-8")
    env = dict(os.environ)
    env.pop("NUMASIM_BACKTRACE", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    return env


def _run(cmd, where: str, cwd: Path, env: dict) -> None:
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{where} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_code_blocks_run(path, tmp_path):
    import numasim

    env = _session(tmp_path)
    ran = 0
    for line, lang, code in blocks(path):
        where = f"{rel(path)}:{line} ({lang})"
        if lang == "sh":
            script, _ = without_skipped(code)
            if script.strip():
                _run(["bash", "-c", "set -euo pipefail\n" + script], where, tmp_path, env)
                ran += 1
        elif lang == "python":
            file = tmp_path / f"block_{line}.py"
            file.write_text(code, encoding="utf-8")
            _run([sys.executable, str(file)], where, tmp_path, env)
            ran += 1
        elif lang == "toml":
            numasim.resolve(code + '\n[[workload]]\nkind = "numa02"\nsize_mib = 64\n')
            ran += 1
    assert ran or not any(lang != "text" for _, lang, _ in blocks(path)), f"{rel(path)}: nothing ran"


def test_submodules_are_attributes_of_a_fresh_import():
    """docs/results.md: `numasim.run(..., progress=numasim.progress.Progress())` after a bare
    `import numasim` (a fresh interpreter: here other tests have imported the submodules)."""
    code = ("import numasim, sys\n"
            "assert 'numasim.progress' not in sys.modules\n"
            "numasim.progress.Progress(); numasim.storage.load_result; numasim.repeat.run_iterations\n"
            "numasim.compare.compare; numasim.plot; numasim.report; numasim.experiments.names()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
