//! Copy-on-write after fork (kernel/fork.c: dup_mmap; mm/memory.c: copy_page_range,
//! do_wp_page). A private VMA the child inherits maps the parent's anonymous folios too, both
//! PTEs read-only; the first process to store to one copies it (wp_page_copy), and the last
//! one left mapping it owns it again and reuses it in place.
//!
//! A shared folio lives in a COW share, a `ShmemFile` with `cow` set (the anon_vma's folios):
//! its node, last_cpupid and LRU state are the share's, and each mapping's PTE carries PG_COW,
//! so the rmap walks of shmem (migration, last_cpupid) reach every process that maps it. A
//! PG_COW folio is always mapped by two processes or more: when one is left it leaves the
//! share (its PTE stays read-only until it stores). Only base folios are shared: a fork of a
//! private VMA holding a large folio (THP, mTHP) stops the run (`Error::NotModelled`).

use crate::kernel::Kernel;
use crate::mm::access_notifier::AccessNotifier;
use crate::mm::pgtable::{PageTable, CPUPID_UNSET, PG_ACTIVE, PG_COW, PG_LRU_BATCHED};
use crate::mm::rmap::PageRef;
use crate::mm::shmem::ShmemFile;
use crate::topology::MAX_NODES;
use crate::vmstat::VmEvent;

impl Kernel {
    /// The VMAs of `child` (a new process forked by a task of `parent`) that inherit the
    /// parent's: the image's writable VMAs in order (workload/image.rs), and those the workload
    /// named (`fork_inherits`). Pairs whose size or placement differ are not inherited.
    fn inherited_vmas(&self, parent: usize, child: usize) -> Vec<(usize, usize)> {
        let mut pairs: Vec<(usize, usize)> = match (self.images.get(&parent), self.images.get(&child)) {
            (Some(p), Some(c)) => p.main_pages.iter().zip(&c.main_pages).map(|(a, b)| (a.0, b.0)).collect(),
            _ => Vec::new(),
        };
        pairs.extend(self.fork_inherits.get(&child).into_iter().flatten().copied());
        let (pm, cm) = (&self.mms[parent], &self.mms[child]);
        pairs.retain(|&(pv, cv)| {
            let (a, b) = (&pm.vmas[pv], &cm.vmas[cv]);
            a.start == b.start && a.pt.len() == b.pt.len() && a.shmem.is_none() && b.shmem.is_none() && a.anon && b.anon
        });
        pairs
    }

    /// fork(2) by task `t` of the process whose main thread is `child`: each inherited private
    /// VMA of the child maps the parent's present folios through read-only PTEs (a PROT_NONE
    /// one stays PROT_NONE), sharing them; the parent's writable PTEs become read-only, so its
    /// TLBs are flushed. The child returns from fork on a copy of the parent's stack: its main
    /// thread keeps the caller's hot pages (stack, heap) hot, at the same addresses in its own
    /// VMAs. Returns the parent's time, ns.
    // kernel/fork.c: dup_mmap -> mm/memory.c: copy_page_range -> copy_present_pte;
    // arch/x86/kernel/process.c: copy_thread (the child resumes where the parent called fork)
    pub fn dup_mmap(&mut self, t: usize, child: usize) -> f64 {
        let (pmm, cmm, cpu) = (self.tasks[t].mm, self.tasks[child].mm, self.tasks[t].cpu);
        let pairs = self.inherited_vmas(pmm, cmm);
        let hot: Vec<_> = self.tasks[t].hot.iter().filter_map(|&(v, i, w)| pairs.iter().find(|p| p.0 == v).map(|p| (p.1, i, w))).collect();
        self.tasks[child].hot.extend(hot);
        let mut copied = 0u64;
        for &(pv, cv) in &pairs {
            let len = self.mms[pmm].vmas[pv].pt.len();
            for idx in (0..len).filter(|&i| self.mms[pmm].vmas[pv].pt.populated(i)).collect::<Vec<_>>() {
                if !self.copy_present_pte(pmm, pv, cmm, cv, idx) {
                    return 0.0;
                }
                copied += 1;
            }
        }
        let mut cost = copied as f64 * self.cost.pte_update_ns;
        if copied > 0 {
            cost += self.flush_tlb_mm_range(pmm, cpu, copied);
        }
        cost
    }

    /// Share page `idx` of the parent's VMA `pv` with the child's `cv`. False if it is part
    /// of a large folio (the run stops).
    fn copy_present_pte(&mut self, pmm: usize, pv: usize, cmm: usize, cv: usize, idx: u64) -> bool {
        let pt = &self.mms[pmm].vmas[pv].pt;
        if pt.folio(idx).1 > 1 {
            let comm = self.mms[pmm].comm.clone();
            self.not_modelled = Some(format!(
                "fork of process {comm} with large folios (THP or mTHP) in a private mapping: copy-on-write is modelled for base pages only (set kernel.thp.enabled = \"never\" or the buffer's madvise = \"nohugepage\")"
            ));
            return false;
        }
        let node = pt.nid(idx) as usize;
        let file = match (pt.cow(idx), self.mms[pmm].vmas[pv].cow) {
            (true, Some(f)) => f,
            (_, share) => {
                let f = share.unwrap_or_else(|| self.cow_share_new(pmm, pv));
                self.cow_share_take(pmm, pv, f, idx);
                f
            }
        };
        if !self.shmem[file].mappers.contains(&(cmm, cv)) {
            self.shmem[file].mappers.push((cmm, cv));
            self.mms[cmm].vmas[cv].cow = Some(file);
        }
        let flags = self.mms[pmm].vmas[pv].pt.pages[idx as usize].flags & !(PG_LRU_BATCHED | PG_ACTIVE);
        let cpupid = self.shmem[file].cache.last_cpupid(idx);
        let m = &mut self.mms[cmm];
        m.vmas[cv].pt.populate(idx, node, flags | PG_COW);
        m.vmas[cv].pt.set_last_cpupid(idx, cpupid);
        m.node_pages[node] += 1;
        m.shared_pages[node] += 1;
        self.access_notify_populated(cmm, cv, idx, node);
        true
    }

    /// A new COW share for VMA `vma` of `mm` (its anon_vma, now shared with a child).
    fn cow_share_new(&mut self, mm: usize, vma: usize) -> usize {
        let len = self.mms[mm].vmas[vma].pt.len();
        let name = format!("anon_vma of {} VMA {vma}", self.mms[mm].comm);
        self.shmem.push(ShmemFile { name, cow: true, cache: PageTable::new(len, self.topo.nr_nodes), mappers: vec![(mm, vma)], node_pages: [0; MAX_NODES] });
        let f = self.shmem.len() - 1;
        self.mms[mm].vmas[vma].cow = Some(f);
        f
    }

    /// The folio at page `idx` of `mm`'s VMA `vma`, its own until now, joins share `f`: its
    /// state moves there and its PTE becomes read-only (pte_wrprotect).
    fn cow_share_take(&mut self, mm: usize, vma: usize, f: usize, idx: u64) {
        let e = self.mms[mm].vmas[vma].pt.pages[idx as usize];
        let node = e.node as usize;
        let c = &mut self.shmem[f].cache;
        c.populate(idx, node, 0);
        c.set_last_cpupid(idx, e.last_cpupid);
        c.set_lru_batched(idx, e.flags & PG_LRU_BATCHED != 0);
        c.set_active(idx, e.flags & PG_ACTIVE != 0);
        self.shmem[f].node_pages[node] += 1;
        let m = &mut self.mms[mm];
        let pt = &mut m.vmas[vma].pt;
        pt.set_cow(idx, true);
        if !pt.protnone(idx) {
            pt.make_present(idx, false);
        }
        m.shared_pages[node] += 1;
        if e.flags & PG_LRU_BATCHED != 0 {
            self.relocate_lru_locator(PageRef { mm, vma, idx }, Some(PageRef::in_object(f, idx)));
        }
    }

    /// Task `t` stores to page `idx`, which it shares copy-on-write: a new base page under the
    /// VMA's or task's policy gets a copy, and the PTE maps it writable; the old one's TLB
    /// entries are flushed. Returns the fault's time, ns (the run stops on out-of-memory).
    // mm/memory.c: do_wp_page -> wp_page_copy
    pub fn wp_page_copy(&mut self, t: usize, vma: usize, idx: u64) -> f64 {
        let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
        let Some(file) = self.page_object(mm, vma, idx) else { return 0.0 };
        let old = self.mms[mm].vmas[vma].pt.nid(idx) as usize;
        let pol = self.vma_policy(t, vma);
        let mut cost = self.cost.fault_entry_exit_ns;
        let Some(node) = self.alloc_page(&pol, cpu, &mut cost) else {
            self.oom_no_page(t, &pol);
            return cost;
        };
        let m = &mut self.mms[mm];
        m.shared_pages[old] -= 1;
        m.node_pages[old] -= 1;
        m.node_pages[node] += 1;
        let pt = &mut m.vmas[vma].pt;
        pt.set_cow(idx, false);
        pt.set_node(idx, node);
        pt.set_lru_batched(idx, false);
        pt.set_active(idx, false);
        pt.set_last_cpupid(idx, CPUPID_UNSET);
        if pt.protnone(idx) {
            pt.make_present(idx, true);
        }
        pt.make_writable(idx);
        self.cow_unshare_last(file, idx);
        self.folio_add_lru(cpu, mm, vma, idx, 0);
        self.access_notify_moved(mm, vma, idx, old, node);
        cost += self.page_copy_ns(self.topo.cpu_node[cpu], old, node);
        // ptep_clear_flush: other CPUs may hold the old read-only translation
        cost += self.flush_tlb_mm_range(mm, cpu, 1);
        self.count(VmEvent::Pgfault, 1);
        cost
    }

    /// If one mapping is left on the share's folio at `idx`, the folio becomes that mapping's
    /// own again (its PTE stays read-only: a store reuses it in place, wp_page_reuse); if none,
    /// it is freed. Returns the node of a freed folio.
    // mm/memory.c: wp_can_reuse_anon_folio (folio_mapcount == 1); mm/rmap.c: folio_remove_rmap_pte
    pub fn cow_unshare_last(&mut self, file: usize, idx: u64) -> Option<usize> {
        if !self.shmem[file].cache.populated(idx) {
            return None;
        }
        let left = self.shmem_mappings_of(file, idx);
        if left.len() > 1 {
            return None;
        }
        let c = &self.shmem[file].cache;
        let (node, batched, active) = (c.nid(idx) as usize, c.lru_batched(idx), c.active(idx));
        let owner = left.first().map(|&(m, v)| PageRef { mm: m, vma: v, idx });
        if let Some(o) = owner {
            let pt = &mut self.mms[o.mm].vmas[o.vma].pt;
            pt.set_cow(idx, false);
            pt.set_lru_batched(idx, batched);
            pt.set_active(idx, active);
            self.mms[o.mm].shared_pages[node] -= 1;
        }
        if batched {
            // a batch that holds the folio finds it through its owner now (or drops it)
            self.relocate_lru_locator(PageRef::in_object(file, idx), owner);
        }
        self.shmem[file].cache.unpopulate(idx);
        self.shmem[file].node_pages[node] -= 1;
        left.is_empty().then_some(node)
    }

    /// Entries of the CPUs' LRU add batches that find a folio through `from` find it through
    /// `to` instead (the batch holds the folio, not the mapping), or are dropped (a freed folio).
    fn relocate_lru_locator(&mut self, from: PageRef, to: Option<PageRef>) {
        for b in self.lru_add.iter_mut() {
            match to {
                Some(to) => b.iter_mut().filter(|p| **p == from).for_each(|p| *p = to),
                None => b.retain(|p| *p != from),
            }
        }
    }

    /// exit_mmap's part for the shared folios (vma, share, page) of an mm already marked exited:
    /// each is freed if no process maps it any more, or left to the last one. Returns the pages
    /// freed per node.
    // kernel/fork.c: mmput -> exit_mmap -> zap_pte_range (folio_remove_rmap_pte)
    pub fn cow_exit(&mut self, shared: &[(usize, usize, u64)]) -> [u64; MAX_NODES] {
        let mut freed = [0u64; MAX_NODES];
        for &(_, file, idx) in shared {
            if let Some(node) = self.cow_unshare_last(file, idx) {
                freed[node] += 1;
            }
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use crate::invariants::{check_counters, check_mm};
    use crate::kernel::Kernel;
    use crate::mm::types::{VM_READ, VM_WRITE};
    use crate::testutil::{pin, small_kernel, thread};
    use crate::vmstat::VmEvent::*;

    /// A parent thread `p` (mm 0, CPU 0) whose 64-page private VMA `pv` has pages 0..16 on
    /// node 0, and a child process (`cmm`, main thread `c` on CPU 2) whose VMA `cv` sits at the
    /// same address and inherits it at fork.
    struct Fork {
        k: Kernel,
        p: usize,
        c: usize,
        cmm: usize,
        pv: usize,
        cv: usize,
    }

    fn forked(version: &str) -> Fork {
        let mut k = small_kernel(&format!("[kernel]\nversion = \"{version}\""));
        let p = thread(&k, 0);
        pin(&mut k, p, 0);
        let pv = k.mms[0].mmap_anon(64, VM_READ | VM_WRITE);
        let cmm = crate::workload::autonuma::new_mm(&mut k, "child", 1);
        let first = k.mms[0].vmas[0].pt.len();
        k.mms[cmm].mmap_anon(first, VM_READ | VM_WRITE);
        let cv = k.mms[cmm].mmap_anon(64, VM_READ | VM_WRITE);
        assert_eq!(k.mms[0].vmas[pv].start, k.mms[cmm].vmas[cv].start, "the child's VMA is where the parent's is");
        k.fork_inherits.insert(cmm, vec![(pv, cv)]);
        let c = crate::workload::autonuma::new_task(&mut k, cmm, "child", 0, Vec::new(), None, 0);
        k.tasks[c].pid = k.mms[cmm].tgid;
        pin(&mut k, c, 2);
        for i in 0..16 {
            k.do_anonymous_page(p, pv, i).expect("a page");
        }
        k.lru_add_drain_all();
        Fork { k, p, c, cmm, pv, cv }
    }

    /// kernel/fork.c: dup_mmap -> copy_present_pte — the child maps the parent's folios (no
    /// page allocated), both PTEs read-only; each process counts them in its RSS. The child
    /// resumes on the parent's stack (copy_thread): it keeps the caller's hot pages of the
    /// inherited VMAs hot, at its own addresses.
    #[test]
    fn fork_shares_the_parents_pages_read_only() {
        let Fork { mut k, p, c, cmm, pv, cv } = forked("6.12");
        let used = k.nodes[0].used;
        k.tasks[p].hot = vec![(pv, 2, true), (0, 0, true)];
        k.dup_mmap(p, c);
        assert_eq!(k.tasks[c].hot, vec![(cv, 2, true)], "only the inherited VMA's page, in the child's VMA");
        assert_eq!(k.nodes[0].used, used, "nothing allocated");
        for (mm, v) in [(0, pv), (cmm, cv)] {
            let pt = &k.mms[mm].vmas[v].pt;
            assert!((0..16).all(|i| pt.cow(i) && !pt.writable(i) && pt.nid(i) == 0), "mm {mm}: shared, read-only, on node 0");
            assert!(!pt.populated(16));
        }
        assert_eq!(k.mms[cmm].node_pages[0], 16);
        assert!(k.folio_likely_mapped_shared(cmm, cv, 3));
        check_counters(&k).unwrap();
        check_mm(&k, 0).unwrap();
        check_mm(&k, cmm).unwrap();
    }

    /// mm/memory.c: do_wp_page — the first process to store to a shared page gets a copy on
    /// its node (wp_page_copy); the other is then alone on the old folio and reuses it in place
    /// (wp_page_reuse): one page allocated for the two stores.
    #[test]
    fn first_store_copies_and_the_last_mapping_reuses() {
        let Fork { mut k, p, c, cmm, pv, cv } = forked("6.12");
        k.dup_mmap(p, c);
        let (used0, used1, faults) = (k.nodes[0].used, k.nodes[1].used, k.vmstat.get(Pgfault));
        let mut b = 1e9;
        assert!(k.access_page(c, cv, 5, true, &mut b));
        let pt = &k.mms[cmm].vmas[cv].pt;
        assert!(!pt.cow(5) && pt.writable(5) && pt.nid(5) == 1, "the child's own copy, on its node");
        assert_eq!((k.nodes[0].used, k.nodes[1].used), (used0, used1 + 1));
        let pt = &k.mms[0].vmas[pv].pt;
        assert!(!pt.cow(5) && !pt.writable(5), "the parent is alone on the old folio, its PTE still read-only");
        assert!(!k.folio_likely_mapped_shared(0, pv, 5));
        assert!(k.access_page(p, pv, 5, true, &mut b));
        assert!(k.mms[0].vmas[pv].pt.writable(5));
        assert_eq!((k.nodes[0].used, k.nodes[1].used), (used0, used1 + 1), "reused: nothing allocated");
        assert_eq!(k.vmstat.get(Pgfault) - faults, 2);
        assert!(k.mms[0].vmas[pv].pt.cow(6) && k.mms[cmm].vmas[cv].pt.cow(6), "the other pages stay shared");
        check_counters(&k).unwrap();
        check_mm(&k, 0).unwrap();
        check_mm(&k, cmm).unwrap();
    }

    /// mm/mprotect.c: change_pte_range ("Also skip shared copy-on-write pages", 859d4adc3415,
    /// v4.19) — from 4.19 the scanner leaves a folio two processes share alone; before, it
    /// protects it like any other. An exclusive page is protected either way.
    #[test]
    fn scanner_skips_shared_cow_pages_from_4_19() {
        for (version, skipped) in [("3.19", false), ("4.9", false), ("5.12", true), ("6.1", true), ("6.12", true)] {
            let Fork { mut k, p, c, pv, cv, .. } = forked(version);
            k.dup_mmap(p, c);
            let mut b = 1e9;
            assert!(k.access_page(c, cv, 0, true, &mut b), "{version}: page 0 is the child's own now");
            let (n, _) = k.change_protection_prot_numa(p, pv, 0, 16);
            assert_eq!(k.mms[0].vmas[pv].pt.protnone(3), !skipped, "{version}: a shared page");
            assert!(k.mms[0].vmas[pv].pt.protnone(0), "{version}: the parent's exclusive page");
            assert_eq!(n, if skipped { 1 } else { 16 }, "{version}");
        }
    }

    /// A NUMA migration of a folio two processes share (possible before 4.19) unmaps it from
    /// both (rmap_walk_anon) and gives each a read-only PTE to the new folio.
    #[test]
    fn migrating_a_shared_page_moves_every_mapping() {
        let Fork { mut k, p, c, cmm, pv, cv } = forked("3.19");
        k.dup_mmap(p, c);
        let (migrated, _) = k.migrate_misplaced_folio(p, pv, 7, 1);
        assert!(migrated);
        for (mm, v) in [(0, pv), (cmm, cv)] {
            let pt = &k.mms[mm].vmas[v].pt;
            assert!(pt.nid(7) == 1 && pt.cow(7) && !pt.writable(7), "mm {mm}: the shared folio moved, still read-only");
        }
        assert_eq!(k.vmstat.get(NumaPagesMigrated), 1, "one folio");
        check_counters(&k).unwrap();
    }

    /// exit_mmap: a shared folio stays with the process that still maps it (its own again),
    /// and is freed with the last mapping.
    #[test]
    fn exit_leaves_shared_pages_to_the_other_process() {
        let Fork { mut k, p, c, cmm, pv, .. } = forked("6.12");
        k.dup_mmap(p, c);
        let used = k.nodes[0].used;
        k.exit_mmap(cmm);
        assert_eq!(k.nodes[0].used, used, "the parent still maps all 16");
        assert!((0..16).all(|i| !k.mms[0].vmas[pv].pt.cow(i)), "the parent's own again");
        check_counters(&k).unwrap();
        check_mm(&k, 0).unwrap();
    }

    /// mm/swap.c: a folio waiting in an LRU add batch at fork stays there, shared (isolation
    /// fails in both processes); after the child's store its copy waits in the child's CPU's
    /// batch, and a drain puts both the copy and the parent's folio on the LRU.
    #[test]
    fn batched_folios_reach_the_lru_through_copies_and_forks() {
        let Fork { mut k, p, c, cmm, pv, cv } = forked("6.1");
        k.do_anonymous_page(p, pv, 20).expect("a page");
        assert!(!k.folio_test_lru(0, pv, 20), "batched on the parent's CPU");
        k.dup_mmap(p, c);
        assert!(!k.folio_test_lru(cmm, cv, 20), "the shared folio is still batched");
        let mut b = 1e9;
        assert!(k.access_page(c, cv, 20, true, &mut b));
        assert!(!k.folio_test_lru(cmm, cv, 20), "the child's copy waits in its CPU's batch");
        k.lru_add_drain_all();
        assert!(k.folio_test_lru(cmm, cv, 20), "the copy is on the LRU");
        assert!(k.folio_test_lru(0, pv, 20), "and so is the folio the parent now owns");
        assert!(k.lru_add.iter().all(|b| b.is_empty()));
    }

    /// A large folio in an inherited private VMA stops the run: its copy-on-write (shared
    /// PMD, partial copies) is not modelled.
    #[test]
    fn fork_of_a_large_folio_is_not_modelled() {
        let Fork { mut k, p, c, pv, .. } = forked("6.12");
        let pt = &mut k.mms[0].vmas[pv].pt;
        pt.populate_folio(32, 2, 0, crate::mm::pgtable::PTE_WRITE, false);
        k.dup_mmap(p, c);
        let msg = k.not_modelled.clone().expect("refused");
        assert!(msg.contains("large folios"), "{msg}");
    }
}
