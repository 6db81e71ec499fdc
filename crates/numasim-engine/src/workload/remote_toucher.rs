//! A remote-memory toucher (the real-kernel validation workload, numaw's `remote_toucher.c`):
//! the main thread, bound to `touch_node`, first-touches the whole buffer; then one worker per
//! CPU of `run_node` streams over all of it for `duration_s`, so NUMA balancing should pull the
//! buffer to `run_node`; `local_threads` more, one per CPU of `touch_node`, stream over the same
//! pages at the same time (threads of one process sharing a buffer from two nodes).
//! With `processes = 2` the main process forks after the first touch: the child runs the
//! `run_node` workers, the parent the `local_threads`, over a buffer mapped `MAP_SHARED`
//! (`mapping = "shared"`, anonymous) or from a memfd (`"shmem"`): two processes sharing pages;
//! or a private one (`"private"`), which the child inherits copy-on-write (mm/cow.rs).

use super::autonuma::{fork_task, new_mm, new_task};
use super::Op;
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::mm::types::{VM_HUGEPAGE, VM_NOHUGEPAGE, VM_READ, VM_WRITE};
use crate::scenario::raw::RawWorkload;
use crate::topology::Topology;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct RemoteToucherSpec {
    pub kind: String,
    pub size_mib: u64,
    /// Worker threads, one per CPU of `run_node` (wrapping when there are more).
    pub threads: usize,
    /// Workers on `touch_node`'s CPUs streaming over the same buffer (created after the others).
    pub local_threads: usize,
    pub touch_node: usize,
    pub run_node: usize,
    pub duration_s: f64,
    /// madvise(2) advice on the buffer: "none", "hugepage" or "nohugepage".
    pub madvise: String,
    /// The buffer: "private" (anonymous), "shared" (MAP_SHARED|MAP_ANONYMOUS) or "shmem" (a
    /// memfd mapped MAP_SHARED); both shared kinds are shmem in the kernel (mm/shmem.rs).
    pub mapping: String,
    /// 1, or 2: the `run_node` workers belong to a child forked after the first touch.
    pub processes: usize,
    pub start_s: f64,
}

impl RemoteToucherSpec {
    pub fn resolve(w: &RawWorkload, i: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        super::reject_keys(w, i, &["size_mib", "threads", "local_threads", "touch_node", "run_node", "duration_s", "madvise", "mapping", "processes", "start_s"], p);
        let start = p.len();
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        let size_mib = w.size_mib.unwrap_or(64);
        if !(1..=1 << 32).contains(&size_mib) {
            bad("size_mib", format!("must be in 1..=4294967296, got {size_mib}"));
        }
        let mut node = |key: &str, v: Option<i64>, def: i64| {
            let n = v.unwrap_or(def);
            if n < 0 || n as usize >= topo.nr_nodes {
                bad(key, format!("node {n} does not exist (the machine has {} nodes)", topo.nr_nodes));
                return 0;
            }
            n as usize
        };
        let touch_node = node("touch_node", w.touch_node, 0);
        let run_node = node("run_node", w.run_node, 1.min(topo.nr_nodes as i64 - 1));
        for (key, n) in [("touch_node", touch_node), ("run_node", run_node)] {
            if !topo.has_cpu(n) {
                p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", format!("node {n} has no CPUs: threads run there")));
            }
        }
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        let threads = w.threads.unwrap_or(topo.node_cpus.get(run_node).map_or(1, |c| c.len()) as i64);
        if !(1..=65536).contains(&threads) {
            bad("threads", format!("must be in 1..=65536, got {threads}"));
        }
        let local_threads = w.local_threads.unwrap_or(0);
        if !(0..=65536).contains(&local_threads) {
            bad("local_threads", format!("must be in 0..=65536, got {local_threads}"));
        }
        let duration_s = w.duration_s.unwrap_or(f64::NAN);
        if !(duration_s > 0.0 && duration_s < 1e6) {
            bad("duration_s", format!("give the streaming phase length in (0, 1e6) s, got {duration_s}"));
        }
        let madvise = w.madvise.clone().unwrap_or_else(|| "none".into());
        if !["none", "hugepage", "nohugepage"].contains(&madvise.as_str()) {
            bad("madvise", format!("must be \"none\", \"hugepage\" or \"nohugepage\", got {madvise:?}"));
        }
        let start_s = w.start_s.unwrap_or(0.0);
        if !(0.0..1e6).contains(&start_s) {
            bad("start_s", format!("must be in [0, 1e6), got {start_s}"));
        }
        let mapping = w.mapping.clone().unwrap_or_else(|| "private".into());
        let processes = w.processes.unwrap_or(1);
        if !["private", "shared", "shmem"].contains(&mapping.as_str()) {
            bad("mapping", format!("must be \"private\", \"shared\" or \"shmem\", got {mapping:?}"));
        } else if mapping != "private" && madvise != "none" {
            bad("madvise", format!("a {mapping} mapping is shmem, whose THP follows shmem_enabled (not modelled): give madvise = \"none\""));
        }
        if !(1..=2).contains(&processes) {
            bad("processes", format!("must be 1 or 2, got {processes}"));
        }
        (p.len() == start).then(|| RemoteToucherSpec {
            kind: w.kind.clone(),
            size_mib: size_mib as u64,
            threads: threads as usize,
            local_threads: local_threads as usize,
            touch_node,
            run_node,
            duration_s,
            madvise,
            mapping,
            processes: processes as usize,
            start_s,
        })
    }

    pub fn build(&self, k: &mut Kernel, index: usize) {
        let pages = self.size_mib * 256;
        let advice = match self.madvise.as_str() {
            "hugepage" => VM_HUGEPAGE,
            "nohugepage" => VM_NOHUGEPAGE,
            _ => 0,
        };
        let forked = self.processes == 2;
        let parent_threads = if forked { self.local_threads } else { self.threads + self.local_threads };
        let mm = new_mm(k, "numawork", parent_threads);
        let file = (self.mapping != "private").then(|| k.shmem_file_setup(&self.mapping, pages));
        let map = |k: &mut Kernel, mm: usize| match file {
            Some(f) => k.mmap_shared(mm, f, VM_READ | VM_WRITE),
            None => k.mms[mm].mmap_anon(pages, VM_READ | VM_WRITE | advice),
        };
        let vma = map(k, mm);
        // the main thread (numaw's remote_toucher.c): binds itself to touch_node once started,
        // memsets the buffer (first touch), creates the workers (forking first with 2
        // processes) and waits for them
        let prog = vec![Op::SetAffinity(1 << self.touch_node), Op::Sweep { vma, first: 0, npages: pages, passes: 1 }, Op::Spawn, Op::Join];
        let main = new_task(k, mm, "numawork", index, prog, None, (self.start_s * 1e9) as u64);
        let touch_cpus: Vec<bool> = k.topo.cpu_node.iter().map(|&n| n == self.touch_node).collect();
        // fork(2): the child shares the buffer's file, inherits the affinity, clones its workers
        let child = forked.then(|| {
            let cmm = new_mm(k, "numawork", self.threads);
            let cvma = map(k, cmm);
            if file.is_none() {
                // the private buffer is the parent's, copy-on-write
                k.fork_inherits.entry(cmm).or_default().push((vma, cvma));
            }
            let c = fork_task(k, cmm, "numawork", index, vec![Op::Spawn, Op::Join], main);
            k.tasks[c].allowed = touch_cpus.clone();
            (c, cvma)
        });
        let (run, local) = (k.topo.node_cpus[self.run_node].clone(), k.topo.node_cpus[self.touch_node].clone());
        for i in 0..self.threads + self.local_threads {
            let remote = i < self.threads;
            let (parent, buf) = match child {
                Some((c, cvma)) if remote => (c, cvma),
                _ => (main, vma),
            };
            let tmm = k.tasks[parent].mm;
            let prog = vec![Op::SweepFor { vma: buf, first: 0, npages: pages, duration_ns: (self.duration_s * 1e9) as u64 }];
            let t = new_task(k, tmm, "numawork", index, prog, Some(parent), 0);
            let cpu = if remote { run[i % run.len()] } else { local[(i - self.threads) % local.len()] };
            k.tasks[t].allowed = (0..k.topo.nr_cpus()).map(|c| c == cpu).collect();
        }
    }
}
