//! Running a tick's tasks. A task runs its whole tick at once, one CPU after another, except
//! threads of one process whose store streams cover the same pages: who reaches a page first
//! decides who takes its fault, so those run interleaved in simulated time (issue 27). Each
//! runs freely over pages it can access without a fault (a page that needs none cannot come to
//! need one within the tick: the scanner ran at its start), and stops before its next fault, or
//! before a page another thread's fault is still changing, until every other thread of the
//! group has reached its instant (conservative event order, ties in CPU order). Faults,
//! migrations and races are thus taken in the order of their instants, to the ns.

use crate::kernel::Kernel;
use crate::workload::exec::TickRun;
use crate::workload::Op;

/// `run.interleave_max_threads` by default: off. Threads of equal costs that start together
/// stay in step in the model, where real ones drift apart, so every fault of one becomes a
/// collision for the other; against the real-kernel boots the model is closer without the
/// collisions than with them until that drift is modelled (docs/model.md, "Threads that
/// share pages"). A convoy of n threads also costs n simulator steps per fault.
pub const DEFAULT_MAX_THREADS: usize = 0;

/// The interleaved group that is running.
#[derive(Debug, Default)]
pub struct Interleave {
    /// (task, what is left of its tick) of every member; the running one's budget is its own
    runs: Vec<(usize, TickRun)>,
    live: Vec<bool>,
    running: usize,
    /// ns into the tick the running task may reach before its next fault
    horizon: f64,
    parked: bool,
}

impl Kernel {
    /// Run every CPU's current task for the tick, adding each task's runtime.
    pub fn run_tasks(&mut self) {
        // migrate_pages(2) callers whose target streams run first (mm/migration_entry.rs)
        self.timed_migrators = self.find_timed_migrators();
        for t in self.timed_migrators.clone() {
            let used = self.run_task(t);
            self.tasks[t].sum_exec_runtime += used.round() as u64;
        }
        let groups = self.sharing_groups();
        let mut done = vec![false; groups.len()];
        for cpu in 0..self.cpus.len() {
            let Some(t) = self.cpus[cpu].curr() else { continue };
            if self.timed_migrators.contains(&t) {
                continue;
            }
            match groups.iter().position(|g| g.contains(&t)) {
                Some(g) if !done[g] => {
                    done[g] = true;
                    self.run_group(&groups[g]);
                }
                Some(_) => {}
                None => {
                    let used = self.run_task(t);
                    self.tasks[t].sum_exec_runtime += used.round() as u64;
                }
            }
        }
        let next = (self.now + self.tick_ns) as f64;
        if !self.pending_flushes.is_empty() {
            self.deliver_pending_flushes(next);
        }
        self.inflight.retain(|r| r.end > next);
    }

    /// Groups of two or more running threads of one mm of at most `interleave_max` threads
    /// whose store streams overlap.
    fn sharing_groups(&self) -> Vec<Vec<usize>> {
        if self.interleave_max < 2 {
            return Vec::new();
        }
        // (mm, vma, first, end, task) of each running task in a store stream
        let mut streams: Vec<(usize, usize, u64, u64, usize)> = Vec::new();
        for c in &self.cpus {
            let Some(t) = c.curr() else { continue };
            if let Some((vma, lo, hi)) = self.stream_of(t) {
                streams.push((self.tasks[t].mm, vma, lo, hi, t));
            }
        }
        if streams.len() < 2 {
            return Vec::new();
        }
        // a process of more threads (all it ever has) is left out whole, however many of them
        // run this tick
        let mut threads = vec![0usize; self.mms.len()];
        for p in &self.tasks {
            threads[p.mm] += 1;
        }
        streams.retain(|s| threads[s.0] <= self.interleave_max);
        streams.sort_unstable();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut cur: Vec<usize> = Vec::new();
        let mut reach = (usize::MAX, usize::MAX, 0u64);
        for &(mm, vma, lo, hi, t) in &streams {
            if (mm, vma) == (reach.0, reach.1) && lo < reach.2 {
                cur.push(t);
                reach.2 = reach.2.max(hi);
            } else {
                groups.push(std::mem::take(&mut cur));
                cur = vec![t];
                reach = (mm, vma, hi);
            }
        }
        groups.push(cur);
        groups.retain(|g| g.len() > 1);
        // in CPU order (ties between equal instants go to the lower CPU)
        for g in &mut groups {
            g.sort_by_key(|&t| self.tasks[t].cpu);
        }
        groups
    }

    /// The pages task `t` streams over now: (vma, first, end).
    fn stream_of(&self, t: usize) -> Option<(usize, u64, u64)> {
        let p = &self.tasks[t];
        match p.program.get(p.pc) {
            Some(&Op::Sweep { vma, first, npages, .. }) | Some(&Op::SweepFor { vma, first, npages, .. }) | Some(&Op::Stream { vma, first, npages, .. }) => Some((vma, first, first + npages)),
            Some(&Op::LinearAccess { vma, npages, .. }) => Some((vma, 0, npages)),
            _ => None,
        }
    }

    /// The tasks on a CPU in a migrate_pages(2)/move_pages(2) call whose target has a thread
    /// on a CPU in a store stream, in CPU order.
    fn find_timed_migrators(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for c in &self.cpus {
            let Some(t) = c.curr() else { continue };
            let p = &self.tasks[t];
            let target = match p.program.get(p.pc) {
                Some(&Op::MigratePages { workload, .. }) | Some(&Op::MovePages { workload, .. }) => self.workload_mm(workload),
                _ => None,
            };
            let Some(mm) = target else { continue };
            if self.cpus.iter().filter_map(|c| c.curr()).any(|s| self.tasks[s].mm == mm && self.stream_of(s).is_some()) {
                out.push(t);
            }
        }
        out
    }

    /// Run the tasks of `group` interleaved: always the one with the earliest instant, until it
    /// must wait for another (`parked`) or its tick ends.
    fn run_group(&mut self, group: &[usize]) {
        let tick = self.tick_ns as f64;
        let runs: Vec<(usize, TickRun)> = group.iter().map(|&t| (t, self.run_task_begin(t))).collect();
        let live = vec![true; runs.len()];
        self.il = Some(Interleave { runs, live, running: 0, horizon: 0.0, parked: false });
        while let Some(il) = self.il.as_mut() {
            // the earliest live member (lowest CPU on a tie), and the next earliest instant
            let mut first: Option<usize> = None;
            let mut horizon = f64::INFINITY;
            for i in (0..il.runs.len()).filter(|&i| il.live[i]) {
                let at = tick - il.runs[i].1.budget;
                match first {
                    Some(f) if at >= tick - il.runs[f].1.budget => horizon = horizon.min(at),
                    Some(f) => {
                        horizon = horizon.min(tick - il.runs[f].1.budget);
                        first = Some(i);
                    }
                    None => first = Some(i),
                }
            }
            let Some(i) = first else { break };
            (il.running, il.horizon, il.parked) = (i, horizon, false);
            let (t, mut budget) = (il.runs[i].0, il.runs[i].1.budget);
            self.run_task_body(t, &mut budget);
            let Some(il) = self.il.as_mut() else { break };
            il.runs[i].1.budget = budget;
            if !il.parked {
                il.live[i] = false;
            }
        }
        let runs = self.il.take().map(|il| il.runs).unwrap_or_default();
        for (t, run) in runs {
            let used = self.run_task_end(t, run);
            self.tasks[t].sum_exec_runtime += used.round() as u64;
        }
    }

    /// In an interleaved tick: must the running task, with `b` ns of its tick left, wait for
    /// the others before its next fault? Marks it parked if so.
    pub fn must_park(&mut self, b: f64) -> bool {
        let tick = self.tick_ns as f64;
        match &mut self.il {
            Some(il) if tick - b > il.horizon => {
                il.parked = true;
                true
            }
            _ => false,
        }
    }

    pub fn parked(&self) -> bool {
        self.il.as_ref().is_some_and(|il| il.parked)
    }

    /// Charge `ns` of system time to task `t`, waiting in an interleaved group (its tick's
    /// budget) or not (a debt for its next tick).
    pub fn charge_interleaved(&mut self, t: usize, ns: f64) {
        self.tasks[t].sys_ns += ns;
        let waiting = self.il.as_mut().and_then(|il| {
            let running = il.running;
            il.runs.iter_mut().enumerate().find(|(j, m)| m.0 == t && *j != running).map(|(_, m)| m)
        });
        if let Some(r) = waiting {
            let take = ns.min(r.1.budget.max(0.0));
            r.1.budget -= take;
            self.tasks[t].sys_debt_ns += ns - take;
        } else {
            self.tasks[t].sys_debt_ns += ns;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{small_kernel, thread};
    use crate::workload::Op;

    /// Task `t` streams over the first thread's part (a quarter of the buffer) instead of its own.
    fn sweep_first_part(k: &mut crate::kernel::Kernel, t: usize) {
        let pc = k.tasks[t].pc;
        let npages = k.mms[k.tasks[t].mm].vmas[0].pt.len() / 4;
        k.tasks[t].program[pc] = Op::Sweep { vma: 0, first: 0, npages, passes: 1 };
    }

    /// numa02's threads each stream over their own part: nothing to interleave. Two threads
    /// streaming over the same pages form a group, the others stay out; a process of more threads than
    /// `run.interleave_max_threads` does not.
    #[test]
    fn only_threads_streaming_over_the_same_pages_interleave() {
        let mut k = small_kernel("");
        assert!(k.sharing_groups().is_empty(), "off by default");
        k.interleave_max = 8;
        assert!(k.sharing_groups().is_empty(), "numa02's parts are disjoint");
        let (a, b) = (thread(&k, 0), thread(&k, 1));
        sweep_first_part(&mut k, a);
        sweep_first_part(&mut k, b);
        let mut g = k.sharing_groups();
        assert_eq!(g.len(), 1);
        g[0].sort();
        let mut want = vec![a, b];
        want.sort();
        assert_eq!(g[0], want);
        k.interleave_max = 4; // the process has 5 threads
        assert!(k.sharing_groups().is_empty());
    }
}
