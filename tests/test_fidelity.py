"""The real-kernel boots shipped as data (validation/results/, realkernel/bootdata.py): the data
file, its errors, and the trimming of a VM result to what compare.py reads."""

import json

import pytest

from numasim.realkernel import bootdata
from numasim.realkernel import compare as cmpmod
from numasim.realkernel import pacing
from numasim.realkernel.kernels import KERNELS
from numasim.realkernel.validate import shipped
from numasim.scenario import UsageError


# ---------------------------------------------------------------- shipped boots


def test_shipped_boots_load_and_name_shipped_scenarios_and_known_kernels():
    boots = bootdata.load()
    assert len(boots) >= 20
    names = set(shipped())
    for b in boots:
        assert b["scenario"] in names and b["kernel"] in KERNELS
        assert b["vm_kernel"].startswith(b["kernel"] + ".")
        assert bootdata.stale(b) == [], f"{b['scenario']} {b['boot']}: the shipped scenario changed since the boot"
    assert {b["kernel"] for b in boots} == {"6.1", "6.12"}
    assert sum(bootdata.results_dir().joinpath(f).stat().st_size
               for f in {b["file"] for b in boots}) < 200_000  # kilobytes, not a dump of the runs


def _write(tmp_path, data):
    p = tmp_path / "boots.json"
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return p


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.pop("format"), "not a numasim boots file"),
    (lambda d: d.update(boots=[]), "no \"boots\" list"),
    (lambda d: d["boots"][0].pop("calibration"), "boot 1 lacks calibration"),
    (lambda d: d["boots"][1].update(scenario="nope-4k"), "no shipped validation scenario 'nope-4k'"),
    (lambda d: d["boots"][0].update(kernel="5.4"), "unknown kernel '5.4'"),
    (lambda d: d["boots"][0]["calibration"].pop("stream_0_0"), "has no stream_0_0"),
    (lambda d: d["boots"][0]["vm"]["times"].pop("elapsed_s"), "needs counters and times.elapsed_s"),
    (lambda d: d["boots"][0]["vm"]["series"]["vmstat"]["time_s"].pop(), "vmstat series differ in length"),
])
def test_a_malformed_boots_file_is_a_clear_error(tmp_path, mutate, needle):
    data = json.loads(sorted(bootdata.results_dir().glob("*.json"))[0].read_text())
    mutate(data)
    with pytest.raises(UsageError, match="boots.json: .*" + needle.replace("(", r"\(").replace(")", r"\)")):
        bootdata.load([_write(tmp_path, data)])
    with pytest.raises(UsageError, match="boots.json: not JSON"):
        bootdata.load([_write(tmp_path, "{")])


def test_thin_drops_only_repeats_of_repeats():
    s = {"time_s": [1, 2, 3, 4, 5, 6, 7], "a": [0, 5, 5, 5, 5, 9, 9], "b": [0, 1, 1, 1, 1, 1, 1]}
    assert bootdata.thin(s) == {"time_s": [1, 2, 3, 6, 7], "a": [0, 5, 5, 9, 9], "b": [0, 1, 1, 1, 1]}


def test_trimmed_result_gives_the_same_metrics():
    """A result cut down as the shipped boots are gives the numeric metrics compare.py and
    pacing.py compute from the whole, at any horizon (a small numa02 sampled every 5 ms: two
    scan passes, long runs of repeated samples between them)."""
    import numasim
    from conftest import SMALL_NUMA02
    from numasim.scenario import apply_overrides, load_scenario, to_toml

    d = apply_overrides(load_scenario(SMALL_NUMA02), [("run.sample_interval_ms", 5), ("workload.passes", 60)])
    full = numasim.run(to_toml(d))
    trimmed = bootdata.vm_result({"vm": bootdata.trim(full.raw)})
    times = full.raw["series"]["vmstat"]["time_s"]
    assert len(trimmed.raw["series"]["vmstat"]["time_s"]) < len(times) / 4

    def numeric(m):
        return {k: v for k, v in m.items() if isinstance(v, (int, float)) and not k.startswith(("move", "swap", "stick"))}

    assert numeric(cmpmod.metrics(trimmed)) == numeric(cmpmod.metrics(full))
    assert cmpmod.metrics(full)["scan_windows"] == 2
    for t in [*times, *(x + 0.0025 for x in times)]:
        f, k = pacing.metrics(full, t), pacing.metrics(trimmed, t)
        for name in ("scan_passes", "numa_pte_updates_per_pass", "numa_hint_faults_per_pass"):
            assert k.get(name) == f.get(name), (t, name)
    for name in ("numa_pte_updates", "numa_hint_faults"):
        assert [pacing.count_at(trimmed, name, t) for t in times] == [pacing.count_at(full, name, t) for t in times]
