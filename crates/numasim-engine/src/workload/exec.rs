//! Running a task's program for one tick: ordinary accesses are aggregated per 2 MiB block, and
//! only pages that need a fault are visited one by one.

use super::Op;
use crate::cost::PAGE_SIZE;
use crate::kernel::Kernel;
use crate::mm::migrate_syscall::PageSelection;
use crate::mm::pgtable::BLOCK_PAGES;
use crate::sched::task::{SweepState, TaskState};

/// What is left of a task's tick after `run_task_begin`.
#[derive(Debug, Clone, Copy)]
pub struct TickRun {
    /// ns of the tick left to run the program
    pub budget: f64,
    /// ns of the tick the task had when it began running: the whole tick, or what is left of
    /// it after a start inside the tick
    start: f64,
    /// a SIGKILL takes effect at the end of the tick
    kill: bool,
    /// ns of the tick after the SIGKILL
    past_kill: f64,
}

impl Kernel {
    /// Pin `pages` pages at a random I/O-aligned place of the process's sampled VMA for a
    /// direct-I/O read (pin_user_pages); they are unpinned when the task runs again.
    // mm/gup.c: pin_user_pages (FOLL_PIN), block/fops.c: direct I/O
    pub fn direct_io_read(&mut self, t: usize, pages: u64) {
        let mm = self.tasks[t].mm;
        let Some(s) = self.mms[mm].sampler else {
            return;
        };
        let vma = self.samplers[s].vma;
        let len = self.mms[mm].vmas[vma].pt.len();
        let slots = (len / pages.max(1)).max(1);
        let first = (self.samplers[s].rng_next() % slots) * pages;
        self.pin_user_pages(t, vma, first, pages.min(len - first));
    }

    /// `clock` of the running task with `budget_left` ns of its tick still to run.
    pub fn set_clock(&mut self, budget_left: f64) {
        // through i64, the conversions baseline x86-64 has (the tick is far below 2^63 ns)
        self.clock = self.now + (self.tick_ns as i64 as f64 - budget_left).max(0.0) as i64 as u64;
    }

    /// The scan windows won this tick, before any CPU runs: each winner scans on return to user
    /// space at the start of its tick (after its debts), and the other threads of its mm see the
    /// window's PROT_NONE PTEs and its pending flush in the same tick, whatever their CPU.
    // kernel/task_work.c: task_work_run -> task_numa_work
    pub fn run_numa_task_work(&mut self) {
        let tick = self.tick_ns as f64;
        for cpu in 0..self.cpus.len() {
            let Some(t) = self.cpus[cpu].curr() else { continue };
            let p = &self.tasks[t];
            let debts = p.sys_debt_ns + p.wait_debt_ns;
            if !p.numa.work_pending || debts >= tick {
                continue;
            }
            self.tasks[t].numa.work_pending = false;
            self.unpin_user_pages(t);
            self.clock = self.now + debts as u64;
            let c = self.task_numa_work(t);
            // paid from the tick's budget in run_task, as the debts before it
            self.tasks[t].sys_ns += c;
            self.tasks[t].sys_debt_ns += c;
        }
    }

    /// Run task `t` on its CPU for up to one tick; returns the ns of CPU time it used.
    pub fn run_task(&mut self, t: usize) -> f64 {
        let mut run = self.run_task_begin(t);
        self.run_task_body(t, &mut run.budget);
        self.run_task_end(t, run)
    }

    /// Run task `t` from `at` ns into the tick to its end (a new task that starts inside the
    /// tick); returns the ns of CPU time it used.
    pub fn run_task_from(&mut self, t: usize, at: f64) -> f64 {
        let mut run = self.run_task_begin_with(t, self.tick_ns as f64 - at);
        self.run_task_body(t, &mut run.budget);
        self.run_task_end(t, run)
    }

    /// The start of task `t`'s tick: its debts, the host's steal, a SIGKILL due in the tick and
    /// its hot pages; returns what is left of the tick to run its program.
    pub fn run_task_begin(&mut self, t: usize) -> TickRun {
        self.run_task_begin_with(t, self.tick_ns as f64)
    }

    /// `run_task_begin` for a task that has `left` ns of the tick (it starts inside it).
    fn run_task_begin_with(&mut self, t: usize, left: f64) -> TickRun {
        let tick = self.tick_ns as f64;
        let mut b = left;
        let wait = self.tasks[t].wait_debt_ns;
        if wait > 0.0 {
            // sleeping, e.g. in migration_entry_wait: the tick passes without work
            let pay = wait.min(b);
            b -= pay;
            self.tasks[t].wait_debt_ns -= pay;
        }
        if self.host_steal_ns > 0.0 {
            // a VM's vCPU waiting for a host core, for its share of the time it is busy: kernel
            // work (the debts) needs a host core as much as user work
            b -= self.host_steal_ns * b / tick;
        }
        let debt = self.tasks[t].sys_debt_ns;
        if debt > 0.0 {
            let pay = debt.min(b);
            b -= pay;
            self.tasks[t].sys_debt_ns -= pay;
        }
        self.unpin_user_pages(t);
        // A SIGKILL due in this tick: the task runs until then, then exits. It acts on the way
        // back to user space, so not before the task's debts (kernel work) are paid.
        let kill = self.tasks[t].kill_at.filter(|&at| at < self.now + self.tick_ns && b > 0.0).map(|at| at.saturating_sub(self.now) as f64);
        let mut past_kill = 0.0;
        if let Some(d) = kill {
            let usable = (d - (tick - b)).max(0.0);
            past_kill = b - usable;
            b = usable;
        }
        if b > 0.0 && !self.tasks[t].hot.is_empty() {
            self.set_clock(b);
            self.touch_hot_pages(t, &mut b);
        }
        TickRun { budget: b, start: left, kill: kill.is_some(), past_kill }
    }

    /// Run task `t`'s program with `b` ns of its tick left, until the tick is used, the task
    /// sleeps or exits, or (in an interleaved tick) it must wait for the threads it shares pages
    /// with before its next fault.
    pub fn run_task_body(&mut self, t: usize, budget: &mut f64) {
        let tick = self.tick_ns as f64;
        let mut b = *budget;
        while b > 0.0 && self.tasks[t].state == TaskState::Runnable && self.oom.is_none() && !self.parked() {
            self.set_clock(b);
            let pc = self.tasks[t].pc;
            let Some(&op) = self.tasks[t].program.get(pc) else {
                self.task_exit(t, tick - b);
                break;
            };
            match op {
                Op::SetPolicy(p) => {
                    self.tasks[t].policy = p;
                    self.tasks[t].pc += 1;
                }
                Op::SetAffinity(mask) => {
                    let allowed: Vec<bool> = self.topo.cpu_node.iter().map(|&n| mask & (1 << n) != 0).collect();
                    let cpu = self.tasks[t].cpu;
                    self.tasks[t].allowed = allowed;
                    self.tasks[t].pc += 1;
                    if !self.tasks[t].allowed[cpu] {
                        self.displaced.push(t);
                        break;
                    }
                }
                Op::SetCpus(set) => {
                    let cpu = self.tasks[t].cpu;
                    self.tasks[t].allowed = self.cpu_sets[set].clone();
                    self.tasks[t].pc += 1;
                    if !self.tasks[t].allowed[cpu] {
                        self.displaced.push(t);
                        break;
                    }
                }
                Op::Stream { vma, first, npages, stride, access, passes, duration_ns } => {
                    if self.stream_op(t, vma, first, npages, stride, access, passes, duration_ns, &mut b) {
                        self.tasks[t].pc += 1;
                        self.tasks[t].sweep = SweepState::default();
                        self.tasks[t].op_start_ns = None;
                    }
                }
                Op::Sweep { vma, first, npages, passes } => {
                    if self.sweep(t, vma, first, npages, passes, &mut b) {
                        self.tasks[t].pc += 1;
                        self.tasks[t].sweep = SweepState::default();
                    }
                }
                Op::SweepFor { vma, first, npages, duration_ns } => {
                    let done = self.for_duration(t, duration_ns, &mut b, |k, bb| {
                        k.stream_loads_first = true;
                        k.sweep(t, vma, first, npages, u32::MAX, bb);
                        k.stream_loads_first = false;
                    });
                    if done {
                        self.tasks[t].pc += 1;
                        self.tasks[t].sweep = SweepState::default();
                        self.tasks[t].op_start_ns = None;
                    }
                }
                Op::Exec => {
                    self.touch_image_at_exec(t, &mut b);
                    self.tasks[t].pc += 1;
                }
                Op::Spawn => {
                    if !self.clone_next_child(t, &mut b) {
                        self.tasks[t].pc += 1;
                    }
                }
                Op::SleepUntil(at) => {
                    self.tasks[t].pc += 1;
                    if self.now + ((tick - b) as u64) < at {
                        self.tasks[t].wake_at = Some(at);
                        self.task_sleep(t);
                        break;
                    }
                }
                Op::SleepFor(ns) => {
                    self.tasks[t].pc += 1;
                    if ns > 0 {
                        self.tasks[t].wake_at = Some(self.now + (tick - b) as u64 + ns);
                        self.task_sleep(t);
                        break;
                    }
                }
                Op::MigratePages { workload, from, to } => {
                    let target = self.workload_mm(workload);
                    if self.sys_migrate(t, target, PageSelection::Node(from), to, &mut b) {
                        self.tasks[t].pc += 1;
                    }
                }
                Op::MovePages { workload, vma, first, npages, to } => {
                    let vma = self.workload_vma(workload, vma);
                    let target = self.workload_mm(workload);
                    if self.sys_migrate(t, target, PageSelection::Range { vma, first, npages }, to, &mut b) {
                        self.tasks[t].pc += 1;
                    }
                }
                Op::PinLongterm { vma, first, npages } => {
                    self.pin_user_pages_longterm(t, vma, first, npages);
                    self.tasks[t].pc += 1;
                }
                Op::DirectIo { pages, ns } => {
                    self.tasks[t].pc += 1;
                    self.direct_io_read(t, pages);
                    self.tasks[t].wake_at = Some(self.now + (tick - b) as u64 + ns);
                    self.task_sleep(t);
                    break;
                }
                Op::LinearAccess { vma, npages, duration_ns, .. } => {
                    if self.linear_phases(t, vma, npages, duration_ns, &mut b) {
                        self.tasks[t].pc += 1;
                        self.tasks[t].sweep = SweepState::default();
                        self.tasks[t].op_start_ns = None;
                    }
                }
                Op::RandomAccess { sampler, warmup, duration_ns, overhead_ns } => {
                    if self.random_phases(t, sampler, warmup, duration_ns, overhead_ns, &mut b) {
                        self.tasks[t].pc += 1;
                        self.tasks[t].sweep = SweepState::default();
                    }
                }
                Op::Sample { .. } => {
                    if self.sampler_step(t, op, &mut b) {
                        break;
                    }
                }
                Op::Join => {
                    let done = self.tasks[t].children.iter().all(|&c| self.tasks[c].state == TaskState::Exited);
                    if done {
                        self.tasks[t].pc += 1;
                    } else {
                        self.task_sleep(t);
                        break;
                    }
                }
            }
        }
        *budget = b;
    }

    /// Run a timed op's work (`run`, pass after pass) for what is left of `duration_ns` since
    /// the op started (`op_start_ns`), within the tick's budget `b`; true once that time is over.
    pub(crate) fn for_duration(&mut self, t: usize, duration_ns: u64, b: &mut f64, run: impl FnOnce(&mut Self, &mut f64)) -> bool {
        let tick = self.tick_ns as f64;
        let at = self.now as f64 + (tick - *b);
        let end = *self.tasks[t].op_start_ns.get_or_insert(at) + duration_ns as f64;
        if at < end {
            let slice = (end - at).min(*b);
            let mut bb = slice;
            run(self, &mut bb);
            *b -= slice - bb;
        }
        self.now as f64 + (tick - *b) >= end
    }

    /// The end of task `t`'s tick: a SIGKILL due in it takes effect; returns the ns of CPU
    /// time the task used.
    pub fn run_task_end(&mut self, t: usize, run: TickRun) -> f64 {
        let used = run.start - run.past_kill - run.budget.max(0.0);
        if run.kill && self.tasks[t].state == TaskState::Runnable {
            // kernel/signal.c: get_signal -> do_exit, wherever the program was (a task that
            // went to sleep first is woken by the signal and exits next tick)
            self.set_clock(run.start - used);
            // the instant in the tick: the task's start in it (0 for a whole tick) plus its run
            self.task_exit(t, self.tick_ns as f64 - run.start + used);
        }
        used
    }

    /// pmbench's linear pattern: the warm-up pass, then the timed loop for `duration_ns` of wall
    /// time, counting one access per page crossed. Returns true when both are done.
    fn linear_phases(&mut self, t: usize, vma: usize, npages: u64, duration_ns: u64, b: &mut f64) -> bool {
        let tick = self.tick_ns as f64;
        if self.tasks[t].op_start_ns.is_none() {
            if !self.sweep(t, vma, 0, npages, 1, b) {
                return false;
            }
            // the timed loop starts from page 0 now
            self.tasks[t].sweep = SweepState::default();
            self.tasks[t].op_start_ns = Some(self.now as f64 + (tick - *b));
        }
        let start = self.tasks[t].op_start_ns.unwrap_or_default();
        let end = start + duration_ns as f64;
        let at = self.now as f64 + (tick - *b);
        if at < end && *b > 0.0 && self.oom.is_none() {
            let slice = (end - at).min(*b);
            let mut bb = slice;
            let crossed = |s: SweepState| s.pass as f64 * npages as f64 + s.pos;
            let before = crossed(self.tasks[t].sweep);
            self.sweep(t, vma, 0, npages, u32::MAX, &mut bb);
            self.tasks[t].accesses += crossed(self.tasks[t].sweep) - before;
            *b -= slice - bb;
        }
        let at = self.now as f64 + (tick - *b);
        self.tasks[t].access_ns = (at.min(end) - start).max(0.0);
        at >= end
    }

    /// pmbench's warm-up (untimed accesses) then its timed loop, which runs for `duration_ns` of
    /// wall time: time taken from the thread by interrupts or other tasks lowers its throughput.
    /// Returns true when both are done.
    fn random_phases(&mut self, t: usize, s: usize, warmup: u64, duration_ns: u64, overhead_ns: f64, b: &mut f64) -> bool {
        let tick = self.tick_ns as f64;
        if self.tasks[t].sweep.pass == 0 {
            let left = warmup as f64 - self.tasks[t].sweep.pos;
            if left > 0.0 {
                let d = self.random_access(t, s, left, overhead_ns, false, b);
                self.tasks[t].sweep.pos += d;
                if d < left {
                    return false;
                }
            }
            // the timed loop starts now; `pos` keeps its start time (ns)
            self.tasks[t].sweep = SweepState { pass: 1, pos: self.now as f64 + (tick - *b) };
        }
        let start = self.tasks[t].sweep.pos;
        let end = start + duration_ns as f64;
        let at = self.now as f64 + (tick - *b);
        if at < end && *b > 0.0 && self.oom.is_none() {
            let slice = (end - at).min(*b);
            let mut bb = slice;
            let d = self.random_access(t, s, f64::INFINITY, overhead_ns, true, &mut bb);
            *b -= slice - bb;
            self.tasks[t].accesses += d;
        }
        let at = self.now as f64 + (tick - *b);
        self.tasks[t].access_ns = (at.min(end) - start).max(0.0);
        at >= end
    }

    /// Advance a store stream; returns true when all passes are done.
    fn sweep(&mut self, t: usize, vma: usize, first: u64, npages: u64, passes: u32, b: &mut f64) -> bool {
        // the tick's costs per page, out of the task while its stream runs (set per tick only)
        let cost = std::mem::take(&mut self.tasks[t].page_cost);
        let done = self.sweep_at(t, vma, first, npages, passes, b, &cost);
        self.tasks[t].page_cost = cost;
        done
    }

    #[allow(clippy::too_many_arguments)]
    fn sweep_at(&mut self, t: usize, vma: usize, first: u64, npages: u64, passes: u32, b: &mut f64, cost: &[f64]) -> bool {
        let mm = self.tasks[t].mm;
        let nr = self.topo.nr_nodes;
        let end = first + npages;
        if npages == 0 {
            return true;
        }
        loop {
            let SweepState { mut pass, mut pos } = self.tasks[t].sweep;
            if pass >= passes {
                return true;
            }
            if *b <= 0.0 || self.oom.is_some() {
                return false;
            }
            if self.parked() {
                return false;
            }
            let whole = pos as u64; // pos >= 0: truncation is floor, without a libm call
            let frac = pos - whole as f64;
            let idx = first + whole;
            let blk = (idx / BLOCK_PAGES) as usize;
            let mut seg_end = ((blk as u64 + 1) * BLOCK_PAGES).min(end);
            // interleaved: stop at a page another thread's fault is still changing
            let mut race_at = None;
            if !self.inflight.is_empty() {
                let at = self.now as f64 + (self.tick_ns as f64 - *b);
                let lo = idx + (frac > 0.0) as u64;
                if let Some(s) = self.inflight_stop(t, mm, vma, lo, seg_end, at) {
                    if s == idx {
                        race_at = Some(idx);
                        seg_end = idx + 1;
                    } else {
                        seg_end = s;
                    }
                }
            }
            let pt = &self.mms[mm].vmas[vma].pt;
            if race_at.is_none() && pt.block_clean(blk, true) {
                // every page of the block is present and writable: one step for the whole block
                let pop = pt.blocks[blk].populated as f64;
                let k = pt.block_nodes(blk);
                // (nodes without pages add nothing to the sums: skipped)
                let avg = (0..nr).filter(|&n| k[n] != 0).map(|n| k[n] as f64 * cost[n]).sum::<f64>() / pop;
                let avail = (seg_end - idx) as f64 - frac;
                let (adv, used) = if avail * avg <= *b {
                    pos = (seg_end - first) as f64;
                    (avail, avail * avg)
                } else {
                    // the budget ends inside this block: spend all of it (no float residue)
                    let a = *b / avg;
                    pos += a;
                    (a, *b)
                };
                *b -= used;
                let p = &mut self.tasks[t];
                p.user_ns += used;
                for n in (0..nr).filter(|&n| k[n] != 0) {
                    p.cur_bytes[n] += adv * PAGE_SIZE * k[n] as f64 / pop;
                }
            } else if race_at.is_none() && frac == 0.0 && pt.blocks[blk].populated == 0 && self.thp_allowable_orders(self.mms[mm].vmas[vma].flags) == 0 && self.mms[mm].vmas[vma].shmem.is_none() {
                // no page of this block is present, no fault may map a large folio, and none
                // finds a folio in a file's page cache
                let Some((i, f)) = self.sweep_unpopulated(t, vma, idx, seg_end, b, cost) else {
                    return false;
                };
                pos = (i - first) as f64 + f;
            } else {
                // some page of this block needs a fault: take faults page by page, and cross
                // the accessible pages between them in a tight loop
                let (mut i, mut f) = (idx, frac);
                while i < seg_end {
                    if f == 0.0 && race_at == Some(i) {
                        race_at = None;
                        if self.must_park(*b) {
                            break;
                        }
                        self.take_fault_race(t, vma, i, b);
                        if *b <= 0.0 {
                            break;
                        }
                    }
                    if f == 0.0 && !self.mms[mm].vmas[vma].pt.store_ok(i) && (self.must_park(*b) || !self.access_page(t, vma, i, true, b) || *b <= 0.0) {
                        break;
                    }
                    let pt = &self.mms[mm].vmas[vma].pt;
                    let bytes = &mut self.stream_bytes;
                    let n0 = pt.nid(i) as usize;
                    let mut used = (1.0 - f) * cost[n0];
                    if used > *b {
                        // the budget ends inside page i
                        let part = *b / cost[n0];
                        bytes[n0] = part * PAGE_SIZE;
                        used = *b;
                        f += part;
                    } else {
                        bytes[n0] = (1.0 - f) * PAGE_SIZE;
                        i += 1;
                        f = 0.0;
                        while i < seg_end && pt.store_ok(i) {
                            let n = pt.nid(i) as usize;
                            let c = cost[n];
                            if used + c > *b {
                                f = (*b - used) / c;
                                bytes[n] += f * PAGE_SIZE;
                                used = *b;
                                break;
                            }
                            used += c;
                            bytes[n] += PAGE_SIZE;
                            i += 1;
                        }
                    }
                    *b -= used;
                    let p = &mut self.tasks[t];
                    p.user_ns += used;
                    for n in 0..nr {
                        p.cur_bytes[n] += bytes[n];
                        bytes[n] = 0.0;
                    }
                    if *b <= 0.0 {
                        *b = 0.0;
                        break;
                    }
                }
                if self.oom.is_some() {
                    return false;
                }
                pos = (i - first) as f64 + f;
            }
            if pos >= npages as f64 {
                pass += 1;
                pos = 0.0;
            }
            self.tasks[t].sweep = SweepState { pass, pos };
        }
    }

    /// A store stream from page `i` to `end`, none of them present, in a VMA whose faults map
    /// base pages: a first-touch fault then a store per page, the general loop's arithmetic
    /// without its checks. Returns where the stream stopped (page, fraction stored), None on
    /// out-of-memory.
    // mm/memory.c: do_anonymous_page, page by page
    fn sweep_unpopulated(&mut self, t: usize, vma: usize, mut i: u64, end: u64, b: &mut f64, cost: &[f64]) -> Option<(u64, f64)> {
        let pol = self.vma_policy(t, vma);
        let mm = self.tasks[t].mm;
        while i < end {
            if self.must_park(*b) {
                break;
            }
            // the fault happens where the stream is in its tick
            self.set_clock(*b);
            let c = self.map_anon_base_page(t, vma, i, &pol)?;
            if self.il.is_some() {
                self.note_fault(t, vma, i, self.clock as f64, c, (false, 0));
            }
            self.charge_sys(t, c, b);
            if *b <= 0.0 {
                break;
            }
            let node = self.mms[mm].vmas[vma].pt.nid(i) as usize;
            let p = &mut self.tasks[t];
            if cost[node] > *b {
                // the budget ends inside page i
                let part = *b / cost[node];
                p.user_ns += *b;
                p.cur_bytes[node] += part * PAGE_SIZE;
                *b = 0.0;
                return Some((i, part));
            }
            *b -= cost[node];
            p.user_ns += cost[node];
            p.cur_bytes[node] += PAGE_SIZE;
            i += 1;
            if *b <= 0.0 {
                *b = 0.0;
                break;
            }
        }
        Some((i, 0.0))
    }

    /// Interleaved: task `t` reaches page `idx`, which another thread's fault is still changing
    /// (mm/fault_race.rs); its system time and its wait (off the CPU) come from the budget.
    pub(crate) fn take_fault_race(&mut self, t: usize, vma: usize, idx: u64, b: &mut f64) {
        self.set_clock(*b);
        let at = self.now as f64 + (self.tick_ns as f64 - *b);
        let (sys, wait) = self.fault_race(t, vma, idx, at);
        self.charge_sys(t, sys, b);
        let w = wait.min(*b);
        *b -= w;
        self.tasks[t].wait_debt_ns += wait - w;
    }

    /// A store (or a load: `write` false) reaches page `idx`: take whatever faults it needs,
    /// paid from the budget `b`. False on out-of-memory.
    // mm/memory.c: handle_pte_fault dispatch (do_anonymous_page / do_numa_page / do_wp_page)
    pub fn access_page(&mut self, t: usize, vma: usize, idx: u64, write: bool, b: &mut f64) -> bool {
        let mm = self.tasks[t].mm;
        // the fault happens where the stream is in its tick
        self.set_clock(*b);
        let t0 = self.clock as f64;
        if !self.mms[mm].vmas[vma].pt.populated(idx) {
            match self.do_pte_missing(t, vma, idx, write && !self.stream_loads_first) {
                Some(c) => {
                    if self.il.is_some() {
                        self.note_fault(t, vma, idx, t0, c, (false, 0));
                    }
                    self.charge_sys(t, c, b)
                }
                None => return false,
            }
        } else if self.mms[mm].vmas[vma].pt.protnone(idx) {
            let nid = self.mms[mm].vmas[vma].pt.nid(idx) as usize;
            let c = self.do_numa_page(t, vma, idx);
            if self.il.is_some() {
                self.note_fault(t, vma, idx, t0, c, (true, nid));
            }
            self.charge_sys(t, c, b);
            if write {
                // the store the fault was for: a migrated PTE was rebuilt clean before 6.1
                self.mms[mm].vmas[vma].pt.set_dirty(idx, true);
            }
        }
        if write && !self.mms[mm].vmas[vma].pt.writable(idx) {
            let c = self.do_wp_page(t, vma, idx);
            self.charge_sys(t, c, b);
        }
        true
    }
}
