"""The VM runner simulated beside the workload (realkernel/sampler.py, the engine's `sampler`)."""

import numasim
from numasim.realkernel import bootdata, sampler, spec
from numasim.realkernel.validate import scenario_dict
from numasim.scenario import to_toml

RUNNER = {"cpu_s": 5.0, "sample_wall_s": 8.0, "mem_wall_s": 4.0, "task_wall_s": 0.0, "samples": 300}


def test_a_boots_runner_record_splits_its_cpu_time_by_wall_time():
    # 5 s of CPU over 12 s of work: 10/24 of each part's wall time; 30 reads of 1.5 GiB
    busy, per_gib = sampler.costs(RUNNER, 30.0, 1.5, 1.0)
    assert abs(busy - 8.0 * 5 / 12 / 300 * 1e3) < 1e-9
    assert abs(per_gib - 4.0 * 5 / 12 / 30 / 1.5 * 1e3) < 1e-9
    # without a record (older boots): the measured medians
    assert sampler.costs(None, 30.0, 1.5, 1.0) == (sampler.BUSY_MS, sampler.MAPS_MS_PER_GIB)


def test_the_sampler_samples_as_the_runner_does_and_the_vm_is_not_given_it():
    d = sampler.add(scenario_dict("two-processes-4k", "6.12"))
    w = d["workload"][-1]
    # two-processes-4k: vmstat every 500 ms, numa_maps every 10 s (spec.sample_intervals)
    assert (w["kind"], w["interval_s"], w["maps_interval_s"]) == ("sampler", 0.5, 10.0)
    resolved = numasim.resolve(to_toml(d))
    lines = spec.workload_lines(resolved)
    assert len(lines) == len(resolved["workloads"]) - 1 and not any(ln.startswith("sampler") for ln in lines)


def test_packed_boots_keep_the_runners_record():
    raw = {"counters": {}, "times": {"elapsed_s": 1.0}, "series": {}, "source": {"runner": RUNNER, "kind": "qemu"}}
    assert bootdata.trim(raw)["source"] == {"runner": RUNNER}


def test_the_sampler_moves_a_busy_scenario_but_is_not_measured():
    """numa01-thread-alloc-small-4k keeps all four vCPUs busy: the sampler's samples take CPU
    time from the workload (a longer run) but are not in its times' processes."""
    d = scenario_dict("numa01-thread-alloc-small-4k", "6.12")
    alone = numasim.run(to_toml(d))
    sampled = numasim.run(to_toml(sampler.add(d)))
    assert sampled.elapsed_s > alone.elapsed_s
    assert len(sampled.raw["processes"]) == len(alone.raw["processes"])
