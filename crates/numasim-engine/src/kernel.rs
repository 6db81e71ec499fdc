//! The simulated machine and kernel state that every mechanism module works on.

use crate::cost::CostProfile;
use crate::features::Feature;
use crate::mm::page_alloc::NodeMem;
use crate::mm::types::{Mm, VM_HUGEPAGE, VM_NOHUGEPAGE};
use crate::scenario::{KernelConfig, Scenario};
use crate::sched::task::Task;
use crate::topology::{Topology, MAX_NODES};
use crate::vmstat::{VmEvent, VmStat};

/// One CPU's runqueue; `rq[0]` is the task running on it.
#[derive(Debug, Clone, Default)]
pub struct Cpu {
    pub rq: Vec<usize>,
    /// cpu_tlbstate.loaded_mm: the user mm whose translations this CPU may cache.
    pub loaded_mm: Option<usize>,
    /// cpu_tlbstate_shared.is_lazy: idle or a kernel thread borrowing `loaded_mm`.
    pub is_lazy: bool,
    /// Tasks that blocked while sharing this CPU and stay queued (DELAY_DEQUEUE, 6.12+), with
    /// the time they leave the runqueue.
    pub delayed: Vec<(usize, u64)>,
    /// rq->idle_stamp: when the CPU last went idle, ns.
    pub idle_stamp: u64,
    /// Went idle during this tick (it runs newidle balancing at the tick's end).
    pub newly_idle: bool,
}

impl Cpu {
    pub fn curr(&self) -> Option<usize> {
        self.rq.first().copied()
    }
}

/// Counts of the NUMA work the engine did (what its cost should grow with).
#[derive(Debug, Clone, Default)]
pub struct SimEvents {
    pub pte_updates: u64,
    pub hint_faults: u64,
    pub migrations: u64,
    /// Faults that met another thread's fault on the same page (mm/fault_race.rs).
    pub fault_races: u64,
}

/// RNG stream of the allocator's fragmentation draws (see simulation.rs for the others).
const RNG_FRAGMENTATION: u64 = 2;
/// RNG stream of scheduler races (which thread wins an mm's scan window).
const RNG_SCHED: u64 = 3;
/// RNG stream of reclaim's reference checks (mm/vmscan.rs).
const RNG_RECLAIM: u64 = 4;

pub struct Kernel {
    pub topo: Topology,
    pub cost: CostProfile,
    /// The lowest of `cost.latency_ns` (a bound for the random-access race test).
    pub min_latency_ns: f64,
    /// Scratch bytes per node of one stretch of a store stream (all zero between uses).
    pub stream_bytes: Vec<f64>,
    /// `cost.page_copy_ns` for every (CPU node, source, target), indexed by `page_copy_idx`.
    page_copy_ns: Vec<f64>,
    /// `latency_bucket` of `cost.latency_ns[cpu node][memory node]` (a random access's
    /// histogram bucket).
    pub latency_buckets: [[u8; MAX_NODES]; MAX_NODES],
    pub cfg: KernelConfig,
    /// `cfg.thp.allowable_orders` by VM_HUGEPAGE (bit 0) and VM_NOHUGEPAGE (bit 1), looked up
    /// on every first-touch fault.
    thp_orders: [u16; 4],
    /// Start of the current tick, ns.
    pub now: u64,
    /// Simulated time of the code running now (`now` plus the running task's time in the tick), ns.
    pub clock: u64,
    pub tick_ns: u64,
    pub mms: Vec<Mm>,
    /// shmem files and MAP_SHARED anonymous regions (mm/shmem.rs).
    pub shmem: Vec<crate::mm::shmem::ShmemFile>,
    pub tasks: Vec<Task>,
    pub cpus: Vec<Cpu>,
    pub nodes: Vec<NodeMem>,
    pub vmstat: VmStat,
    /// /proc/interrupts "TLB shootdowns", per CPU.
    pub irq_tlb_count: Vec<u64>,
    pub events: SimEvents,
    /// Tasks cloned during this tick with the instant of their clone (ns into the tick), placed
    /// at its end (wake_up_new_task) in the order of those instants.
    pub spawned: Vec<(f64, usize)>,
    /// Tasks asking to leave a CPU they are no longer allowed on.
    pub displaced: Vec<usize>,
    pub oom: Option<String>,
    /// A run stopped on something the engine does not model (Error::NotModelled).
    pub not_modelled: Option<String>,
    /// Random-access distributions of pmbench-like processes.
    pub samplers: Vec<crate::workload::random::AccessSampler>,
    /// KVM VMs (their QEMU processes are ordinary mms).
    pub kvms: Vec<crate::kvm::Vm>,
    /// Per sampler, the threads in its random-access loop on a CPU this tick (they run at once).
    pub sampler_threads: Vec<Vec<usize>>,
    /// numa_groups ever created (a freed group stays, empty).
    pub numa_groups: Vec<crate::sched::numa::group::NumaGroup>,
    /// NUMA task moves decided this tick, applied at its end.
    pub numa_moves: Vec<crate::sched::numa::task_migrate::NumaMove>,
    /// Chance that a no-compaction PMD-order allocation finds no free block (machine.fragmentation).
    pub fragmentation: f64,
    pub frag_rng: crate::sim::rng::Rng,
    pub sched_rng: crate::sim::rng::Rng,
    /// The NUMA sched domains of every node (sched/domain.rs).
    pub sched_domains: crate::sched::domain::SchedDomains,
    /// Per CPU and NUMA level (index into topo.numa_distances), its NUMA domain's balancing state.
    pub numa_sd: Vec<Vec<crate::sched::balance::SdState>>,
    /// Per CPU, its MC domain's balancing state (sched/balance_mc.rs).
    pub mc_sd: Vec<crate::sched::balance::SdState>,
    /// Per task, se->exec_start: when it last stopped running, ns.
    pub exec_start: Vec<u64>,
    /// Per-order anon_fault_alloc / anon_fault_fallback (hugepages-<size>kB/stats).
    pub mthp_stats: [[u64; 2]; 10],
    /// NUMA migrations of each large folio ever migrated, by (mm, vma, head).
    pub folio_migrations: std::collections::HashMap<(usize, usize, u64), u32>,
    /// The scheduler's NUMA tracepoints (trace.rs).
    pub trace: crate::trace::TraceLog,
    /// Per CPU, the base folios waiting in its LRU add batch (mm/swap.rs).
    pub lru_add: Vec<Vec<crate::mm::rmap::PageRef>>,
    /// The image of the processes of the workload being built (workload/image.rs).
    pub image_preset: crate::workload::image::ImagePreset,
    /// Each process's own small memory, by mm, if modelled (workload/image.rs).
    pub images: std::collections::BTreeMap<usize, crate::workload::image::Image>,
    /// A forked process's VMAs that its parent's VMAs become at fork, by child mm: (parent VMA,
    /// child VMA), besides the image's (mm/cow.rs: dup_mmap).
    pub fork_inherits: std::collections::BTreeMap<usize, Vec<(usize, usize)>>,
    /// A VM's host cores (`machine.host_cores`), and the ns of this tick the host takes from
    /// each busy vCPU when more vCPUs are busy than it has cores.
    pub host_cores: Option<f64>,
    pub host_steal_ns: f64,
    /// The interleaved group of threads running now, if any (sim/interleave.rs).
    pub il: Option<crate::sim::interleave::Interleave>,
    /// `run.interleave_max_threads`.
    pub interleave_max: usize,
    /// Faults in progress of the threads of interleaved groups (mm/fault_race.rs).
    pub inflight: Vec<crate::mm::fault_race::InFlight>,
    /// The migrate_pages(2)/move_pages(2) callers whose target has threads in a store stream
    /// this tick: they run first, and their migrations leave timed records (mm/migration_entry.rs).
    pub timed_migrators: Vec<usize>,
    /// Where the running timed call's current `migrate_pages()` started.
    pub call_clock: Option<crate::mm::migration_entry::CallClock>,
    /// The running stream loads a page before it stores to it (`Op::SweepFor`): a fault on an
    /// unmapped shmem page is a read fault (mm/shmem.rs: fault-around).
    pub stream_loads_first: bool,
    /// CPU sets that `Op::SetCpus` names (a `program`'s affinity operations).
    pub cpu_sets: Vec<Vec<bool>>,
    /// Nodes a migration's copy may go to when its target is full, in order (demotion's
    /// allowed mask in the target's zonelist order; empty otherwise).
    pub migrate_fallback: Vec<usize>,
    /// The running migrate_pages() is reclaim's demotion (MR_DEMOTION): a large folio that
    /// finds no room is split and its pages retried.
    pub migrating_for_demotion: bool,
    /// While Some: the instant of the flush being sent, whose IPIs are delivered at the tick's end.
    pub flush_at: Option<f64>,
    pub pending_flushes: Vec<crate::mm::migration_entry::PendingFlush>,
    /// (task, from, until): a thread asleep in migration_entry_wait, absolute ns.
    pub asleep: Vec<(usize, f64, f64)>,
    /// `machine.steal_in_runtime`: the share of stolen time the guest counts as runtime.
    pub steal_in_runtime: f64,
    /// `machine.tick_sys_share`: the share of user-mode time that is the tick's kernel work.
    pub tick_sys_share: f64,
    /// Memory tiers and demotion targets (mm/memory_tiers.rs).
    pub tiers: crate::mm::memory_tiers::NodeTiers,
    /// Some node can demote (demotion_enabled and a target): the nodes keep LRU lists.
    pub lru_tracking: bool,
    pub reclaim_rng: crate::sim::rng::Rng,
}

impl Kernel {
    /// copy_page of one page from `src` to `dst` by a CPU on `cpu_node`, ns (the profile's
    /// `page_copy_ns`, looked up: it is on every migration's path).
    #[inline]
    pub fn page_copy_ns(&self, cpu_node: usize, src: usize, dst: usize) -> f64 {
        let n = self.topo.nr_nodes;
        self.page_copy_ns[(cpu_node * n + src) * n + dst]
    }

    pub fn new(s: &Scenario) -> Self {
        let topo = s.machine.topology.clone();
        let nodes = NodeMem::for_topology(&topo, s.kernel.tiering.watermark_scale_factor as u64);
        let tiers = crate::mm::memory_tiers::NodeTiers::build(&topo, &s.machine.memory_type, s.machine.hmat, &s.machine.cost, s.kernel.variants.memory_tiers);
        let lru_tracking = s.kernel.tiering.demotion_enabled && tiers.demotion.iter().any(|d| !d.is_empty());
        Kernel {
            cpus: vec![Cpu::default(); topo.nr_cpus()],
            irq_tlb_count: vec![0; topo.nr_cpus()],
            nodes,
            topo,
            cost: s.machine.cost.clone(),
            min_latency_ns: s.machine.cost.latency_ns.iter().flatten().copied().fold(f64::INFINITY, f64::min),
            stream_bytes: vec![0.0; s.machine.topology.nr_nodes],
            page_copy_ns: {
                let n = s.machine.topology.nr_nodes;
                (0..n * n * n).map(|i| s.machine.cost.page_copy_ns(i / (n * n), i / n % n, i % n)).collect()
            },
            latency_buckets: {
                let mut b = [[0; MAX_NODES]; MAX_NODES];
                for (from, row) in s.machine.cost.latency_ns.iter().enumerate() {
                    for (to, &ns) in row.iter().enumerate() {
                        b[from][to] = crate::workload::random::latency_bucket(ns) as u8;
                    }
                }
                b
            },
            thp_orders: [0, VM_HUGEPAGE, VM_NOHUGEPAGE, VM_HUGEPAGE | VM_NOHUGEPAGE].map(|f| s.kernel.thp.allowable_orders(f)),
            cfg: s.kernel.clone(),
            now: 0,
            clock: 0,
            tick_ns: 1_000_000_000 / s.kernel.hz as u64,
            mms: Vec::new(),
            shmem: Vec::new(),
            tasks: Vec::new(),
            vmstat: VmStat::default(),
            events: SimEvents::default(),
            spawned: Vec::new(),
            displaced: Vec::new(),
            oom: None,
            not_modelled: None,
            samplers: Vec::new(),
            kvms: Vec::new(),
            sampler_threads: Vec::new(),
            numa_groups: Vec::new(),
            numa_moves: Vec::new(),
            fragmentation: s.machine.fragmentation,
            frag_rng: crate::sim::rng::Rng::new(s.seed, RNG_FRAGMENTATION),
            sched_rng: crate::sim::rng::Rng::new(s.seed, RNG_SCHED),
            sched_domains: crate::sched::domain::SchedDomains::build(&s.machine.topology, &s.kernel.variants),
            numa_sd: vec![vec![Default::default(); s.machine.topology.numa_distances.len()]; s.machine.topology.nr_cpus()],
            mc_sd: vec![Default::default(); s.machine.topology.nr_cpus()],
            exec_start: Vec::new(),
            mthp_stats: [[0; 2]; 10],
            folio_migrations: Default::default(),
            trace: crate::trace::TraceLog { fault_kinds: s.run.trace_faults.then(Default::default), tracepoints: s.run.trace.then(Default::default), ..Default::default() },
            lru_add: vec![Vec::new(); s.machine.topology.nr_cpus()],
            image_preset: crate::workload::image::ImagePreset::None,
            images: Default::default(),
            fork_inherits: Default::default(),
            host_cores: s.machine.host_cores,
            steal_in_runtime: s.machine.steal_in_runtime,
            tick_sys_share: s.machine.tick_sys_share,
            host_steal_ns: 0.0,
            il: None,
            interleave_max: s.run.interleave_max_threads,
            inflight: Vec::new(),
            timed_migrators: Vec::new(),
            call_clock: None,
            stream_loads_first: false,
            cpu_sets: Vec::new(),
            migrate_fallback: Vec::new(),
            migrating_for_demotion: false,
            flush_at: None,
            pending_flushes: Vec::new(),
            asleep: Vec::new(),
            tiers,
            lru_tracking,
            reclaim_rng: crate::sim::rng::Rng::new(s.seed, RNG_RECLAIM),
        }
    }

    /// With `machine.host_cores`, each busy vCPU runs only host_cores / busy of the tick: the
    /// rest is stolen by the host (TCG vCPU threads take turns on the host's cores), while the
    /// guest still counts it as the task's runtime.
    pub fn update_host_steal(&mut self) {
        self.host_steal_ns = match self.host_cores {
            Some(h) => {
                let busy = self.cpus.iter().filter(|c| !c.rq.is_empty()).count().max(1);
                self.tick_ns as f64 * (1.0 - (h / busy as f64).min(1.0))
            }
            None => 0.0,
        };
    }

    /// Take `cost` ns of system time from the task's budget; what does not fit becomes debt.
    pub fn charge_sys(&mut self, t: usize, cost: f64, budget: &mut f64) {
        let p = &mut self.tasks[t];
        p.sys_ns += cost;
        if cost <= *budget {
            *budget -= cost;
        } else {
            p.sys_debt_ns += cost - *budget;
            *budget = 0.0;
        }
    }

    #[inline]
    pub fn count(&mut self, e: VmEvent, n: u64) {
        self.vmstat.count(e, n);
    }

    /// THP orders a fault in a VMA with `vm_flags` may allocate: `ThpConfig::allowable_orders`,
    /// precomputed (the sysfs settings are fixed for a run).
    #[inline]
    pub fn thp_allowable_orders(&self, vm_flags: u32) -> u16 {
        self.thp_orders[(vm_flags & VM_HUGEPAGE != 0) as usize | ((vm_flags & VM_NOHUGEPAGE != 0) as usize) << 1]
    }

    pub fn feature(&self, f: Feature) -> bool {
        self.cfg.features.on(f)
    }

    /// The variant of every mechanism this kernel runs (variants.rs).
    #[inline]
    pub fn variants(&self) -> &crate::variants::Variants {
        &self.cfg.variants
    }

    pub fn numa_balancing(&self) -> bool {
        self.cfg.numa_balancing
    }

    /// NUMA_BALANCING_MEMORY_TIERING is set.
    #[inline]
    pub fn tiering_mode(&self) -> bool {
        self.cfg.tiering.tiering()
    }

    // include/linux/memory-tiers.h: node_is_toptier
    #[inline]
    pub fn node_is_toptier(&self, node: usize) -> bool {
        self.tiers.toptier[node]
    }

    pub fn cpu_node(&self, cpu: usize) -> usize {
        self.topo.cpu_node[cpu]
    }

    /// Node the task currently runs on.
    pub fn task_node(&self, t: usize) -> usize {
        self.topo.cpu_node[self.tasks[t].cpu]
    }
}
