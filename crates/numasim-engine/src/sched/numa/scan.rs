//! The PTE scanner's trigger, windows and period (kernel/sched/fair.c, spec §1).

use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::types::{VmaNumabState, VM_EXEC, VM_READ, VM_WRITE};

const NSEC_PER_MSEC: u64 = 1_000_000;
/// MAX_SCAN_WINDOW, MB/s
const MAX_SCAN_WINDOW: u32 = 2560;
const NUMA_PERIOD_SLOTS: u64 = 10;
const NUMA_PERIOD_THRESHOLD: u64 = 7;
/// include/linux/hash.h: GOLDEN_RATIO_32
const GOLDEN_RATIO_32: u32 = 0x61C8_8647;

// include/linux/hash.h: hash_32
pub fn hash_32(val: u32, bits: u32) -> u32 {
    val.wrapping_mul(GOLDEN_RATIO_32) >> (32 - bits)
}

impl Kernel {
    fn scan_pages(&self) -> u64 {
        (self.cfg.sysctl.numa_balancing_scan_size_mb as u64) << 8
    }

    // kernel/sched/fair.c: task_nr_scan_windows
    fn task_nr_scan_windows(&self, t: usize) -> u64 {
        let nr_scan_pages = self.scan_pages().max(1);
        let mut rss = self.mms[self.tasks[t].mm].rss();
        if rss == 0 {
            rss = nr_scan_pages;
        }
        rss.div_ceil(nr_scan_pages)
    }

    // kernel/sched/fair.c: task_scan_min
    pub fn task_scan_min(&self, t: usize) -> u32 {
        let scan_size = self.cfg.sysctl.numa_balancing_scan_size_mb;
        let windows = if scan_size < MAX_SCAN_WINDOW { MAX_SCAN_WINDOW / scan_size.max(1) } else { 1 };
        let floor = 1000 / windows.max(1);
        let scan = self.cfg.sysctl.numa_balancing_scan_period_min_ms as u64 / self.task_nr_scan_windows(t);
        floor.max(scan as u32)
    }

    // kernel/sched/fair.c: task_scan_max (a group scales it by its size and shared share)
    pub fn task_scan_max(&self, t: usize) -> u32 {
        let smin = self.task_scan_min(t);
        let smax = self.cfg.sysctl.numa_balancing_scan_period_max_ms as u64 / self.task_nr_scan_windows(t);
        let smax = smax.max(self.group_scan_scale(t, smax));
        (smin as u64).max(smax).min(u32::MAX as u64) as u32
    }

    // kernel/sched/fair.c: task_scan_start (not capped by task_scan_max)
    pub fn task_scan_start(&self, t: usize) -> u32 {
        let smin = self.task_scan_min(t) as u64;
        smin.max(self.group_scan_scale(t, smin)).min(u32::MAX as u64) as u32
    }

    /// Set up a new task's NUMA fields at fork/clone (spec §1.2).
    // kernel/sched/fair.c: init_numa_balancing
    pub fn init_numa_balancing(&mut self, t: usize, parent: Option<usize>) {
        let delay = self.cfg.sysctl.numa_balancing_scan_delay_ms;
        let mm = self.tasks[t].mm;
        if self.mms[mm].users == 1 {
            self.mms[mm].numa_next_scan = self.now + delay as u64 * NSEC_PER_MSEC;
            self.mms[mm].numa_scan_seq = 0;
        }
        let same_mm = parent.filter(|&p| self.tasks[p].mm == mm);
        let node_stamp = match same_mm {
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

    // kernel/sched/fair.c: reset_ptenuma_scan
    fn reset_ptenuma_scan(&mut self, mm: usize) {
        let m = &mut self.mms[mm];
        m.numa_scan_seq = m.numa_scan_seq.wrapping_add(1);
        m.numa_scan_offset = 0;
    }

    /// VMAs the scanner never touches (spec §1.5 rules 1-6).
    fn vma_unsuitable(&self, t: usize, vma: usize) -> bool {
        let v = &self.mms[self.tasks[t].mm].vmas[vma];
        let shared_ro = !v.anon && v.flags & VM_READ != 0 && v.flags & VM_WRITE == 0;
        let inaccessible = v.flags & (VM_READ | VM_WRITE | VM_EXEC) == 0;
        !self.vma_policy(t, vma).mof() || shared_ro || inaccessible
    }

    /// Did the scanning thread fault in this VMA recently? (spec §1.6)
    // kernel/sched/fair.c: vma_is_accessed
    fn vma_is_accessed(&self, t: usize, vma: usize) -> bool {
        let m = &self.mms[self.tasks[t].mm];
        let v = &m.vmas[vma];
        let ns = v.numab.as_ref().expect("numab state exists");
        if (m.numa_scan_seq.wrapping_sub(ns.start_scan_seq) as i32) < 2 {
            return true;
        }
        let pids = ns.pids_active[0] | ns.pids_active[1];
        if pids & (1u64 << hash_32(self.tasks[t].pid, 6)) != 0 {
            return true;
        }
        if m.numa_scan_offset > v.start {
            return true;
        }
        m.numa_scan_seq.wrapping_sub(ns.prev_scan_seq) as i32 > m.users as i32
    }

    // include/linux/mm.h: vma_set_access_pid_bit
    pub fn vma_set_access_pid_bit(&mut self, mm: usize, vma: usize, pid: u32) {
        if let Some(ns) = self.mms[mm].vmas[vma].numab.as_mut() {
            ns.pids_active[1] |= 1u64 << hash_32(pid, 6);
        }
    }

    /// One scan window: protect up to scan_size of resident pages (spec §1.4). Returns sys ns.
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
        self.tasks[t].numa.node_stamp += 2 * self.tick_ns;
        let mut pages = self.scan_pages() as i64;
        let mut virtpages = pages * 8;
        if pages == 0 {
            return 0.0;
        }
        let numab = self.feature(Feature::VmaNumabState);
        let mut sys = 0.0;
        let mut pids_skipped = false;
        let mut pids_forced = false;
        let (stopped, mut start) = 'retry: loop {
            let mut start = self.mms[mm].numa_scan_offset;
            let mut vi = match self.mms[mm].vmas.iter().position(|v| v.end() > start) {
                Some(i) => i,
                None => {
                    self.reset_ptenuma_scan(mm);
                    start = 0;
                    0
                }
            };
            while vi < self.mms[mm].vmas.len() {
                if self.vma_unsuitable(t, vi) {
                    vi += 1;
                    continue;
                }
                if numab {
                    let seq = self.mms[mm].numa_scan_seq;
                    let v = &mut self.mms[mm].vmas[vi];
                    let ns = v.numab.get_or_insert_with(|| VmaNumabState {
                        next_scan: now + delay,
                        pids_active_reset: now + delay + 4 * delay,
                        pids_active: [0; 2],
                        start_scan_seq: seq,
                        prev_scan_seq: seq.wrapping_sub(1),
                    });
                    if seq != 0 && now < ns.next_scan {
                        vi += 1;
                        continue;
                    }
                    if seq != 0 && now > ns.pids_active_reset {
                        ns.pids_active_reset += 4 * delay;
                        ns.pids_active = [ns.pids_active[1], 0];
                    }
                    if ns.prev_scan_seq == seq {
                        self.mms[mm].numa_scan_offset = v.end();
                        vi += 1;
                        continue;
                    }
                    if !pids_forced && !self.vma_is_accessed(t, vi) {
                        pids_skipped = true;
                        vi += 1;
                        continue;
                    }
                }
                let (vstart, vend) = (self.mms[mm].vmas[vi].start, self.mms[mm].vmas[vi].end());
                loop {
                    start = start.max(vstart);
                    let end = (start + pages as u64).div_ceil(512).saturating_mul(512).min(vend);
                    let (n, cost) = self.change_prot_numa(t, vi, start - vstart, end - vstart);
                    sys += cost;
                    if n > 0 {
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
                if numab {
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
            if !pids_forced && pids_skipped {
                pids_forced = true;
                continue;
            }
            break (false, start);
        };
        if stopped {
            self.mms[mm].numa_scan_offset = start;
        } else {
            self.reset_ptenuma_scan(mm);
            start = 0;
        }
        let _ = start;
        // inc/dec_tlb_flush_pending around each change_protection: the window's walk and flush
        self.mms[mm].tlb_flush_pending = (self.clock, self.clock + sys as u64);
        // node_stamp += 32 * time spent here: caps scanning overhead at ~3%
        self.tasks[t].numa.node_stamp += 32 * sys as u64;
        sys
    }

    /// Adapt the scan period to the locality of the last pass (spec §1.9).
    // kernel/sched/fair.c: update_task_scan_period
    pub fn update_task_scan_period(&mut self, t: usize, shared: u64, private: u64) {
        let [remote, local, failed] = self.tasks[t].numa.faults_locality;
        if local + shared == 0 || failed > 0 {
            let p = &mut self.tasks[t].numa;
            p.scan_period = p.scan_period_max.min(p.scan_period.saturating_mul(2));
            let period = p.scan_period as u64;
            let mm = self.tasks[t].mm;
            self.mms[mm].numa_next_scan = self.now + period * NSEC_PER_MSEC;
            return;
        }
        let period = self.tasks[t].numa.scan_period as i64;
        let period_slot = (period as u64).div_ceil(NUMA_PERIOD_SLOTS) as i64;
        let lr_ratio = (local * NUMA_PERIOD_SLOTS / (local + remote)) as i64;
        let ps_ratio = (private * NUMA_PERIOD_SLOTS).checked_div(private + shared).unwrap_or(0) as i64;
        let th = NUMA_PERIOD_THRESHOLD as i64;
        let diff = if ps_ratio >= th {
            (ps_ratio - th).max(1) * period_slot
        } else if lr_ratio >= th {
            (lr_ratio - th).max(1) * period_slot
        } else {
            -(th - lr_ratio.max(ps_ratio)) * period_slot
        };
        let (lo, hi) = (self.task_scan_min(t) as i64, self.task_scan_max(t) as i64);
        let p = &mut self.tasks[t].numa;
        p.scan_period = (period + diff).max(lo).min(hi.max(lo)) as u32;
        p.faults_locality = [0; 3];
    }

    /// A task moved to another node by the scheduler: maybe scan fast again (spec §1.9).
    // kernel/sched/fair.c: update_scan_period
    pub fn update_scan_period(&mut self, t: usize, new_cpu: usize) {
        let src = self.task_node(t);
        let dst = self.cpu_node(new_cpu);
        let p = &self.tasks[t].numa;
        if !self.numa_balancing() || p.faults.is_empty() || src == dst {
            return;
        }
        if p.scan_seq != 0 && (Some(dst) == p.preferred_nid || (p.preferred_nid.is_some() && Some(src) != p.preferred_nid)) {
            return;
        }
        self.tasks[t].numa.scan_period = self.task_scan_start(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_32_spreads_pids_over_64_bits() {
        // include/linux/hash.h: hash_32(val, bits) = val * GOLDEN_RATIO_32 >> (32 - bits)
        assert_eq!(hash_32(1, 6), 0x61C8_8647 >> 26);
        assert!((0..1000).all(|p| hash_32(p, 6) < 64));
    }
}

#[cfg(test)]
mod window_tests {
    use super::NSEC_PER_MSEC;
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

    /// kernel/sched/fair.c: task_scan_min/task_scan_max — worked numbers of spec §1.9.
    #[test]
    fn scan_period_bounds_follow_rss() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        k.mms[0].node_pages = [262144, 0, 0, 0, 0, 0, 0, 0]; // 1 GiB -> 4 windows
        assert_eq!((k.task_scan_min(t), k.task_scan_max(t)), (250, 15000));
        k.mms[0].node_pages = [262144 * 8, 0, 0, 0, 0, 0, 0, 0]; // 8 GiB -> 32 windows
        assert_eq!((k.task_scan_min(t), k.task_scan_max(t)), (100, 1875));
    }

    /// kernel/sched/fair.c: update_task_scan_period — failed migrations double the period (up
    /// to the max) and leave numa_faults_locality[] alone; private local faults slow scanning;
    /// shared remote faults speed it up.
    #[test]
    fn scan_period_adapts_to_locality() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        k.mms[0].node_pages = [262144, 0, 0, 0, 0, 0, 0, 0];
        let p = &mut k.tasks[t].numa;
        p.scan_period = 1000;
        p.scan_period_max = 15000;
        p.faults_locality = [5, 5, 1];
        k.update_task_scan_period(t, 0, 10);
        assert_eq!(k.tasks[t].numa.scan_period, 2000);
        assert_eq!(k.tasks[t].numa.faults_locality, [5, 5, 1], "not cleared on the doubling path");

        k.tasks[t].numa.faults_locality = [0, 10, 0];
        k.update_task_scan_period(t, 0, 10); // ps_ratio 10 -> +3 slots of 200 ms
        assert_eq!(k.tasks[t].numa.scan_period, 2600);
        assert_eq!(k.tasks[t].numa.faults_locality, [0, 0, 0]);

        k.tasks[t].numa.faults_locality = [10, 0, 0];
        k.update_task_scan_period(t, 10, 0); // lr 0, ps 0 -> -7 slots of 260 ms
        assert_eq!(k.tasks[t].numa.scan_period, 2600 - 7 * 260);
    }

    /// kernel/sched/fair.c: update_task_scan_period — `local + shared == 0` doubles the period
    /// and pushes the whole mm's next scan back by it: an empty fault buffer (a thread's first
    /// placement) and only private remote faults (migrated ones included: TNF_FAULT_LOCAL is
    /// set only for a page already local) both take that path. This is what paces
    /// numa01_THREAD_ALLOC's first phase-2 pass (docs/model.md, mthp-numa).
    #[test]
    fn no_local_or_shared_faults_double_the_period_and_delay_the_mm_scan() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        let mm = k.tasks[t].mm;
        k.now = 5 * NSEC_PER_MSEC * 1000;
        for (locality, private) in [([0, 0, 0], 0), ([10, 0, 0], 10)] {
            let p = &mut k.tasks[t].numa;
            p.scan_period = 1000;
            p.scan_period_max = 5000;
            p.faults_locality = locality;
            k.mms[mm].numa_next_scan = k.now;
            k.update_task_scan_period(t, 0, private);
            assert_eq!(k.tasks[t].numa.scan_period, 2000, "{locality:?}");
            assert_eq!(k.mms[mm].numa_next_scan, k.now + 2000 * NSEC_PER_MSEC, "{locality:?}");
        }
        // one local fault takes the adaptive path instead: no push
        k.tasks[t].numa.faults_locality = [9, 1, 0];
        k.mms[mm].numa_next_scan = k.now;
        k.update_task_scan_period(t, 0, 10);
        assert_eq!(k.mms[mm].numa_next_scan, k.now);
    }
}
