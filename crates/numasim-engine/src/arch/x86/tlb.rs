//! x86 TLB shootdowns (arch/x86/mm/tlb.c, spec §7).
//!
//! ## Modelled
//! `mm_cpumask` and lazy TLB: a CPU that goes idle keeps its user mm loaded in lazy mode and is
//! never IPIed for it. Up to v6.13 a switch to another user mm clears the old mm's bit; with
//! `tlb-lazy-cpumask` (v6.14) the bit stays and a flush at most once a second also IPIs the stale
//! members, which then drop out. `flush_tlb_mm_range` (33-page ceiling), the batched
//! `arch_tlbbatch_add_pending` / `arch_tlbbatch_flush` (info->mm == NULL: every non-lazy CPU in
//! the mask), IPI costs charged to the sender and, as interrupt time, to each receiver.
//! ## Not modelled
//! tlb_gen catch-up on the receiver (a received IPI always counts as a flush), PCID/ASIDs,
//! INVLPGB, paravirt flushes.

use crate::features::Feature;
use crate::kernel::Kernel;
use crate::tracepoints::FlushSite;
use crate::vmstat::VmEvent;

/// tlb_single_page_flush_ceiling
pub const TLB_SINGLE_PAGE_FLUSH_CEILING: u64 = 33;
const NSEC_PER_SEC: u64 = 1_000_000_000;

/// A deferred flush being gathered (struct arch_tlbflush_unmap_batch).
#[derive(Debug, Clone, Default)]
pub struct TlbBatch {
    pub cpumask: Vec<bool>,
}

impl Kernel {
    /// Load `next` (a task's mm, or None when the CPU goes idle) on `cpu`.
    // arch/x86/mm/tlb.c: switch_mm_irqs_off / enter_lazy_tlb
    pub fn switch_mm(&mut self, cpu: usize, next: Option<usize>) {
        let c = &mut self.cpus[cpu];
        match next {
            None => c.is_lazy = c.loaded_mm.is_some(),
            Some(mm) if c.loaded_mm == Some(mm) => c.is_lazy = false,
            Some(mm) => {
                let prev = c.loaded_mm.replace(mm);
                c.is_lazy = false;
                if let Some(prev) = prev {
                    if !self.feature(Feature::TlbLazyCpumask) {
                        self.mms[prev].cpumask[cpu] = false;
                    }
                }
                self.mms[mm].cpumask[cpu] = true;
            }
        }
    }

    /// The mm is gone: no CPU may keep it loaded.
    pub fn drop_mm_from_cpus(&mut self, mm: usize) {
        for c in self.cpus.iter_mut().filter(|c| c.loaded_mm == Some(mm)) {
            c.loaded_mm = None;
            c.is_lazy = false;
        }
        self.mms[mm].cpumask.iter_mut().for_each(|b| *b = false);
    }

    /// Would CPU `c` get an IPI for a flush of `mm` (None: a batched flush)?
    // arch/x86/mm/tlb.c: should_flush_tlb (v6.14) / the is_lazy test before it
    pub fn should_flush_tlb(&self, c: usize, mm: Option<usize>, trim: bool) -> bool {
        let cpu = &self.cpus[c];
        if cpu.is_lazy {
            return false;
        }
        if !self.feature(Feature::TlbLazyCpumask) {
            return true;
        }
        mm.is_none() || cpu.loaded_mm == mm || trim
    }

    /// Send flush IPIs to the CPUs of `mask` other than `cpu` that should flush; returns the
    /// sender's cost. A receiver no longer running `mm` clears its bit (TLB_REMOTE_WRONG_CPU).
    // arch/x86/mm/tlb.c: native_flush_tlb_multi -> flush_tlb_func on each target
    fn flush_tlb_multi(&mut self, mask: &mut [bool], cpu: usize, mm: Option<usize>, trim: bool, site: FlushSite) -> f64 {
        self.count(VmEvent::NrTlbRemoteFlush, 1);
        let targets: Vec<usize> = (0..mask.len()).filter(|&c| mask[c] && c != cpu && self.should_flush_tlb(c, mm, trim)).collect();
        if !targets.is_empty() {
            self.trace_flush(site, targets.len());
        }
        let handler = self.cost.ipi_receive_ns;
        if let Some(at) = self.flush_at {
            // a timed migration call's flush: whether each target is asleep at `at` is known
            // once its threads have run the tick (mm/migration_entry.rs)
            self.pending_flushes.push(crate::mm::migration_entry::PendingFlush { at, cpus: targets.clone() });
        }
        for &c in &targets {
            if self.flush_at.is_none() {
                self.flush_ipi_received(c);
            }
            if mm.is_some() && self.cpus[c].loaded_mm != mm {
                mask[c] = false;
            }
        }
        if targets.is_empty() {
            0.0
        } else {
            // the sender waits until every target ran its handler (smp_call_function_many_cond)
            self.cost.ipi_send_ns + self.cost.ipi_per_target_ns * targets.len() as f64 + handler
        }
    }

    /// CPU `c` takes a flush IPI: a "TLB shootdowns" interrupt, the handler charged to what it runs.
    // arch/x86/mm/tlb.c: flush_tlb_func
    pub fn flush_ipi_received(&mut self, c: usize) {
        let handler = self.cost.ipi_receive_ns;
        self.irq_tlb_count[c] += 1;
        self.count(VmEvent::NrTlbRemoteFlushReceived, 1);
        if let Some(t) = self.cpus[c].curr() {
            self.tasks[t].sys_ns += handler;
            self.tasks[t].sys_debt_ns += handler;
        }
    }

    fn local_flush(&mut self, npages: u64) -> f64 {
        if npages > TLB_SINGLE_PAGE_FLUSH_CEILING {
            self.count(VmEvent::NrTlbLocalFlushAll, 1);
            self.cost.tlb_flush_local_all_ns
        } else {
            self.count(VmEvent::NrTlbLocalFlushOne, npages);
            self.cost.tlb_flush_local_one_ns * npages as f64
        }
    }

    /// Flush `npages` of `mm` from every CPU that may cache them; returns the sender's cost, ns.
    // arch/x86/mm/tlb.c: flush_tlb_mm_range
    pub fn flush_tlb_mm_range(&mut self, mm: usize, cpu: usize, npages: u64) -> f64 {
        let mut cost = 0.0;
        // the mask is taken out while the IPIs go (stale members drop out of it) and put back
        let mut mask = std::mem::take(&mut self.mms[mm].cpumask);
        if mask.iter().enumerate().any(|(c, &b)| b && c != cpu) {
            let trim = self.feature(Feature::TlbLazyCpumask) && self.now > self.mms[mm].next_trim_cpumask;
            if trim {
                self.mms[mm].next_trim_cpumask = self.now + NSEC_PER_SEC;
            }
            cost += self.flush_tlb_multi(&mut mask, cpu, Some(mm), trim, FlushSite::MmRange);
        }
        self.mms[mm].cpumask = mask;
        if self.cpus[cpu].loaded_mm == Some(mm) {
            cost += self.local_flush(npages);
        }
        cost
    }

    /// Defer the flush of an unmapped PTE of `mm` into `batch`.
    // arch/x86/include/asm/tlbflush.h: arch_tlbbatch_add_pending
    pub fn arch_tlbbatch_add_pending(&self, batch: &mut TlbBatch, mm: usize) {
        if batch.cpumask.is_empty() {
            batch.cpumask = vec![false; self.cpus.len()];
        }
        for (b, &m) in batch.cpumask.iter_mut().zip(&self.mms[mm].cpumask) {
            *b |= m;
        }
    }

    /// One flush for everything gathered in `batch`; returns the sender's cost, ns.
    // arch/x86/mm/tlb.c: arch_tlbbatch_flush
    pub fn arch_tlbbatch_flush(&mut self, batch: &mut TlbBatch, cpu: usize) -> f64 {
        let mut mask = std::mem::take(&mut batch.cpumask);
        if mask.is_empty() {
            return 0.0;
        }
        let mut cost = 0.0;
        if mask.iter().enumerate().any(|(c, &b)| b && c != cpu) {
            cost += self.flush_tlb_multi(&mut mask, cpu, None, false, FlushSite::Batch);
        }
        if mask[cpu] {
            cost += self.local_flush(u64::MAX);
        }
        cost
    }
}

#[cfg(test)]
mod tests {
    use super::TlbBatch;
    use crate::testutil::small_kernel;
    use crate::vmstat::VmEvent::*;

    /// arch/x86/mm/tlb.c: flush_tlb_mm_range — more than tlb_single_page_flush_ceiling (33)
    /// pages become one full flush; IPIs go to the other CPUs running the mm, and each receiver
    /// counts a "TLB shootdowns" interrupt and spends the handler time.
    #[test]
    fn ceiling_and_ipi_targets() {
        let mut k = small_kernel("");
        let sys_before: Vec<f64> = (0..4).map(|c| k.tasks[k.cpus[c].curr().unwrap()].sys_ns).collect();
        k.flush_tlb_mm_range(0, 0, 33);
        assert_eq!((k.vmstat.get(NrTlbLocalFlushOne), k.vmstat.get(NrTlbLocalFlushAll)), (33, 0));
        k.flush_tlb_mm_range(0, 0, 34);
        assert_eq!(k.vmstat.get(NrTlbLocalFlushAll), 1);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 2);
        assert_eq!(k.irq_tlb_count, vec![0, 2, 2, 2], "the sender is not interrupted");
        let t1 = k.cpus[1].curr().unwrap();
        assert!(k.tasks[t1].sys_ns > sys_before[1]);
    }

    /// arch/x86/mm/tlb.c: should_flush_tlb — a CPU that went idle keeps the mm loaded in lazy
    /// TLB mode and its cpumask bit, but gets no IPI; the flush round still counts.
    #[test]
    fn lazy_cpu_keeps_its_bit_but_gets_no_ipi() {
        let mut k = small_kernel("");
        k.cpus[3].rq.clear();
        k.switch_mm(3, None);
        assert!(k.cpus[3].is_lazy && k.mms[0].cpumask[3]);
        k.flush_tlb_mm_range(0, 0, 64);
        assert_eq!(k.irq_tlb_count, vec![0, 1, 1, 0]);
        // only lazy CPUs left besides the sender: the round counts, no IPI is sent
        k.cpus[1].rq.clear();
        k.switch_mm(1, None);
        k.cpus[2].rq.clear();
        k.switch_mm(2, None);
        let cost = k.flush_tlb_mm_range(0, 0, 64);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 2);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlushReceived), 2);
        assert!(cost < k.cost.ipi_send_ns);
    }

    /// <= v6.13 switch_mm_irqs_off clears the previous mm's bit; with tlb-lazy-cpumask (v6.14)
    /// the bit stays, normal flushes skip the CPU, and the once-a-second trim IPIs it once,
    /// after which it is out of the mask.
    #[test]
    fn switching_mm_and_the_v6_14_trim() {
        let mut k = small_kernel("");
        k.mms.push(crate::mm::types::Mm::new(9999, "other", 4, k.topo.nr_nodes));
        k.switch_mm(2, Some(1));
        assert!(!k.mms[0].cpumask[2], "v6.13: bit cleared on switch to another user mm");

        let mut k = small_kernel("[kernel.features]\ntlb-lazy-cpumask = true");
        k.mms.push(crate::mm::types::Mm::new(9999, "other", 4, k.topo.nr_nodes));
        k.switch_mm(2, Some(1));
        assert!(k.mms[0].cpumask[2], "v6.14: the stale bit stays");
        k.now = 5_000_000_000; // more than a second after the last trim
        k.flush_tlb_mm_range(0, 0, 64);
        assert_eq!(k.irq_tlb_count[2], 1, "the trim IPIs the stale CPU");
        assert!(!k.mms[0].cpumask[2], "which drops out of the mask");
        k.flush_tlb_mm_range(0, 0, 64);
        assert_eq!(k.irq_tlb_count[2], 1);
        assert_eq!(k.irq_tlb_count[1], 2);
    }

    /// arch/x86/mm/tlb.c: arch_tlbbatch_flush — one round for the union of the gathered mms'
    /// masks, with info->mm == NULL: every non-lazy CPU in it is IPIed, whatever it runs now.
    #[test]
    fn batched_flush_is_one_round_for_the_union() {
        let mut k = small_kernel("[kernel.features]\ntlb-lazy-cpumask = true");
        k.mms.push(crate::mm::types::Mm::new(9999, "other", 4, k.topo.nr_nodes));
        k.switch_mm(3, Some(1)); // CPU 3 now runs another mm; its bit for mm 0 stays (v6.14)
        let mut batch = TlbBatch::default();
        for _ in 0..512 {
            k.arch_tlbbatch_add_pending(&mut batch, 0);
        }
        k.arch_tlbbatch_flush(&mut batch, 0);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 1);
        assert_eq!(k.irq_tlb_count, vec![0, 1, 1, 1], "CPU 3 is IPIed although it runs another mm");
        assert!(batch.cpumask.is_empty());
        assert_eq!(k.arch_tlbbatch_flush(&mut batch, 0), 0.0, "an empty batch flushes nothing");
    }
}
