//! Threads that reach the same page while another thread's fault on it is in progress
//! (issue 27). In an interleaved tick (sim/interleave.rs) each fault of a thread sharing its
//! pages leaves a record of when its PTE changes; a second thread that reaches the page before
//! then does what the kernel does:
//! - first touch: its own do_anonymous_page allocates and zeroes a page, finds the PTE set
//!   under the PTL and frees it (`if (!pte_none(...)) goto release`);
//! - hint fault, no migration: the first holds the PTL from its `pte_same` check until it has
//!   restored the PTE, so the second spins on it, finds the PTE changed and returns (a fault,
//!   not a hint fault);
//! - hint fault that migrates: the first drops the PTL once it has decided (and, since 6.11,
//!   isolated the folio); a second that takes it before the unmap still sees PROT_NONE, counts
//!   a hint fault, fails folio_isolate_lru where it would migrate too (TNF_MIGRATE_FAIL; local
//!   otherwise) and maps the page, so the unmap must flush the TLB of the CPUs running the mm
//!   (b99a342d4f11's race); its access then retries, finds the migration entry and sleeps in
//!   migration_entry_wait until the page is remapped, as does any thread arriving after the
//!   unmap.

use crate::kernel::Kernel;
use crate::sched::numa::fault::TNF_MIGRATE_FAIL;
use crate::vmstat::VmEvent;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultKind {
    FirstTouch,
    Hint,
    /// a hint fault that migrated the folio away from `old_nid`
    Migration,
    /// a migrate_pages(2)/move_pages(2) call's migration of the folio: mapped until
    /// `pte_until`, a migration entry from then until `end` (mm/migration_entry.rs)
    MigrateCall,
}

/// A fault of `task` on the folio [head, head + nr) of (mm, vma), in absolute ns.
#[derive(Debug, Clone, Copy)]
pub struct InFlight {
    pub task: usize,
    pub mm: usize,
    pub vma: usize,
    pub head: u64,
    pub nr: u64,
    pub kind: FaultKind,
    /// the folio's node before the fault
    pub old_nid: usize,
    /// until then the PTE is none / PROT_NONE: a second fault's PTL check still sees it
    pub pte_until: f64,
    /// the PTE is final (after the migration entry, if any)
    pub end: f64,
}

impl Kernel {
    /// Record task `t`'s fault on page `idx` that started at absolute ns `t0` and took `cost`,
    /// from the page's state before it (populated, node) and after it. A thread has one fault
    /// in progress at a time: its record replaces the last one.
    pub fn note_fault(&mut self, t: usize, vma: usize, idx: u64, t0: f64, cost: f64, before: (bool, usize)) {
        let mm = self.tasks[t].mm;
        let pt = &self.mms[mm].vmas[vma].pt;
        if !pt.populated(idx) {
            return;
        }
        let (head, nr) = pt.folio(idx);
        let half = self.cost.fault_entry_exit_ns / 2.0;
        let end = t0 + (cost - half).max(0.0);
        let (kind, pte_until) = if !before.0 {
            (FaultKind::FirstTouch, end)
        } else if pt.nid(head) as usize != before.1 {
            // isolated and unmapped once do_numa_page has decided: the migration entry from then on
            (FaultKind::Migration, (t0 + half + self.cost.hint_fault_ns).min(end))
        } else {
            (FaultKind::Hint, end)
        };
        let rec = InFlight { task: t, mm, vma, head, nr, kind, old_nid: before.1, pte_until, end };
        match self.inflight.iter_mut().find(|r| r.task == t) {
            Some(r) => *r = rec,
            None => self.inflight.push(rec),
        }
    }

    /// The first page of [lo, hi) of (mm, vma) with another task's fault still in progress at
    /// absolute ns `at`.
    pub fn inflight_stop(&self, t: usize, mm: usize, vma: usize, lo: u64, hi: u64, at: f64) -> Option<u64> {
        self.inflight.iter().filter(|r| r.task != t && r.mm == mm && r.vma == vma && r.end > at && r.head < hi && r.head + r.nr > lo).map(|r| r.head.max(lo)).min()
    }

    /// Task `t` reaches page `idx` at absolute ns `at` while another task's fault on it is in
    /// progress: take what the kernel gives it (module comment). Returns (system ns, waiting ns).
    // mm/memory.c: do_anonymous_page, do_numa_page; mm/migrate.c: migration_entry_wait
    pub fn fault_race(&mut self, t: usize, vma: usize, idx: u64, at: f64) -> (f64, f64) {
        let mm = self.tasks[t].mm;
        let Some(r) = self.inflight.iter().copied().find(|r| r.task != t && r.mm == mm && r.vma == vma && r.end > at && r.head <= idx && idx < r.head + r.nr) else {
            return (0.0, 0.0);
        };
        let e = self.cost.fault_entry_exit_ns;
        let check = at + e / 2.0; // its PTL check
        match r.kind {
            FaultKind::FirstTouch if at < r.pte_until => {
                self.count(VmEvent::Pgfault, 1);
                self.events.fault_races += 1;
                (e + self.cost.clear_page_ns * r.nr as f64, 0.0)
            }
            FaultKind::Hint => {
                // the first holds the PTL from its pte_same check to the restore: this one
                // spins on it, then finds the PTE changed and returns
                self.count(VmEvent::Pgfault, 1);
                self.events.fault_races += 1;
                (e + (r.pte_until - check).max(0.0), 0.0)
            }
            FaultKind::Migration if check < r.pte_until => {
                // its PTL check comes after the first's (spinning until it is released) and
                // before the first's unmap: the PTE is still PROT_NONE
                self.events.fault_races += 1;
                let c = self.race_isolated_folio(t, &r) + (r.pte_until - check).max(0.0);
                // its access retries after the unmap: the migration entry, as below
                let wait = (r.end - (at + c)).max(0.0);
                if wait > 0.0 {
                    self.count(VmEvent::Pgfault, 1);
                    self.tasks[t].migration_wait_ns += wait;
                    return (c + e, wait);
                }
                (c, 0.0)
            }
            FaultKind::Migration => {
                // a migration entry: migration_entry_wait until remove_migration_ptes
                self.count(VmEvent::Pgfault, 1);
                self.events.fault_races += 1;
                self.tasks[t].migration_wait_ns += r.end - at;
                (e, r.end - at)
            }
            FaultKind::MigrateCall if at >= r.pte_until => self.migration_entry_wait(t, at, r.end),
            _ => (0.0, 0.0),
        }
    }

    /// Task `t`'s hint fault on a folio that record `r`'s task has isolated for migration: it
    /// counts, fails folio_isolate_lru where it would migrate too, and maps the page, so the
    /// migrating task's unmap finds an accessible PTE and flushes the mm's TLBs.
    // mm/memory.c: do_numa_page -> migrate_misplaced_folio_prepare (folio_isolate_lru fails)
    fn race_isolated_folio(&mut self, t: usize, r: &InFlight) -> f64 {
        let cpu = self.tasks[t].cpu;
        let pt = &self.mms[r.mm].vmas[r.vma].pt;
        let last_cpupid = pt.last_cpupid(r.head);
        self.vma_set_access_pid_bit(r.mm, r.vma, self.tasks[t].pid);
        // local, or it would migrate too and folio_isolate_lru fails
        let flags = match self.count_hint_fault(r.old_nid, cpu) {
            0 => TNF_MIGRATE_FAIL,
            local => local,
        };
        self.task_numa_fault(t, last_cpupid, r.old_nid, r.nr, flags);
        // try_to_migrate_one: ptep_clear_flush of a present PTE, paid by the migrating task
        let from = self.tasks[r.task].cpu;
        let flush = self.flush_tlb_mm_range(r.mm, from, r.nr);
        self.charge_interleaved(r.task, flush);
        self.cost.fault_entry_exit_ns + self.cost.hint_fault_ns
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{pin, place_page, small_kernel, thread};
    use crate::vmstat::VmEvent::*;

    /// Thread a on CPU `cpu_a` takes the hint fault on page `idx` of node 0 at t0 = 0 (its
    /// record noted); thread b is on CPU `cpu_b`. Returns (kernel, b, the fault's cost).
    fn first_fault(cpu_a: usize, cpu_b: usize, idx: u64) -> (crate::kernel::Kernel, usize, f64) {
        let mut k = small_kernel("");
        let (a, b) = (thread(&k, 0), thread(&k, 1));
        pin(&mut k, a, cpu_a);
        pin(&mut k, b, cpu_b);
        place_page(&mut k, idx, 0);
        k.mms[0].vmas[0].pt.make_protnone(idx);
        let c = k.do_numa_page(a, 0, idx);
        k.note_fault(a, 0, idx, 0.0, c, (true, 0));
        (k, b, c)
    }

    /// Thread a (CPU 2, node 1) takes the hint fault on page 11 of node 0 at t0 = 0 and
    /// migrates it; b (CPU 0, node 0) reaches the page `dt` ns later. Returns (kernel, b's
    /// system ns, b's wait ns).
    fn race_after_migration(dt: f64) -> (crate::kernel::Kernel, usize, f64, f64) {
        let (mut k, b, _) = first_fault(2, 0, 11);
        assert_eq!(k.mms[0].vmas[0].pt.nid(11), 1, "the fixture's fault migrates");
        let before = k.vmstat.get(NumaHintFaults);
        let (sys, wait) = k.fault_race(b, 0, 11, dt);
        assert!(k.vmstat.get(NumaHintFaults) >= before);
        (k, b, sys, wait)
    }

    /// mm/memory.c: do_numa_page — a thread whose PTL check comes before the migrating
    /// thread's unmap still sees PROT_NONE: it counts a hint fault (local: the page is still on
    /// its node), maps the page, so the unmap flushes a present PTE (an IPI round), and its
    /// retried access waits on the migration entry.
    #[test]
    fn fault_before_the_unmap_counts_and_forces_a_flush() {
        let (k, b, sys, wait) = race_after_migration(100.0);
        assert_eq!((k.vmstat.get(NumaHintFaults), k.vmstat.get(NumaHintFaultsLocal)), (2, 1));
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 1, "the unmap of a present PTE flushes");
        assert!(sys >= k.cost.fault_entry_exit_ns + k.cost.hint_fault_ns);
        assert!(wait > 0.0, "the retried access meets the migration entry");
        assert_eq!(k.tasks[b].migration_wait_ns, wait);
    }

    /// mm/migrate.c: migration_entry_wait — after the unmap, a thread finds the migration
    /// entry: one more fault, no hint fault, no flush, a wait until the remap.
    #[test]
    fn fault_after_the_unmap_waits_on_the_migration_entry() {
        let e = small_kernel("").cost.fault_entry_exit_ns;
        let h = small_kernel("").cost.hint_fault_ns;
        let at = e + h; // past the unmap at e/2 + h
        let (k, _, sys, wait) = race_after_migration(at);
        assert_eq!(k.vmstat.get(NumaHintFaults), 1);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 0);
        assert_eq!(sys, e);
        let end = k.inflight[0].end;
        assert!((wait - (end - at)).abs() < 1e-9, "waits until the remap");
    }

    /// mm/memory.c: do_numa_page — the local path holds the PTL from pte_same to the restore:
    /// a second thread spins, finds the PTE changed and returns without a hint fault.
    #[test]
    fn local_hint_fault_gives_the_second_thread_a_spurious_fault() {
        let (mut k, b, c) = first_fault(0, 1, 12);
        let faults = k.vmstat.get(Pgfault);
        let (sys, wait) = k.fault_race(b, 0, 12, 10.0);
        assert_eq!(k.vmstat.get(NumaHintFaults), 1, "one hint fault for one PROT_NONE PTE");
        assert_eq!(k.vmstat.get(Pgfault), faults + 1);
        assert_eq!(wait, 0.0);
        assert!(sys > k.cost.fault_entry_exit_ns, "it spun on the PTL");
        // after the restore there is nothing to meet
        assert_eq!(k.fault_race(b, 0, 12, c), (0.0, 0.0));
    }
}
