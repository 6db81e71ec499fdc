"""The wheel installs without Rust into a fresh venv and every command works from it; the
sdist carries the docs, the C sources and the licence file (issue 29, item 16).

`make setup` builds the wheel beside the engine (scripts/build-engine.sh: target/wheels/);
without one this test builds it with maturin (a few minutes)."""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
SMALL = (ROOT / "tests/fixtures/good/numa02-small.toml").read_text()


def _maturin() -> str:
    return str(Path(sys.executable).with_name("maturin"))


def _wheel() -> Path:
    wheels = sorted((ROOT / "target/wheels").glob("numasim-*.whl"), key=lambda p: p.stat().st_mtime)
    newest_source = max(p.stat().st_mtime for p in (ROOT / "python/numasim").rglob("*") if p.is_file()
                        and "__pycache__" not in p.parts and not p.name.endswith(".so"))
    if not wheels or wheels[-1].stat().st_mtime < newest_source:
        subprocess.run([_maturin(), "build", "--release", "--quiet", "--out", str(ROOT / "target/wheels")],
                       cwd=ROOT, check=True)
        wheels = sorted((ROOT / "target/wheels").glob("numasim-*.whl"), key=lambda p: p.stat().st_mtime)
    return wheels[-1]


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv with the wheel installed, its PATH without cargo or rustc."""
    root = tmp_path_factory.mktemp("wheel")
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    no_rust = ":".join(p for p in os.environ["PATH"].split(":") if ".cargo" not in p)
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}:{no_rust}", "HOME": str(root / "home"),
           "VIRTUAL_ENV": str(env_dir)}
    env.pop("PYTHONPATH", None)
    p = subprocess.run([str(env_dir / "bin/pip"), "install", "-q", str(_wheel())], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return env_dir, env, root


def _numasim(venv, *args, module=False):
    env_dir, env, root = venv
    cmd = [str(env_dir / "bin/python"), "-m", "numasim"] if module else [str(env_dir / "bin/numasim")]
    return subprocess.run([*cmd, *map(str, args)], env=env, cwd=root, capture_output=True, text=True, timeout=300)


def test_the_installed_package_is_the_wheels_not_the_source_tree(venv):
    env_dir, env, _ = venv
    p = subprocess.run([str(env_dir / "bin/python"), "-c", "import numasim; print(numasim.__file__)"],
                       env=env, capture_output=True, text=True, cwd="/")
    assert p.returncode == 0 and str(env_dir) in p.stdout, p.stdout + p.stderr
    assert subprocess.run(["sh", "-c", "command -v cargo rustc"], env=env, capture_output=True).returncode != 0


def test_every_command_runs_from_the_wheel(venv, tmp_path):
    _, _, root = venv
    (root / "small.toml").write_text(SMALL)
    assert _numasim(venv, "--help", module=True).returncode == 0
    r = _numasim(venv, "run", "small.toml", "--save", "on.json")
    assert r.returncode == 0 and "Per-node process memory usage" in r.stdout, r.stderr
    off = _numasim(venv, "run", "small.toml", "--balancing", "off", "--save", "off.json")
    assert off.returncode == 0, off.stderr
    for args in (["compare", "off.json", "on.json"], ["plot", "on.json", "--out", "img"],
                 ["report", "off.json", "on.json", "--out", "rep"], ["machines"], ["features"],
                 ["scenario", "show", "small.toml"], ["examples"], ["examples", "copy", "kvm-guest"],
                 ["reproduce", "--list"], ["validate", "--list"], ["bench", "--help"], ["hostrun", "--help"]):
        p = _numasim(venv, *args)
        assert p.returncode == 0, (args, p.stderr[-1500:])
    assert (root / "rep/index.html").exists() and (root / "kvm-guest.toml").exists()


def test_validate_builds_the_shipped_c_workloads_on_first_use(venv):
    env_dir, env, root = venv
    code = "from numasim.realkernel.vm import numaw_path; print(numaw_path())"
    p = subprocess.run([str(env_dir / "bin/python"), "-c", code], env=env, capture_output=True, text=True, cwd=root)
    if p.returncode != 0 and "libc6-dev" in p.stderr:
        pytest.skip("no static C library here: " + p.stderr.strip().splitlines()[-1])
    assert p.returncode == 0, p.stderr
    exe = Path(p.stdout.strip())
    assert str(root / "home") in str(exe) and os.access(exe, os.X_OK)
    # without gcc, the error says what is missing
    no_gcc = {**env, "PATH": str(env_dir / "bin"), "HOME": str(root / "home2")}
    q = subprocess.run([str(env_dir / "bin/python"), "-c", code], env=no_gcc, capture_output=True, text=True, cwd=root)
    assert q.returncode != 0 and "gcc is needed to build numasim's C workloads" in q.stderr, q.stderr


def test_the_sdist_has_the_docs_the_c_sources_and_the_licence(tmp_path):
    p = subprocess.run([_maturin(), "sdist", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    [sdist] = tmp_path.glob("numasim-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    docs = {str(f.relative_to(ROOT)) for f in (ROOT / "docs").rglob("*") if f.is_file()}
    c_sources = {str(f.relative_to(ROOT)) for f in (ROOT / "python/numasim/realkernel/workloads").iterdir()}
    assert docs and docs <= names
    assert c_sources and {s for s in c_sources if s.endswith((".c", ".h"))} == c_sources <= names
    assert "LICENSE" in names  # the MIT licence pyproject.toml and Cargo.toml declare
