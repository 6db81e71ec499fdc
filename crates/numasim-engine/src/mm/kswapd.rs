//! kswapd: a node's reclaim thread, woken at the watermarks, run at the end of the tick in
//! which it was woken, on a CPU of its node (mm/vmscan.c: kswapd, balance_pgdat).

use crate::kernel::Kernel;
use crate::mm::vmscan::Reclaimer;

impl Kernel {
    /// Give every awake kswapd this tick's CPU time (at the tick's end); one that balanced its
    /// node, or found nothing to demote, goes back to sleep.
    // mm/vmscan.c: kswapd, kswapd_try_to_sleep
    pub fn run_kswapds(&mut self) {
        if !self.lru_tracking {
            return;
        }
        for n in 0..self.topo.nr_nodes {
            if !self.nodes[n].kswapd_wake {
                continue;
            }
            // kswapd runs on a CPU of its node: an idle one if there is one (a whole tick), else
            // it shares the least loaded busy one with the task there (CFS: half each), and that
            // task loses what kswapd used
            let cpus = &self.topo.node_cpus[n];
            let victim = if cpus.iter().any(|&c| self.cpus[c].curr().is_none()) { None } else { cpus.iter().copied().min_by_key(|&c| (self.cpus[c].rq.len(), c)).and_then(|c| self.cpus[c].curr()) };
            let share = if victim.is_some() { self.tick_ns as f64 / 2.0 } else { self.tick_ns as f64 };
            // a batch may overrun the tick: the debt is paid from the next one
            let m = &mut self.nodes[n];
            m.kswapd_credit_ns = (m.kswapd_credit_ns + share).min(share);
            let before = m.kswapd_cpu_ns;
            if self.balance_pgdat(n) {
                let m = &mut self.nodes[n];
                (m.kswapd_wake, m.kswapd_credit_ns) = (false, 0.0);
            }
            if let Some(v) = victim {
                self.tasks[v].wait_debt_ns += self.nodes[n].kswapd_cpu_ns - before;
            }
        }
    }

    /// Reclaim (demote) until the node's free pages reach the promo watermark in tiering mode,
    /// else the high one, or until the LRU has nothing cold left, within kswapd's CPU credit.
    /// Returns false when the credit ran out first (kswapd stays awake).
    // mm/vmscan.c: balance_pgdat, pgdat_balanced (WMARK_PROMO with NUMA_BALANCING_MEMORY_TIERING)
    fn balance_pgdat(&mut self, node: usize) -> bool {
        let m = &self.nodes[node];
        let mark = if self.tiering_mode() { m.wmark_promo } else { m.wmark_high };
        let want = mark.saturating_sub(m.free());
        if self.tiers.demotion[node].is_empty() {
            return true;
        }
        let running = self.running_mms();
        self.shrink_node(node, want, &running, Reclaimer::Kswapd).finished
    }

    /// Processes with a runnable task (what `folio_referenced` asks of a page outside
    /// random-access VMAs).
    pub(crate) fn running_mms(&self) -> Vec<bool> {
        let mut running = vec![false; self.mms.len()];
        for t in self.tasks.iter().filter(|t| t.runnable()) {
            running[t.mm] = true;
        }
        running
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::tiered_kernel;

    /// kswapd is a kthread on its node's CPUs: with an idle one it takes a whole tick and costs
    /// nobody anything; with every CPU busy it shares one under CFS (half the tick) and the
    /// task there loses the time kswapd used.
    #[test]
    fn kswapd_on_a_busy_node_takes_its_time_from_the_task_there() {
        for busy in [false, true] {
            let mut k = tiered_kernel("demotion_enabled = true", 2);
            let t = k.tasks.iter().position(|t| t.comm == "memhog").expect("the memhog");
            let cpus = k.topo.node_cpus[0].clone();
            if busy {
                // the memhog's thread on every CPU of node 0 (as if it had siblings there)
                for &c in &cpus {
                    k.cpus[c].rq = vec![t];
                }
                k.tasks[t].state = crate::sched::task::TaskState::Runnable;
            }
            k.nodes[0].used = k.nodes[0].present - k.nodes[0].wmark_min; // far below the watermark
            k.nodes[0].kswapd_wake = true;
            let debt = k.tasks[t].wait_debt_ns;
            k.run_kswapds();
            let used = k.nodes[0].kswapd_cpu_ns;
            assert!(used > 0.0, "kswapd demoted");
            let tick = k.tick_ns as f64;
            if busy {
                assert!(used <= tick / 2.0 + 1.0, "half a tick at most: {used}");
                assert_eq!(k.tasks[t].wait_debt_ns - debt, used, "the task there pays it");
            } else {
                assert!(used > tick / 2.0, "a whole tick on an idle CPU: {used}");
                assert_eq!(k.tasks[t].wait_debt_ns, debt);
            }
        }
    }
}
