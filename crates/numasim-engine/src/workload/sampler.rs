//! `sampler`: the process that measures a run (numaw's runner in the VM of `numasim
//! validate`): every `interval_s` it reads /proc (vmstat, interrupts, its threads' sched
//! files) and writes its lines, and every `maps_interval_s` it also reads the workload's
//! numa_maps, which walks every page table entry: its cost follows the pages mapped then. It is unpinned and takes a CPU while it
//! does so, so on a machine whose CPUs the workload keeps busy the load balancer sees an
//! extra task for that long. It runs in the background: the run ends when the other
//! workloads do, and its CPU time is not in the run's times.

use super::autonuma::{new_mm, new_task};
use super::Op;
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::scenario::raw::RawWorkload;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct SamplerSpec {
    pub kind: String,
    pub interval_s: f64,
    /// CPU time per sample, ms (system time: /proc reads and console writes).
    pub busy_ms: f64,
    /// CPU time of a numa_maps read per GiB the other processes map, ms, and how often it
    /// reads (0: never).
    pub maps_ms_per_gib: f64,
    pub maps_interval_s: f64,
    pub start_s: f64,
}

impl SamplerSpec {
    pub fn resolve(w: &RawWorkload, i: usize, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        super::reject_keys(w, i, &["interval_s", "busy_ms", "maps_ms_per_gib", "maps_interval_s", "start_s"], p);
        let start = p.len();
        let interval_s = w.interval_s.unwrap_or(0.1);
        let busy_ms = w.busy_ms.unwrap_or(0.0);
        let maps_ms_per_gib = w.maps_ms_per_gib.unwrap_or(0.0);
        let maps_interval_s = w.maps_interval_s.unwrap_or(0.0);
        let start_s = w.start_s.unwrap_or(0.0);
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        if !(0.001..=3600.0).contains(&interval_s) {
            bad("interval_s", format!("must be in [0.001, 3600] s, got {interval_s}"));
        }
        if !(0.0..1e6).contains(&start_s) {
            bad("start_s", format!("must be in [0, 1e6), got {start_s}"));
        }
        if !(busy_ms >= 0.0 && busy_ms < interval_s * 1000.0) {
            bad("busy_ms", format!("must be in [0, interval_s) = [0, {}) ms, got {busy_ms}", interval_s * 1000.0));
        }
        if maps_interval_s != 0.0 && !(maps_interval_s >= interval_s && maps_interval_s <= 3600.0) {
            bad("maps_interval_s", format!("0 (never) or in [interval_s, 3600] s, got {maps_interval_s}"));
        }
        if !(0.0..1e4).contains(&maps_ms_per_gib) {
            bad("maps_ms_per_gib", format!("must be in [0, 10000) ms, got {maps_ms_per_gib}"));
        }
        (p.len() == start).then(|| SamplerSpec { kind: w.kind.clone(), interval_s, busy_ms, maps_ms_per_gib, maps_interval_s, start_s })
    }

    pub fn build(&self, k: &mut Kernel, index: usize) {
        let mm = new_mm(k, "numaw", 1);
        k.mms[mm].background = true;
        let maps_every = if self.maps_interval_s > 0.0 { (self.maps_interval_s / self.interval_s).round().max(1.0) as u32 } else { 0 };
        let op = Op::Sample { interval_ns: (self.interval_s * 1e9) as u64, busy_ns: (self.busy_ms * 1e6) as u64, maps_every, maps_ns_per_gib: (self.maps_ms_per_gib * 1e6) as u64 };
        // it starts the workloads and sleeps: it takes a CPU first at its first sample
        let t = new_task(k, mm, "numaw", index, vec![op], None, ((self.start_s + self.interval_s) * 1e9) as u64);
        k.tasks[t].background = true;
    }
}

impl Kernel {
    /// One step of the sampler's loop with `b` ns of its tick left: begin the sample due, run
    /// it (system time), and once it is done sleep until the next one. True when it sleeps.
    pub(crate) fn sampler_step(&mut self, t: usize, op: Op, b: &mut f64) -> bool {
        let Op::Sample { interval_ns, busy_ns, maps_every, maps_ns_per_gib } = op else { return false };
        let tick = self.tick_ns as f64;
        let p = &mut self.tasks[t];
        if p.busy_left_ns <= 0.0 {
            let n = p.samples_begun;
            let maps = if maps_every > 0 && n.is_multiple_of(maps_every as u64) { maps_ns_per_gib as f64 * self.measured_gib(t) } else { 0.0 };
            let p = &mut self.tasks[t];
            p.samples_begun += 1;
            p.busy_left_ns = busy_ns as f64 + maps;
        }
        let p = &mut self.tasks[t];
        let run = p.busy_left_ns.min(*b);
        p.sys_ns += run;
        p.busy_left_ns -= run;
        *b -= run;
        if p.busy_left_ns > 0.0 {
            return false;
        }
        // the next sample: the next multiple of the interval after the last one began
        let next = p.start_ns + p.samples_begun * interval_ns;
        let now = self.now + (tick - *b) as u64;
        p.wake_at = Some(next.max(now + 1));
        self.task_sleep(t);
        true
    }

    /// GiB of memory the processes other than the sampler's map now (numa_maps walks it all).
    fn measured_gib(&self, t: usize) -> f64 {
        let own = self.tasks[t].mm;
        let pages: u64 = self.mms.iter().enumerate().filter(|&(m, mm)| m != own && mm.users > 0).map(|(_, mm)| mm.node_pages.iter().sum::<u64>()).sum();
        pages as f64 / (1u64 << 18) as f64
    }
}
