//! A memory eater: `numactl --membind=N memhog SIZE` holding its memory until killed
//! (numactl/memhog.c; workloads.md §5).

use super::autonuma::{new_mm, new_task};
use super::Op;
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::mm::mempolicy::Mempolicy;
use crate::mm::types::{VM_READ, VM_WRITE};
use crate::scenario::raw::RawWorkload;
use crate::topology::Topology;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct MemoryEaterSpec {
    pub kind: String,
    pub size_gib: f64,
    pub node: usize,
    pub start_s: f64,
    /// When the eater is killed and its memory freed.
    pub free_at_s: f64,
}

impl MemoryEaterSpec {
    pub fn resolve(w: &RawWorkload, i: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        super::reject_keys(w, i, &["size_gib", "node", "start_s", "free_at_s"], p);
        let start = p.len();
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        let size_gib = w.size_gib.unwrap_or(0.0);
        if !(size_gib > 0.0 && size_gib <= 1e6) {
            bad("size_gib", format!("give the memory to eat, in (0, 1e6] GiB; got {size_gib}"));
        }
        let node = w.node.unwrap_or(0);
        if node < 0 || node as usize >= topo.nr_nodes {
            bad("node", format!("node {node} does not exist (the machine has {} nodes)", topo.nr_nodes));
        }
        let start_s = w.start_s.unwrap_or(0.0);
        let Some(free_at_s) = w.free_at_s else {
            bad("free_at_s", "give the time the eater is killed (free_at_s)".into());
            return None;
        };
        if !(start_s >= 0.0 && free_at_s > start_s && free_at_s < 1e6) {
            bad("free_at_s", format!("must be after start_s ({start_s}) and below 1e6, got {free_at_s}"));
        }
        if size_gib * 262144.0 > topo.node_pages.get(node.max(0) as usize).copied().unwrap_or(0) as f64 {
            p.push(ScenarioProblem::new(format!("workload[{i}].size_gib"), "exceeds_machine_memory", format!("{size_gib} GiB does not fit on node {node}")));
        }
        (p.len() == start).then(|| MemoryEaterSpec { kind: w.kind.clone(), size_gib, node: node as usize, start_s, free_at_s })
    }

    pub fn footprint_pages(&self) -> u64 {
        (self.size_gib * 262144.0) as u64
    }

    pub fn build(&self, k: &mut Kernel, index: usize) {
        let mm = new_mm(k, "memhog", 0);
        let vma = k.mms[mm].mmap_anon(self.footprint_pages(), VM_READ | VM_WRITE);
        let free_at = (self.free_at_s * 1e9) as u64;
        let prog = vec![Op::SetPolicy(Mempolicy::bind(1 << self.node)), Op::Sweep { vma, first: 0, npages: self.footprint_pages(), passes: 1 }, Op::SleepUntil(free_at)];
        let t = new_task(k, mm, "memhog", index, prog, None, (self.start_s * 1e9) as u64);
        // killed at free_at_s even if still filling (SIGKILL -> do_exit -> exit_mmap frees it)
        k.tasks[t].kill_at = Some(free_at);
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::parse_scenario;
    use crate::simulation::Simulation;
    use crate::vmstat::VmEvent;

    /// `free_at_s` kills the eater at that time even in the middle of its fill (SIGKILL ->
    /// do_exit -> exit_mmap): it exits at exactly free_at_s and its pages are freed in that tick,
    /// not when the fill would have ended.
    #[test]
    fn eater_is_killed_at_free_at_even_mid_fill() {
        let text = crate::testutil::SMALL
            .replace("[[workload]]\nkind = \"numa02\"\nsize_mib = 64\npasses = 1000\nthreads = 4\n", "[[workload]]\nkind = \"memory_eater\"\nsize_gib = 0.9\nnode = 1\nfree_at_s = 0.201\n");
        let mut sim = Simulation::new(&parse_scenario(&text).unwrap()).unwrap();
        let t = sim.k.tasks.iter().position(|t| t.comm == "memhog").expect("eater task");
        let mm = sim.k.tasks[t].mm;
        let full = (0.9 * 262144.0) as u64;
        let mut held = 0;
        // HZ 250: the kill falls 1 ms into the tick that starts at 0.2 s
        while sim.k.now <= 200_000_000 {
            held = sim.k.mms[mm].node_pages[1];
            if !sim.step().unwrap() {
                break; // the eater was the only task
            }
        }
        assert!(held > 0 && held < full / 2, "still filling at 0.2 s: {held} of {full} pages");
        let k = &sim.k;
        assert_eq!(k.tasks[t].state, crate::sched::task::TaskState::Exited);
        assert_eq!(k.tasks[t].exit_ns, 201_000_000, "killed at free_at_s");
        assert!(k.mms[mm].exited, "exit_mmap ran in the kill's tick");
        assert_eq!(k.nodes[1].used, 0, "every page back on node 1");
        assert_eq!(k.vmstat.get(VmEvent::Pgfree), k.vmstat.get(VmEvent::Pgalloc));
        assert!(k.vmstat.get(VmEvent::Pgalloc) < full);
        assert!(sim.finished() && sim.k.now == 204_000_000, "the run ends with the eater's tick: {} s", sim.now_s());
    }

    /// The eater's fill of fresh blocks (do_anonymous_page once per page, in the sweep's
    /// tight loop) allocates every page once on the bound node and charges each page one
    /// fault and one store: sys = pages x (fault entry/exit + clear_page), user = pages x the
    /// store cost, across budget ends inside pages and blocks.
    #[test]
    fn eater_fill_faults_every_page_once_with_its_time() {
        let text = crate::testutil::SMALL
            .replace("[[workload]]\nkind = \"numa02\"\nsize_mib = 64\npasses = 1000\nthreads = 4\n", "[[workload]]\nkind = \"memory_eater\"\nsize_gib = 0.3\nnode = 1\nfree_at_s = 5.0\n");
        let mut sim = Simulation::new(&parse_scenario(&text).unwrap()).unwrap();
        while sim.now_s() < 2.0 {
            assert!(sim.step().unwrap());
        }
        let k = &sim.k;
        let t = k.tasks.iter().position(|t| t.comm == "memhog").expect("eater task");
        let pages = (0.3 * 262144.0) as u64;
        let mm = k.tasks[t].mm;
        assert_eq!(k.mms[mm].node_pages[..2], [0, pages], "every page on the bound node");
        let pt = &k.mms[mm].vmas[0].pt;
        assert!((0..pages).all(|i| pt.populated(i) && pt.writable(i) && pt.nid(i) == 1));
        assert_eq!(k.vmstat.get(VmEvent::Pgfault), pages, "one fault per page");
        assert_eq!(k.vmstat.get(VmEvent::Pgalloc), pages);
        let fault = k.cost.fault_entry_exit_ns + k.cost.clear_page_ns;
        let p = &k.tasks[t];
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b;
        assert!(close(p.sys_ns, pages as f64 * fault), "sys {} for {pages} faults of {fault} ns", p.sys_ns);
        assert!(close(p.user_ns, pages as f64 * p.page_cost[1]), "user {} for {pages} stores of {} ns", p.user_ns, p.page_cost[1]);
    }
}
