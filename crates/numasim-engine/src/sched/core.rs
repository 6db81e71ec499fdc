//! Runqueues, task start and wake-up, time-sharing and the per-tick balancing (kernel/sched/).
//!
//! ## Modelled
//! One running task per CPU, round-robin time-sharing per tick when oversubscribed; fork and
//! exec placement through the sched domains and wake-ups (select.rs); NUMA-level load
//! balancing, periodic and newly idle (balance.rs); inside a node, idle CPUs pull queued tasks,
//! queued tasks spread over the node's CPUs and SMT siblings spread over idle cores, and a busy
//! CPU's periodic MC balance lets tasks take turns where they do not divide evenly
//! (balance_mc.rs);
//! DELAY_DEQUEUE (6.12): a task that blocks while sharing its CPU stays queued until the end
//! of the next tick (when the tasks that waited have caught up its lag), and a wake-up before
//! that just requeues it there.
//! ## Not modelled
//! PELT load, cgroups, priorities, wake_affine; of the MC-level load balancer, only the busy
//! CPU's migrate_load case follows the kernel's rules (the in-node pulls above stand for the
//! rest).

use crate::kernel::Kernel;
use crate::sched::select::SdFlag;
use crate::sched::task::TaskState;
use crate::trace::TraceKind;
use crate::variants::{DelayDequeue, NumaMigrateRetry};
use crate::workload::Op;

impl Kernel {
    /// Tasks queued on `node`'s CPUs.
    pub fn node_running(&self, node: usize) -> usize {
        self.topo.node_cpus[node].iter().map(|&c| self.cpus[c].rq.len()).sum()
    }

    /// Start a forked/cloned task where sched_balance_find_dst_cpu puts it. A program (no
    /// parent in the engine) is forked by a launcher on CPU 0, which is not simulated, then
    /// balanced again at exec.
    // kernel/sched/core.c: sched_fork, wake_up_new_task -> select_task_rq (WF_FORK); sched_exec
    pub fn wake_up_new_task(&mut self, t: usize) {
        let parent = self.tasks[t].parent;
        let mm = self.tasks[t].mm;
        self.tasks[t].state = TaskState::Runnable;
        self.tasks[t].start_ns = self.now;
        if let Some(p) = parent {
            self.tasks[t].policy = if self.tasks[t].policy == crate::mm::mempolicy::Mempolicy::DEFAULT { self.tasks[p].policy } else { self.tasks[t].policy };
        }
        if self.exec_start.len() < self.tasks.len() {
            self.exec_start.resize(self.tasks.len(), 0);
        }
        // sched_fork: the NUMA state (a thread keeps its parent's preferred node) comes first
        self.init_numa_balancing(t, parent);
        if let Some(pm) = parent.map(|p| self.tasks[p].mm).filter(|&pm| pm != mm) {
            // fork: dup_mm copies the parent's mm_struct, scan state included (copy_mm runs
            // after sched_fork, so it sees what init_numa_balancing set)
            let (next, seq, offset) = (self.mms[pm].numa_next_scan, self.mms[pm].numa_scan_seq, self.mms[pm].numa_scan_offset);
            let m = &mut self.mms[mm];
            (m.numa_next_scan, m.numa_scan_seq, m.numa_scan_offset) = (next, seq, offset);
        }
        if let Some(p) = parent.filter(|_| self.variants().numa_migrate_retry == NumaMigrateRetry::Base) {
            // dup_task_struct copies it; 70ce3ea9aa4e (6.0) zeroes it
            self.tasks[t].numa.migrate_retry = self.tasks[p].numa.migrate_retry;
        }
        let cpu = match parent {
            Some(p) => {
                let c = self.tasks[p].cpu;
                self.select_task_rq_fork(t, c, c, SdFlag::Fork)
            }
            None => {
                let c = self.select_task_rq_fork(t, 0, 0, SdFlag::Fork);
                self.tasks[t].cpu = c;
                self.cpus[c].rq.push(t);
                let e = self.select_task_rq_fork(t, c, c, SdFlag::Exec);
                self.cpus[c].rq.retain(|&x| x != t);
                e
            }
        };
        self.tasks[t].cpu = cpu;
        self.mms[mm].users += 1;
        self.cpus[cpu].rq.push(t);
        let src = parent.map(|p| self.task_node(p));
        self.trace_sched(TraceKind::WakeupNew, t, src, Some(self.cpu_node(cpu)), None);
    }

    /// Place the tasks cloned during a tick. The CPUs ran one after another, so the clones of
    /// parents on different CPUs are placed in the order of their instants in the tick, and a
    /// parent that blocked after its clones (pthread_join, wait) still counts on its CPU for
    /// every clone up to its last one. A new task whose program starts by cloning (a forked
    /// process creating its threads) and that lands on an idle CPU runs from its instant on,
    /// so that its own clones take their place among the others'.
    // kernel/fork.c: kernel_clone -> wake_up_new_task, at the instant of each clone
    pub fn wake_up_new_tasks(&mut self, mut spawned: Vec<(f64, usize)>) {
        spawned.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut last = Self::last_clones(&self.tasks, &spawned);
        let mut i = 0;
        while i < spawned.len() {
            let (at, t) = spawned[i];
            // a parent forks while running: if it went to sleep later in the tick, count it
            // there (the other parents first, then this clone's own)
            let own = self.tasks[t].parent;
            let held: Vec<(usize, usize)> = last
                .iter()
                .filter(|&&(p, end)| end >= i && Some(p) != own)
                .chain(last.iter().filter(|&&(p, _)| Some(p) == own))
                .map(|&(p, _)| (p, self.tasks[p].cpu))
                .filter(|&(p, c)| self.tasks[p].state == TaskState::Sleeping && !self.cpus[c].rq.contains(&p) && !self.cpus[c].delayed.iter().any(|&(x, _)| x == p))
                .collect();
            for &(p, c) in &held {
                self.cpus[c].rq.push(p);
            }
            self.wake_up_new_task(t);
            for &(p, c) in &held {
                self.cpus[c].rq.retain(|&x| x != p);
            }
            let clones = self.start_in_tick(t, at);
            if !clones.is_empty() {
                let rest = spawned.split_off(i + 1);
                spawned.extend(merge_by_instant(rest, clones));
                last = Self::last_clones(&self.tasks, &spawned);
            }
            i += 1;
        }
    }

    /// (parent, index of its last clone in `spawned`) for every parent in it.
    fn last_clones(tasks: &[crate::sched::task::Task], spawned: &[(f64, usize)]) -> Vec<(usize, usize)> {
        let mut last: Vec<(usize, usize)> = Vec::new();
        for (i, &(_, t)) in spawned.iter().enumerate() {
            if let Some(p) = tasks[t].parent {
                match last.iter_mut().find(|(q, _)| *q == p) {
                    Some(e) => e.1 = i,
                    None => last.push((p, i)),
                }
            }
        }
        last
    }

    /// A new task cloned at `at` ns into the tick whose program starts by cloning, alone on
    /// its CPU: the CPU is woken (a reschedule IPI, as `wakeup_preempt` sends to an idle CPU)
    /// and the task runs the rest of the tick. Returns the clones it made, with their instants.
    // kernel/sched/core.c: wake_up_new_task -> wakeup_preempt -> resched_curr
    fn start_in_tick(&mut self, t: usize, at: f64) -> Vec<(f64, usize)> {
        let cpu = self.tasks[t].cpu;
        let start = at + self.cost.ipi_send_ns + self.cost.ipi_receive_ns;
        let clones_first = self.tasks[t].program.iter().find(|op| !matches!(op, Op::SetPolicy(_) | Op::SetAffinity(_))) == Some(&Op::Spawn);
        if !clones_first || self.cpus[cpu].rq.as_slice() != [t] || start >= self.tick_ns as f64 {
            return Vec::new();
        }
        let used = self.run_task_from(t, start);
        self.tasks[t].sum_exec_runtime += used.round() as u64;
        let mut clones = std::mem::take(&mut self.spawned);
        clones.sort_by(|a, b| a.0.total_cmp(&b.0));
        clones
    }

    fn dequeue(&mut self, t: usize) {
        let cpu = self.tasks[t].cpu;
        self.cpus[cpu].rq.retain(|&x| x != t);
        if self.cpus[cpu].rq.is_empty() {
            // a lone delayed task is picked, hence dequeued, at once
            self.cpus[cpu].delayed.clear();
            self.cpus[cpu].idle_stamp = self.clock.max(self.now);
            self.cpus[cpu].newly_idle = true;
        }
    }

    /// Move a runnable task to `cpu` (set_task_cpu with update_scan_period).
    pub fn move_task(&mut self, t: usize, cpu: usize) {
        if cpu != self.tasks[t].cpu {
            let (src, dst) = (self.task_node(t), self.cpu_node(cpu));
            self.trace_sched(TraceKind::MigrateTask, t, Some(src), Some(dst), None);
        }
        self.update_scan_period(t, cpu);
        self.dequeue(t);
        self.tasks[t].cpu = cpu;
        self.cpus[cpu].rq.push(t);
    }

    /// The task blocks. From 6.12 (152e11f6df29, DELAY_DEQUEUE) a task sharing its CPU is not
    /// eligible (it ran ahead of the others) and stays queued, sched_delayed, until the end of
    /// the next tick.
    // kernel/sched/fair.c: dequeue_entity
    pub fn task_sleep(&mut self, t: usize) {
        self.tasks[t].state = TaskState::Sleeping;
        let cpu = self.tasks[t].cpu;
        if self.variants().delay_dequeue >= DelayDequeue::V6_12 && self.cpus[cpu].rq.len() > 1 && self.cpus[cpu].rq.contains(&t) {
            self.cpus[cpu].rq.retain(|&x| x != t);
            self.cpus[cpu].delayed.push((t, self.now + 2 * self.tick_ns));
        } else {
            self.dequeue(t);
        }
    }

    /// Delayed tasks whose time has come leave their runqueue.
    fn expire_delayed(&mut self) {
        let end = self.now + self.tick_ns;
        for c in &mut self.cpus {
            c.delayed.retain(|&(_, until)| until > end);
        }
    }

    /// Wake a sleeping task: on its previous CPU if idle, else an idle CPU of that node, else
    /// its previous CPU. A delayed task is still queued: it is just runnable again.
    // kernel/sched/core.c: try_to_wake_up (ttwu_runnable), select_task_rq_fair (wake-up)
    pub fn wake_up_process(&mut self, t: usize) {
        let prev = self.tasks[t].cpu;
        if let Some(i) = self.cpus[prev].delayed.iter().position(|&(x, _)| x == t) {
            self.cpus[prev].delayed.remove(i);
            self.tasks[t].state = TaskState::Runnable;
            self.cpus[prev].rq.push(t);
            return;
        }
        let cpu = self.select_idle_sibling(t, prev, prev);
        if cpu != prev {
            self.trace_sched(TraceKind::MigrateTask, t, Some(self.cpu_node(prev)), Some(self.cpu_node(cpu)), None);
        }
        self.tasks[t].state = TaskState::Runnable;
        self.tasks[t].cpu = cpu;
        self.cpus[cpu].rq.push(t);
    }

    // kernel/exit.c: do_exit
    pub fn task_exit(&mut self, t: usize, used_ns: f64) {
        self.settle_clock_reads(t);
        self.tasks[t].state = TaskState::Exited;
        self.task_numa_free(t);
        self.tasks[t].mem_node_at_exit = crate::result::sweep_mem_node(self, t);
        self.tasks[t].exit_ns = self.now + used_ns.round() as u64;
        self.dequeue(t);
        let mm = self.tasks[t].mm;
        self.mms[mm].users -= 1;
    }

    /// Per-tick scheduler work after every CPU ran its task.
    // kernel/sched/core.c: sched_tick (task_tick_fair -> task_tick_numa) and balancing
    pub fn scheduler_tick(&mut self, _tick_no: u64) {
        // the tick's softirq work runs at its end
        self.clock = self.now + self.tick_ns;
        if self.exec_start.len() < self.tasks.len() {
            self.exec_start.resize(self.tasks.len(), 0);
        }
        for cpu in 0..self.cpus.len() {
            if let Some(t) = self.cpus[cpu].curr() {
                self.exec_start[t] = self.clock;
            }
        }
        self.apply_numa_moves();
        for cpu in 0..self.cpus.len() {
            if let Some(t) = self.cpus[cpu].curr() {
                self.task_tick_numa(t);
            }
        }
        self.expire_delayed();
        // SCHED_SOFTIRQ before the reschedule: the running tasks are still on their CPUs;
        // each CPU's domains lowest first
        self.rebalance_mc_domains();
        self.rebalance_numa_domains();
        for cpu in 0..self.cpus.len() {
            if self.cpus[cpu].rq.len() > 1 {
                self.cpus[cpu].rq.rotate_left(1);
            }
        }
        self.newidle_balance();
        if self.cpus.iter().any(|c| c.rq.len() > 1) {
            self.node_rq_balance();
        }
        self.smt_balance();
        for c in &mut self.cpus {
            c.newly_idle = false;
        }
    }

    /// An idle CPU pulls a queued (not running) task of its node; one that went idle this tick
    /// then tries its NUMA domains (sched_balance_newidle), while some runqueue is overloaded.
    // kernel/sched/fair.c: sched_balance_newidle
    fn newidle_balance(&mut self) {
        if !self.cpus.iter().any(|c| c.rq.len() > 1) {
            return;
        }
        for cpu in 0..self.cpus.len() {
            if !self.idle(cpu) {
                continue;
            }
            let node = self.cpu_node(cpu);
            let src = self.topo.node_cpus[node].iter().copied().filter(|&c| self.cpus[c].rq.len() > 1).find_map(|c| self.cpus[c].rq[1..].iter().copied().find(|&t| self.tasks[t].allowed[cpu]));
            if let Some(t) = src {
                self.move_task(t, cpu);
            } else if self.cpus[cpu].newly_idle {
                self.newidle_balance_numa(cpu);
            }
        }
    }

    /// Inside a node, a task sharing a core moves to a fully idle core (SMT domain balancing).
    fn smt_balance(&mut self) {
        if self.topo.smt < 2 {
            return;
        }
        for node in 0..self.topo.nr_nodes {
            if !self.topo.node_cpus[node].iter().any(|&c| self.core_idle(c)) {
                continue;
            }
            let cpus = self.topo.node_cpus[node].clone();
            for &c in &cpus {
                let Some(t) = self.cpus[c].curr() else { continue };
                if self.cpus[c].rq.len() > 1 || !self.topo.siblings(c).any(|s| !self.idle(s)) {
                    continue;
                }
                if let Some(dst) = cpus.iter().copied().find(|&d| self.core_idle(d) && self.tasks[t].allowed[d]) {
                    self.move_task(t, dst);
                }
            }
        }
    }

    /// Inside a node, a queued task moves to a CPU with at least two fewer runnable tasks.
    // kernel/sched/fair.c: sched_balance_rq at the MC level
    fn node_rq_balance(&mut self) {
        for node in 0..self.topo.nr_nodes {
            loop {
                let cpus = &self.topo.node_cpus[node];
                let (Some(&src), Some(&dst)) = (cpus.iter().max_by_key(|&&c| (self.cpus[c].rq.len(), std::cmp::Reverse(c))), cpus.iter().min_by_key(|&&c| (self.cpus[c].rq.len(), c))) else { break };
                if self.cpus[src].rq.len() < self.cpus[dst].rq.len() + 2 {
                    break;
                }
                let Some(&t) = self.cpus[src].rq[1..].iter().rev().find(|&&t| self.tasks[t].allowed[dst]) else { break };
                self.move_task(t, dst);
            }
        }
    }
}

/// Two lists sorted by instant merged into one (on a tie, `a`'s entry first).
fn merge_by_instant(a: Vec<(f64, usize)>, b: Vec<(f64, usize)>) -> Vec<(f64, usize)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        out.push(if y.0 < x.0 { b.next() } else { a.next() }.unwrap_or_default());
    }
    out.extend(a);
    out.extend(b);
    out
}

#[cfg(test)]
mod tests {
    use crate::scenario::parse_scenario;
    use crate::simulation::Simulation;
    use crate::testutil::{small_kernel, SMALL};

    /// Fork balancing spreads a process's threads over the nodes, one per CPU.
    #[test]
    fn threads_spread_one_per_cpu() {
        let k = small_kernel("");
        assert!(k.cpus.iter().all(|c| c.rq.len() == 1));
    }

    /// Oversubscribed CPUs time-share: 8 busy threads on 4 CPUs each get about half a CPU.
    #[test]
    fn oversubscribed_threads_share_cpus_fairly() {
        let text = SMALL.replace("threads = 4", "threads = 8").replace("passes = 1000", "passes = 100000");
        let mut sim = Simulation::new(&parse_scenario(&format!("[kernel]\nnuma_balancing = false\n{text}")).unwrap()).unwrap();
        sim.step_until(2_000_000_000).unwrap();
        let threads: Vec<u64> = sim.k.tasks.iter().filter(|t| t.parent.is_some()).map(|t| t.sum_exec_runtime).collect();
        let (lo, hi) = (threads.iter().min().unwrap(), threads.iter().max().unwrap());
        assert_eq!(threads.len(), 8);
        assert!(hi - lo <= 2 * sim.k.tick_ns, "runtimes {threads:?}");
        let total: u64 = threads.iter().sum();
        assert!(total > 4 * 1_800_000_000 && total <= 4 * 2_000_000_000, "4 CPUs busy: {total}");
    }
}
