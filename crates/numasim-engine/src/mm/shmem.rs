//! Shared memory (mm/shmem.c): `MAP_SHARED|MAP_ANONYMOUS` mappings (shmem_zero_setup) and
//! shmem/tmpfs files (memfd_create) mapped `MAP_SHARED`, possibly by several processes.
//!
//! A file's folios live in its page cache (`ShmemFile::cache`: node, last_cpupid, LRU state).
//! Every mm that maps the file has its own PTEs in its VMA's page table, whose entries carry a
//! copy of the folio state: everything that changes a folio (allocation, migration, the
//! last_cpupid stamp) changes the cache and every mapping of it (the rmap walk over i_mmap).
//! Folios are base pages: shmem THP (`shmem_enabled`, default "never") is not modelled.

use crate::kernel::Kernel;
use crate::mm::access_notifier::AccessNotifier;
use crate::mm::pgtable::{PageTable, PTE_DIRTY, PTE_WRITE};
use crate::mm::types::{Vma, VM_SHARED, VM_WRITE};
use crate::topology::MAX_NODES;
use crate::vmstat::VmEvent;

/// A shmem inode and its page cache; or, with `cow`, the anonymous folios that processes share
/// copy-on-write since a fork (mm/cow.rs), which the same rmap walks reach.
#[derive(Debug, Clone)]
pub struct ShmemFile {
    pub name: String,
    /// A COW share: a mapping maps page i from it only where its PTE has PG_COW.
    pub cow: bool,
    /// The file's folios; PTE flags are not used here, only node, last_cpupid and LRU state.
    pub cache: PageTable,
    /// Every mapping of the file (address_space->i_mmap): (mm, vma), live or exited.
    pub mappers: Vec<(usize, usize)>,
    /// The file's pages per node (NR_SHMEM).
    pub node_pages: [u64; MAX_NODES],
}

impl Kernel {
    /// A new shmem file of `npages` pages (shmem_file_setup; memfd_create + ftruncate).
    // mm/shmem.c: shmem_file_setup
    pub fn shmem_file_setup(&mut self, name: &str, npages: u64) -> usize {
        self.shmem.push(ShmemFile { name: name.into(), cow: false, cache: PageTable::new(npages, self.topo.nr_nodes), mappers: Vec::new(), node_pages: [0; MAX_NODES] });
        self.shmem.len() - 1
    }

    /// Map all of file `file` into `mm` with VM_SHARED; returns the VMA.
    // mm/mmap.c: mmap_region -> shmem_mmap (vma_link_file adds it to i_mmap)
    pub fn mmap_shared(&mut self, mm: usize, file: usize, flags: u32) -> usize {
        let npages = self.shmem[file].cache.len();
        let vma = self.mms[mm].mmap_anon(npages, flags | VM_SHARED);
        let v: &mut Vma = &mut self.mms[mm].vmas[vma];
        (v.anon, v.shmem) = (false, Some(file));
        self.shmem[file].mappers.push((mm, vma));
        vma
    }

    /// The live mappings of `file` that map page `idx`: (mm, vma).
    // mm/rmap.c: rmap_walk_file (rmap_walk_anon for a COW share)
    fn shmem_rmap(&self, file: usize, idx: u64) -> impl Iterator<Item = (usize, usize)> + '_ {
        let cow = self.shmem[file].cow;
        self.shmem[file].mappers.iter().copied().filter(move |&(m, v)| {
            let pt = &self.mms[m].vmas[v].pt;
            !self.mms[m].exited && pt.populated(idx) && (!cow || pt.cow(idx))
        })
    }

    /// The shared object page `idx` of `vma` maps: the VMA's shmem file, or its COW share if
    /// the PTE has PG_COW; None for a page of the mm's own.
    pub fn page_object(&self, mm: usize, vma: usize, idx: u64) -> Option<usize> {
        let v = &self.mms[mm].vmas[vma];
        v.shmem.or_else(|| v.cow.filter(|_| v.pt.cow(idx)))
    }

    /// `shmem_rmap`, collected (for walks that change the mappings).
    pub fn shmem_mappings_of(&self, file: usize, idx: u64) -> Vec<(usize, usize)> {
        self.shmem_rmap(file, idx).collect()
    }

    /// Whether the folio holding page `idx` of `vma` is mapped by more than one process.
    // include/linux/mm.h: folio_likely_mapped_shared (folio_maybe_mapped_shared since 6.15)
    pub fn folio_likely_mapped_shared(&self, mm: usize, vma: usize, idx: u64) -> bool {
        self.page_object(mm, vma, idx).is_some_and(|f| self.shmem_rmap(f, idx).nth(1).is_some())
    }

    /// A fault on an unmapped page of a shared mapping: map the file's folio if the page cache
    /// has it (a minor fault, nothing allocated), else allocate a base page under the VMA's or
    /// the task's policy, add it to the page cache and map it. The PTE of a writable shared
    /// mapping is writable and dirty (no write-notify for shmem). None on out-of-memory.
    // mm/memory.c: do_shared_fault -> __do_fault (mm/shmem.c: shmem_fault -> shmem_get_folio_gfp) -> finish_fault
    pub fn shmem_fault(&mut self, t: usize, vma: usize, file: usize, idx: u64) -> Option<f64> {
        let mm = self.tasks[t].mm;
        let v = &self.mms[mm].vmas[vma];
        let flags = if v.flags & VM_WRITE != 0 { PTE_WRITE | PTE_DIRTY } else { 0 };
        let mut cost = self.cost.fault_entry_exit_ns;
        if !self.shmem[file].cache.populated(idx) {
            let pol = self.vma_policy(t, vma);
            // direct reclaim's time, if any, is the fault's
            let Some(node) = self.alloc_page(&pol, self.tasks[t].cpu, &mut cost) else {
                self.oom_no_page(t, &pol);
                return None;
            };
            let f = &mut self.shmem[file];
            f.cache.populate(idx, node, 0);
            f.node_pages[node] += 1;
            self.folio_add_lru(self.tasks[t].cpu, mm, vma, idx, 0);
            cost += self.cost.clear_page_ns;
        }
        self.map_cached_page(mm, vma, file, idx, flags);
        self.count(VmEvent::Pgfault, 1);
        Some(cost)
    }

    /// Map the page cache's folio at page `idx` of `file` into `vma` of `mm` with PTE `flags`.
    // mm/memory.c: set_pte_range (folio_add_file_rmap_ptes, MM_SHMEMPAGES)
    fn map_cached_page(&mut self, mm: usize, vma: usize, file: usize, idx: u64, flags: u8) {
        let c = &self.shmem[file].cache;
        let (node, cpupid) = (c.nid(idx) as usize, c.last_cpupid(idx));
        let m = &mut self.mms[mm];
        m.vmas[vma].pt.populate(idx, node, flags);
        m.vmas[vma].pt.set_last_cpupid(idx, cpupid);
        m.node_pages[node] += 1;
        m.shared_pages[node] += 1;
        self.access_notify_populated(mm, vma, idx, node);
    }

    /// A load from an unmapped page of a shared mapping: if the page cache has the folio, the
    /// fault also maps the cached pages around it that this mm does not map yet, in the
    /// aligned window of `fault_around_bytes` (64 KiB: 16 pages) within the VMA and the PMD,
    /// each PTE from vm_page_prot (writable for shmem, clean); one fault for them all. A page
    /// not in the cache is allocated as by a store (shmem_fault, then finish_fault alone).
    // mm/memory.c: do_read_fault -> do_fault_around -> filemap_map_pages
    pub fn shmem_read_fault(&mut self, t: usize, vma: usize, file: usize, idx: u64) -> Option<f64> {
        const FAULT_AROUND_PAGES: u64 = 16;
        let mm = self.tasks[t].mm;
        if !self.shmem[file].cache.populated(idx) {
            return self.shmem_fault(t, vma, file, idx);
        }
        let v = &self.mms[mm].vmas[vma];
        let flags = if v.flags & VM_WRITE != 0 { PTE_WRITE } else { 0 };
        let from = idx & !(FAULT_AROUND_PAGES - 1);
        let to = (from + FAULT_AROUND_PAGES).min(v.pt.len());
        let mut mapped = 0;
        for i in from..to {
            if self.shmem[file].cache.populated(i) && !self.mms[mm].vmas[vma].pt.populated(i) {
                self.map_cached_page(mm, vma, file, i, flags);
                mapped += 1;
            }
        }
        self.count(VmEvent::Pgfault, 1);
        Some(self.cost.fault_entry_exit_ns + (mapped - 1) as f64 * self.cost.pte_update_ns)
    }

    /// Stamp the folio's last_cpupid in the page cache and in every mapping of it.
    // mm/mmzone.c: folio_xchg_last_cpupid (the folio is one, its mappings many)
    pub fn shmem_set_last_cpupid(&mut self, file: usize, idx: u64, cpupid: u32) {
        self.shmem[file].cache.set_last_cpupid(idx, cpupid);
        for (m, v) in self.shmem_mappings_of(file, idx) {
            self.mms[m].vmas[v].pt.set_last_cpupid(idx, cpupid);
        }
    }

    /// The folio at page `idx` of `file` moved from `src` to `target`: every mapping gets its new
    /// PTE from its migration entry (remove_migration_ptes), built from vm_page_prot, which for a
    /// writable shared mapping without write-notify carries the write bit; a COW share's PTEs
    /// stay read-only.
    // mm/migrate.c: remove_migration_ptes -> remove_migration_pte (rmap_walk over i_mmap / anon_vma)
    pub fn shmem_folio_moved(&mut self, file: usize, idx: u64, src: usize, target: usize) {
        let cow = self.shmem[file].cow;
        for (m, v) in self.shmem_mappings_of(file, idx) {
            let writable = self.mms[m].vmas[v].flags & VM_WRITE != 0 && !cow;
            let mm = &mut self.mms[m];
            let pt = &mut mm.vmas[v].pt;
            pt.set_node(idx, target);
            if pt.protnone(idx) {
                pt.make_present(idx, writable);
            }
            for pages in [&mut mm.node_pages, &mut mm.shared_pages] {
                pages[src] -= 1;
                pages[target] += 1;
            }
            self.access_notify_moved(m, v, idx, src, target);
        }
        let f = &mut self.shmem[file];
        f.cache.set_node(idx, target);
        f.node_pages[src] -= 1;
        f.node_pages[target] += 1;
    }

    /// Process exit unmaps its mapping of `file`; the last mapping gone, the file (unlinked by
    /// the workload, as a MAP_SHARED anonymous region always is) frees its pages. Returns the
    /// pages freed per node.
    // mm/mmap.c: exit_mmap -> remove_vma (fput -> shmem_evict_inode)
    pub fn shmem_unmap(&mut self, file: usize) -> [u64; MAX_NODES] {
        let live = self.shmem[file].mappers.iter().any(|&(m, _)| !self.mms[m].exited);
        if live {
            return [0; MAX_NODES];
        }
        let f = &mut self.shmem[file];
        f.cache.unmap_all();
        std::mem::replace(&mut f.node_pages, [0; MAX_NODES])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::mm::types::{VM_READ, VM_WRITE};
    use crate::sched::numa::fault::{cpu_pid_to_cpupid, TNF_SHARED};
    use crate::testutil::{pin, small_kernel, thread};
    use crate::vmstat::VmEvent::*;

    /// A second process (a new mm) and a thread of it on `cpu`.
    fn second_process(k: &mut crate::kernel::Kernel, cpu: usize) -> (usize, usize) {
        let mm = crate::workload::autonuma::new_mm(k, "other", 1);
        let t = crate::workload::autonuma::new_task(k, mm, "other", 0, Vec::new(), None, 0);
        k.tasks[t].pid = k.mms[mm].tgid;
        pin(k, t, cpu);
        (mm, t)
    }

    /// A thread `a` of mm 0 on CPU 0 and a thread `b` of a second process on CPU 2, both
    /// mapping one 64-page shmem file (`va`, `vb`).
    pub(crate) struct Two {
        pub k: crate::kernel::Kernel,
        pub a: usize,
        pub mm_b: usize,
        pub b: usize,
        pub file: usize,
        pub va: usize,
        pub vb: usize,
    }

    pub(crate) fn two_processes() -> Two {
        let mut k = small_kernel("");
        let a = thread(&k, 0);
        pin(&mut k, a, 0);
        let (mm_b, b) = second_process(&mut k, 2);
        let file = k.shmem_file_setup("shm", 64);
        let va = k.mmap_shared(0, file, VM_READ | VM_WRITE);
        let vb = k.mmap_shared(mm_b, file, VM_READ | VM_WRITE);
        Two { k, a, mm_b, b, file, va, vb }
    }

    /// mm/shmem.c: shmem_fault — the first process to touch a page allocates it (one page on
    /// its node, cleared); the second maps the same folio: a minor fault, no allocation. Both
    /// mms count it in their RSS (numa_maps), the allocator once (pages conserved).
    #[test]
    fn second_mapping_maps_the_same_folio() {
        let Two { mut k, a, mm_b, b, file, va, vb } = two_processes();
        let node_b = k.cpu_node(2);
        assert_ne!(node_b, 0, "the second process runs on another node");
        let (used, faults) = (k.nodes[0].used, k.vmstat.get(Pgfault));
        k.shmem_fault(a, va, file, 5).unwrap();
        k.shmem_fault(b, vb, file, 5).unwrap();
        assert_eq!(k.nodes[0].used, used + 1, "one page allocated, on the first toucher's node");
        assert_eq!(k.mms[mm_b].vmas[vb].pt.nid(5), 0, "the second mapping sees the first's folio");
        assert_eq!((k.mms[0].shared_pages[0], k.mms[mm_b].shared_pages[0]), (1, 1));
        assert_eq!(k.vmstat.get(Pgfault) - faults, 2);
        assert!(k.folio_likely_mapped_shared(0, va, 5));
        assert!(!k.folio_likely_mapped_shared(0, va, 6), "an unmapped page is mapped by nobody");
        crate::invariants::check_counters(&k).unwrap();
    }

    /// mm/memory.c: do_numa_page / numa_migrate_check — a hint fault on a folio of a VM_SHARED
    /// mapping that another process maps too sets TNF_SHARED, which lets task_numa_group join
    /// tasks of different processes; migrating it rewrites every mapping's PTE (remove_migration_ptes)
    /// and flushes the other mm's CPUs, whose PTE was accessible (spec E6).
    #[test]
    fn hint_fault_on_a_page_mapped_by_two_processes_is_shared_and_moves_every_mapping() {
        let Two { mut k, a, mm_b, b, file, va, vb } = two_processes();
        k.shmem_fault(a, va, file, 9).unwrap();
        k.shmem_fault(b, vb, file, 9).unwrap();
        k.mms[mm_b].cpumask[2] = true;
        k.lru_add_drain_all();
        // b's scanner protected its PTE; a's PTE is still present
        k.mms[mm_b].vmas[vb].pt.make_protnone(9);
        // the previous fault on the page came from b's node, so the filter lets it migrate
        k.shmem_set_last_cpupid(file, 9, cpu_pid_to_cpupid(3, k.tasks[b].pid));
        assert_eq!(k.mms[0].vmas[va].pt.last_cpupid(9), cpu_pid_to_cpupid(3, k.tasks[b].pid), "the stamp is the folio's, seen by every mapping");
        assert_eq!(k.tnf_shared(mm_b, vb, 9) & TNF_SHARED, TNF_SHARED);
        let flushes = k.vmstat.get(NrTlbRemoteFlush);
        k.do_numa_page(b, vb, 9);
        let node_b = k.cpu_node(2);
        assert_eq!(k.vmstat.get(NumaPagesMigrated), 1);
        for (m, v) in [(0, va), (mm_b, vb)] {
            let pt = &k.mms[m].vmas[v].pt;
            assert_eq!(pt.nid(9) as usize, node_b, "mm {m} maps the moved folio");
            assert!(!pt.protnone(9) && pt.writable(9), "mm {m}: the new PTE is writable (vm_page_prot of a shared mapping)");
        }
        assert_eq!(k.shmem[file].cache.nid(9) as usize, node_b);
        assert!(k.vmstat.get(NrTlbRemoteFlush) > flushes, "the other process's accessible PTE needs a flush");
        crate::invariants::check_counters(&k).unwrap();
        for m in [0, mm_b] {
            crate::invariants::check_mm(&k, m).unwrap();
        }
    }

    /// A private mapping is never TNF_SHARED, whoever else touched the page: task_numa_group
    /// joins across processes only through VM_SHARED mappings.
    #[test]
    fn private_pages_are_never_tnf_shared() {
        let mut k = small_kernel("");
        crate::testutil::place_page(&mut k, 3, 0);
        k.mms[0].vmas[0].pt.make_protnone(3);
        assert_eq!(k.tnf_shared(0, 0, 3) & TNF_SHARED, 0);
    }

    /// mm/shmem.c: the file outlives one process's exit while another maps it; the last
    /// mapping gone, its pages return to their nodes.
    #[test]
    fn pages_are_freed_with_the_last_mapping() {
        let Two { mut k, a, mm_b, b, file, va, vb } = two_processes();
        for i in 0..10 {
            k.shmem_fault(a, va, file, i).unwrap();
        }
        k.shmem_fault(b, vb, file, 0).unwrap();
        let used = k.nodes[0].used;
        k.exit_mmap(mm_b);
        assert_eq!(k.nodes[0].used, used, "the first process still maps the file");
        assert_eq!(k.shmem[file].node_pages[0], 10);
        crate::invariants::check_counters(&k).unwrap();
        k.exit_mmap(0);
        let _ = b;
        crate::invariants::check_counters(&k).unwrap();
        assert_eq!(k.shmem[file].node_pages[0], 0, "freed with the last mapping");
    }

    /// mm/mempolicy.c: vma_policy_mof — task_numa_work skips a shmem VMA without a shared
    /// policy until "mm: mempolicy: fix automatic numa balancing for shmem" (7.2); from then
    /// the task's default policy (MPOL_F_MOF) lets it be scanned. Private memory is scanned in
    /// both. (The VM: 6.1.192 and 6.12.95 update no PTE of a shared buffer, 7.3.4 every one.)
    #[test]
    fn shmem_is_scanned_only_from_the_fix() {
        for (version, scanned) in [("6.1", false), ("6.12", false), ("7.3", true)] {
            let mut k = small_kernel(&format!("[kernel]\nversion = \"{version}\""));
            let t = thread(&k, 0);
            let file = k.shmem_file_setup("shm", 64);
            let v = k.mmap_shared(0, file, VM_READ | VM_WRITE);
            assert_eq!(k.vma_policy_mof(t, v), scanned, "{version}: shmem");
            assert!(k.vma_policy_mof(t, 0), "{version}: private anonymous memory");
        }
    }

    /// mm/memory.c: do_read_fault -> do_fault_around — a load from a page of a shared
    /// mapping that the page cache holds maps the cached pages of its aligned 16-page window
    /// too, with one fault; a store (do_shared_fault) maps only its own page.
    #[test]
    fn a_read_fault_maps_the_cached_pages_around_it() {
        let Two { mut k, a, mm_b, b, file, va, vb } = two_processes();
        for i in (0..32).filter(|&i| i != 20) {
            k.shmem_fault(a, va, file, i).unwrap();
        }
        let faults = k.vmstat.get(Pgfault);
        k.shmem_read_fault(b, vb, file, 18).unwrap();
        let pt = &k.mms[mm_b].vmas[vb].pt;
        assert_eq!(k.vmstat.get(Pgfault) - faults, 1);
        assert!((16..32).all(|i| pt.populated(i) == (i != 20)), "the window 16..32, but the page not in the cache");
        assert!(!pt.populated(15) && pt.writable(18), "nothing outside it; writable (vm_page_prot)");
        k.shmem_fault(b, vb, file, 5).unwrap();
        assert!(!k.mms[mm_b].vmas[vb].pt.populated(4), "a store fault maps its page alone");
        assert_eq!(k.mms[mm_b].shared_pages[0], 16);
        crate::invariants::check_counters(&k).unwrap();
    }
}
