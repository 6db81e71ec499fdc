//! Machine cost profile: every constant comes from a profile file that cites its source.

use serde::{Deserialize, Serialize};

pub const PAGE_SIZE: f64 = 4096.0;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The keys of `[machine.cost]`, in the profile's order.
pub const COST_KEYS: [&str; 24] = [
    "stream_gibps",
    "page_store_gibps",
    "touch_gibps",
    "smt_share",
    "latency_ns",
    "node_bandwidth_gibps",
    "dram_bytes_per_store",
    "interconnect_gibps",
    "fault_entry_exit_ns",
    "clear_page_ns",
    "pte_update_ns",
    "hint_fault_ns",
    "migrate_page_ns",
    "page_copy_gibps",
    "ipi_send_ns",
    "ipi_per_target_ns",
    "ipi_receive_ns",
    "tlb_flush_local_all_ns",
    "tlb_flush_local_one_ns",
    "clone_ns",
    "vm_exit_ns",
    "ept_violation_ns",
    "clock_read_ns",
    "clock_read_sys_ns",
];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostProfile {
    /// Per-thread streaming store bandwidth, GiB/s, [cpu node][memory node], thread alone on a core.
    pub stream_gibps: Vec<Vec<f64>>,
    /// The same stores made one 4 KiB memset per page (a `program`'s store ops), GiB/s,
    /// [cpu node][memory node]: glibc may store a large memset non-temporally, a page with
    /// ordinary stores; an emulated CPU runs the two at very different rates.
    pub page_store_gibps: Vec<Vec<f64>>,
    /// Pages crossed per second (as GiB/s) by a lone thread loading one byte of every cache line,
    /// [cpu node][memory node]: a `program`'s load and rmw ops and the remote toucher's workers.
    /// A real CPU moves every line as a memset does (bandwidth-bound); an emulated one executes
    /// a few instructions per line, many times faster than the memset's per byte.
    pub touch_gibps: Vec<Vec<f64>>,
    /// Bandwidth share of each of two busy SMT siblings, relative to a lone thread.
    pub smt_share: f64,
    /// Idle load-to-use latency, ns, [cpu node][memory node].
    pub latency_ns: Vec<Vec<f64>>,
    /// Memory-controller bandwidth per node, GiB/s of DRAM traffic.
    pub node_bandwidth_gibps: Vec<f64>,
    /// DRAM bytes moved per byte a streaming store writes: 2 with write-allocate caches (the
    /// line is read for ownership, then written back), 1 with non-temporal stores.
    pub dram_bytes_per_store: f64,
    /// Interconnect bandwidth per direction between two nodes, GiB/s: one figure for every
    /// pair, or a [from node][to node] matrix (the diagonal is not used) where links differ, as
    /// between the nodes of one socket and across sockets.
    pub interconnect_gibps: Interconnect,
    pub fault_entry_exit_ns: f64,
    pub clear_page_ns: f64,
    pub pte_update_ns: f64,
    pub hint_fault_ns: f64,
    pub migrate_page_ns: f64,
    pub page_copy_gibps: f64,
    pub ipi_send_ns: f64,
    pub ipi_per_target_ns: f64,
    pub ipi_receive_ns: f64,
    pub tlb_flush_local_all_ns: f64,
    pub tlb_flush_local_one_ns: f64,
    /// The creator's time to make a task (`pthread_create`: the stack's mmap and guard
    /// mprotect, `clone` with copy_process and wake_up_new_task), ns. A fork's page-table copy
    /// is charged apart (dup_mmap, per PTE).
    pub clone_ns: f64,
    /// A vCPU's VM exit and re-entry (the kick of a KVM remote TLB flush), ns.
    pub vm_exit_ns: f64,
    /// An EPT violation resolved by KVM beyond the exit: GUP of the host page, SPTE install, ns.
    pub ept_violation_ns: f64,
    /// One clock_gettime(CLOCK_MONOTONIC) of a time-bound stream, which reads the clock once per
    /// 256 pages it reaches (numaw's loops), ns: the vDSO's with a TSC clocksource, a system
    /// call where the clocksource has no vDSO reader (HPET). One figure, or one per number of
    /// other busy CPUs (0, 1, ...; the last for more): an emulated HPET read waits longer when
    /// a QEMU guest's vCPUs outnumber the host's cores.
    pub clock_read_ns: PerBusy,
    /// The system time the machine charges per read, likewise (0 for the vDSO). Tick-based
    /// accounting charges a tick to whatever it interrupts: under QEMU a tick that comes while a
    /// vCPU waits for the emulated HPET lands in the read, so this may exceed the time taken.
    pub clock_read_sys_ns: PerBusy,
}

/// A cost that is one figure, or one per number of other busy CPUs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PerBusy {
    Uniform(f64),
    ByOthers(Vec<f64>),
}

impl PerBusy {
    /// The figure with `others` other CPUs busy (the last one for more than the list gives).
    pub fn at(&self, others: usize) -> f64 {
        match self {
            PerBusy::Uniform(v) => *v,
            PerBusy::ByOthers(v) => v[others.min(v.len() - 1)],
        }
    }

    pub fn values(&self) -> &[f64] {
        match self {
            PerBusy::Uniform(v) => std::slice::from_ref(v),
            PerBusy::ByOthers(v) => v,
        }
    }
}

/// `CostProfile::interconnect_gibps`: a number or a matrix in the profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Interconnect {
    Uniform(f64),
    PerPair(Vec<Vec<f64>>),
}

impl Interconnect {
    /// GiB/s from node `from` to node `to`.
    pub fn gibps(&self, from: usize, to: usize) -> f64 {
        match self {
            Interconnect::Uniform(v) => *v,
            Interconnect::PerPair(m) => m[from][to],
        }
    }
}

impl CostProfile {
    /// Nanoseconds for a lone thread on `cpu_node` to stream one page to `mem_node`.
    pub fn page_stream_ns(&self, cpu_node: usize, mem_node: usize) -> f64 {
        PAGE_SIZE / (self.stream_gibps[cpu_node][mem_node] * GIB / 1e9)
    }

    /// Pages a time-bound stream reaches between two reads of the clock.
    pub const CLOCK_READ_PAGES: f64 = 256.0;

    /// copy_page from `src` to `dst` by a CPU on `cpu_node`, ns: the slower side sets the pace.
    pub fn page_copy_ns(&self, cpu_node: usize, src: usize, dst: usize) -> f64 {
        let local = self.stream_gibps[cpu_node][cpu_node];
        let ratio = self.stream_gibps[cpu_node][src].min(self.stream_gibps[cpu_node][dst]) / local;
        PAGE_SIZE / (self.page_copy_gibps * ratio * GIB / 1e9)
    }

    /// Bytes per ns of a GiB/s figure.
    pub fn bytes_per_ns(gibps: f64) -> f64 {
        gibps * GIB / 1e9
    }
}
