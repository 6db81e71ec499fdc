//! Threads that meet the migration entries of a migrate_pages(2)/move_pages(2) call of their
//! process (issue 27). The caller runs on another CPU while the target's threads stream over
//! the pages it moves; who reaches a page when decides what the kernel does:
//! - migrate_pages_batch unmaps a batch (a migration entry in each PTE), flushes once, then
//!   copies and remaps folio by folio (v6.3+; before, unmap_and_move flushes and remaps each
//!   folio in turn). A thread that reaches a page between its unmap and its remap faults and
//!   sleeps in migration_entry_wait until remove_migration_ptes; one arriving before the unmap
//!   passes.
//! - A thread asleep leaves its CPU idle in lazy TLB mode, so the batch's flush does not
//!   interrupt it (native_flush_tlb_multi skips lazy CPUs).
//!
//! Resolution: the caller's work does not depend on the threads (to this model's resolution),
//! theirs depends on its, so a caller whose target has threads in a store stream runs its tick
//! first (`timed_migrators`) and leaves a record of each folio's unmap and remap instants; the
//! streams then meet them in simulated time, to the ns (mm/fault_race.rs). Its flush IPIs are
//! delivered at the tick's end, to the targets not asleep at the flush's instant; the sender
//! waits as if every target were interrupted.
//!
//! The time the kernel spends on a folio beyond the copy (allocation, rmap walk, PTE clear on
//! the unmap side; rmap walk, PTE set, freeing on the remap side) is split evenly between the
//! unmap and the remap in the timeline; the charged total is unchanged.
//! A woken thread runs again after a reschedule IPI's send and receive costs (its CPU was
//! idle). Not modelled: idle states' exit latencies, stale TLB entries used between the unmap
//! and the flush, a page's node changing at the call rather
//! than at its remap for a thread that passes it before the unmap.

use crate::kernel::Kernel;
use crate::mm::access_notifier::AccessNotifier;
use crate::mm::fault_race::{FaultKind, InFlight};
use crate::mm::rmap::PageRef;
use crate::vmstat::VmEvent;

/// Where a timed call's `migrate_pages()` started: absolute ns, and the caller's tick budget
/// left then.
#[derive(Debug, Clone, Copy)]
pub struct CallClock {
    pub caller: usize,
    pub at: f64,
    pub left: f64,
}

/// A flush whose IPIs wait for the tick's end: (instant, CPUs it would interrupt).
#[derive(Debug, Clone)]
pub struct PendingFlush {
    pub at: f64,
    pub cpus: Vec<usize>,
}

impl Kernel {
    /// The absolute ns at which the running timed call has done `work` ns of kernel work: the
    /// rest of its tick, then in each later tick what the host's steal leaves (run_task_begin).
    pub fn call_wall_clock(&self, work: f64) -> f64 {
        let Some(c) = self.call_clock else { return 0.0 };
        self.wall_clock_after(c.at, c.left, work)
    }

    /// The absolute ns at which kernel work that starts at `at`, with `left` ns of its tick to
    /// run, has done `work` ns: the rest of its tick, then in each later tick what the host's
    /// steal leaves (run_task_begin).
    pub fn wall_clock_after(&self, at: f64, left: f64, work: f64) -> f64 {
        if work <= left {
            return at + work;
        }
        let tick = self.tick_ns as f64;
        let per_tick = tick - self.host_steal_ns;
        let later = work - left;
        let k = (later / per_tick).floor();
        at + left + k * tick + self.host_steal_ns + (later - k * per_tick)
    }

    /// The running timed call unmapped folio `p` at absolute ns `unmap_at` and remaps it at
    /// `remap_at`.
    pub fn note_call_migration(&mut self, p: PageRef, unmap_at: f64, remap_at: f64) {
        let Some(CallClock { caller, .. }) = self.call_clock else { return };
        let (head, nr) = self.folio_of(p);
        // old_nid is read for hint-fault migrations only
        let old_nid = self.mms[p.mm].vmas[p.vma].pt.nid(head) as usize;
        self.inflight.push(InFlight { task: caller, mm: p.mm, vma: p.vma, head, nr, kind: FaultKind::MigrateCall, old_nid, pte_until: unmap_at, end: remap_at });
    }

    /// Task `t` finds a migration entry at absolute ns `at`: a fault, then asleep until the
    /// remap at `end` wakes it. Returns (system ns, waiting ns).
    // mm/migrate.c: migration_entry_wait -> migration_entry_wait_on_locked
    pub fn migration_entry_wait(&mut self, t: usize, at: f64, end: f64) -> (f64, f64) {
        let e = self.cost.fault_entry_exit_ns;
        self.count(VmEvent::Pgfault, 1);
        self.events.fault_races += 1;
        // folio_unlock wakes it on an idle CPU: a reschedule IPI (ttwu_queue ->
        // smp_send_reschedule) that CPU takes before it runs the task again
        let awake = end + self.cost.ipi_send_ns + self.cost.ipi_receive_ns;
        let wait = (awake - at - e).max(0.0);
        self.tasks[t].migration_wait_ns += wait;
        self.asleep.push((t, at + e / 2.0, awake));
        (e, wait)
    }

    /// Threads of a process whose accesses are modelled (mm/access_notifier.rs) that touch
    /// `pages` while they are unmapped for migration wait on their migration entries until the
    /// remap: batched (v6.3) for the whole `duration_ns`, one folio at a time for its share.
    /// Off the CPU, not system time.
    // mm/migrate.c: migration_entry_wait
    pub fn migration_entry_stalls(&mut self, pages: &[PageRef], duration_ns: f64, batched: bool) {
        let Some(first) = pages.first() else { return };
        let mm = first.mm;
        let window = if batched { duration_ns } else { duration_ns / pages.len() as f64 };
        // the wait depends on the thread's node only: ask once per node
        let mut wait_on = vec![None; self.topo.nr_nodes];
        for c in 0..self.cpus.len() {
            let Some(t) = self.cpus[c].curr().filter(|&t| self.tasks[t].mm == mm) else {
                continue;
            };
            let node = self.topo.cpu_node[c];
            let wait = match wait_on[node] {
                Some(w) => w,
                None => {
                    let Some(w) = self.access_migration_entry_wait_ns(pages, node, window, batched) else {
                        return;
                    };
                    wait_on[node] = Some(w);
                    w
                }
            };
            self.tasks[t].wait_debt_ns += wait;
            self.tasks[t].migration_wait_ns += wait;
        }
    }

    /// Deliver the pending flushes sent before absolute ns `until`: a target CPU whose task is
    /// asleep at the flush's instant, with nothing else to run, is idle in lazy TLB mode and
    /// gets no IPI.
    // arch/x86/mm/tlb.c: native_flush_tlb_multi (should_flush_tlb skips lazy CPUs)
    pub fn deliver_pending_flushes(&mut self, until: f64) {
        let (due, later): (Vec<PendingFlush>, Vec<PendingFlush>) = std::mem::take(&mut self.pending_flushes).into_iter().partition(|f| f.at < until);
        self.pending_flushes = later;
        for f in due {
            for c in f.cpus {
                let idle = self.cpus[c].rq.len() == 1 && self.cpus[c].curr().is_some_and(|t| self.asleep.iter().any(|&(s, a, b)| s == t && a <= f.at && f.at < b));
                if !idle {
                    self.flush_ipi_received(c);
                }
            }
        }
        let keep = self.pending_flushes.iter().map(|f| f.at).fold(until, f64::min);
        self.asleep.retain(|&(_, _, b)| b > keep);
    }
}

#[cfg(test)]
mod tests {
    use crate::mm::migrate::MigrateMode;
    use crate::mm::rmap::PageRef;
    use crate::testutil::{pin, place_page, small_kernel, thread};
    use crate::vmstat::VmEvent::*;

    /// A caller on CPU 0 migrates pages 0..4 of mm 0 (node 0) to node 1 in one batch from
    /// t = 0 (v6.3+), with the timeline recorded; thread b of the mm runs on CPU 2, alone.
    /// Returns (kernel, b).
    fn timed_batch() -> (crate::kernel::Kernel, usize) {
        let mut k = small_kernel("");
        let (a, b) = (thread(&k, 0), thread(&k, 2));
        pin(&mut k, a, 0);
        pin(&mut k, b, 2);
        for idx in 0..4 {
            place_page(&mut k, idx, 0);
        }
        k.call_clock = Some(super::CallClock { caller: a, at: 0.0, left: 1e12 });
        let pages: Vec<_> = (0..4).map(|idx| PageRef { mm: 0, vma: 0, idx }).collect();
        k.migrate_pages(&pages, 1, 0, MigrateMode::Sync);
        k.call_clock = None;
        (k, b)
    }

    /// mm/migrate.c: migrate_pages_batch — every folio of the batch is unmapped before the one
    /// flush and remapped after it, in order; the flush's IPIs wait for the tick's end.
    #[test]
    fn a_batch_unmaps_all_then_flushes_then_remaps() {
        let (k, _) = timed_batch();
        assert_eq!(k.inflight.len(), 4);
        let flush = k.pending_flushes[0].at;
        for (i, r) in k.inflight.iter().enumerate() {
            assert!(r.pte_until <= flush && flush < r.end, "page {i}: unmap, flush, remap");
            if i > 0 {
                assert!(r.pte_until > k.inflight[i - 1].pte_until && r.end > k.inflight[i - 1].end);
            }
        }
        assert_eq!(k.irq_tlb_count.iter().sum::<u64>(), 0, "not delivered yet");
    }

    /// mm/migrate.c: migration_entry_wait — a thread that reaches a page after its unmap faults
    /// and sleeps until the remap; its CPU is then idle in lazy TLB mode and the batch's flush
    /// skips it. One that reaches it before the unmap passes, and is interrupted.
    #[test]
    fn asleep_on_a_migration_entry_at_the_flush_means_no_ipi() {
        let (mut k, b) = timed_batch();
        let r = k.inflight[0];
        let faults = k.vmstat.get(Pgfault);
        assert_eq!(k.fault_race(b, 0, 0, r.pte_until - 1.0), (0.0, 0.0), "before the unmap: mapped");
        let (sys, wait) = k.fault_race(b, 0, 0, r.pte_until + 1.0);
        assert_eq!(k.vmstat.get(Pgfault), faults + 1);
        let woken = r.end + k.cost.ipi_send_ns + k.cost.ipi_receive_ns;
        assert!(sys > 0.0 && (r.pte_until + 1.0 + sys + wait - woken).abs() < 1e-6, "asleep until the remap's wake-up");
        k.deliver_pending_flushes(f64::INFINITY);
        assert_eq!(k.irq_tlb_count[2], 0, "CPU 2 was idle (lazy) at the flush");
        assert_eq!(k.irq_tlb_count[1] + k.irq_tlb_count[3], 2, "the busy CPUs of the mm are interrupted");

        let (mut k, _) = timed_batch();
        k.deliver_pending_flushes(f64::INFINITY);
        assert_eq!(k.irq_tlb_count[2], 1, "a thread that never met an entry is interrupted");
    }
}
