//! numasim-engine: a deterministic simulation of Linux automatic NUMA balancing.
//!
//! Modules follow the kernel's own split: `mm` (mm/), `sched` (kernel/sched/), `arch::x86`
//! (arch/x86/mm/tlb.c). The engine has no I/O, no wall clock and no threads.

pub mod arch;
pub mod cost;
pub mod error;
pub mod features;
pub mod invariants;
pub mod kernel;
pub mod kernels;
pub mod kvm;
pub mod membw;
pub mod mm;
pub mod result;
pub mod scenario;
pub mod sched;
pub mod sim;
pub mod simulation;
#[cfg(test)]
pub mod testutil;
pub mod topology;
pub mod trace;
pub mod tracepoints;
pub mod variants;
pub mod vmstat;
pub mod workload;

pub use error::{Error, Result, ScenarioProblem};
pub use result::RunResult;
pub use scenario::{parse_scenario, Scenario};
pub use simulation::{run, Simulation};

/// Host memory the simulation of `s` will need, estimated before anything is allocated.
pub fn estimate_host_bytes(s: &Scenario) -> u64 {
    let pages: u64 = s.workloads.iter().map(|w| w.footprint_pages()).sum();
    let per_page: u64 = s.workloads.iter().map(|w| w.footprint_pages() * w.host_bytes_per_page()).sum();
    // page state + block summaries + tasks + time series (bounded by max_sim_s)
    let samples = (s.run.max_sim_s * 1000.0 / s.run.sample_interval_ms as f64) as u64;
    let placements = if s.run.placement_interval_ms == 0 { 0 } else { (s.run.max_sim_s * 1000.0 / s.run.placement_interval_ms as f64) as u64 };
    (64 << 20) + per_page + pages / 512 * 32 + samples * (vmstat::NR_VM_EVENTS as u64 * 8 + 64) + placements * 8192
}

/// Parse, check the host can hold it, and build the simulation (nothing has run yet).
pub fn prepare_toml(text: &str, host_memory_bytes: Option<u64>) -> Result<Simulation> {
    let s = parse_scenario(text)?;
    if let Some(avail) = host_memory_bytes {
        let need = estimate_host_bytes(&s);
        if need > avail {
            return Err(Error::Capacity { needed: need, available: avail });
        }
    }
    Simulation::new(&s)
}

/// Parse, check the host can hold it, run, and return the result as JSON text.
pub fn run_toml(text: &str, host_memory_bytes: Option<u64>) -> Result<String> {
    let r = prepare_toml(text, host_memory_bytes)?.finish()?;
    Ok(r.to_json().to_string())
}
