//! The load balancer of a busy CPU at the MC level: its node's CPUs (one LLC per node), in
//! groups of one CPU, or of one core's SMT siblings (kernel/sched/fair.c: sched_balance_rq with
//! sd = the MC domain, env->idle == CPU_NOT_IDLE).
//!
//! When the local group is fully busy and another group of the node is overloaded (three tasks
//! on two CPUs, five on four), calculate_imbalance asks for a migrate_load of the smaller gap to
//! the average load: half a task's load here. detach_tasks takes a task only when
//! `shr_bound(load, nr_balance_failed)` fits in it, so the pull succeeds at the balance after a
//! failed one, and the tasks take turns on the CPUs: each gets its share of the node over time,
//! as CFS gives it, where without this rule the lone task keeps a CPU to itself.
//!
//! The other in-node cases keep the simpler per-tick rules of core.rs: an idle CPU pulls a
//! queued task (newidle_balance), a CPU with two more tasks than another gives one
//! (node_rq_balance), a task sharing a core moves to an idle core (smt_balance). Not modelled
//! here: active balancing at the MC level (from 5.12 it is for migrate_task only, which this
//! case is not), and the SMT level below MC.

use super::balance::{fbq_classify, LbEnv, SdState};
use super::domain::{Level, SCHED_CAPACITY_SCALE};
use super::stats::{GroupType, SgStats};
use crate::kernel::Kernel;

impl Kernel {
    /// The periodic MC-level balance of every busy CPU that is due this tick.
    // kernel/sched/fair.c: sched_balance_domains (rebalance_domains) for the MC domain
    pub fn rebalance_mc_domains(&mut self) {
        if !self.cpus.iter().any(|c| c.rq.len() > 1) {
            return;
        }
        let now = self.now + self.tick_ns;
        for cpu in 0..self.cpus.len() {
            if self.idle(cpu) {
                continue; // idle CPUs pull in newidle_balance
            }
            let min_interval = self.topo.node_cpus[self.cpu_node(cpu)].len() as u64; // sd->min_interval: sd_weight ms
            if self.mc_sd[cpu].balance_interval == 0 {
                self.mc_sd[cpu].balance_interval = min_interval;
            }
            let st = self.mc_sd[cpu];
            if now < st.last_balance + self.sd_balance_interval(st.balance_interval, Level::Mc, true) {
                continue;
            }
            self.mc_balance_busy(cpu, min_interval);
            self.mc_sd[cpu].last_balance = now;
        }
    }

    /// The CPUs of each MC group of `cpu`'s node: the local group first, then from the next CPU
    /// on, wrapping (build_sched_groups: for_each_cpu_wrap).
    fn mc_groups(&self, cpu: usize) -> Vec<Vec<usize>> {
        let cpus = &self.topo.node_cpus[self.cpu_node(cpu)];
        let start = cpus.iter().position(|&c| c == cpu).unwrap_or(0);
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for &c in cpus[start..].iter().chain(&cpus[..start]) {
            if groups.iter().any(|g| g.contains(&c)) {
                continue;
            }
            let mut g: Vec<usize> = std::iter::once(c).chain(self.topo.siblings(c)).filter(|s| cpus.contains(s)).collect();
            g.sort_unstable();
            groups.push(g);
        }
        groups
    }

    /// One sched_balance_rq of busy `dst_cpu` at the MC level.
    // kernel/sched/fair.c: sched_balance_rq, should_we_balance, sched_balance_find_src_group,
    // calculate_imbalance (migrate_load), sched_balance_find_src_rq, detach_tasks
    fn mc_balance_busy(&mut self, dst_cpu: usize, min_interval: u64) {
        let groups = self.mc_groups(dst_cpu);
        let params = self.sd_params(Level::Mc);
        // should_we_balance: the local group's first idle CPU, else its first CPU
        let balancer = groups[0].iter().copied().find(|&c| self.idle(c)).unwrap_or(groups[0][0]);
        if balancer != dst_cpu {
            return self.mc_out_balanced(dst_cpu);
        }
        let stats: Vec<SgStats> = groups.iter().map(|g| self.update_sg_lb_stats(g, params.imbalance_pct)).collect();
        let local = stats[0];
        if local.group_type == GroupType::HasSpare {
            return; // an idle sibling: the per-tick in-node rules (core.rs)
        }
        // update_sd_pick_busiest: the overloaded group of the highest avg_load (the first of equals)
        let mut busiest: Option<usize> = None;
        for gi in 1..groups.len() {
            if stats[gi].group_type == GroupType::Overloaded && busiest.is_none_or(|b| stats[gi].avg_load > stats[b].avg_load) {
                busiest = Some(gi);
            }
        }
        // a busiest group that is not overloaded: nothing for a busy CPU to pull
        let Some(bi) = busiest else { return self.mc_out_balanced(dst_cpu) };
        let b = stats[bi];
        let total_load: u64 = stats.iter().map(|s| s.group_load).sum();
        let total_capacity: u64 = stats.iter().map(|s| s.group_capacity).sum();
        let sds_avg = total_load * SCHED_CAPACITY_SCALE / total_capacity.max(1);
        let local_avg = local.group_load * SCHED_CAPACITY_SCALE / local.group_capacity.max(1);
        if local.group_type == GroupType::Overloaded && 100 * b.avg_load <= params.imbalance_pct * local_avg {
            return self.mc_out_balanced(dst_cpu);
        }
        if local_avg >= b.avg_load || local_avg >= sds_avg {
            return self.mc_out_balanced(dst_cpu);
        }
        let gap = (b.avg_load - sds_avg) * b.group_capacity;
        let imbalance = (gap.min((sds_avg - local_avg) * local.group_capacity) / SCHED_CAPACITY_SCALE) as i64;
        if imbalance <= 0 {
            return self.mc_out_balanced(dst_cpu);
        }
        let failed = self.mc_sd[dst_cpu].nr_balance_failed;
        let fbq = fbq_classify(b.sum_nr_running, b.nr_numa_running, b.nr_preferred_running);
        let mut env = LbEnv::for_mc(self, dst_cpu, failed, imbalance, fbq);
        let Some(src) = self.find_src_rq(&env, groups[bi].iter().copied()) else { return self.mc_out_balanced(dst_cpu) };
        env.src_cpu = src;
        // a task moves if can_migrate_task allows it and its load, halved per failed balance
        // (shr_bound), fits in the imbalance
        let moved = self.detach_tasks(&mut env) > 0;
        let st = &mut self.mc_sd[dst_cpu];
        st.nr_balance_failed = if moved { 0 } else { failed + 1 };
        st.balance_interval = min_interval; // "we were unbalanced": the interval restarts
    }

    /// out_balanced: the failure count restarts and the interval doubles, up to max_interval
    /// (2 * sd_weight ms).
    // kernel/sched/fair.c: sched_balance_rq, out_balanced / out_one_pinned
    fn mc_out_balanced(&mut self, cpu: usize) {
        let max_interval = 2 * self.topo.node_cpus[self.cpu_node(cpu)].len() as u64;
        let st: &mut SdState = &mut self.mc_sd[cpu];
        st.nr_balance_failed = 0;
        if st.balance_interval < max_interval {
            st.balance_interval *= 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::parse_scenario;
    use crate::simulation::Simulation;

    /// kernel/sched/fair.c: calculate_imbalance / detach_tasks — three busy tasks on a node of
    /// two CPUs: the MC balancer's imbalance is half a task's load, so each pull comes at the
    /// balance after a failed one and the tasks take turns; each gets about two thirds of a
    /// CPU, where a lone task kept a CPU to itself (1 s against 0.5 s each for the others).
    #[test]
    fn three_tasks_on_two_cpus_take_turns() {
        let text = r#"
[machine]
profile = "xeon-platinum-2n-128c"
nodes = 2
cpus_per_node = 2
smt = 1
memory_gib_per_node = 2
distances = [[10, 20], [20, 10]]
[kernel]
version = "6.12"
numa_balancing = false
[[workload]]
kind = "program"
[[workload.buffer]]
size_mib = 4
[[workload.process]]
node = 0
[[workload.process.thread]]
count = 3
node = 0
ops = [{ op = "store", duration_s = 3.0 }]
"#;
        let mut sim = Simulation::new(&parse_scenario(text).unwrap()).unwrap();
        sim.step_until(3_000_000_000).unwrap();
        let runtimes: Vec<u64> = sim.k.tasks.iter().filter(|t| t.parent.is_some()).map(|t| t.sum_exec_runtime).collect();
        assert_eq!(runtimes.len(), 3);
        let total: u64 = runtimes.iter().sum();
        for &r in &runtimes {
            let share = r as f64 / total as f64;
            assert!((0.28..0.39).contains(&share), "each task a third of the node's time: {runtimes:?}");
        }
    }
}
