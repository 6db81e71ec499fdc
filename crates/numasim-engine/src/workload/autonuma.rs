//! autonuma-benchmark: numa01, numa01_THREAD_ALLOC, numa02, numa02_SMT and their HARD_BIND /
//! INVERSE_BIND variants (workloads.md §1; aarcange/autonuma-benchmark numa01.c, numa02.c).

use super::Op;
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::mm::mempolicy::Mempolicy;
use crate::mm::types::{VM_READ, VM_WRITE};
use crate::scenario::raw::RawWorkload;
use crate::sched::task::{SweepState, Task, TaskNuma, TaskState};
use crate::sim::rng::Rng;
use crate::topology::{node_bit, NodeMask, Topology};
use serde::Serialize;

pub const KINDS: &[&str] = &[
    "numa01",
    "numa01_HARD_BIND",
    "numa01_INVERSE_BIND",
    "numa01_THREAD_ALLOC",
    "numa01_THREAD_ALLOC_HARD_BIND",
    "numa01_THREAD_ALLOC_INVERSE_BIND",
    "numa02",
    "numa02_HARD_BIND",
    "numa02_INVERSE_BIND",
    "numa02_SMT",
    "numa02_SMT_HARD_BIND",
    "numa02_SMT_INVERSE_BIND",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Test {
    Numa01,
    Numa01ThreadAlloc,
    Numa02,
    Numa02Smt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Bind {
    None,
    Hard,
    Inverse,
}

#[derive(Debug, Clone, Serialize)]
pub struct AutonumaSpec {
    pub kind: String,
    pub test: Test,
    pub bind: Bind,
    pub processes: usize,
    /// Threads per process.
    pub threads: usize,
    pub size_mib: u64,
    pub passes: u32,
    pub start_s: f64,
}

impl AutonumaSpec {
    pub fn parse_kind(kind: &str) -> Option<(Test, Bind)> {
        let (base, bind) = if let Some(b) = kind.strip_suffix("_HARD_BIND") {
            (b, Bind::Hard)
        } else if let Some(b) = kind.strip_suffix("_INVERSE_BIND") {
            (b, Bind::Inverse)
        } else {
            (kind, Bind::None)
        };
        let test = match base {
            "numa01" => Test::Numa01,
            "numa01_THREAD_ALLOC" => Test::Numa01ThreadAlloc,
            "numa02" => Test::Numa02,
            "numa02_SMT" => Test::Numa02Smt,
            _ => return None,
        };
        Some((test, bind))
    }

    pub fn resolve(kind: (Test, Bind), w: &RawWorkload, i: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        let (test, bind) = kind;
        let cpus = topo.nr_cpus();
        let start = p.len();
        super::reject_keys(w, i, &["threads", "size_mib", "passes", "start_s"], p);
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        // preproc.awk: numa01 THREADS = cpus/2 per process; numa02 NCPUS; numa02_SMT NCPUS/2
        let (processes, def_threads, def_size, def_passes) = match test {
            Test::Numa01 => (2, cpus / 2, 3072, 50),
            Test::Numa01ThreadAlloc => (2, cpus / 2, 3072, 1000),
            Test::Numa02 => (1, cpus, 1024, 800),
            Test::Numa02Smt => (1, cpus / 2, 1024, 800),
        };
        let threads = w.threads.unwrap_or(def_threads.max(1) as i64);
        if !(1..=65536).contains(&threads) {
            bad("threads", format!("must be in 1..=65536, got {threads}"));
        }
        let size = w.size_mib.unwrap_or(def_size);
        if !(1..=1 << 32).contains(&size) {
            bad("size_mib", format!("must be in 1..=4294967296, got {size}"));
        }
        let passes = w.passes.unwrap_or(def_passes);
        if !(1..=1_000_000).contains(&passes) {
            bad("passes", format!("must be in 1..=1000000, got {passes}"));
        }
        let start_s = w.start_s.unwrap_or(0.0);
        if !(0.0..1e6).contains(&start_s) {
            bad("start_s", format!("must be in [0, 1e6), got {start_s}"));
        }
        if threads > 0 && size > 0 && (size as u64 * 256) < threads as u64 {
            bad("threads", format!("{threads} threads cannot each own a page of a {size} MiB buffer"));
        }
        if topo.nr_nodes < 2 {
            // start_bench.sh refuses to run on fewer than 2 nodes
            p.push(ScenarioProblem::new(format!("workload[{i}].kind"), "impossible_topology", format!("{} needs at least 2 nodes", w.kind)));
        }
        if bind != Bind::None && (0..topo.nr_nodes).any(|n| !topo.has_cpu(n)) {
            p.push(ScenarioProblem::new(format!("workload[{i}].kind"), "impossible_topology", format!("{} binds threads to every node, and some have no CPUs", w.kind)));
        }
        if matches!(test, Test::Numa02 | Test::Numa02Smt) && bind != Bind::None && (threads as usize) < topo.nr_nodes {
            p.push(ScenarioProblem::new(format!("workload[{i}].threads"), "invalid_value", "HARD/INVERSE_BIND needs at least one thread per node".to_string()));
        }
        if p.len() > start {
            return None;
        }
        Some(AutonumaSpec { kind: w.kind.clone(), test, bind, processes, threads: threads as usize, size_mib: size as u64, passes: passes as u32, start_s })
    }

    pub fn footprint_pages(&self) -> u64 {
        self.processes as u64 * self.size_mib * 256
    }

    fn node_mask(nodes: std::ops::Range<usize>) -> NodeMask {
        nodes.fold(0, |m, n| m | node_bit(n))
    }

    pub fn build(&self, k: &mut Kernel, index: usize, rng: &mut Rng) {
        let n = k.topo.nr_nodes;
        let pages = self.size_mib * 256;
        let start_ns = (self.start_s * 1e9) as u64;
        let comm = self.kind.clone();
        let all = Self::node_mask(0..n);
        let (first_half, second_half) = (Self::node_mask(0..n / 2), Self::node_mask(n / 2..n));
        match self.test {
            Test::Numa01 | Test::Numa01ThreadAlloc => {
                // numa01.c: nodemask_global = (time(NULL) & 1) + 1, shared by both processes
                let x = rng.below(2) as usize;
                // main() fork()s first, then each process mallocs its buffer and creates its
                // threads: process 1 is the child of process 0's main thread
                let mut parent_main = None;
                for proc in 0..self.processes {
                    let mm = new_mm(k, &comm, self.threads);
                    let vma = k.mms[mm].mmap_anon(pages, VM_READ | VM_WRITE);
                    // HARD_BIND: the child (proc 1) runs on the first half, the parent on the second;
                    // INVERSE flips only the NODEMASK1 process (the source's copy-paste bug)
                    let (cpus, mem) = match (self.bind, proc) {
                        (Bind::None, _) => (all, None),
                        (Bind::Hard, 1) => (first_half, Some(first_half)),
                        (Bind::Hard, _) => (second_half, Some(second_half)),
                        (Bind::Inverse, _) => (if proc == 1 { first_half } else { second_half }, Some(second_half)),
                    };
                    let prog = vec![Op::Spawn, Op::Join];
                    let main = match parent_main {
                        Some(pm) => fork_task(k, mm, &comm, index, prog, pm),
                        None => new_task(k, mm, &comm, index, prog, None, start_ns),
                    };
                    parent_main = parent_main.or(Some(main));
                    set_binding(k, main, cpus, mem);
                    for i in 0..self.threads {
                        let (first, npages) = match self.test {
                            Test::Numa01ThreadAlloc => {
                                let slice = pages / self.threads as u64;
                                (i as u64 * slice, slice)
                            }
                            _ => (0, pages),
                        };
                        let mut prog = Vec::new();
                        if self.bind == Bind::None {
                            prog.push(Op::SetPolicy(Mempolicy::bind(1 << x)));
                        }
                        prog.push(Op::Sweep { vma, first: 0, npages: pages, passes: 1 });
                        if self.bind == Bind::None {
                            prog.push(Op::SetPolicy(Mempolicy::DEFAULT));
                        }
                        prog.push(Op::Sweep { vma, first, npages, passes: self.passes });
                        let t = new_task(k, mm, &comm, index, prog, Some(main), 0);
                        set_binding(k, t, cpus, mem);
                    }
                }
            }
            Test::Numa02 | Test::Numa02Smt => {
                let mm = new_mm(k, &comm, self.threads);
                let vma = k.mms[mm].mmap_anon(pages, VM_READ | VM_WRITE);
                let chunk = pages / n as u64;
                let mut prog = Vec::new();
                if self.bind == Bind::None {
                    // BINDMAP's bind() is a no-op: the main thread zeroes the whole buffer
                    prog.push(Op::Sweep { vma, first: 0, npages: pages, passes: 1 });
                } else {
                    for node in 0..n {
                        let npages = if node == n - 1 { pages - chunk * node as u64 } else { chunk };
                        prog.push(Op::SetAffinity(1 << node));
                        prog.push(Op::SetPolicy(Mempolicy::bind(1 << node)));
                        prog.push(Op::Sweep { vma, first: chunk * node as u64, npages, passes: 1 });
                    }
                }
                prog.extend([Op::Spawn, Op::Join]);
                let main = new_task(k, mm, &comm, index, prog, None, start_ns);
                let slice = pages / self.threads as u64;
                let per_node = (self.threads / n).max(1);
                for i in 0..self.threads {
                    let prog = vec![Op::Sweep { vma, first: i as u64 * slice, npages: slice, passes: self.passes }];
                    let t = new_task(k, mm, &comm, index, prog, Some(main), 0);
                    let node = match self.bind {
                        Bind::None => None,
                        Bind::Hard => Some((i / per_node).min(n - 1)),
                        Bind::Inverse => Some(((self.threads - 1 - i) / per_node).min(n - 1)),
                    };
                    if let Some(node) = node {
                        set_binding(k, t, 1 << node, Some(1 << node));
                    }
                }
            }
        }
    }
}

/// A new process (an exec'd program) with the image of the workload being built (image.rs)
/// below the buffers it maps next; `threads`: the threads it will create.
pub(crate) fn new_mm(k: &mut Kernel, comm: &str, threads: usize) -> usize {
    let pid = next_pid(k);
    k.mms.push(crate::mm::types::Mm::new(pid, comm, k.topo.nr_cpus(), k.topo.nr_nodes));
    let mm = k.mms.len() - 1;
    k.map_image_low(mm, k.image_preset, threads);
    mm
}

fn next_pid(k: &Kernel) -> u32 {
    1000 + k.tasks.len() as u32 + k.mms.len() as u32
}

pub(crate) fn new_task(k: &mut Kernel, mm: usize, comm: &str, workload: usize, program: Vec<Op>, parent: Option<usize>, start_ns: u64) -> usize {
    let pid = if parent.is_none() { k.mms[mm].tgid } else { next_pid(k) };
    let t = k.tasks.len();
    k.tasks.push(Task {
        pid,
        tgid: k.mms[mm].tgid,
        mm,
        comm: comm.to_string(),
        workload,
        state: TaskState::NotStarted,
        cpu: 0,
        allowed: vec![true; k.topo.nr_cpus()],
        policy: Mempolicy::DEFAULT,
        program,
        pc: 0,
        sweep: SweepState::default(),
        op_start_ns: None,
        children: Vec::new(),
        spawned_children: 0,
        parent,
        wake_at: None,
        kill_at: None,
        syscall: None,
        accesses: 0.0,
        access_ns: 0.0,
        sum_exec_runtime: 0,
        user_ns: 0.0,
        sys_ns: 0.0,
        sys_debt_ns: 0.0,
        wait_debt_ns: 0.0,
        migration_wait_ns: 0.0,
        start_ns,
        exit_ns: 0,
        numa: TaskNuma::default(),
        mem_node_at_exit: None,
        last_bytes: vec![0.0; k.topo.nr_nodes],
        cur_bytes: vec![0.0; k.topo.nr_nodes],
        page_cost: vec![0.0; k.topo.nr_nodes],
        clock_sys_per_page: 0.0,
        page_stores: false,
        hot: Vec::new(),
        background: false,
        busy_left_ns: 0.0,
        samples_begun: 0,
    });
    if let Some(p) = parent {
        k.tasks[p].children.push(t);
    }
    t
}

/// fork(2) by task `parent` of a new process `mm` whose main thread runs `program`: the child
/// is its process's leader, inherits its parent's affinity, and is cloned after the parent's
/// earlier forks and before its threads.
// kernel/fork.c: kernel_clone (no CLONE_VM)
pub(crate) fn fork_task(k: &mut Kernel, mm: usize, comm: &str, workload: usize, program: Vec<Op>, parent: usize) -> usize {
    let c = new_task(k, mm, comm, workload, program, Some(parent), 0);
    k.tasks[c].pid = k.mms[mm].tgid;
    k.tasks[c].allowed = k.tasks[parent].allowed.clone();
    let forks = k.tasks[parent].children.iter().filter(|&&x| x != c && k.tasks[x].mm != k.tasks[parent].mm).count();
    let ch = &mut k.tasks[parent].children;
    ch.retain(|&x| x != c);
    ch.insert(forks, c);
    c
}

/// CPU affinity to the nodes in `cpus`, and optionally MPOL_BIND to `mem`.
fn set_binding(k: &mut Kernel, t: usize, cpus: NodeMask, mem: Option<NodeMask>) {
    let allowed = k.topo.cpu_node.iter().map(|&n| cpus & (1 << n) != 0).collect();
    k.tasks[t].allowed = allowed;
    if let Some(m) = mem {
        k.tasks[t].policy = Mempolicy::bind(m);
    }
}
