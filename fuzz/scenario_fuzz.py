"""Coverage-guided fuzzing of the scenario parser and resolver through the Python entry
(atheris, libFuzzer). docs/fuzzing.md has the campaigns and their figures.

One input is what a user hands `numasim run FILE --set KEY=VALUE ...`: the bytes of FILE,
then up to four NUL-separated `--set` expressions. The input goes the command line's way:
the file is read as UTF-8, the overrides are applied, the engine resolves the scenario and
estimates its host memory. Only a NumasimError may come out, and not an InternalError (an
engine panic or a broken invariant): anything else is a crash that libFuzzer saves.

With target/fuzz-engine/_engine.so (fuzz/build-engine.sh: the engine with SanitizerCoverage)
libFuzzer also sees the Rust parser's and resolver's edges; without it, the Python side's only.

    python fuzz/seeds.py SEED_DIR       # the shipped scenarios, examples and bad fixtures
    python fuzz/scenario_fuzz.py -runs=1000000 CORPUS_DIR SEED_DIR   # -timeout=10 by default
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parent.parent
INSTRUMENTED = Path(os.environ.get("NUMASIM_FUZZ_ENGINE", ROOT / "target/fuzz-engine/_engine.so"))
MAX_SETS = 4


def load_engine() -> str:
    """Load the instrumented engine as numasim._engine when it exists; say which one runs.
    Called once atheris.Fuzz has loaded libFuzzer, which then takes its coverage counters."""
    if INSTRUMENTED.exists():
        # libFuzzer's __sanitizer_cov_* hooks, made global for the engine's coverage counters
        core = next(Path(atheris.__file__).parent.glob("core_with_libfuzzer*.so"))
        ctypes.CDLL(str(core), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        spec = importlib.util.spec_from_file_location("numasim._engine", INSTRUMENTED)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["numasim._engine"] = module
        return f"instrumented engine {INSTRUMENTED}"
    return "uninstrumented engine (Python coverage only; fuzz/build-engine.sh builds the other)"


def make_target(scratch: Path):
    """The function libFuzzer calls with each input."""
    with atheris.instrument_imports(include=["numasim"]):
        from numasim import _engine
        from numasim.exceptions import InternalError, NumasimError
        from numasim.scenario import parse_set, scenario_toml
        from numasim.textfile import check_utf8_args

    path = scratch / "scenario.toml"

    def one_input(data: bytes) -> None:
        file, *sets = data.split(b"\0")
        path.write_bytes(file)
        exprs = [s.decode("utf-8", "surrogateescape") for s in sets[:MAX_SETS]]
        try:
            check_utf8_args(exprs)
            text = scenario_toml(path, overrides=[parse_set(e) for e in exprs])
            _engine.resolve(text)
            _engine.estimate_host_bytes(text)
        except InternalError:
            raise  # an engine panic or bug
        except NumasimError:
            pass  # a clear error about bad input: the expected outcome

    return one_input


DEFAULTS = ["-timeout=10", "-rss_limit_mb=4096", "-max_len=8192"]  # a hang is an input over 10 s


def with_defaults(argv: list) -> list:
    """``argv`` with DEFAULTS for the libFuzzer flags it does not set."""
    given = {a.split("=", 1)[0] for a in argv[1:] if a.startswith("-")}
    return argv[:1] + [d for d in DEFAULTS if d.split("=", 1)[0] not in given] + argv[1:]


def main(argv: list) -> None:
    argv = with_defaults(argv)
    scratch = tempfile.TemporaryDirectory(prefix="numasim-fuzz-")
    target = []

    def first_then_target(data: bytes) -> None:
        if not target:  # libFuzzer is loaded (globally) once Fuzz() runs: the engine now
            print(f"scenario_fuzz: {load_engine()}", file=sys.stderr)
            target.append(make_target(Path(scratch.name)))
        target[0](data)

    atheris.Setup(argv, first_then_target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
