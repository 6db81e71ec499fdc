//! Memory bandwidth sharing: per-thread stream rates, SMT siblings, memory controllers and the
//! interconnect, solved once per tick from each thread's node mix of the previous tick.

use crate::cost::{CostProfile, PAGE_SIZE};
use crate::kernel::Kernel;
use crate::workload::{Access, Op};

/// What the loop of a thread's current op does per page, as far as its cost goes.
#[derive(Clone, Copy, PartialEq)]
enum Rate {
    /// a memset of the whole range (`stream_gibps`)
    Stream,
    /// one memset per page (`page_store_gibps`)
    PageStore,
    /// one load per cache line (`touch_gibps`)
    Touch,
}

#[derive(Clone, Copy)]
struct StreamLoop {
    rate: Rate,
    /// Time-bound: the clock is read once per `CLOCK_READ_PAGES` pages reached.
    clock: bool,
}

impl StreamLoop {
    fn of(op: Option<&Op>, page_stores: bool) -> Self {
        let store = if page_stores { Rate::PageStore } else { Rate::Stream };
        match op {
            // numaw's streaming pass: every line loaded, one byte stored (remote_toucher.c, a
            // program's rmw op)
            Some(Op::SweepFor { .. }) => StreamLoop { rate: Rate::Touch, clock: true },
            Some(&Op::Stream { access, duration_ns, .. }) => StreamLoop { rate: if access == Access::Store { store } else { Rate::Touch }, clock: duration_ns > 0 },
            _ => StreamLoop { rate: store, clock: false },
        }
    }

    fn gibps(self, cost: &CostProfile) -> &Vec<Vec<f64>> {
        match self.rate {
            Rate::Stream => &cost.stream_gibps,
            Rate::PageStore => &cost.page_store_gibps,
            Rate::Touch => &cost.touch_gibps,
        }
    }

    /// The row of the per-tick cost cache: CPU node, SMT shared or not, and the loop.
    fn row(self, node: usize, alone: bool) -> usize {
        12 * node + 6 * alone as usize + 2 * self.rate as usize + self.clock as usize
    }
}

impl Kernel {
    /// Set `page_cost` (ns per page to each memory node) for every running task.
    pub fn update_page_costs(&mut self) {
        let nr = self.topo.nr_nodes;
        let running: Vec<(usize, usize)> = (0..self.cpus.len()).filter_map(|c| self.cpus[c].curr().map(|t| (c, t))).collect();
        let mut busy = vec![false; self.cpus.len()];
        for &(c, _) in &running {
            busy[c] = true;
        }
        // unconstrained per-thread rates (bytes/ns) and demand per node and per link
        let mut node_demand = vec![0.0f64; nr];
        // link a -> n at a * nr + n
        let mut link_demand = vec![0.0f64; nr * nr];
        let mut lone_rate = Vec::with_capacity(running.len());
        // the nodes a thread streamed to last tick, with their share (nonzero only: a zero
        // share adds nothing to a sum)
        let mut mix: Vec<(usize, f64)> = Vec::with_capacity(nr);
        // pmbench linear walkers: their per-access overhead (latency-bound, no stream demand)
        let mut walker = Vec::with_capacity(running.len());
        for &(c, t) in &running {
            let a = self.cpu_node(c);
            let share = if self.topo.siblings(c).any(|s| busy[s]) { self.cost.smt_share } else { 1.0 };
            let p = &mut self.tasks[t];
            std::mem::swap(&mut p.last_bytes, &mut p.cur_bytes);
            p.cur_bytes.fill(0.0);
            let total: f64 = p.last_bytes[..nr].iter().sum();
            self.clock_reads_to_sys(t, total);
            let p = &mut self.tasks[t];
            let single = matches!(p.program.get(p.pc), Some(Op::RandomAccess { .. }));
            let linear = match p.program.get(p.pc) {
                Some(&Op::LinearAccess { overhead_ns, .. }) => Some(overhead_ns),
                _ => None,
            };
            walker.push(linear);
            if (total == 0.0 && single) || linear.is_some() {
                // single latency-bound accesses (pmbench, a guest): no stream demand
                lone_rate.push(share);
                continue;
            }
            mix.clear();
            if total > 0.0 {
                mix.extend((0..nr).filter(|&n| p.last_bytes[n] != 0.0).map(|n| (n, p.last_bytes[n] / total)));
            } else {
                mix.push((a, 1.0));
            }
            let rates = StreamLoop::of(p.program.get(p.pc), p.page_stores).gibps(&self.cost);
            let bw = |n: usize| CostProfile::bytes_per_ns(rates[a][n]) * share;
            let inv: f64 = mix.iter().map(|&(n, m)| m / bw(n)).sum();
            let rate = 1.0 / inv;
            for &(n, m) in &mix {
                node_demand[n] += rate * m;
                if n != a {
                    link_demand[a * nr + n] += rate * m;
                }
            }
            lone_rate.push(share);
        }
        // stored bytes a controller can take: each costs dram_bytes_per_store of DRAM traffic
        let node_slow: Vec<f64> = (0..nr).map(|n| (node_demand[n] / (CostProfile::bytes_per_ns(self.cost.node_bandwidth_gibps[n]) / self.cost.dram_bytes_per_store)).max(1.0)).collect();
        // the costs depend on the thread's node and SMT share only: one row per pair
        let mut rows: Vec<Option<Vec<f64>>> = vec![None; 12 * nr];
        let others = running.len().saturating_sub(1);
        for (i, &(c, t)) in running.iter().enumerate() {
            let a = self.cpu_node(c);
            let share = lone_rate[i];
            let p = &self.tasks[t];
            let lp = StreamLoop::of(p.program.get(p.pc), p.page_stores);
            // an emulated clocksource's read costs more with more vCPUs busy
            let (clock_ns, clock_sys) = if lp.clock { (self.cost.clock_read_ns.at(others), self.cost.clock_read_sys_ns.at(others)) } else { (0.0, 0.0) };
            self.tasks[t].clock_sys_per_page = clock_sys / CostProfile::CLOCK_READ_PAGES;
            if let Some(overhead_ns) = walker[i] {
                // pmbench linear: one latency-bound access per page crossed
                let cost = &mut self.tasks[t].page_cost;
                for n in 0..nr {
                    cost[n] = self.cost.latency_ns[a][n] + overhead_ns;
                }
                continue;
            }
            let rates = lp.gibps(&self.cost);
            let clock = clock_ns / CostProfile::CLOCK_READ_PAGES;
            let row = rows[lp.row(a, share == 1.0)].get_or_insert_with(|| {
                (0..nr)
                    .map(|n| {
                        let mut slow = node_slow[n];
                        if n != a {
                            slow = slow.max(link_demand[a * nr + n] / CostProfile::bytes_per_ns(self.cost.interconnect_gibps.gibps(a, n)));
                        }
                        PAGE_SIZE / (CostProfile::bytes_per_ns(rates[a][n]) * share) * slow + clock
                    })
                    .collect()
            });
            self.tasks[t].page_cost[..nr].copy_from_slice(row);
        }
    }
}

impl Kernel {
    /// The clock reads a time-bound stream made over `bytes` it streamed with them in its page
    /// cost: the system time charged for them (a system call where the clocksource has no vDSO
    /// reader) moves from the user time the stream was charged to system time.
    pub fn clock_reads_to_sys(&mut self, t: usize, bytes: f64) {
        let p = &mut self.tasks[t];
        if p.clock_sys_per_page == 0.0 || bytes == 0.0 {
            return;
        }
        let sys = bytes / PAGE_SIZE * p.clock_sys_per_page;
        p.user_ns -= sys;
        p.sys_ns += sys;
    }

    /// The clock reads of the bytes a task streamed since the last bandwidth tick: at its exit,
    /// or at a run's end when it is cut off at `max_sim_s`.
    pub fn settle_clock_reads(&mut self, t: usize) {
        let streamed = self.tasks[t].cur_bytes.iter().sum();
        self.clock_reads_to_sys(t, streamed);
        self.tasks[t].cur_bytes.fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use crate::cost::{CostProfile, Interconnect, PAGE_SIZE};
    use crate::testutil::{small_kernel, thread};
    use crate::workload::Op;

    /// Ordinary stores are write-allocate: a memset stream's line is read for ownership and later
    /// written back, so each stored byte takes `dram_bytes_per_store` bytes of its memory
    /// controller's DRAM bandwidth (glibc's pre-2.40 `rep stosb` memset).
    #[test]
    fn write_allocate_stores_take_two_bytes_of_dram_bandwidth_each() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        let node = k.task_node(t);
        let streams = (0..k.cpus.len()).filter(|&c| k.cpu_node(c) == node && k.cpus[c].curr().is_some()).count();
        assert!(streams >= 2, "the fixture runs its threads two to a node");
        let lone = PAGE_SIZE / CostProfile::bytes_per_ns(k.cost.stream_gibps[node][node]);
        // DRAM for 1.5 times the node's stores: enough with non-temporal stores, short by a
        // quarter with write-allocate ones
        k.cost.node_bandwidth_gibps[node] = 1.5 * streams as f64 * k.cost.stream_gibps[node][node];
        k.cost.dram_bytes_per_store = 1.0;
        k.update_page_costs();
        assert!((k.tasks[t].page_cost[node] / lone - 1.0).abs() < 1e-9);
        k.cost.dram_bytes_per_store = 2.0;
        k.update_page_costs();
        assert!((k.tasks[t].page_cost[node] / lone - 4.0 / 3.0).abs() < 1e-9, "{} vs {lone}", k.tasks[t].page_cost[node]);
    }

    /// Threads making single random accesses (pmbench) move no stream of bytes, so they take
    /// no share of a memory controller from a memset stream on the same node.
    #[test]
    fn single_access_threads_take_no_stream_bandwidth() {
        let mut k = small_kernel("");
        let cap = k.cost.node_bandwidth_gibps[0];
        let streamer = thread(&k, 0);
        k.update_page_costs();
        let alone = k.tasks[streamer].page_cost.clone();
        // the other threads turn to random accesses; squeeze the controller so that three more
        // full-rate streams would have to share it
        for i in 1..4 {
            let t = thread(&k, i);
            let pc = k.tasks[t].pc;
            k.tasks[t].program[pc] = Op::RandomAccess { sampler: 0, warmup: 0, duration_ns: 1, overhead_ns: 0.0 };
        }
        k.cost.node_bandwidth_gibps[0] = k.cost.stream_gibps[0][0] * 1.5 * k.cost.dram_bytes_per_store;
        k.update_page_costs();
        assert_eq!(k.tasks[streamer].page_cost, alone, "controller of {cap} GiB/s shared with nobody");
    }

    /// A per-pair interconnect limits each direction by its own link: streams from node a to
    /// node b slow down when a->b is short of bandwidth, whatever b->a offers.
    #[test]
    fn each_direction_is_limited_by_its_own_link() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        let (a, b) = (k.task_node(t), 1 - k.task_node(t));
        // every running thread on a streams to b
        let on_a: Vec<usize> = (0..k.cpus.len()).filter(|&c| k.cpu_node(c) == a).filter_map(|c| k.cpus[c].curr()).collect();
        let set_remote = |k: &mut crate::kernel::Kernel| {
            for &o in &on_a {
                k.tasks[o].cur_bytes.fill(0.0);
                k.tasks[o].cur_bytes[b] = 1.0;
            }
        };
        set_remote(&mut k);
        k.update_page_costs();
        let free = k.tasks[t].page_cost[b];
        let demand = on_a.len() as f64 * k.cost.stream_gibps[a][b];
        let mut links = vec![vec![0.0; 2]; 2];
        (links[a][b], links[b][a]) = (demand / 2.0, 1000.0);
        k.cost.interconnect_gibps = Interconnect::PerPair(links.clone());
        set_remote(&mut k);
        k.update_page_costs();
        assert!((k.tasks[t].page_cost[b] / free - 2.0).abs() < 1e-9, "half the link: twice the time per page");
        (links[a][b], links[b][a]) = (1000.0, demand / 2.0);
        k.cost.interconnect_gibps = Interconnect::PerPair(links);
        set_remote(&mut k);
        k.update_page_costs();
        assert_eq!(k.tasks[t].page_cost[b], free, "the other direction's link does not matter");
    }
}
