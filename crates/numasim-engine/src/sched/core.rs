//! Runqueues, task placement at fork/wakeup, time-sharing and load balancing (kernel/sched/).
//!
//! ## Modelled
//! One running task per CPU, round-robin time-sharing per tick when oversubscribed, fork placement
//! on the node with the most idle CPUs (idle cores first), newidle pulls of queued tasks, SMT
//! spreading inside a node, and NUMA-domain balancing of running-task counts that tolerates an
//! imbalance of 2 (adjust_numa_imbalance) and leaves a task on its preferred node. A task alone
//! on its CPU moves only by active balancing: after more than cache_nice_tries + 2 failed
//! periodic balances, one task per kick.
//! ## Not modelled
//! PELT load, cgroups, priorities, wakeup affinity heuristics, a domain per NUMA distance level.

use crate::kernel::Kernel;
use crate::sched::task::TaskState;
use crate::trace::TraceKind;

/// Ticks between NUMA-domain balancing passes (sd->balance_interval of a NUMA domain, ~32 ms).
const NUMA_BALANCE_TICKS: u64 = 8;
/// Running-task imbalance between nodes that the NUMA domain tolerates (adjust_numa_imbalance).
const NUMA_IMBALANCE_MIN: usize = 2;
/// sd->cache_nice_tries of a NUMA domain (kernel/sched/topology.c: sd_init).
const NUMA_CACHE_NICE_TRIES: u32 = 2;

/// The NUMA sched domain's balancing state (struct sched_domain), one domain spanning all CPUs.
#[derive(Debug, Clone, Copy, Default)]
pub struct NumaDomain {
    pub nr_balance_failed: u32,
    /// Next periodic balance, ns: every sd->min_interval = sd_weight ms (sd_init).
    pub next_balance: u64,
}

impl Kernel {
    fn idle(&self, cpu: usize) -> bool {
        self.cpus[cpu].rq.is_empty()
    }

    fn core_idle(&self, cpu: usize) -> bool {
        self.idle(cpu) && self.topo.siblings(cpu).all(|s| self.idle(s))
    }

    /// Best CPU of `node` for `t`: an idle CPU of an idle core, else an idle CPU, else the least loaded.
    fn select_cpu_on_node(&self, t: usize, node: usize) -> Option<usize> {
        let allowed = &self.tasks[t].allowed;
        let cands = self.topo.node_cpus[node].iter().copied().filter(|&c| allowed[c]);
        cands.min_by_key(|&c| (!self.idle(c) as usize, !self.core_idle(c) as usize, self.cpus[c].rq.len(), c))
    }

    fn node_running(&self, node: usize) -> usize {
        self.topo.node_cpus[node].iter().map(|&c| self.cpus[c].rq.len()).sum()
    }

    fn idle_cpus(&self, t: usize, node: usize) -> usize {
        self.topo.node_cpus[node].iter().filter(|&&c| self.tasks[t].allowed[c] && self.idle(c)).count()
    }

    /// Node with the most allowed idle CPUs, ties to `prefer`, then the lowest id.
    // kernel/sched/fair.c: sched_balance_find_dst_group (fork/exec balancing), simplified
    fn find_idlest_node(&self, t: usize, prefer: usize) -> usize {
        (0..self.topo.nr_nodes)
            .filter(|&n| self.topo.node_cpus[n].iter().any(|&c| self.tasks[t].allowed[c]))
            .max_by_key(|&n| (self.idle_cpus(t, n), std::cmp::Reverse(self.node_running(n)), n == prefer, std::cmp::Reverse(n)))
            .unwrap_or(prefer)
    }

    /// Start a forked/cloned task on the idlest allowed CPU.
    // kernel/sched/core.c: wake_up_new_task -> select_task_rq (SD_BALANCE_FORK)
    pub fn wake_up_new_task(&mut self, t: usize) {
        let parent = self.tasks[t].parent;
        let prefer = parent.map(|p| self.task_node(p)).unwrap_or(0);
        let node = self.find_idlest_node(t, prefer);
        let cpu = self.select_cpu_on_node(t, node).unwrap_or(0);
        let mm = self.tasks[t].mm;
        self.tasks[t].state = TaskState::Runnable;
        self.tasks[t].start_ns = self.now;
        self.tasks[t].cpu = cpu;
        if let Some(p) = parent {
            self.tasks[t].policy = if self.tasks[t].policy == crate::mm::mempolicy::Mempolicy::DEFAULT { self.tasks[p].policy } else { self.tasks[t].policy };
        }
        self.init_numa_balancing(t, parent);
        self.mms[mm].users += 1;
        self.cpus[cpu].rq.push(t);
    }

    fn dequeue(&mut self, t: usize) {
        let cpu = self.tasks[t].cpu;
        self.cpus[cpu].rq.retain(|&x| x != t);
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

    pub fn task_sleep(&mut self, t: usize) {
        self.tasks[t].state = TaskState::Sleeping;
        self.dequeue(t);
    }

    /// Wake a sleeping task on its previous CPU if idle, else the best CPU of its node.
    // kernel/sched/fair.c: select_task_rq_fair (wakeup), simplified
    pub fn wake_up_process(&mut self, t: usize) {
        let prev = self.tasks[t].cpu;
        let cpu = if self.idle(prev) && self.tasks[t].allowed[prev] {
            prev
        } else {
            let node = self.find_idlest_node(t, self.cpu_node(prev));
            self.select_cpu_on_node(t, node).unwrap_or(prev)
        };
        if cpu != prev {
            self.trace_sched(TraceKind::MigrateTask, t, Some(self.cpu_node(prev)), Some(self.cpu_node(cpu)), None);
        }
        self.tasks[t].state = TaskState::Runnable;
        self.tasks[t].cpu = cpu;
        self.cpus[cpu].rq.push(t);
    }

    // kernel/exit.c: do_exit
    pub fn task_exit(&mut self, t: usize, used_ns: f64) {
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
    pub fn scheduler_tick(&mut self, tick_no: u64) {
        self.apply_numa_moves();
        for cpu in 0..self.cpus.len() {
            if let Some(t) = self.cpus[cpu].curr() {
                self.task_tick_numa(t);
            }
        }
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
        if tick_no.is_multiple_of(NUMA_BALANCE_TICKS) {
            self.numa_domain_balance();
        }
    }

    /// An idle CPU pulls a queued (not running) task, nearest node first.
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
            let src = self
                .topo
                .nodes_by_distance(node)
                .iter()
                .flat_map(|&n| self.topo.node_cpus[n].iter().copied())
                .filter(|&c| self.cpus[c].rq.len() > 1)
                .find_map(|c| self.cpus[c].rq[1..].iter().copied().find(|&t| self.tasks[t].allowed[cpu]));
            if let Some(t) = src {
                self.move_task(t, cpu);
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

    /// Even out runnable tasks between nodes beyond the tolerated imbalance: a queued task goes
    /// to the least loaded CPU of the idlest node; a task is not moved off its preferred node.
    /// A running task can only be pushed to an idle CPU by active balancing, at most one per
    /// periodic balance and only after more than cache_nice_tries + 2 failed ones.
    // kernel/sched/fair.c: sched_balance_rq at the NUMA level, migrate_degrades_locality
    fn numa_domain_balance(&mut self) {
        let nr = self.topo.nr_nodes;
        let mut periodic = self.now >= self.numa_sd.next_balance;
        if periodic {
            self.numa_sd.next_balance = self.now + self.cpus.len() as u64 * 1_000_000;
        }
        loop {
            let running: Vec<usize> = (0..nr).map(|n| self.node_running(n)).collect();
            let busiest = (0..nr).max_by_key(|&n| (running[n], std::cmp::Reverse(n))).unwrap_or(0);
            let idlest = (0..nr).min_by_key(|&n| (running[n], n)).unwrap_or(0);
            if running[busiest] <= running[idlest] + NUMA_IMBALANCE_MIN {
                if periodic {
                    self.numa_sd.nr_balance_failed = 0;
                }
                return;
            }
            let has_idle = self.topo.node_cpus[idlest].iter().any(|&c| self.idle(c));
            let mut cands: Vec<usize> = self.topo.node_cpus[busiest].clone();
            cands.sort_by_key(|&c| (std::cmp::Reverse(self.cpus[c].rq.len()), std::cmp::Reverse(self.topo.siblings(c).filter(|&s| !self.idle(s)).count()), std::cmp::Reverse(c)));
            let can_move = |k: &Kernel, t: usize| {
                let leaves_preferred = k.numa_balancing() && k.tasks[t].numa.preferred_nid == Some(busiest);
                k.topo.node_cpus[idlest].iter().any(|&d| k.tasks[t].allowed[d]) && !leaves_preferred
            };
            let queued = cands.iter().find_map(|&c| self.cpus[c].rq.iter().skip(1).rev().copied().find(|&t| can_move(self, t)));
            let t = match queued {
                Some(t) => {
                    self.numa_sd.nr_balance_failed = 0;
                    t
                }
                None => {
                    let curr = cands.iter().find_map(|&c| self.cpus[c].curr().filter(|&t| can_move(self, t)));
                    let Some(t) = curr.filter(|_| has_idle && periodic) else { return };
                    periodic = false;
                    // load_balance: nothing detachable; need_active_balance -> imbalanced_active_balance
                    self.numa_sd.nr_balance_failed += 1;
                    if self.numa_sd.nr_balance_failed <= NUMA_CACHE_NICE_TRIES + 2 {
                        return;
                    }
                    self.numa_sd.nr_balance_failed = NUMA_CACHE_NICE_TRIES + 1;
                    t
                }
            };
            let Some(dst) = self.select_cpu_on_node(t, idlest) else { return };
            self.move_task(t, dst);
        }
    }

    /// Inside a node, a queued task moves to a CPU with at least two fewer runnable tasks.
    // kernel/sched/fair.c: sched_balance_rq at the MC level
    fn node_rq_balance(&mut self) {
        for node in 0..self.topo.nr_nodes {
            loop {
                let cpus = &self.topo.node_cpus[node];
                let src = *cpus.iter().max_by_key(|&&c| (self.cpus[c].rq.len(), std::cmp::Reverse(c))).unwrap();
                let dst = *cpus.iter().min_by_key(|&&c| (self.cpus[c].rq.len(), c)).unwrap();
                if self.cpus[src].rq.len() < self.cpus[dst].rq.len() + 2 {
                    break;
                }
                let Some(&t) = self.cpus[src].rq[1..].iter().rev().find(|&&t| self.tasks[t].allowed[dst]) else { break };
                self.move_task(t, dst);
            }
        }
    }
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

    /// A task alone on its CPU is not detachable: the NUMA domain pushes one only by active
    /// balancing, after more than cache_nice_tries (2) + 2 failed periodic balances, then
    /// restarts the count at cache_nice_tries + 1, so one more move every second balance.
    // kernel/sched/fair.c: sched_balance_rq, imbalanced_active_balance
    #[test]
    fn running_tasks_move_one_per_active_balance() {
        let text = SMALL.replace("cpus_per_node = 2", "cpus_per_node = 8").replace("threads = 4", "threads = 8");
        let mut k = crate::testutil::small_kernel_from(&format!("[kernel]\nnuma_balancing = false\n{text}"));
        let threads: Vec<usize> = (0..8).map(|i| crate::testutil::thread(&k, i)).collect();
        for (i, &t) in threads.iter().enumerate() {
            k.move_task(t, i);
        }
        assert_eq!((k.node_running(0), k.node_running(1)), (8, 0));
        let interval = k.cpus.len() as u64 * 1_000_000;
        let mut moved_at = vec![];
        for attempt in 1..=12 {
            k.now = k.numa_sd.next_balance.max(k.now + interval);
            let before = k.node_running(1);
            k.numa_domain_balance();
            assert!(k.node_running(1) <= before + 1, "one task per kick");
            // a balance inside the interval is not periodic and cannot kick
            k.numa_domain_balance();
            if k.node_running(1) > before {
                moved_at.push(attempt);
            }
        }
        assert_eq!(moved_at, vec![5, 7, 9], "then 5 vs 3 is within the tolerated imbalance");
        assert_eq!((k.node_running(0), k.node_running(1)), (5, 3));
    }
}
