"""Saved results are never silently wrong (issue 29): a damaged file in a group is an error
naming it (item 2); saves are atomic and a result's sidecars carry its run id (item 3);
Parquet is a dependency, and a save without pyarrow says what it skipped (item 4)."""

import json
import os
import shutil
from pathlib import Path

import pytest

import numasim
from conftest import SMALL_NUMA02, numasim_cli
from numasim import storage
from numasim.scenario import UsageError, tomllib

SERIES = {"run.placement_interval_ms": 100}  # results with every sidecar


@pytest.fixture(scope="module")
def runs():
    """Two different small runs (seeds 7 and 8)."""
    return [numasim.run(SMALL_NUMA02, seed=s, overrides=SERIES) for s in (7, 8)]


def _files(d: Path) -> list:
    return sorted(p.name for p in d.iterdir())


# ---------------------------------------------------------------- item 2


@pytest.mark.parametrize("damage", ["truncated", "binary"])
def test_damaged_result_in_a_group_is_an_error_naming_it(tmp_path, runs, damage):
    group = tmp_path / "on"
    storage.save_iterations(runs + runs[:1], group)
    bad = group / "iter-02.json"
    text = bad.read_bytes()
    bad.write_bytes(text[: len(text) // 2] if damage == "truncated" else b"\xff\xfe" + text[:100])
    with pytest.raises(UsageError, match="iter-02.json: not a numasim result"):
        storage.load_group(group)
    p = numasim_cli("compare", group)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith(f"error: {bad}: not a numasim result"), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_json_that_is_not_a_result_is_still_ignored(tmp_path, runs):
    storage.save_iterations(runs, tmp_path / "on")
    (tmp_path / "on" / "notes.json").write_text(json.dumps({"not": "a result"}))
    assert len(storage.load_group(tmp_path / "on")) == 2


# ---------------------------------------------------------------- item 3


def test_sidecars_record_the_run_id(tmp_path, runs):
    a, b = runs
    assert a.run_id != b.run_id and len(a.run_id) == 16
    written = storage.save_result(a, tmp_path / "r.json")
    assert [p.name for p in written] == ["r.json", "r.vmstat.parquet", "r.memory.parquet",
                                         "r.tasks.parquet", "r.placement.parquet"]
    for side in written[1:]:
        assert storage.sidecar_run_id(side) == a.run_id
    assert storage.load_result(tmp_path / "r.json").to_json() == a.to_json()


def test_sidecars_of_another_run_are_refused(tmp_path, runs):
    a, b = runs
    storage.save_result(a, tmp_path / "a.json")
    storage.save_result(b, tmp_path / "b.json")
    shutil.copy(tmp_path / "b.memory.parquet", tmp_path / "a.memory.parquet")
    with pytest.raises(UsageError, match=r"a\.memory\.parquet: belongs to run .*, not to a\.json"):
        storage.load_result(tmp_path / "a.json")
    with pytest.raises(UsageError, match="a.memory.parquet"):
        storage.read_sidecar(tmp_path / "a.json", "vmstat")
    p = numasim_cli("compare", tmp_path / "a.json")
    assert p.returncode == 2 and p.stderr.startswith(f"error: {tmp_path / 'a.memory.parquet'}: belongs to run")


def test_interrupted_save_keeps_the_old_files(tmp_path, runs, monkeypatch):
    """Ctrl-C while the second sidecar of the new run is written: the old run's JSON and
    sidecars are all still there, unchanged, and no temporary file is left behind."""
    import pyarrow.parquet as pq

    a, b = runs
    path = tmp_path / "r.json"
    storage.save_result(a, path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real, calls = pq.write_table, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(pq, "write_table", interrupted)
    with pytest.raises(KeyboardInterrupt):
        storage.save_result(b, path)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert storage.load_result(path).to_json() == a.to_json()


def test_interrupted_group_save_keeps_the_old_group(tmp_path, runs, monkeypatch):
    a, b = runs
    storage.save_iterations([a, a, a], tmp_path / "g")
    before = {p.name: p.read_bytes() for p in (tmp_path / "g").iterdir()}
    real = Path.write_text

    def interrupted(self, *args, **kwargs):
        if self.name.startswith(".iter-02.json"):
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        storage.save_iterations([b, b], tmp_path / "g")
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in (tmp_path / "g").iterdir()} == before
    assert [r.seed for _, r in storage.load_group(tmp_path / "g")] == [7, 7, 7]


def test_a_save_replaces_stale_sidecars(tmp_path, runs):
    """A result without the tasks/placement series (an older engine's) saved over one with
    them: the old sidecars go, they do not stay beside the new JSON."""
    from fake_results import fake_result

    storage.save_result(runs[0], tmp_path / "r.json")
    storage.save_result(fake_result(), tmp_path / "r.json")
    assert _files(tmp_path) == ["r.json", "r.memory.parquet", "r.vmstat.parquet"]
    storage.save_result(runs[0], tmp_path / "r.json", parquet=False)
    assert _files(tmp_path) == ["r.json"]


def test_result_save_is_atomic(tmp_path, runs, monkeypatch):
    a, b = runs
    a.save(tmp_path / "r.json")
    monkeypatch.setattr(os, "replace", lambda *x: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        b.save(tmp_path / "r.json")
    monkeypatch.undo()
    assert _files(tmp_path) == ["r.json"] and (tmp_path / "r.json").read_text() == a.to_json()


# ---------------------------------------------------------------- item 4


def test_pyarrow_is_a_dependency():
    meta = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    assert any(d.startswith("pyarrow") for d in meta["project"]["dependencies"])


def test_save_without_pyarrow_says_what_it_skipped(tmp_path, monkeypatch, capsys):
    from numasim import cli

    monkeypatch.setattr(storage, "have_parquet", lambda: False)
    assert cli.main(["run", str(SMALL_NUMA02), "--save", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"warning: pyarrow is not installed: saved {tmp_path / 'r.json'} without "
                          "the Parquet sidecars"), err
    assert _files(tmp_path) == ["r.json"]
    with pytest.warns(storage.ParquetSkippedWarning):
        storage.save_iterations([numasim.run(SMALL_NUMA02)], tmp_path / "g")
