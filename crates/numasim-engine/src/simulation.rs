//! The event loop: one scheduler tick at a time, every CPU runs its task for the tick.

use crate::error::{Error, Result};
use crate::invariants;
use crate::kernel::Kernel;
use crate::result::{RunResult, Samples};
use crate::scenario::Scenario;
use crate::sched::task::TaskState;
use crate::sim::rng::Rng;

/// RNG stream ids: one per purpose, so adding draws in one never shifts another.
const RNG_WORKLOAD: u64 = 1;

pub struct Simulation {
    pub k: Kernel,
    scenario: Scenario,
    tick_no: u64,
    max_ns: u64,
    sample_ns: u64,
    next_sample: u64,
    placement_ns: u64,
    next_placement: u64,
    samples: Samples,
    done: bool,
}

impl Simulation {
    pub fn new(s: &Scenario) -> Result<Self> {
        let mut k = Kernel::new(s);
        let mut rng = Rng::new(s.seed, RNG_WORKLOAD);
        for (i, w) in s.workloads.iter().enumerate() {
            let first_mm = k.mms.len();
            k.image_preset = s.images[i];
            w.build(&mut k, i, &mut rng);
            for mm in first_mm..k.mms.len() {
                k.map_image_high(mm);
            }
        }
        let sample_ns = s.run.sample_interval_ms * 1_000_000;
        let placement_ns = s.run.placement_interval_ms * 1_000_000;
        let mut sim = Simulation {
            k,
            scenario: s.clone(),
            tick_no: 0,
            max_ns: (s.run.max_sim_s * 1e9) as u64,
            sample_ns,
            next_sample: sample_ns,
            placement_ns,
            next_placement: placement_ns,
            samples: Samples::default(),
            done: false,
        };
        sim.samples.record(&sim.k);
        Ok(sim)
    }

    pub fn now_s(&self) -> f64 {
        self.k.now as f64 / 1e9
    }

    /// (simulated ns, time limit ns, NUMA events so far: PTE updates + hint faults + pages
    /// migrated + TLB-shootdown IPIs), for a progress display.
    pub fn progress(&self) -> (u64, u64, u64) {
        use crate::vmstat::VmEvent::*;
        let v = &self.k.vmstat;
        let ipis: u64 = self.k.irq_tlb_count.iter().sum();
        (self.k.now, self.max_ns, v.get(NumaPteUpdates) + v.get(NumaHintFaults) + v.get(PgmigrateSuccess) + ipis)
    }

    /// Fraction of the workloads' planned work done (workload/plan.rs), or of `run.max_sim_s`
    /// if that is further: how far the run is, for a progress display.
    pub fn fraction_done(&self) -> f64 {
        let by_time = if self.max_ns > 0 { self.k.now as f64 / self.max_ns as f64 } else { 1.0 };
        let f = if self.done { 1.0 } else { self.k.work_done().max(by_time) };
        f.clamp(0.0, 1.0)
    }

    pub fn finished(&self) -> bool {
        self.done
    }

    /// Run one tick; returns false once every task has exited or the time limit is reached.
    pub fn step(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let k = &mut self.k;
        let roots: Vec<usize> = (0..k.tasks.len()).filter(|&t| k.tasks[t].state == TaskState::NotStarted && k.tasks[t].parent.is_none() && k.tasks[t].start_ns <= k.now).collect();
        for t in roots {
            k.wake_up_new_task(t);
        }
        for cpu in 0..k.cpus.len() {
            let next = k.cpus[cpu].curr().map(|t| k.tasks[t].mm);
            k.switch_mm(cpu, next);
        }
        k.update_page_costs();
        k.update_host_steal();
        k.collect_sampler_threads();
        k.numa_scan_window_race();
        k.run_numa_task_work();
        k.run_tasks();
        if let Some(detail) = k.oom.take() {
            return Err(Error::OutOfMemory { at_s: k.now as f64 / 1e9, detail });
        }
        if let Some(detail) = k.not_modelled.take() {
            return Err(Error::NotModelled { at_s: k.now as f64 / 1e9, detail });
        }
        self.tick_no += 1;
        k.run_kswapds();
        k.scheduler_tick(self.tick_no);
        let spawned = std::mem::take(&mut k.spawned);
        k.wake_up_new_tasks(spawned);
        for t in std::mem::take(&mut k.displaced) {
            let node = (0..k.topo.nr_nodes).find(|&n| k.topo.node_cpus[n].iter().any(|&c| k.tasks[t].allowed[c])).unwrap_or(0);
            let cpu = k.topo.node_cpus[node].iter().copied().filter(|&c| k.tasks[t].allowed[c]).min_by_key(|&c| (k.cpus[c].rq.len(), c)).unwrap_or(0);
            k.move_task(t, cpu);
        }
        let next_tick = k.now + k.tick_ns;
        let sleepers: Vec<usize> = (0..k.tasks.len())
            .filter(|&t| {
                let p = &k.tasks[t];
                p.state == TaskState::Sleeping
                    && (p.kill_at.is_some_and(|at| at <= next_tick) // a SIGKILL wakes it to exit
                        || match p.wake_at {
                            Some(at) => at <= next_tick,
                            None => p.children.iter().all(|&c| k.tasks[c].state == TaskState::Exited),
                        })
            })
            .collect();
        for t in sleepers {
            k.tasks[t].wake_at = None;
            k.wake_up_process(t);
        }
        for mm in 0..k.mms.len() {
            if !k.mms[mm].exited && k.mms[mm].users == 0 && k.tasks.iter().all(|t| t.mm != mm || t.state == TaskState::Exited) {
                invariants::check_mm(k, mm)?;
                k.exit_mmap(mm);
            }
        }
        k.now += k.tick_ns;
        // the run is over when every task but the background ones (the sampler) has exited
        let all_exited = k.tasks.iter().all(|t| t.background || t.state == TaskState::Exited);
        if k.now >= self.next_sample || all_exited {
            invariants::check_counters(k)?;
            self.samples.record(k);
            self.next_sample = (k.now / self.sample_ns + 1) * self.sample_ns;
            if self.placement_ns > 0 && (k.now >= self.next_placement || all_exited) {
                self.samples.record_placement(k);
                self.next_placement = (k.now / self.placement_ns + 1) * self.placement_ns;
            }
        }
        if all_exited || k.now >= self.max_ns {
            self.done = true;
            return Ok(false);
        }
        Ok(true)
    }

    /// Run until simulated time `t_ns` or the end; returns false once finished.
    pub fn step_until(&mut self, t_ns: u64) -> Result<bool> {
        while self.k.now < t_ns {
            if !self.step()? {
                return Ok(false);
            }
        }
        Ok(!self.done)
    }

    pub fn finish(mut self) -> Result<RunResult> {
        while self.step()? {}
        // a run cut off at max_sim_s: its running tasks' last clock reads
        for t in 0..self.k.tasks.len() {
            if self.k.tasks[t].state != TaskState::Exited {
                self.k.settle_clock_reads(t);
            }
        }
        let completed = self.k.tasks.iter().all(|t| t.background || t.state == TaskState::Exited);
        Ok(RunResult::collect(&self.scenario, &self.k, self.samples, completed, self.tick_no))
    }
}

/// Run a scenario to the end.
pub fn run(s: &Scenario) -> Result<RunResult> {
    Simulation::new(s)?.finish()
}

impl Kernel {
    /// Process exit: every page goes back to its node.
    // kernel/fork.c: mmput -> exit_mmap
    pub fn exit_mmap(&mut self, mm: usize) {
        let mut freed = vec![0u64; self.topo.nr_nodes];
        let mut files = Vec::new();
        // folios shared copy-on-write since a fork: (vma, share, page)
        let mut shared = Vec::new();
        for (vi, v) in self.mms[mm].vmas.iter_mut().enumerate() {
            let mut cow_nodes = [0u64; crate::topology::MAX_NODES];
            if let Some(file) = v.cow {
                for idx in (0..v.pt.len()).filter(|&i| v.pt.populated(i) && v.pt.cow(i)) {
                    cow_nodes[v.pt.nid(idx) as usize] += 1;
                    shared.push((vi, file, idx));
                }
            }
            let unmapped = v.pt.unmap_all();
            match v.shmem {
                // a shared mapping's pages stay with its file
                Some(file) => files.push(file),
                // a folio shared since a fork is its share's to free
                None => freed.iter_mut().zip(unmapped).zip(cow_nodes).for_each(|((f, g), c)| *f += g - c),
            }
        }
        self.mms[mm].exited = true;
        for file in files {
            freed.iter_mut().zip(self.shmem_unmap(file)).for_each(|(f, g)| *f += g);
        }
        let cow_freed = self.cow_exit(&shared);
        freed.iter_mut().zip(cow_freed).for_each(|(f, g)| *f += g);
        for (n, &f) in freed.iter().enumerate() {
            self.nodes[n].used -= f;
            self.count(crate::vmstat::VmEvent::Pgfree, f);
        }
        self.drop_mm_from_cpus(mm);
        if let Some(s) = self.mms[mm].sampler.take() {
            // the process is gone: free its distribution and pending events, keep its histogram
            let hist = self.samplers[s].latency_hist;
            self.samplers[s] = crate::workload::random::AccessSampler::new(mm, usize::MAX, Vec::new().into(), 0.0, 0.0, crate::sim::rng::Rng::new(0, 0));
            self.samplers[s].latency_hist = hist;
        }
        let m = &mut self.mms[mm];
        m.node_pages = [0; crate::topology::MAX_NODES];
        m.shared_pages = [0; crate::topology::MAX_NODES];
    }
}
