//! Address spaces and VMAs (include/linux/mm_types.h: struct mm_struct, struct vm_area_struct).

use super::mempolicy::Mempolicy;
use super::pgtable::PageTable;
use crate::topology::MAX_NODES;

pub const VM_READ: u32 = 0x1;
pub const VM_WRITE: u32 = 0x2;
pub const VM_EXEC: u32 = 0x4;
pub const VM_SHARED: u32 = 0x8;
/// Page-ranges managed without struct page (remap_pfn_range): the [vvar] special mapping.
pub const VM_PFNMAP: u32 = 0x400;
/// Memory-mapped I/O or similar: never migrated.
pub const VM_IO: u32 = 0x4000;
/// madvise(MADV_HUGEPAGE)
pub const VM_HUGEPAGE: u32 = 0x2000_0000;
/// madvise(MADV_NOHUGEPAGE)
pub const VM_NOHUGEPAGE: u32 = 0x4000_0000;

/// struct vma_numab_state (v6.4+): per-VMA scan delay and PID activity.
#[derive(Debug, Clone, Default)]
pub struct VmaNumabState {
    pub next_scan: u64,
    pub pids_active_reset: u64,
    pub pids_active: [u64; 2],
    pub start_scan_seq: u32,
    pub prev_scan_seq: u32,
}

/// struct vm_area_struct: a range of virtual pages [start, start + npages).
#[derive(Debug, Clone)]
pub struct Vma {
    /// First virtual page number (2 MiB aligned, as thp_get_unmapped_area places large anon maps).
    pub start: u64,
    pub flags: u32,
    /// Anonymous (true) or file-backed.
    pub anon: bool,
    /// VMA mempolicy (mbind); None falls back to the task's policy.
    pub policy: Option<Mempolicy>,
    pub pt: PageTable,
    pub numab: Option<VmaNumabState>,
    /// Part of the program's own image (data, heap, stacks, libraries: workload/image.rs), not
    /// of the memory the workload maps.
    pub image: bool,
    /// vm_file of a shared mapping: index in `Kernel::shmem` (mm/shmem.rs), None for private
    /// anonymous memory.
    pub shmem: Option<usize>,
    /// A private VMA whose PG_COW pages are shared with other processes since a fork: the
    /// share's index in `Kernel::shmem` (mm/cow.rs; its anon_vma's folios).
    pub cow: Option<usize>,
}

impl Vma {
    pub fn end(&self) -> u64 {
        self.start + self.pt.len()
    }
}

/// struct mm_struct with the NUMA-balancing fields.
#[derive(Debug, Clone)]
pub struct Mm {
    pub tgid: u32,
    pub comm: String,
    pub vmas: Vec<Vma>,
    /// Live threads (mm_users).
    pub users: u32,
    pub numa_next_scan: u64,
    pub numa_scan_offset: u64,
    pub numa_scan_seq: u32,
    /// When the last numa_scan_seq increment happened, ns: the end of the task_numa_work call
    /// that finished the pass. Threads faulting before it still read the previous seq.
    pub numa_scan_seq_at: u64,
    /// Resident pages per node (what numa_maps / autonuma-benchmark's nmstat sum up).
    pub node_pages: [u64; MAX_NODES],
    pub exited: bool,
    /// The sampler's (workload/sampler.rs): not in the run's series.
    pub background: bool,
    /// mm_cpumask: CPUs that may hold translations of this mm.
    pub cpumask: Vec<bool>,
    /// v6.14+: next time (ns) a flush may IPI stale cpumask members to trim them.
    pub next_trim_cpumask: u64,
    /// Index in `Kernel::samplers` of this process's random-access distribution: its
    /// subscription to mm/access_notifier.rs.
    pub sampler: Option<usize>,
    /// The part of `node_pages` held by a shared object, counted in every mm that maps them and
    /// allocated once in the object: shmem folios (MM_SHMEMPAGES) and anonymous folios shared
    /// copy-on-write since a fork (mm/cow.rs).
    pub shared_pages: [u64; MAX_NODES],
    /// Pages pinned for direct I/O (pin_user_pages): (task, vma, first page, pages).
    pub io_pins: Vec<(usize, usize, u64, u64)>,
    /// Long-term pins (FOLL_LONGTERM, e.g. VFIO): (vma, first page, pages), held until exit.
    pub longterm_pins: Vec<(usize, u64, u64)>,
    /// mm->tlb_flush_pending: the last scan window's change_protection ran over [from, until) ns.
    pub tlb_flush_pending: (u64, u64),
    /// The machine's nodes (sizes the page tables' per-node counts).
    pub nr_nodes: usize,
}

impl Mm {
    pub fn new(tgid: u32, comm: &str, nr_cpus: usize, nr_nodes: usize) -> Self {
        Mm {
            nr_nodes,
            tgid,
            comm: comm.into(),
            vmas: Vec::new(),
            users: 0,
            numa_next_scan: 0,
            numa_scan_offset: 0,
            numa_scan_seq: 0,
            numa_scan_seq_at: 0,
            node_pages: [0; MAX_NODES],
            shared_pages: [0; MAX_NODES],
            exited: false,
            background: false,
            cpumask: vec![false; nr_cpus],
            next_trim_cpumask: 0,
            sampler: None,
            io_pins: Vec::new(),
            longterm_pins: Vec::new(),
            tlb_flush_pending: (0, 0),
        }
    }

    /// get_mm_rss
    pub fn rss(&self) -> u64 {
        self.node_pages.iter().sum()
    }

    /// Map a new anonymous VMA after the last one, 2 MiB aligned; returns its index.
    pub fn mmap_anon(&mut self, npages: u64, flags: u32) -> usize {
        let start = self.vmas.last().map(|v| v.end().div_ceil(512) * 512 + 512).unwrap_or(0x40000);
        self.vmas.push(Vma { start, flags, anon: true, policy: None, pt: PageTable::new(npages, self.nr_nodes), numab: None, image: false, shmem: None, cow: None });
        self.vmas.len() - 1
    }
}
