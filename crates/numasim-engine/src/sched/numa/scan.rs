//! The PTE scanner's trigger and windows (kernel/sched/fair.c, spec §1.2-1.4): which thread
//! scans when, and how far one window goes (the per-VMA rules are in scan_vma.rs, the period in
//! scan_period.rs).

use super::scan_period::NSEC_PER_MSEC;
use super::scan_vma::{NumaVmaSkip, VmaGate};
use crate::kernel::Kernel;
use crate::variants::{NewThreadScan, ScanBudget, VmaScanRules};

impl Kernel {
    /// Set up a new task's NUMA fields at fork/clone (spec §1.2), before the task counts as a
    /// user of its mm. sched_fork runs while the child still points at its parent's mm, so the
    /// parent's first clone or fork (mm_users == 1) restarts that mm's scanning: a scan delay
    /// from now, numa_scan_seq 0. A workload's first task is an exec'd program, whose mm
    /// mm_alloc zeroed: numa_next_scan 0, so its first task_numa_work only arms the delay.
    /// Since 4.20 a new thread's node_stamp is staggered, so its first tick-triggered scan keeps
    /// the scan delay as its period; before, node_stamp 0 made that first trigger set
    /// task_scan_start.
    // kernel/sched/fair.c: init_numa_balancing (137844759843, 4.20; __sched_fork before);
    // kernel/fork.c: mm_alloc
    pub fn init_numa_balancing(&mut self, t: usize, parent: Option<usize>) {
        let delay = self.cfg.sysctl.numa_balancing_scan_delay_ms;
        let mm = self.tasks[t].mm;
        let users_mm = parent.map_or(mm, |p| self.tasks[p].mm);
        if parent.is_none() {
            self.mms[mm].numa_next_scan = 0;
            self.mms[mm].numa_scan_seq = 0;
        } else if self.mms[users_mm].users == 1 {
            self.mms[users_mm].numa_next_scan = self.now + delay as u64 * NSEC_PER_MSEC;
            self.mms[users_mm].numa_scan_seq = 0;
        }
        let same_mm = parent.filter(|&p| self.tasks[p].mm == mm);
        let stagger = self.variants().new_thread_scan >= NewThreadScan::V4_20;
        let node_stamp = match same_mm.filter(|_| stagger) {
            // the source compares a ms value with ns in 32-bit min_t: reproduce the code
            Some(p) => {
                let a = self.task_scan_max(p);
                let b = (self.tasks[p].numa.scan_period as u64 * self.mms[mm].users as u64 * NSEC_PER_MSEC) as u32;
                a.min(b) as u64 + 2 * self.tick_ns
            }
            None => 0,
        };
        let preferred = same_mm.and_then(|p| self.tasks[p].numa.preferred_nid);
        let seq = self.mms[mm].numa_scan_seq;
        let n = &mut self.tasks[t].numa;
        *n = Default::default();
        n.node_stamp = node_stamp;
        n.scan_seq = seq;
        n.scan_period = delay;
        n.preferred_nid = preferred;
    }

    /// Scheduler tick: queue task_numa_work once the task used a scan period of CPU time.
    // kernel/sched/fair.c: task_tick_numa
    pub fn task_tick_numa(&mut self, t: usize) {
        let p = &self.tasks[t];
        if !self.numa_balancing() || p.numa.work_pending || !p.runnable() {
            return;
        }
        let now = p.sum_exec_runtime;
        let period = p.numa.scan_period as u64 * NSEC_PER_MSEC;
        if now > p.numa.node_stamp + period {
            if p.numa.node_stamp == 0 {
                self.tasks[t].numa.scan_period = self.task_scan_start(t);
            }
            self.tasks[t].numa.node_stamp += period;
            if self.now >= self.mms[self.tasks[t].mm].numa_next_scan {
                self.tasks[t].numa.work_pending = true;
            }
        }
    }

    /// Threads of one mm whose task work is pending race for its scan window: the first to
    /// reach the cmpxchg on numa_next_scan scans, the others return early. CPUs take the tick
    /// together and return to user space in no set order, so the winner is any of them; the
    /// losers' work is dropped (it would find numa_next_scan moved on, with no side effect).
    // kernel/sched/fair.c: task_numa_work (try_cmpxchg on mm->numa_next_scan)
    pub fn numa_scan_window_race(&mut self) {
        let mut pending: Vec<(usize, usize)> = (0..self.cpus.len())
            .filter_map(|c| self.cpus[c].curr())
            .filter(|&t| self.tasks[t].numa.work_pending && self.now >= self.mms[self.tasks[t].mm].numa_next_scan)
            .map(|t| (self.tasks[t].mm, t))
            .collect();
        if pending.len() < 2 {
            return;
        }
        pending.sort_unstable();
        for group in pending.chunk_by(|a, b| a.0 == b.0).filter(|g| g.len() > 1) {
            let winner = (self.sched_rng.next_u64() % group.len() as u64) as usize;
            for (i, &(_, t)) in group.iter().enumerate() {
                if i != winner {
                    self.tasks[t].numa.work_pending = false;
                }
            }
        }
    }

    /// A pass is complete: the next window starts at the first VMA, and faults from `at` on
    /// (ns) belong to the next pass.
    // kernel/sched/fair.c: reset_ptenuma_scan
    fn reset_ptenuma_scan(&mut self, mm: usize, at: u64) {
        let m = &mut self.mms[mm];
        m.numa_scan_seq = m.numa_scan_seq.wrapping_add(1);
        m.numa_scan_seq_at = at;
        m.numa_scan_offset = 0;
    }

    /// mm->numa_scan_seq as a thread faulting now reads it: task_numa_work bumps it where the
    /// window ends, after its PTE walk and flushes, while the mm's other threads run on and
    /// fault on the PTEs it has already changed (their faults still count in the old pass).
    pub fn numa_scan_seq_seen(&self, mm: usize) -> u32 {
        let m = &self.mms[mm];
        if self.clock < m.numa_scan_seq_at {
            m.numa_scan_seq.wrapping_sub(1)
        } else {
            m.numa_scan_seq
        }
    }

    /// The instant the scanning thread, which runs after `debts` ns of kernel work at the start
    /// of its tick, has done `work` ns more: each tick's first `host_steal_ns` go to the host.
    fn scan_end_clock(&self, debts: f64, work: f64) -> u64 {
        let tick = self.tick_ns as f64;
        self.wall_clock_after(self.now as f64 + self.host_steal_ns, tick - self.host_steal_ns, debts + work) as u64
    }

    /// The sum_exec_runtime that `work` ns of kernel work add (task_numa_work's `runtime`
    /// difference): the work, and in a TCG guest (`machine.host_cores`) the host's turns to
    /// other vCPUs meanwhile, which the engine counts as runtime as the guest does (it has no
    /// steal clock; run_task_begin).
    pub fn runtime_of_kernel_work(&self, work: f64) -> f64 {
        if self.host_steal_ns <= 0.0 {
            return work;
        }
        let tick = self.tick_ns as f64;
        work * tick / (tick - self.host_steal_ns)
    }

    /// One scan window: protect up to scan_size of resident pages (spec §1.4), with the
    /// release's budget (`scan_budget`) and per-VMA rules (`vma_scan_rules`). Returns sys ns.
    // kernel/sched/fair.c: task_numa_work
    pub fn task_numa_work(&mut self, t: usize) -> f64 {
        let mm = self.tasks[t].mm;
        let now = self.now;
        let delay = self.cfg.sysctl.numa_balancing_scan_delay_ms as u64 * NSEC_PER_MSEC;
        if self.mms[mm].numa_next_scan == 0 {
            self.mms[mm].numa_next_scan = now + delay;
        }
        if now < self.mms[mm].numa_next_scan {
            return 0.0;
        }
        if self.tasks[t].numa.scan_period == 0 {
            self.tasks[t].numa.scan_period_max = self.task_scan_max(t);
            self.tasks[t].numa.scan_period = self.task_scan_start(t);
        }
        // only one thread of the mm wins the window (cmpxchg on numa_next_scan)
        self.mms[mm].numa_next_scan = now + self.tasks[t].numa.scan_period as u64 * NSEC_PER_MSEC;
        let traced = self.trace_window_begin(t);
        let mut vmas = 0u32;
        self.tasks[t].numa.node_stamp += 2 * self.tick_ns;
        let budget = self.variants().scan_budget;
        let forced_retry = self.variants().vma_scan_rules >= VmaScanRules::V6_7;
        let mut pages = self.scan_pages() as i64;
        // 4620f8c1fda2 (4.3): at most 8 x scan_size of virtual space per window
        let mut virtpages = if budget >= ScanBudget::V4_3 { pages * 8 } else { i64::MAX };
        if pages == 0 {
            return 0.0;
        }
        let mut sys = 0.0;
        let mut updated = false;
        let mut pids_skipped = false;
        let mut pids_forced = false;
        let (stopped, mut start) = 'retry: loop {
            let mut start = self.mms[mm].numa_scan_offset;
            let mut vi = match self.mms[mm].vmas.iter().position(|v| v.end() > start) {
                Some(i) => i,
                None => {
                    self.reset_ptenuma_scan(mm, self.clock);
                    start = 0;
                    0
                }
            };
            while vi < self.mms[mm].vmas.len() {
                let gate = match self.vma_suitable(t, vi) {
                    VmaGate::Scan => self.vma_numab_gate(t, vi, pids_forced),
                    skip => skip,
                };
                if let VmaGate::Skip(why) = gate {
                    pids_skipped |= why == NumaVmaSkip::PidInactive;
                    vi += 1;
                    continue;
                }
                let (vstart, vend) = (self.mms[mm].vmas[vi].start, self.mms[mm].vmas[vi].end());
                vmas += 1;
                loop {
                    start = start.max(vstart);
                    let end = (start + pages as u64).div_ceil(512).saturating_mul(512).min(vend);
                    let (n, cost) = self.change_prot_numa(t, vi, start - vstart, end - vstart);
                    sys += cost;
                    // before 4.3 every chunk after the first update counts; since, only the
                    // chunks that updated a PTE, and every chunk against virtpages
                    updated = n > 0 || (updated && budget == ScanBudget::Base);
                    if updated {
                        pages -= (end - start) as i64;
                    }
                    virtpages -= (end - start) as i64;
                    start = end;
                    if pages <= 0 || virtpages <= 0 {
                        break 'retry (true, start);
                    }
                    if end >= vend {
                        break;
                    }
                }
                if forced_retry {
                    let seq = self.mms[mm].numa_scan_seq;
                    if let Some(ns) = self.mms[mm].vmas[vi].numab.as_mut() {
                        ns.prev_scan_seq = seq;
                    }
                }
                if pids_forced {
                    break 'retry (true, start);
                }
                vi += 1;
            }
            // f169c62ff7cd (6.7): budget left and VMAs refused by the PID filter: scan one of them
            if forced_retry && !pids_forced && pids_skipped {
                pids_forced = true;
                continue;
            }
            break (false, start);
        };
        let end_at = self.scan_end_clock(self.clock.saturating_sub(now) as f64, sys);
        if stopped {
            self.mms[mm].numa_scan_offset = start;
        } else {
            self.reset_ptenuma_scan(mm, end_at);
            start = 0;
        }
        let _ = start;
        // inc/dec_tlb_flush_pending around each change_protection: the window's walk and flush
        self.mms[mm].tlb_flush_pending = (self.clock, self.clock + sys as u64);
        if let Some(w) = traced {
            self.trace_window_end(w, end_at, vmas);
        }
        // 51170840fe91 (4.5): node_stamp += 32 * the runtime spent here caps scanning at ~3%
        if budget >= ScanBudget::V4_5 {
            self.tasks[t].numa.node_stamp += 32 * self.runtime_of_kernel_work(sys) as u64;
        }
        sys
    }
}

#[cfg(test)]
mod window_tests {
    use crate::testutil::{small_kernel, thread};
    use crate::vmstat::VmEvent;

    const SMALL_WINDOW: &str = "[kernel.sysctl]\nnuma_balancing_scan_size_mb = 16";

    /// kernel/sched/fair.c: task_numa_work — one window protects at most scan_size of resident
    /// pages, saves its offset, and a completed pass bumps mm->numa_scan_seq (reset_ptenuma_scan).
    #[test]
    fn window_budget_offset_and_pass_count() {
        let mut k = small_kernel(SMALL_WINDOW);
        let t = thread(&k, 0);
        let resident = k.mms[0].rss();
        assert_eq!(resident, 16384, "the main thread touched the whole 64 MiB");
        for w in 1..=4u64 {
            k.mms[0].numa_next_scan = 1;
            k.task_numa_work(t);
            assert_eq!(k.vmstat.get(VmEvent::NumaPteUpdates), 4096 * w, "window {w}");
        }
        assert_eq!(k.mms[0].numa_scan_seq, 0);
        k.mms[0].numa_next_scan = 1;
        k.task_numa_work(t);
        assert_eq!(k.vmstat.get(VmEvent::NumaPteUpdates), 16384, "already PROT_NONE: skipped");
        assert!(k.mms[0].numa_scan_seq >= 1, "the pass wrapped");
        assert_eq!(k.vmstat.get(VmEvent::NrTlbLocalFlushAll), 4, "one flush per chunk that changed PTEs");
    }

    /// mm/mprotect.c: change_protection_range (inc/dec_tlb_flush_pending around the walk and
    /// its flush) — a window leaves the mm with a flush pending from the scan's start for as
    /// long as the scan takes; other threads' faults in that time see PROT_NONE PTEs as
    /// accessible. The scanner runs before the CPUs' work, at its thread's start of tick.
    #[test]
    fn scan_window_holds_a_pending_flush_for_its_duration() {
        let mut k = small_kernel(SMALL_WINDOW);
        let t = thread(&k, 0);
        k.mms[0].numa_next_scan = 1;
        k.tasks[t].numa.work_pending = true;
        k.tasks[t].sys_debt_ns = 1_000.0;
        k.run_numa_task_work();
        let (from, until) = k.mms[0].tlb_flush_pending;
        assert_eq!(from, k.now + 1_000, "after the thread's debts");
        let updates = k.vmstat.get(VmEvent::NumaPteUpdates);
        assert_eq!(updates, 4096);
        assert!(until as f64 - from as f64 >= updates as f64 * k.cost.pte_update_ns, "{from}..{until}");
        assert!((k.tasks[t].sys_debt_ns - 1_000.0 - (until - from) as f64).abs() < 1.0, "paid in the tick as a debt");
        assert!(!k.tasks[t].numa.work_pending);
    }

    /// kernel/sched/fair.c: task_numa_work -> reset_ptenuma_scan, task_numa_placement — the
    /// pass's seq is bumped where the window that completes it returns, after its PTE walk
    /// and flush. Another thread that faults while the window runs still reads the old seq (no
    /// placement, its faults count in the old pass); from the window's end it reads the new one.
    #[test]
    fn scan_seq_changes_where_the_completing_window_ends() {
        let mut k = small_kernel("");
        let scanner = thread(&k, 0);
        let other = thread(&k, 1);
        k.mms[0].numa_next_scan = 1;
        k.tasks[scanner].numa.work_pending = true;
        k.tasks[scanner].sys_debt_ns = 1_000.0;
        k.run_numa_task_work();
        assert_eq!(k.mms[0].numa_scan_seq, 1, "the 64 MiB fit one window: the pass is complete");
        let (from, until) = k.mms[0].tlb_flush_pending;
        let end = k.mms[0].numa_scan_seq_at;
        assert!(end >= until && (end - from) as f64 >= 16384.0 * k.cost.pte_update_ns, "after 16k PTE updates: {from} {until} {end}");
        k.tasks[other].numa.migrate_retry = u64::MAX;
        let pid = k.tasks[other].pid;
        k.task_numa_fault(other, crate::sched::numa::fault::cpu_pid_to_cpupid(1, pid), 0, 1, 0);
        k.clock = end - 1;
        assert_eq!(k.numa_scan_seq_seen(0), 0);
        k.task_numa_placement(other);
        assert_eq!(k.tasks[other].numa.scan_seq, 0, "a fault during the window: no placement");
        k.clock = end;
        assert_eq!(k.numa_scan_seq_seen(0), 1);
        k.task_numa_placement(other);
        assert_eq!(k.tasks[other].numa.scan_seq, 1);
    }

    /// kernel/sched/fair.c: task_numa_work — the mm-wide numa_next_scan gate lets one thread
    /// per period scan.
    #[test]
    fn gate_closed_means_no_window() {
        let mut k = small_kernel(SMALL_WINDOW);
        let t = thread(&k, 0);
        k.mms[0].numa_next_scan = k.now + 1;
        k.task_numa_work(t);
        assert_eq!(k.vmstat.get(VmEvent::NumaPteUpdates), 0);
    }

    /// kernel/sched/fair.c: task_numa_work (try_cmpxchg on mm->numa_next_scan) — of the threads
    /// of one mm with task work pending, exactly one keeps it, and not always the one on the
    /// lowest CPU; a closed gate leaves pending work alone.
    #[test]
    fn one_random_thread_wins_the_scan_window() {
        let mut k = small_kernel("");
        let threads: Vec<usize> = (0..4).map(|i| thread(&k, i)).collect();
        let mut wins = [0; 4];
        for _ in 0..200 {
            k.mms[0].numa_next_scan = k.now;
            threads.iter().for_each(|&t| k.tasks[t].numa.work_pending = true);
            k.numa_scan_window_race();
            let pending: Vec<usize> = (0..4).filter(|&i| k.tasks[threads[i]].numa.work_pending).collect();
            assert_eq!(pending.len(), 1, "one winner per mm");
            wins[pending[0]] += 1;
        }
        assert!(wins.iter().all(|&w| w > 20), "every thread wins sometimes: {wins:?}");
        k.mms[0].numa_next_scan = k.now + 1;
        threads.iter().for_each(|&t| k.tasks[t].numa.work_pending = true);
        k.numa_scan_window_race();
        assert!(threads.iter().all(|&t| k.tasks[t].numa.work_pending), "no race before the gate opens");
    }

    /// mm/mempolicy.c: vma_policy_mof — a VMA under a policy without MPOL_F_MOF is skipped.
    #[test]
    fn vma_without_mof_policy_is_skipped() {
        let mut k = small_kernel(SMALL_WINDOW);
        let t = thread(&k, 0);
        k.tasks[t].policy = crate::mm::mempolicy::Mempolicy::bind(1);
        k.mms[0].numa_next_scan = 1;
        k.task_numa_work(t);
        assert_eq!(k.vmstat.get(VmEvent::NumaPteUpdates), 0);
    }

    /// kernel/sched/fair.c: task_tick_numa — work is queued only after numa_scan_period of CPU
    /// time and only while the mm gate is open; node_stamp advances either way.
    #[test]
    fn tick_queues_work_after_a_period_of_runtime() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        k.tasks[t].numa.node_stamp = 1;
        k.tasks[t].numa.scan_period = 1000;
        k.tasks[t].sum_exec_runtime = 900_000_000;
        k.task_tick_numa(t);
        assert!(!k.tasks[t].numa.work_pending);
        k.tasks[t].sum_exec_runtime = 1_100_000_000;
        k.mms[0].numa_next_scan = k.now + 1;
        k.task_tick_numa(t);
        assert!(!k.tasks[t].numa.work_pending, "gate closed");
        assert_eq!(k.tasks[t].numa.node_stamp, 1_000_000_001);
        k.tasks[t].sum_exec_runtime = 2_100_000_000;
        k.mms[0].numa_next_scan = k.now;
        k.task_tick_numa(t);
        assert!(k.tasks[t].numa.work_pending);
    }

    /// kernel/sched/fair.c: task_numa_work — node_stamp advances by 32x the runtime the window
    /// took; in a TCG guest that runtime holds the host's turns to other vCPUs too.
    #[test]
    fn window_penalty_counts_the_guests_runtime() {
        let stamp_after_window = |host_steal_ns: f64| {
            let mut k = small_kernel(SMALL_WINDOW);
            let t = thread(&k, 0);
            k.host_steal_ns = host_steal_ns;
            k.mms[0].numa_next_scan = 1;
            let before = k.tasks[t].numa.node_stamp;
            let sys = k.task_numa_work(t);
            assert!(sys > 0.0);
            (k.tasks[t].numa.node_stamp - before, sys)
        };
        let (bare, sys) = stamp_after_window(0.0);
        assert_eq!(bare, 2 * k_tick() + 32 * sys as u64, "bare metal: 32x the work");
        // the host runs this vCPU half of each tick: the work takes twice its time in runtime
        let (vm, _) = stamp_after_window(k_tick() as f64 / 2.0);
        assert_eq!(vm, 2 * k_tick() + 32 * (2.0 * sys) as u64);
    }

    fn k_tick() -> u64 {
        small_kernel("").tick_ns
    }
}
