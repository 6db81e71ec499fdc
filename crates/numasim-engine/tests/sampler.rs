//! The `sampler` workload (workload/sampler.rs): the process that measures a run, beside it.

use numasim_engine::{parse_scenario, run, RunResult};

/// Two threads, one per CPU of a 2-CPU machine, each rewriting its own 64 MiB 40 times, with
/// balancing off; and, when `sampler` is given, a sampler with those keys beside them.
fn busy_machine(sampler: &str) -> RunResult {
    let text = format!(
        "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 1\nsmt = 1\nmemory_gib_per_node = 2\n\
         [kernel]\nnuma_balancing = false\n\
         [[workload]]\nkind = \"program\"\n[[workload.buffer]]\nsize_mib = 128\n\
         [[workload.process]]\n\
         [[workload.process.thread]]\ncpus = [0]\nops = [{{ op = \"store\", size_mib = 64, passes = 40 }}]\n\
         [[workload.process.thread]]\ncpus = [1]\nops = [{{ op = \"store\", offset_mib = 64, size_mib = 64, passes = 40 }}]\n{sampler}"
    );
    run(&parse_scenario(&text).expect("scenario parses")).expect("run succeeds")
}

/// The run ends when the workload does, though the sampler never exits, and is complete; its
/// CPU time is not the workload's, but it takes it from the workload's CPUs: on a machine the
/// workload keeps busy, a sampler busy 20 of every 100 ms stretches the run by about a tenth
/// (0.2 CPU more demand on 2 CPUs), and it is not counted as a process of the run.
#[test]
fn a_sampler_takes_cpu_time_from_a_busy_machine_and_is_not_measured() {
    let alone = busy_machine("");
    let sampled = busy_machine("[[workload]]\nkind = \"sampler\"\ninterval_s = 0.1\nbusy_ms = 20.0\n");
    assert!(alone.completed && sampled.completed, "both runs finish");
    assert_eq!(sampled.processes.len(), alone.processes.len(), "the sampler is not a measured process");
    let stretch = sampled.elapsed_s / alone.elapsed_s;
    assert!((1.05..1.15).contains(&stretch), "elapsed {:.3} s against {:.3} s: x{stretch:.3}, about x1.1 expected", sampled.elapsed_s, alone.elapsed_s);
    assert!((sampled.system_s - alone.system_s).abs() < 0.05 * alone.system_s.max(0.1), "its system time is not the workload's: {} against {}", sampled.system_s, alone.system_s);
}

/// A numa_maps read costs per GiB the other processes map: with 128 MiB mapped, 1000 ms per
/// GiB every sample is 125 ms of work a 200 ms interval, as much as a fixed 125 ms.
#[test]
fn a_numa_maps_read_costs_by_the_memory_mapped() {
    let fixed = busy_machine("[[workload]]\nkind = \"sampler\"\ninterval_s = 0.2\nbusy_ms = 125.0\n");
    let maps = busy_machine("[[workload]]\nkind = \"sampler\"\ninterval_s = 0.2\nmaps_ms_per_gib = 1000.0\nmaps_interval_s = 0.2\n");
    let none = busy_machine("");
    assert!(maps.elapsed_s > none.elapsed_s * 1.2, "the reads take CPU from the workload: {} against {}", maps.elapsed_s, none.elapsed_s);
    assert!((maps.elapsed_s / fixed.elapsed_s - 1.0).abs() < 0.05, "{} against {}", maps.elapsed_s, fixed.elapsed_s);
}

/// Bad keys are errors at their place.
#[test]
fn sampler_keys_are_checked() {
    for (keys, at) in [("busy_ms = 100.0\ninterval_s = 0.1", "busy_ms"), ("maps_interval_s = 0.05\ninterval_s = 0.1", "maps_interval_s"), ("size_mib = 4", "size_mib")] {
        let e = parse_scenario(&format!("[[workload]]\nkind = \"sampler\"\n{keys}\n")).unwrap_err().to_string();
        assert!(e.contains(&format!("workload[0].{at}")), "{keys}: {e}");
    }
}
