//! Test fixture: a small 2-node machine with one numa02-like process whose threads are placed.

use crate::kernel::Kernel;
use crate::mm::pgtable::PTE_WRITE;
use crate::scenario::parse_scenario;
use crate::simulation::Simulation;

/// 2 nodes x 2 CPUs, 1 GiB per node; one process (4 threads + main) with a 64 MiB buffer.
pub const SMALL: &str = r#"
[machine]
nodes = 2
cpus_per_node = 2
smt = 1
memory_gib_per_node = 1
distances = [[10, 21], [21, 10]]
[machine.cost]
stream_gibps = [[2.0, 1.4], [1.4, 2.0]]
page_store_gibps = [[2.0, 1.4], [1.4, 2.0]]
touch_gibps = [[2.0, 1.4], [1.4, 2.0]]
smt_share = 0.5
latency_ns = [[100.0, 180.0], [180.0, 100.0]]
node_bandwidth_gibps = [100.0, 100.0]
dram_bytes_per_store = 2.0
interconnect_gibps = 50.0
fault_entry_exit_ns = 1000.0
clear_page_ns = 400.0
pte_update_ns = 5.0
hint_fault_ns = 1000.0
migrate_page_ns = 3000.0
page_copy_gibps = 6.0
ipi_send_ns = 700.0
ipi_per_target_ns = 150.0
ipi_receive_ns = 1200.0
tlb_flush_local_all_ns = 200.0
tlb_flush_local_one_ns = 100.0
clone_ns = 0.0
vm_exit_ns = 600.0
ept_violation_ns = 2500.0
clock_read_ns = 0.0
clock_read_sys_ns = 0.0
[[workload]]
kind = "numa02"
size_mib = 64
passes = 1000
threads = 4
image = "none"
"#;

/// A kernel whose threads are running (one per CPU) after the main thread's first touch.
pub fn small_kernel(extra: &str) -> Kernel {
    small_kernel_from(&format!("{extra}\n{SMALL}"))
}

/// As `small_kernel`, from a whole scenario text (SMALL edited).
pub fn small_kernel_from(text: &str) -> Kernel {
    let s = parse_scenario(text).expect("fixture parses");
    let mut sim = Simulation::new(&s).expect("builds");
    // run until the 4 threads are on CPUs
    while sim.k.tasks.iter().filter(|t| t.runnable() && t.parent.is_some()).count() < 4 {
        assert!(sim.step().expect("steps"));
    }
    // the next tick starts by loading each CPU's mm
    for cpu in 0..sim.k.cpus.len() {
        let next = sim.k.cpus[cpu].curr().map(|t| sim.k.tasks[t].mm);
        sim.k.switch_mm(cpu, next);
    }
    sim.k
}

/// Thread `i` of the fixture (task index; the main task is 0).
pub fn thread(k: &Kernel, i: usize) -> usize {
    k.tasks.iter().enumerate().filter(|(_, t)| t.parent.is_some()).nth(i).map(|(t, _)| t).expect("thread")
}

/// Put task `t` on `cpu`, swapping it with the task running there.
pub fn pin(k: &mut Kernel, t: usize, cpu: usize) {
    let old = k.tasks[t].cpu;
    if old == cpu {
        return;
    }
    let other = k.cpus[cpu].curr();
    k.cpus[old].rq.retain(|&x| x != t);
    k.cpus[cpu].rq.retain(|&x| Some(x) != other);
    k.tasks[t].cpu = cpu;
    k.cpus[cpu].rq.insert(0, t);
    if let Some(o) = other {
        k.tasks[o].cpu = old;
        k.cpus[old].rq.insert(0, o);
    }
}

/// Make page `idx` of VMA 0 resident on `node` (writable), whatever it was.
pub fn place_page(k: &mut Kernel, idx: u64, node: usize) {
    let mm = 0;
    let pt = &mut k.mms[mm].vmas[0].pt;
    if pt.populated(idx) {
        let old = pt.unpopulate(idx);
        k.nodes[old].used -= 1;
        k.mms[mm].node_pages[old] -= 1;
    }
    k.mms[mm].vmas[0].pt.populate(idx, node, PTE_WRITE);
    k.nodes[node].used += 1;
    k.mms[mm].node_pages[node] += 1;
}

/// A pmbench process of 4 threads on intel-2s-128g (2 CPUs per node) over a 1 MiB set whose
/// middle page (128) takes almost every access, its threads on CPUs and in their loop.
pub fn hot_page_kernel(features: &str) -> crate::kernel::Kernel {
    let text = format!(
        "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 2\nsmt = 1\n[kernel.features]\n{features}\n\
         [[workload]]\nkind = \"pmbench\"\nthreads = 4\nset_mib = 1\nmap_mib = 1\npattern = \"normal\"\nshape = 0.01\nduration_s = 10.0\nimage = \"none\"\n"
    );
    let mut sim = Simulation::new(&parse_scenario(&text).unwrap()).unwrap();
    while sim.k.tasks.iter().filter(|t| t.runnable() && t.parent.is_some()).count() < 4 {
        sim.step().unwrap();
    }
    for cpu in 0..sim.k.cpus.len() {
        let next = sim.k.cpus[cpu].curr().map(|t| sim.k.tasks[t].mm);
        sim.k.switch_mm(cpu, next);
    }
    sim.k.collect_sampler_threads();
    sim.k
}

/// A tiered machine: node 0 DRAM with 2 CPUs (1 GiB), node 1 CPU-less kmem memory (2 GiB, in
/// memory_tier22); `kernel.numa_balancing = mode`, 6.12, `sysctl` lines under
/// [kernel.sysctl]; a memhog holding 768 MiB, all on node 0.
pub fn tiered(sysctl: &str, mode: u8) -> String {
    let machine = SMALL
        .split("[[workload]]")
        .next()
        .unwrap_or(SMALL)
        .replace("memory_gib_per_node = 1", "memory_gib_per_node = [1, 2]")
        .replace("cpus_per_node = 2", "cpus_per_node = [2, 0]\nmemory_type = [\"dram\", \"kmem\"]");
    format!("[kernel]\nversion = \"6.12\"\nnuma_balancing = {mode}\n[kernel.sysctl]\n{sysctl}\n{machine}\n[[workload]]\nkind = \"memory_eater\"\nsize_gib = 0.75\nnode = 0\nfree_at_s = 1000\n")
}

/// The kernel of `tiered` once the memhog holds its memory.
pub fn tiered_kernel(sysctl: &str, mode: u8) -> Kernel {
    let s = parse_scenario(&tiered(sysctl, mode)).expect("fixture parses");
    let mut sim = Simulation::new(&s).expect("builds");
    while sim.k.nodes[0].used < 768 * 256 {
        assert!(sim.step().expect("steps"), "the memhog fills its memory");
    }
    sim.k
}
