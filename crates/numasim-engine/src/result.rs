//! Run results: counters under /proc/vmstat names, times, and time series, as JSON.

use crate::kernel::Kernel;
use crate::mm::pgtable::BLOCK_PAGES;
use crate::scenario::Scenario;
use crate::sched::task::TaskState;
use crate::vmstat::{NR_VM_EVENTS, VM_EVENT_NAMES};
use serde_json::{json, Map, Value};

/// Time series sampled every `run.sample_interval_ms` (and at the end).
#[derive(Debug, Default, Clone)]
pub struct Samples {
    pub time_ns: Vec<u64>,
    pub vmstat: Vec<[u64; NR_VM_EVENTS]>,
    /// (sample index, pid, node, resident pages): autonuma-benchmark's memory-per-node plot.
    pub memory: Vec<(usize, u32, usize, u64)>,
    /// (sample index, tid, tgid, CPU node, preferred node or -1), every placement interval.
    pub tasks: Vec<(usize, u32, u32, u8, i8)>,
    /// (sample index, pid, bucket, node, pages): where each process's address space lives,
    /// its mapped pages (VMAs in address order) cut into PLACEMENT_BUCKETS equal ranges.
    pub placement: Vec<(usize, u32, u16, u8, u64)>,
    /// (sample index, pid, node, pages) of the program's image (workload/image.rs), which the
    /// placement map leaves out: placement + image = resident pages of that sample.
    pub image: Vec<(usize, u32, u8, u64)>,
    /// (sample index, pid, mm->numa_scan_seq), when a process's pass count changed.
    pub scan_seq: Vec<(usize, u32, u32)>,
}

/// Address ranges of the page-placement map.
pub const PLACEMENT_BUCKETS: usize = 64;

impl Samples {
    /// Per-task nodes and the page-placement map (from the 2 MiB block summaries, not pages).
    pub fn record_placement(&mut self, k: &Kernel) {
        let i = self.time_ns.len().saturating_sub(1);
        for t in k.tasks.iter().filter(|t| !t.background && !matches!(t.state, TaskState::NotStarted | TaskState::Exited)) {
            let pref = t.numa.preferred_nid.map_or(-1, |n| n as i8);
            self.tasks.push((i, t.pid, t.tgid, k.topo.cpu_node[t.cpu] as u8, pref));
        }
        for m in k.mms.iter().filter(|m| m.users > 0 && !m.background) {
            // the memory the workload mapped, not the program's image
            let mut image = vec![0u64; k.topo.nr_nodes];
            for v in m.vmas.iter().filter(|v| v.image) {
                for (acc, t) in image.iter_mut().zip(v.pt.node_totals()) {
                    *acc += t;
                }
            }
            for (n, &pages) in image.iter().enumerate().filter(|x| *x.1 > 0) {
                self.image.push((i, m.tgid, n as u8, pages));
            }
            let total: u64 = m.vmas.iter().filter(|v| !v.image).map(|v| v.pt.len()).sum();
            if total == 0 {
                continue;
            }
            let mut acc = vec![vec![0u64; k.topo.nr_nodes]; PLACEMENT_BUCKETS];
            let mut base = 0u64;
            for v in m.vmas.iter().filter(|v| !v.image) {
                for b in 0..v.pt.blocks.len() {
                    let bucket = ((base + b as u64 * BLOCK_PAGES) * PLACEMENT_BUCKETS as u64 / total) as usize;
                    for (a, &c) in acc[bucket.min(PLACEMENT_BUCKETS - 1)].iter_mut().zip(v.pt.block_nodes(b)) {
                        *a += c as u64;
                    }
                }
                base += v.pt.len();
            }
            for (b, per_node) in acc.iter().enumerate() {
                for (n, &pages) in per_node.iter().enumerate().take(k.topo.nr_nodes).filter(|x| *x.1 > 0) {
                    self.placement.push((i, m.tgid, b as u16, n as u8, pages));
                }
            }
        }
    }

    pub fn record(&mut self, k: &Kernel) {
        let i = self.time_ns.len();
        self.time_ns.push(k.now);
        self.vmstat.push(k.vmstat.0);
        for m in k.mms.iter().filter(|m| m.users > 0 && !m.background) {
            for n in 0..k.topo.nr_nodes {
                self.memory.push((i, m.tgid, n, m.node_pages[n]));
            }
            let last = self.scan_seq.iter().rev().find(|r| r.1 == m.tgid).map(|r| r.2);
            if last != Some(m.numa_scan_seq) {
                self.scan_seq.push((i, m.tgid, m.numa_scan_seq));
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProcessResult {
    pub pid: u32,
    pub comm: String,
    pub workload: usize,
    pub threads: usize,
    pub elapsed_s: f64,
    pub user_s: f64,
    pub system_s: f64,
    /// Accesses of timed random-access loops (pmbench), and their sum of per-thread rates.
    pub accesses: f64,
    pub throughput_aps: f64,
    /// Time the process's threads waited on migration entries, s.
    pub migration_wait_s: f64,
    /// Timed-loop access latencies: count per power-of-two bucket of ns (empty if none).
    pub latency_hist: Vec<f64>,
}

/// Where a thread ended up: its last CPU's node, its preferred node, its numa_group, and the
/// node holding most of the pages its sweeps cover.
#[derive(Debug, Clone)]
pub struct TaskResult {
    pub pid: u32,
    pub tgid: u32,
    pub node: usize,
    pub preferred_nid: Option<usize>,
    pub numa_group: Option<u32>,
    pub mem_node: Option<usize>,
    /// p->numa_pages_migrated: pages its hint faults migrated (/proc/PID/task/TID/sched).
    pub numa_pages_migrated: u64,
}

/// Node holding most of the pages of the ranges task `t` sweeps (None if it sweeps none).
pub fn sweep_mem_node(k: &Kernel, t: usize) -> Option<usize> {
    let mut pages = vec![0u64; k.topo.nr_nodes];
    let pt_of = |vma: usize| &k.mms[k.tasks[t].mm].vmas[vma].pt;
    for op in &k.tasks[t].program {
        if let crate::workload::Op::Sweep { vma, first, npages, .. } = *op {
            pt_of(vma).count_range_nodes(first, first + npages, &mut pages);
        }
    }
    let (node, &most) = pages.iter().enumerate().max_by_key(|&(n, &c)| (c, std::cmp::Reverse(n)))?;
    (most > 0).then_some(node)
}

#[derive(Debug, Clone)]
pub struct RunResult {
    pub scenario: Value,
    pub seed: u64,
    pub counters: Vec<(&'static str, u64)>,
    /// Per node: /sys/devices/system/node/nodeN/numastat (page_alloc::NUMA_STAT_NAMES).
    pub numastat: Vec<[u64; crate::mm::page_alloc::NR_NUMA_STAT]>,
    pub tlb_irqs: Vec<u64>,
    pub elapsed_s: f64,
    pub user_s: f64,
    pub system_s: f64,
    pub processes: Vec<ProcessResult>,
    pub tasks: Vec<TaskResult>,
    pub samples: Samples,
    pub completed: bool,
    pub ticks: u64,
    pub nr_cpus: usize,
    pub nr_nodes: usize,
    /// How NUMA placement sees the node distances (sched_numa_topology_type).
    pub numa_topology_type: crate::topology::NumaTopologyType,
    /// Each node's memory tier (mm/memory_tiers.rs).
    pub tiers: crate::mm::memory_tiers::NodeTiers,
    /// CPU seconds each node's kswapd used (mm/vmscan.rs).
    pub kswapd_cpu_s: Vec<f64>,
    pub events: (u64, u64, u64),
    /// Per mTHP size (hugepages-<size>kB/stats): (size name, anon_fault_alloc, anon_fault_fallback).
    pub mthp: Vec<(String, u64, u64)>,
    pub folios: FolioMigrations,
    pub kvm: Vec<KvmResult>,
    pub trace: crate::trace::TraceLog,
    /// `run.trace`: the result's `trace` object (tracepoints.rs).
    pub tracepoints: Option<Value>,
}

/// One VM of a run.
#[derive(Debug, Clone)]
pub struct KvmResult {
    /// QEMU's pid.
    pub pid: u32,
    pub vcpus: usize,
    /// NUMA-invalidation passes over guest RAM (`Vm::scan_passes`), in all and once the vCPUs
    /// run (`Vm::running_scan_passes`).
    pub scan_passes: f64,
    pub running_scan_passes: f64,
    pub stats: crate::kvm::KvmStats,
}

/// How often NUMA balancing moved each large folio it moved (false sharing makes folios ping-pong).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FolioMigrations {
    /// Large folios migrated at least once.
    pub folios: u64,
    pub migrations: u64,
    pub max: u32,
    /// Folios by migrations in power-of-two buckets: [1], [2,3], [4,7], ...
    pub hist: Vec<u64>,
}

impl FolioMigrations {
    fn collect(k: &Kernel) -> Self {
        let mut f = FolioMigrations::default();
        for &n in k.folio_migrations.values() {
            f.folios += 1;
            f.migrations += n as u64;
            f.max = f.max.max(n);
            let b = (31 - n.leading_zeros()) as usize;
            if f.hist.len() <= b {
                f.hist.resize(b + 1, 0);
            }
            f.hist[b] += 1;
        }
        f
    }
}

/// The histogram kept by a process's sampler, also after the process exited.
fn sampler_hist(k: &Kernel, mm: usize) -> Option<Vec<f64>> {
    k.samplers.iter().find(|s| s.mm == mm).map(|s| s.latency_hist.to_vec())
}

/// {"bucket_ns": [lower bounds], "count": [...]} over the non-empty range of buckets.
fn latency_json(h: &[f64]) -> Value {
    let first = h.iter().position(|&c| c > 0.0);
    let last = h.iter().rposition(|&c| c > 0.0);
    match (first, last) {
        (Some(a), Some(b)) => json!({
            "bucket_ns": (a..=b).map(|i| 1u64 << i).collect::<Vec<_>>(),
            "count": h[a..=b].iter().map(|c| c.round() as u64).collect::<Vec<_>>(),
        }),
        _ => json!({"bucket_ns": [], "count": []}),
    }
}

impl RunResult {
    pub fn collect(s: &Scenario, k: &Kernel, samples: Samples, completed: bool, ticks: u64) -> Self {
        // what is measured: every task but the background ones (the sampler)
        let measured = k.tasks.iter().filter(|t| !t.background);
        let started = measured.clone().filter(|t| t.start_ns > 0 || t.exit_ns > 0 || t.sum_exec_runtime > 0);
        let first = started.clone().map(|t| t.start_ns).min().unwrap_or(0);
        let last = measured.map(|t| t.exit_ns).max().unwrap_or(0).max(if completed { 0 } else { k.now });
        let processes = k
            .mms
            .iter()
            .enumerate()
            .filter(|&(i, _)| !k.tasks.iter().any(|t| t.mm == i && t.background))
            .map(|(i, m)| {
                let ts: Vec<_> = k.tasks.iter().filter(|t| t.mm == i).collect();
                let start = ts.iter().map(|t| t.start_ns).min().unwrap_or(0);
                let end = ts.iter().map(|t| if t.exit_ns > 0 { t.exit_ns } else { k.now }).max().unwrap_or(0);
                ProcessResult {
                    pid: m.tgid,
                    comm: m.comm.clone(),
                    workload: ts.first().map(|t| t.workload).unwrap_or(0),
                    threads: ts.len(),
                    elapsed_s: (end - start) as f64 / 1e9,
                    user_s: ts.iter().map(|t| cputime_adjust(k, t).0).sum::<f64>() / 1e9,
                    system_s: ts.iter().map(|t| cputime_adjust(k, t).1).sum::<f64>() / 1e9,
                    accesses: ts.iter().map(|t| t.accesses).sum(),
                    // LKP's throughput.aps: sum over threads of accesses / their timed loop
                    throughput_aps: ts.iter().filter(|t| t.access_ns > 0.0).map(|t| t.accesses / (t.access_ns / 1e9)).sum(),
                    migration_wait_s: ts.iter().map(|t| t.migration_wait_ns).sum::<f64>() / 1e9,
                    latency_hist: m.sampler.map(|s| k.samplers[s].latency_hist.to_vec()).or_else(|| sampler_hist(k, i)).unwrap_or_default(),
                }
            })
            .collect::<Vec<_>>();
        let tasks = (0..k.tasks.len())
            .filter(|&t| k.tasks[t].sum_exec_runtime > 0 && !k.tasks[t].background)
            .map(|t| {
                let p = &k.tasks[t];
                TaskResult {
                    pid: p.pid,
                    tgid: p.tgid,
                    node: k.topo.cpu_node[p.cpu],
                    preferred_nid: p.numa.preferred_nid,
                    numa_group: p.numa.group.map(|g| k.numa_groups[g].gid),
                    mem_node: p.mem_node_at_exit.or_else(|| sweep_mem_node(k, t)),
                    numa_pages_migrated: p.numa.pages_migrated,
                }
            })
            .collect();
        RunResult {
            tasks,
            scenario: serde_json::to_value(s).unwrap_or(Value::Null),
            seed: s.seed,
            counters: VM_EVENT_NAMES.iter().copied().zip(k.vmstat.0.iter().copied()).collect(),
            tlb_irqs: k.irq_tlb_count.clone(),
            numastat: k.nodes.iter().map(|n| n.numastat).collect(),
            elapsed_s: (last - first) as f64 / 1e9,
            user_s: processes.iter().map(|p| p.user_s).sum(),
            system_s: processes.iter().map(|p| p.system_s).sum(),
            processes,
            samples,
            completed,
            ticks,
            nr_cpus: k.topo.nr_cpus(),
            nr_nodes: k.topo.nr_nodes,
            numa_topology_type: k.topo.numa_topology_type,
            tiers: k.tiers.clone(),
            kswapd_cpu_s: k.nodes.iter().map(|n| n.kswapd_cpu_ns / 1e9).collect(),
            events: (k.events.pte_updates, k.events.hint_faults, k.events.migrations),
            mthp: crate::mm::huge_memory::ANON_ORDERS
                .filter(|&o| k.mthp_stats[o as usize] != [0, 0])
                .map(|o| (crate::mm::huge_memory::size_name(o), k.mthp_stats[o as usize][0], k.mthp_stats[o as usize][1]))
                .collect(),
            folios: FolioMigrations::collect(k),
            kvm: k
                .kvms
                .iter()
                .map(|v| KvmResult { pid: k.mms[v.mm].tgid, vcpus: v.vcpus.len(), scan_passes: v.scan_passes(k), running_scan_passes: v.running_scan_passes(k), stats: v.stats.clone() })
                .collect(),
            trace: crate::trace::TraceLog { tracepoints: None, ..k.trace.clone() },
            tracepoints: k.trace.tracepoints.as_deref().map(|tr| k.trace_json(tr)),
        }
    }

    /// {"numa_hit": [per node], ...}: /sys/devices/system/node/nodeN/numastat at the end.
    fn numastat_json(&self) -> Value {
        crate::mm::page_alloc::NUMA_STAT_NAMES
            .iter()
            .enumerate()
            .map(|(i, name)| (name.to_string(), json!(self.numastat.iter().map(|n| n[i]).collect::<Vec<_>>())))
            .collect::<Map<String, Value>>()
            .into()
    }

    pub fn counter(&self, name: &str) -> u64 {
        self.counters.iter().find(|c| c.0 == name).map(|c| c.1).unwrap_or(0)
    }

    pub fn to_json(&self) -> Value {
        let counters: Map<String, Value> = self.counters.iter().map(|(n, v)| (n.to_string(), json!(v))).collect();
        let times: Vec<f64> = self.samples.time_ns.iter().map(|&t| t as f64 / 1e9).collect();
        let mut vmstat = Map::new();
        vmstat.insert("time_s".into(), json!(times));
        for (i, name) in VM_EVENT_NAMES.iter().enumerate() {
            vmstat.insert(name.to_string(), json!(self.samples.vmstat.iter().map(|r| r[i]).collect::<Vec<_>>()));
        }
        let mem = &self.samples.memory;
        let memory = json!({
            "time_s": mem.iter().map(|r| times[r.0]).collect::<Vec<_>>(),
            "pid": mem.iter().map(|r| r.1).collect::<Vec<_>>(),
            "node": mem.iter().map(|r| r.2).collect::<Vec<_>>(),
            "pages": mem.iter().map(|r| r.3).collect::<Vec<_>>(),
        });
        let ts = &self.samples.tasks;
        let tasks_series = json!({
            "time_s": ts.iter().map(|r| times[r.0]).collect::<Vec<_>>(),
            "tid": ts.iter().map(|r| r.1).collect::<Vec<_>>(),
            "pid": ts.iter().map(|r| r.2).collect::<Vec<_>>(),
            "cpu_node": ts.iter().map(|r| r.3).collect::<Vec<_>>(),
            "preferred_nid": ts.iter().map(|r| r.4).collect::<Vec<_>>(),
        });
        let sq = &self.samples.scan_seq;
        let scan_seq = json!({
            "time_s": sq.iter().map(|r| times[r.0]).collect::<Vec<_>>(),
            "pid": sq.iter().map(|r| r.1).collect::<Vec<_>>(),
            "seq": sq.iter().map(|r| r.2).collect::<Vec<_>>(),
        });
        let numa_events: Vec<Value> = self
            .trace
            .events
            .iter()
            .map(|e| json!({"t": e.t_ns as f64 / 1e9, "event": e.event, "pid": e.pid, "tgid": e.tgid, "src_nid": e.src_nid, "dst_nid": e.dst_nid, "dst_pid": e.dst_pid}))
            .collect();
        let pl = &self.samples.placement;
        let placement = json!({
            "buckets": PLACEMENT_BUCKETS,
            "time_s": pl.iter().map(|r| times[r.0]).collect::<Vec<_>>(),
            "pid": pl.iter().map(|r| r.1).collect::<Vec<_>>(),
            "bucket": pl.iter().map(|r| r.2).collect::<Vec<_>>(),
            "node": pl.iter().map(|r| r.3).collect::<Vec<_>>(),
            "pages": pl.iter().map(|r| r.4).collect::<Vec<_>>(),
        });
        let im = &self.samples.image;
        let image = json!({
            "time_s": im.iter().map(|r| times[r.0]).collect::<Vec<_>>(),
            "pid": im.iter().map(|r| r.1).collect::<Vec<_>>(),
            "node": im.iter().map(|r| r.2).collect::<Vec<_>>(),
            "pages": im.iter().map(|r| r.3).collect::<Vec<_>>(),
        });
        let processes: Vec<Value> = self
            .processes
            .iter()
            .map(|p| {
                json!({"pid": p.pid, "comm": p.comm, "workload": p.workload, "threads": p.threads,
                            "elapsed_s": p.elapsed_s, "user_s": p.user_s, "system_s": p.system_s,
                            "accesses": p.accesses, "throughput_aps": p.throughput_aps,
                            "migration_wait_s": p.migration_wait_s,
                            "latency_hist": latency_json(&p.latency_hist)})
            })
            .collect();
        let mut out = json!({
            "numasim_version": env!("CARGO_PKG_VERSION"),
            "seed": self.seed,
            "scenario": self.scenario,
            "completed": self.completed,
            "counters": counters,
            "numastat": self.numastat_json(),
            "interrupts": {"TLB": {"total": self.tlb_irqs.iter().sum::<u64>(), "per_cpu": self.tlb_irqs}},
            "times": {"elapsed_s": self.elapsed_s, "user_s": self.user_s, "system_s": self.system_s},
            "processes": processes,
            "tasks": self.tasks.iter().map(|t| json!({"pid": t.pid, "tgid": t.tgid, "node": t.node, "preferred_nid": t.preferred_nid,
                                                      "numa_group": t.numa_group, "mem_node": t.mem_node, "numa_pages_migrated": t.numa_pages_migrated})).collect::<Vec<_>>(),
            "series": {"vmstat": vmstat, "memory": memory, "tasks": tasks_series, "placement": placement, "image": image, "scan_seq": scan_seq},
            "numa_events": numa_events,
            "numa_events_dropped": self.trace.dropped,
            "numa_fault_migrate_fail": self.trace.migrate_fail_faults,
            "skip_vma": crate::sched::numa::scan_vma::NumaVmaSkip::ALL.iter().filter(|r| self.trace.skip_vma[**r as usize] > 0)
                .map(|r| (r.name().to_string(), json!(self.trace.skip_vma[*r as usize]))).collect::<Map<String, Value>>(),
            "mthp": self.mthp.iter().map(|(size, a, f)| (format!("hugepages-{size}"), json!({"anon_fault_alloc": a, "anon_fault_fallback": f}))).collect::<Map<String, Value>>(),
            "folio_migrations": {"folios": self.folios.folios, "migrations": self.folios.migrations, "max": self.folios.max,
                                 "hist_min": (0..self.folios.hist.len()).map(|b| 1u64 << b).collect::<Vec<_>>(), "hist": self.folios.hist},
            "kvm": self.kvm.iter().map(|v| json!({"pid": v.pid, "vcpus": v.vcpus, "scan_passes": v.scan_passes, "running_scan_passes": v.running_scan_passes, "stats": v.stats})).collect::<Vec<_>>(),
            "sim": {"ticks": self.ticks, "nr_cpus": self.nr_cpus, "nr_nodes": self.nr_nodes, "numa_topology_type": self.numa_topology_type,
                    "memory_tiers": {"adistance": self.tiers.adistance, "toptier": self.tiers.toptier, "demotion": self.tiers.demotion},
                    "kswapd_cpu_s": self.kswapd_cpu_s,
                    "events": {"pte_updates": self.events.0, "hint_faults": self.events.1, "migrations": self.events.2}},
        });
        if let Some(tr) = &self.tracepoints {
            out["trace"] = tr.clone();
        }
        if let Some(m) = &self.trace.fault_kinds {
            out["fault_kinds"] = m
                .iter()
                .map(|(k, n)| {
                    json!({"t": k.centisecond as f64 / 100.0, "task": k.pid, "local": k.local as u8, "last": crate::trace::FaultKind::LAST[k.last as usize],
                           "migrated": k.migrated as u8, "failed": k.failed as u8, "n": n})
                })
                .collect();
            out["scan_windows"] =
                self.trace.scan_windows.iter().map(|w| json!({"t": w.start as f64 / 1e9, "end": w.end as f64 / 1e9, "task": w.pid, "seq": w.seq, "period_ms": w.period_ms})).collect();
        }
        out
    }
}

/// A task's (user, system) ns as getrusage(2) reports them. The kernel samples user and
/// system at ticks and scales the samples to the task's runtime (kernel/sched/cputime.c:
/// cputime_adjust). In a TCG guest (`machine.host_cores`) there is no steal clock, so the
/// runtime holds the time the host ran other vCPUs (the `machine.steal_in_runtime` share of
/// it), shared out in the same proportion; on bare metal the engine's own user and system
/// time are the runtime. Of the time the engine counts as user, the `machine.tick_sys_share`
/// is the kernel work of the CPU's own timer tick and the softirqs it raises
/// (kernel/time/tick-sched.c: tick_sched_timer -> update_process_times): a tick that samples
/// it counts system time.
fn cputime_adjust(k: &crate::kernel::Kernel, t: &crate::sched::task::Task) -> (f64, f64) {
    let (user, sys) = (t.user_ns, t.sys_ns);
    let (user, sys) = if k.tick_sys_share > 0.0 { (user * (1.0 - k.tick_sys_share), sys + user * k.tick_sys_share) } else { (user, sys) };
    let own = t.user_ns + t.sys_ns;
    let rtime = t.sum_exec_runtime as f64;
    if k.host_cores.is_none() || own <= 0.0 || rtime <= own {
        return (user, sys);
    }
    let scale = (own + k.steal_in_runtime * (rtime - own)) / own;
    (user * scale, sys * scale)
}
