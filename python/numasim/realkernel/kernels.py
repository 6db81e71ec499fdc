"""Fetch Debian kernels for the VM backend with `apt-get download` (nothing is installed).

Each selectable version maps to the Debian suite(s) that carry it. A private apt
configuration under the cache directory points at those suites only (reusing the mirror of
the system's own Debian sources); `/etc/apt` is never read for sources nor written.
The package is unpacked with `dpkg -x` and its vmlinuz kept in the cache, keyed by the
package version, so later runs do not touch the network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from numasim.realkernel.errors import RealKernelError

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"


@dataclass(frozen=True)
class KernelChoice:
    """One selectable kernel: `--kernel NAME`."""

    name: str          # "6.1", "6.12", "7.3"
    suites: tuple      # ((mirror key, suite), ...)
    source_pkg: str    # Debian package with the kernel source, for --debug-kernel
    profile: str       # the engine's [kernel] version whose features match


KERNELS = {
    "6.1": KernelChoice("6.1", (("main", "bookworm"), ("security", "bookworm-security")), "linux-source-6.1", "6.1"),
    "6.12": KernelChoice("6.12", (("main", "bookworm-backports"),), "linux-source-6.12", "6.12"),
    "7.3": KernelChoice("7.3", (("main", "trixie-backports"),), "linux-source-7.3", "7.3"),
}


def choice(name: str) -> KernelChoice:
    try:
        return KERNELS[name]
    except KeyError:
        raise RealKernelError(f"unknown kernel {name!r}; choose one of {', '.join(KERNELS)}") from None


def cache_root() -> Path:
    """`.cache/realkernel` in the source tree (git-ignored), else ~/.cache/numasim/realkernel.
    NUMASIM_REALKERNEL_CACHE overrides both."""
    env = os.environ.get("NUMASIM_REALKERNEL_CACHE")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[3]
    if (repo / "Makefile").exists() and (repo / "python" / "numasim").is_dir():
        return repo / ".cache" / "realkernel"
    return Path.home() / ".cache" / "numasim" / "realkernel"


def system_mirrors() -> dict:
    """The Debian mirror URIs of the system's own sources ({"main": uri, "security": uri})."""
    found = {}
    paths = [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt/sources.list.d").glob("*"))
    for p in paths:
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        # deb822 stanzas
        for stanza in re.split(r"\n\s*\n", text):
            uris = re.findall(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.findall(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites:
                _note(found, uris[0], suites[0].split())
        # one-line format
        for m in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", text, re.M):
            _note(found, m.group(1), [m.group(2)])
    found.setdefault("main", DEFAULT_MIRROR)
    found.setdefault("security", DEFAULT_SECURITY_MIRROR)
    return found


def _note(found: dict, uri: str, suites: list) -> None:
    if "debian" not in uri:
        return
    if any(s.endswith("-security") for s in suites):
        found.setdefault("security", uri.rstrip("/"))
    elif any(s in ("bookworm", "trixie", "stable", "bookworm-updates") for s in suites):
        found.setdefault("main", uri.rstrip("/"))


class Apt:
    """apt-get / apt-cache with a private configuration for one kernel choice."""

    def __init__(self, kc: KernelChoice, root: Path, log=None):
        self.kc = kc
        self.dir = root / "apt" / kc.name
        self.log = log or (lambda msg: None)
        if shutil.which("apt-get") is None:
            raise RealKernelError("apt-get is not available: the VM backend fetches Debian kernels with it")

    def _opts(self) -> list:
        d = self.dir
        return [
            "-o", f"Dir::Etc::SourceList={d / 'sources.list'}",
            "-o", f"Dir::Etc::SourceParts={d / 'sources.list.d'}",
            "-o", f"Dir::State::Lists={d / 'lists'}",
            "-o", f"Dir::Cache={d / 'cache'}",
            "-o", "Dir::Etc::Preferences=/dev/null",
            "-o", f"Dir::Etc::PreferencesParts={d / 'preferences.d'}",
            "-o", "APT::Sandbox::User=root",
            "-o", "Acquire::Retries=3",
            "-o", "Debug::NoLocking=1",
        ]

    def setup(self) -> None:
        mirrors = system_mirrors()
        for sub in ("sources.list.d", "lists/partial", "cache/archives/partial", "preferences.d"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        lines = [f"deb [signed-by={KEYRING}] {mirrors[key]} {suite} main" for key, suite in self.kc.suites]
        (self.dir / "sources.list").write_text("\n".join(lines) + "\n")

    def run(self, *args, cwd=None, timeout=900) -> str:
        cmd = [args[0], *self._opts(), *args[1:]]
        try:
            p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RealKernelError(f"{' '.join(args)}: timed out after {timeout} s") from None
        if p.returncode != 0:
            err = (p.stderr or p.stdout).strip().splitlines()
            tail = "; ".join(err[-3:]) if err else f"exit {p.returncode}"
            raise RealKernelError(f"{' '.join(args)} failed: {tail}")
        return p.stdout

    def update(self) -> None:
        self.log(f"apt-get update ({', '.join(s for _, s in self.kc.suites)}) into {self.dir}")
        self.run("apt-get", "update", "-q")

    def candidate(self, pkg: str) -> str:
        out = self.run("apt-cache", "policy", pkg)
        m = re.search(r"Candidate:\s*(\S+)", out)
        if not m or m.group(1) == "(none)":
            raise RealKernelError(f"no candidate for {pkg} in {', '.join(s for _, s in self.kc.suites)}")
        return m.group(1)

    def depends(self, pkg: str) -> list:
        out = self.run("apt-cache", "depends", "--important", pkg)
        return re.findall(r"^\s*\|?(?:Pre)?Depends:\s*(\S+)", out, re.M)

    def download(self, pkg: str, dest: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        self.log(f"apt-get download {pkg}")
        self.run("apt-get", "download", "-q", pkg, cwd=dest)
        debs = sorted(dest.glob(f"{pkg}_*.deb"), key=lambda p: p.stat().st_mtime)
        if not debs:
            raise RealKernelError(f"apt-get download {pkg} produced no .deb in {dest}")
        return debs[-1]


def _find_vmlinuz(tree: Path):
    cands = list(tree.glob("boot/vmlinuz-*")) + list(tree.glob("usr/lib/modules/*/vmlinuz*"))
    cands += list(tree.glob("lib/modules/*/vmlinuz*"))
    return cands[0] if cands else None


def fetch_kernel(name: str, log=None, root: Path | None = None) -> dict:
    """Return {"vmlinuz": Path, "package": str, "version": str, "release": str} for kernel
    `name`, downloading it on first use (later calls reuse the cache without the network)."""
    kc = choice(name)
    root = root or cache_root()
    kdir = root / "kernels" / kc.name
    meta = kdir / "kernel.txt"
    if meta.exists():
        info = dict(line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line)
        if Path(info.get("vmlinuz", "")).exists():
            return {**info, "vmlinuz": Path(info["vmlinuz"])}
    log = log or (lambda msg: None)
    if shutil.which("dpkg") is None:
        raise RealKernelError("dpkg is not available (needed to unpack the kernel package)")
    try:
        return _download(kc, kdir, meta, root, log)
    except RealKernelError as exc:
        raise RealKernelError(f"could not download kernel {kc.name} ({', '.join(s for _, s in kc.suites)}): "
                              f"{exc.msg}") from None


def _download(kc: KernelChoice, kdir: Path, meta: Path, root: Path, log) -> dict:
    apt = Apt(kc, root, log)
    apt.setup()
    apt.update()
    # linux-image-amd64 (meta) -> linux-image-<abi>-amd64 -> (7.x) linux-binary-unsigned-<abi>
    pkg, seen = "linux-image-amd64", []
    debs = kdir / "debs"
    for _ in range(4):
        seen.append(pkg)
        version = apt.candidate(pkg)
        deb = apt.download(pkg, debs)
        tree = kdir / "tree" / pkg
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        subprocess.run(["dpkg", "-x", str(deb), str(tree)], check=True)
        vmlinuz = _find_vmlinuz(tree)
        if vmlinuz is not None:
            dest = kdir / "vmlinuz"
            shutil.copyfile(vmlinuz, dest)
            release = vmlinuz.name.replace("vmlinuz-", "") if vmlinuz.name.startswith("vmlinuz-") else vmlinuz.parent.name
            shutil.rmtree(kdir / "tree", ignore_errors=True)
            shutil.rmtree(debs, ignore_errors=True)  # only vmlinuz is kept
            info = {"vmlinuz": str(dest), "package": pkg, "version": version, "release": release}
            meta.write_text("".join(f"{k}={v}\n" for k, v in info.items()))
            log(f"kernel {kc.name}: {pkg} {version} ({release})")
            return {**info, "vmlinuz": dest}
        nxt = [d for d in apt.depends(pkg) if re.match(r"linux-(image|binary)-", d) and d not in seen]
        if not nxt:
            break
        pkg = nxt[0]
    raise RealKernelError(f"no vmlinuz found in {' -> '.join(seen)} (kernel {kc.name})")
