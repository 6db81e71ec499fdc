//! `program`: a workload written out (docs/scenario.md): buffers, processes (the first
//! started, the others forked by their parent's main thread) and threads, each with a list of
//! operations. numaw's `program` runs the same in the VM.

use super::autonuma::{fork_task, new_mm, new_task};
use super::{Access, Op};
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::mm::mempolicy::{Mempolicy, MpolMode};
use crate::mm::types::{VM_HUGEPAGE, VM_NOHUGEPAGE, VM_READ, VM_WRITE};
use crate::scenario::raw::{RawOp, RawWorkload};
use crate::topology::{node_bit, Topology};
use serde::Serialize;

const MAX_BUFFERS: usize = 16;
const MAX_PROCESSES: usize = 64;
const MAX_THREADS: i64 = 4096;

#[derive(Debug, Clone, Serialize)]
pub struct BufferSpec {
    pub size_mib: u64,
    /// "private", "shared" (MAP_SHARED|MAP_ANONYMOUS) or "shmem" (a memfd mapped MAP_SHARED)
    pub mapping: String,
    pub madvise: String,
}

/// A stream's range and stop condition (`passes`, or `duration_s` when given).
#[derive(Debug, Clone, Serialize)]
pub struct StreamSpec {
    pub buffer: usize,
    pub offset_mib: u64,
    pub size_mib: u64,
    pub stride: u64,
    pub passes: Option<u32>,
    pub duration_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum OpSpec {
    Store(StreamSpec),
    Load(StreamSpec),
    Rmw(StreamSpec),
    SetMempolicy { mode: String, nodes: Vec<usize> },
    Affinity { node: Option<usize>, cpus: Option<Vec<usize>> },
    Sleep { duration_s: f64 },
}

#[derive(Debug, Clone, Serialize)]
pub struct ThreadSpec {
    pub count: usize,
    pub node: Option<usize>,
    pub cpus: Option<Vec<usize>>,
    pub ops: Vec<OpSpec>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessSpec {
    pub parent: Option<usize>,
    pub node: Option<usize>,
    pub cpus: Option<Vec<usize>>,
    pub main: Vec<OpSpec>,
    pub threads: Vec<ThreadSpec>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProgramSpec {
    pub kind: String,
    pub start_s: f64,
    pub buffers: Vec<BufferSpec>,
    pub processes: Vec<ProcessSpec>,
}

/// Problems of one program, each at its key path.
struct Check<'a> {
    p: &'a mut Vec<ScenarioProblem>,
    topo: &'a Topology,
}

impl Check<'_> {
    fn bad(&mut self, loc: String, msg: String) {
        self.p.push(ScenarioProblem::new(loc, "invalid_value", msg));
    }

    fn node(&mut self, loc: String, n: i64, cpus_needed: bool) -> usize {
        if n < 0 || n as usize >= self.topo.nr_nodes {
            self.bad(loc, format!("node {n} does not exist (the machine has {} nodes)", self.topo.nr_nodes));
            return 0;
        }
        if cpus_needed && !self.topo.has_cpu(n as usize) {
            self.bad(loc, format!("node {n} has no CPUs: threads run there"));
        }
        n as usize
    }

    /// `node` / `cpus` of a process, thread or affinity op: at most one of them.
    fn affinity(&mut self, loc: &str, node: Option<i64>, cpus: &Option<Vec<i64>>) -> (Option<usize>, Option<Vec<usize>>) {
        let ncpus = self.topo.nr_cpus() as i64;
        match (node, cpus) {
            (Some(_), Some(_)) => {
                self.bad(format!("{loc}.cpus"), "give `node` or `cpus`, not both".into());
                (None, None)
            }
            (Some(n), None) => (Some(self.node(format!("{loc}.node"), n, true)), None),
            (None, Some(c)) if c.is_empty() || c.iter().any(|&x| x < 0 || x >= ncpus) => {
                self.bad(format!("{loc}.cpus"), format!("a non-empty list of CPUs in 0..{ncpus}, got {c:?}"));
                (None, None)
            }
            (None, Some(c)) => (None, Some(c.iter().map(|&x| x as usize).collect())),
            (None, None) => (None, None),
        }
    }

    fn ops(&mut self, loc: &str, raw: &[RawOp], buffers: &[BufferSpec]) -> Vec<OpSpec> {
        raw.iter().enumerate().filter_map(|(j, o)| self.op(&format!("{loc}[{j}]"), o, buffers)).collect()
    }

    fn op(&mut self, loc: &str, o: &RawOp, buffers: &[BufferSpec]) -> Option<OpSpec> {
        let allowed: &[&str] = match o.op.as_str() {
            "store" | "load" | "rmw" => &["buffer", "offset_mib", "size_mib", "stride", "passes", "duration_s"],
            "set_mempolicy" => &["mode", "nodes"],
            "affinity" => &["node", "cpus"],
            "sleep" => &["duration_s"],
            other => {
                self.bad(format!("{loc}.op"), format!("unknown operation `{other}`, expected store, load, rmw, set_mempolicy, affinity or sleep"));
                return None;
            }
        };
        let start = self.p.len();
        for key in o.given() {
            if !allowed.contains(&key) {
                self.p.push(ScenarioProblem::new(format!("{loc}.{key}"), "unknown_key", format!("`{key}` does not apply to a `{}` operation (it takes {})", o.op, allowed.join(", "))));
            }
        }
        let spec = match o.op.as_str() {
            "store" | "load" | "rmw" => {
                let s = self.stream(loc, o, buffers)?;
                match o.op.as_str() {
                    "store" => OpSpec::Store(s),
                    "load" => OpSpec::Load(s),
                    _ => OpSpec::Rmw(s),
                }
            }
            "set_mempolicy" => {
                let mode = o.mode.clone().unwrap_or_else(|| "default".into());
                let nodes: Vec<usize> = o.nodes.clone().unwrap_or_default().iter().map(|&n| self.node(format!("{loc}.nodes"), n, false)).collect();
                match (mode.as_str(), nodes.len()) {
                    ("default", 0) | ("preferred", 1) => {}
                    ("bind", n) if n > 0 => {}
                    ("default" | "bind" | "preferred", _) => self.bad(
                        format!("{loc}.nodes"),
                        format!(
                            "mode {mode} takes {}",
                            if mode == "default" {
                                "no nodes"
                            } else if mode == "bind" {
                                "one or more nodes"
                            } else {
                                "one node"
                            }
                        ),
                    ),
                    _ => self.bad(format!("{loc}.mode"), format!("must be \"default\", \"bind\" or \"preferred\", got {mode:?}")),
                }
                OpSpec::SetMempolicy { mode, nodes }
            }
            "affinity" => {
                let (node, cpus) = self.affinity(loc, o.node, &o.cpus);
                if node.is_none() && cpus.is_none() && self.p.len() == start {
                    self.bad(format!("{loc}.node"), "give `node` or `cpus`".into());
                }
                OpSpec::Affinity { node, cpus }
            }
            _ => {
                let d = o.duration_s.unwrap_or(f64::NAN);
                if !(d > 0.0 && d < 1e6) {
                    self.bad(format!("{loc}.duration_s"), format!("give the sleep in (0, 1e6) s, got {d}"));
                }
                OpSpec::Sleep { duration_s: d }
            }
        };
        (self.p.len() == start).then_some(spec)
    }

    fn stream(&mut self, loc: &str, o: &RawOp, buffers: &[BufferSpec]) -> Option<StreamSpec> {
        let b = o.buffer.unwrap_or(0);
        let Some(buf) = usize::try_from(b).ok().and_then(|b| buffers.get(b)) else {
            self.bad(format!("{loc}.buffer"), format!("buffer {b} does not exist ({} given)", buffers.len()));
            return None;
        };
        let offset = o.offset_mib.unwrap_or(0);
        let size = o.size_mib.unwrap_or(buf.size_mib as i64 - offset);
        if offset < 0 || size < 1 || (offset + size) as u64 > buf.size_mib {
            self.bad(format!("{loc}.size_mib"), format!("the range [{offset}, {}) MiB is not inside the {} MiB buffer", offset + size, buf.size_mib));
        }
        let stride = o.stride.unwrap_or(1);
        if !(1..=1 << 20).contains(&stride) {
            self.bad(format!("{loc}.stride"), format!("must be in 1..=1048576 pages, got {stride}"));
        }
        let (passes, duration_s) = match (o.passes, o.duration_s) {
            (Some(_), Some(_)) => {
                self.bad(format!("{loc}.duration_s"), "give `passes` or `duration_s`, not both".into());
                (None, None)
            }
            (_, Some(d)) if !(d > 0.0 && d < 1e6) => {
                self.bad(format!("{loc}.duration_s"), format!("must be in (0, 1e6) s, got {d}"));
                (None, None)
            }
            (_, Some(d)) => (None, Some(d)),
            (p, None) if !(1..=1_000_000).contains(&p.unwrap_or(1)) => {
                self.bad(format!("{loc}.passes"), format!("must be in 1..=1000000, got {}", p.unwrap_or(1)));
                (None, None)
            }
            (p, None) => (Some(p.unwrap_or(1) as u32), None),
        };
        Some(StreamSpec { buffer: b as usize, offset_mib: offset.max(0) as u64, size_mib: size.max(1) as u64, stride: stride.max(1) as u64, passes, duration_s })
    }
}

impl ProgramSpec {
    pub fn resolve(w: &RawWorkload, i: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        super::reject_keys(w, i, &["buffer", "process", "start_s"], p);
        let start = p.len();
        let mut c = Check { p, topo };
        let loc = format!("workload[{i}]");
        let start_s = w.start_s.unwrap_or(0.0);
        if !(0.0..1e6).contains(&start_s) {
            c.bad(format!("{loc}.start_s"), format!("must be in [0, 1e6), got {start_s}"));
        }
        let raw_bufs = w.buffer.as_deref().unwrap_or_default();
        if raw_bufs.is_empty() || raw_bufs.len() > MAX_BUFFERS {
            c.bad(format!("{loc}.buffer"), format!("give 1 to {MAX_BUFFERS} [[workload.buffer]] tables, got {}", raw_bufs.len()));
        }
        let mut buffers = Vec::new();
        for (j, b) in raw_bufs.iter().enumerate() {
            let bl = format!("{loc}.buffer[{j}]");
            let size = b.size_mib.unwrap_or(0);
            if !(1..=1 << 32).contains(&size) {
                c.bad(format!("{bl}.size_mib"), format!("give the size in 1..=4294967296 MiB, got {size}"));
            }
            let mapping = b.mapping.clone().unwrap_or_else(|| "private".into());
            let madvise = b.madvise.clone().unwrap_or_else(|| "none".into());
            if !["private", "shared", "shmem"].contains(&mapping.as_str()) {
                c.bad(format!("{bl}.mapping"), format!("must be \"private\", \"shared\" or \"shmem\", got {mapping:?}"));
            } else if !["none", "hugepage", "nohugepage"].contains(&madvise.as_str()) {
                c.bad(format!("{bl}.madvise"), format!("must be \"none\", \"hugepage\" or \"nohugepage\", got {madvise:?}"));
            } else if mapping != "private" && madvise != "none" {
                c.bad(format!("{bl}.madvise"), format!("a {mapping} buffer is shmem, whose THP follows shmem_enabled (not modelled): give madvise = \"none\""));
            }
            buffers.push(BufferSpec { size_mib: size.max(1) as u64, mapping, madvise });
        }
        let raw_procs = w.process.as_deref().unwrap_or_default();
        if raw_procs.is_empty() || raw_procs.len() > MAX_PROCESSES {
            c.bad(format!("{loc}.process"), format!("give 1 to {MAX_PROCESSES} [[workload.process]] tables, got {}", raw_procs.len()));
        }
        let mut processes = Vec::new();
        let mut nthreads = 0i64;
        for (j, rp) in raw_procs.iter().enumerate() {
            let pl = format!("{loc}.process[{j}]");
            let parent = match (j, rp.parent) {
                (0, Some(_)) => {
                    c.bad(format!("{pl}.parent"), "process 0 is started, not forked: it has no parent".into());
                    None
                }
                (0, None) => None,
                (_, par) => {
                    let q = par.unwrap_or(0);
                    if q < 0 || q as usize >= j {
                        c.bad(format!("{pl}.parent"), format!("must be an earlier process (0..{j}), got {q}"));
                    }
                    Some(q.clamp(0, j as i64 - 1) as usize)
                }
            };
            let (node, cpus) = c.affinity(&pl, rp.node, &rp.cpus);
            let main = c.ops(&format!("{pl}.main"), rp.main.as_deref().unwrap_or_default(), &buffers);
            let mut threads = Vec::new();
            for (n, rt) in rp.thread.as_deref().unwrap_or_default().iter().enumerate() {
                let tl = format!("{pl}.thread[{n}]");
                let count = rt.count.unwrap_or(1);
                if !(1..=MAX_THREADS).contains(&count) {
                    c.bad(format!("{tl}.count"), format!("must be in 1..={MAX_THREADS}, got {count}"));
                }
                nthreads += count.max(0);
                let (node, cpus) = c.affinity(&tl, rt.node, &rt.cpus);
                let Some(raw_ops) = rt.ops.as_deref() else {
                    c.bad(format!("{tl}.ops"), "give the thread's operations (`ops = [...]`)".into());
                    continue;
                };
                let ops = c.ops(&format!("{tl}.ops"), raw_ops, &buffers);
                threads.push(ThreadSpec { count: count.max(1) as usize, node, cpus, ops });
            }
            processes.push(ProcessSpec { parent, node, cpus, main, threads });
        }
        if nthreads > MAX_THREADS {
            c.bad(format!("{loc}.process"), format!("at most {MAX_THREADS} threads in all, got {nthreads}"));
        }
        (p.len() == start).then(|| ProgramSpec { kind: w.kind.clone(), start_s, buffers, processes })
    }

    /// Pages mapped: a private buffer once per process that uses it, a shared one once.
    pub fn footprint_pages(&self) -> u64 {
        let mut pages = 0;
        for (b, buf) in self.buffers.iter().enumerate() {
            let users = self.processes.iter().filter(|p| p.uses(b)).count() as u64;
            pages += buf.size_mib * 256 * if buf.mapping == "private" { users } else { users.min(1) };
        }
        pages
    }

    pub fn build(&self, k: &mut Kernel, index: usize) {
        let comm = "program";
        let files: Vec<Option<usize>> = self.buffers.iter().enumerate().map(|(b, buf)| (buf.mapping != "private").then(|| k.shmem_file_setup(&format!("program-{b}"), buf.size_mib * 256))).collect();
        let mut mains: Vec<usize> = Vec::new();
        for ps in &self.processes {
            let nthreads = ps.threads.iter().map(|t| t.count).sum();
            let mm = new_mm(k, comm, nthreads);
            // the buffers this process uses, mapped in buffer order
            let vmas: Vec<Option<usize>> = (0..self.buffers.len())
                .map(|b| {
                    ps.uses(b).then(|| match files[b] {
                        Some(f) => k.mmap_shared(mm, f, VM_READ | VM_WRITE),
                        None => {
                            let advice = match self.buffers[b].madvise.as_str() {
                                "hugepage" => VM_HUGEPAGE,
                                "nohugepage" => VM_NOHUGEPAGE,
                                _ => 0,
                            };
                            k.mms[mm].mmap_anon(self.buffers[b].size_mib * 256, VM_READ | VM_WRITE | advice)
                        }
                    })
                })
                .collect();
            let mut prog = self.ops(k, &ps.main, &vmas);
            prog.extend([Op::Spawn, Op::Join]);
            let main = match ps.parent.map(|q| mains[q]) {
                Some(pm) => fork_task(k, mm, comm, index, prog, pm),
                None => new_task(k, mm, comm, index, prog, None, (self.start_s * 1e9) as u64),
            };
            if let Some(a) = affinity_of(k, ps.node, &ps.cpus, None) {
                k.tasks[main].allowed = a;
            }
            // numaw's program.c stores with one memset per page
            k.tasks[main].page_stores = true;
            for ts in &ps.threads {
                let prog = self.ops(k, &ts.ops, &vmas);
                for i in 0..ts.count {
                    let t = new_task(k, mm, comm, index, prog.clone(), Some(main), 0);
                    k.tasks[t].page_stores = true;
                    k.tasks[t].allowed = affinity_of(k, ts.node, &ts.cpus, Some(i)).unwrap_or_else(|| k.tasks[main].allowed.clone());
                }
            }
            mains.push(main);
        }
    }

    /// Engine ops for `ops`, with the VMA of each buffer this process maps.
    fn ops(&self, k: &mut Kernel, ops: &[OpSpec], vmas: &[Option<usize>]) -> Vec<Op> {
        ops.iter()
            .map(|o| match o {
                OpSpec::Store(s) | OpSpec::Load(s) | OpSpec::Rmw(s) => {
                    let access = match o {
                        OpSpec::Store(_) => Access::Store,
                        OpSpec::Load(_) => Access::Load,
                        _ => Access::Rmw,
                    };
                    let vma = vmas[s.buffer].unwrap_or(0);
                    let (first, npages) = (s.offset_mib * 256, s.size_mib * 256);
                    let duration_ns = s.duration_s.map_or(0, |d| (d * 1e9) as u64);
                    let passes = s.passes.unwrap_or(u32::MAX);
                    match (access, s.stride, duration_ns) {
                        // the block-aggregated streams of the named kinds, where they apply
                        (Access::Store, 1, 0) => Op::Sweep { vma, first, npages, passes },
                        (Access::Rmw, 1, d) if d > 0 => Op::SweepFor { vma, first, npages, duration_ns: d },
                        _ => Op::Stream { vma, first, npages, stride: s.stride, access, passes, duration_ns },
                    }
                }
                OpSpec::SetMempolicy { mode, nodes } => Op::SetPolicy(match mode.as_str() {
                    "bind" => Mempolicy::bind(nodes.iter().fold(0, |m, &n| m | node_bit(n))),
                    "preferred" => Mempolicy { mode: MpolMode::Preferred(nodes[0]), numa_balancing: false },
                    _ => Mempolicy::DEFAULT,
                }),
                OpSpec::Affinity { node: Some(n), .. } => Op::SetAffinity(node_bit(*n)),
                OpSpec::Affinity { cpus, .. } => {
                    let set: Vec<bool> = (0..k.topo.nr_cpus()).map(|c| cpus.as_deref().unwrap_or_default().contains(&c)).collect();
                    k.cpu_sets.push(set);
                    Op::SetCpus(k.cpu_sets.len() - 1)
                }
                OpSpec::Sleep { duration_s } => Op::SleepFor((duration_s * 1e9) as u64),
            })
            .collect()
    }
}

impl ProcessSpec {
    /// Whether an operation of this process (its main thread's or a thread's) names buffer `b`.
    fn uses(&self, b: usize) -> bool {
        let names = |o: &OpSpec| matches!(o, OpSpec::Store(s) | OpSpec::Load(s) | OpSpec::Rmw(s) if s.buffer == b);
        self.main.iter().any(names) || self.threads.iter().any(|t| t.ops.iter().any(names))
    }
}

/// The allowed CPUs for `node` / `cpus` (None: inherited): a node's CPUs, or the listed CPUs
/// (for thread `i` of a group, its one CPU `cpus[i % len]`).
fn affinity_of(k: &Kernel, node: Option<usize>, cpus: &Option<Vec<usize>>, i: Option<usize>) -> Option<Vec<bool>> {
    match (node, cpus) {
        (Some(n), _) => Some(k.topo.cpu_node.iter().map(|&c| c == n).collect()),
        (None, Some(list)) => {
            let one = i.map(|i| list[i % list.len()]);
            Some((0..k.topo.nr_cpus()).map(|c| one.map_or(list.contains(&c), |o| o == c)).collect())
        }
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::Kernel;
    use crate::scenario::parse_scenario;
    use crate::simulation::Simulation;
    use crate::vmstat::VmEvent::{NumaPagesMigrated, Pgalloc, Pgfault};

    const MACHINE: &str = "seed = 1\n[machine]\nprofile = \"xeon-platinum-2n-128c\"\ncpus_per_node = 4\n";

    /// `program` with `version`, the buffers and processes given as TOML, run until `until_s`
    /// (or its end).
    fn run_until(version: &str, body: &str, until_s: f64) -> Kernel {
        let text = format!("{MACHINE}[kernel]\nversion = \"{version}\"\n[[workload]]\nkind = \"program\"\nimage = \"none\"\n{body}");
        let mut sim = Simulation::new(&parse_scenario(&text).expect("parses")).expect("builds");
        while sim.k.now < (until_s * 1e9) as u64 && sim.step().expect("steps") {}
        sim.k
    }

    fn run(version: &str, body: &str) -> Kernel {
        run_until(version, body, f64::INFINITY)
    }

    /// A reader on node 1 and a writer of the first 8 MiB on node 0 (docs/scenario.md): the
    /// reader's hint faults pull the pages only it touches to node 1 (private to it after the
    /// first touch, by the two-stage filter), while the pages both touch are shared and stay.
    #[test]
    fn a_reader_pulls_what_it_alone_reads_and_the_written_subset_stays() {
        let k = run_until(
            "6.12",
            "[[workload.buffer]]\nsize_mib = 64\n[[workload.process]]\nnode = 0\nmain = [{ op = \"store\" }]\n\
             [[workload.process.thread]]\nnode = 1\nops = [{ op = \"load\", duration_s = 20 }]\n\
             [[workload.process.thread]]\nops = [{ op = \"store\", size_mib = 8, duration_s = 20 }]\n",
            19.0,
        );
        let pt = &k.mms[0].vmas.last().expect("the buffer").pt;
        let on = |range: std::ops::Range<u64>, n: u8| range.filter(|&i| pt.nid(i) == n).count() as u64;
        let moved = on(8 * 256..64 * 256, 1);
        assert!(moved > 56 * 256 * 99 / 100, "the reader's own pages moved to its node: {moved} of 14336");
        assert!(on(0..8 * 256, 0) > 7 * 256, "the shared subset stays with the writer: {} of 2048", on(0..8 * 256, 0));
        assert!(k.vmstat.get(NumaPagesMigrated) >= moved);
    }

    /// mm/memory.c: do_anonymous_page maps the zero page for a read of a page never written:
    /// a load-only stream allocates nothing and faults once per page, not once per pass.
    #[test]
    fn loads_of_pages_never_written_map_the_zero_page_once() {
        let k = run("6.12", "[[workload.buffer]]\nsize_mib = 4\n[[workload.process]]\n[[workload.process.thread]]\nops = [{ op = \"load\", passes = 5 }]\n");
        assert_eq!(k.vmstat.get(Pgalloc), 0, "nothing allocated");
        assert_eq!(k.vmstat.get(Pgfault), 1024, "one zero-page fault per page");
    }

    /// A stride touches (and first-touches) every stride-th page only.
    #[test]
    fn a_strided_store_touches_every_stride_th_page() {
        let k = run("6.12", "[[workload.buffer]]\nsize_mib = 4\n[[workload.process]]\nmain = [{ op = \"store\", stride = 4, passes = 2 }]\n");
        assert_eq!((k.vmstat.get(Pgalloc), k.vmstat.get(Pgfault)), (256, 256), "a fault and a page for each 4th page");
    }

    /// fork(2) with a shmem buffer: the child is forked by process 0's main thread, maps the
    /// same file (one page cache, two mappings), and its private buffer is its own.
    #[test]
    fn a_forked_process_shares_shmem_and_keeps_private_buffers_its_own() {
        let k = run(
            "7.3",
            "[[workload.buffer]]\nsize_mib = 4\nmapping = \"shmem\"\n[[workload.buffer]]\nsize_mib = 2\n\
             [[workload.process]]\nmain = [{ op = \"store\", buffer = 0 }]\n\
             [[workload.process]]\nparent = 0\nmain = [{ op = \"rmw\", buffer = 0 }, { op = \"store\", buffer = 1 }]\n",
        );
        let mains: Vec<usize> = (0..k.tasks.len()).filter(|&t| k.tasks[t].program.len() > 2).collect();
        assert_eq!(mains.len(), 2);
        assert_eq!(k.tasks[mains[1]].parent, Some(mains[0]));
        assert_ne!(k.tasks[mains[0]].mm, k.tasks[mains[1]].mm);
        assert_eq!(k.shmem.len(), 1);
        assert_eq!(k.shmem[0].mappers.len(), 2, "both processes map the file");
        // the shmem file's pages once, the child's private 2 MiB once
        assert_eq!(k.vmstat.get(Pgalloc), 1024 + 512);
    }

    /// Bad programs are refused with the key at fault.
    #[test]
    fn bad_programs_say_where() {
        let cases = [
            ("[[workload.buffer]]\nsize_mib = 4\n[[workload.process]]\nmain = [{ op = \"jump\" }]\n", "process[0].main[0].op"),
            ("[[workload.buffer]]\nsize_mib = 4\n[[workload.process]]\nmain = [{ op = \"store\", buffer = 1 }]\n", "main[0].buffer"),
            ("[[workload.buffer]]\nsize_mib = 4\n[[workload.process]]\nmain = [{ op = \"store\", passes = 2, duration_s = 1.0 }]\n", "main[0].duration_s"),
            ("[[workload.buffer]]\nsize_mib = 4\n[[workload.process]]\nmain = [{ op = \"store\", offset_mib = 2, size_mib = 4 }]\n", "main[0].size_mib"),
            ("[[workload.buffer]]\nsize_mib = 4\n[[workload.process]]\nmain = [{ op = \"sleep\", mode = \"bind\", duration_s = 1.0 }]\n", "main[0].mode"),
            ("[[workload.buffer]]\nsize_mib = 4\n[[workload.process]]\n[[workload.process]]\nparent = 1\n", "process[1].parent"),
            ("[[workload.buffer]]\nsize_mib = 4\nmapping = \"shmem\"\nmadvise = \"hugepage\"\n[[workload.process]]\n", "buffer[0].madvise"),
            ("[[workload.process]]\n", "workload[0].buffer"),
        ];
        for (body, loc) in cases {
            let text = format!("{MACHINE}[[workload]]\nkind = \"program\"\n{body}");
            let e = parse_scenario(&text).expect_err(body).to_string();
            assert!(e.contains(loc), "{loc} in: {e}");
        }
    }
}
