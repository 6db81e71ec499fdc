//! x86 TLB shootdowns (arch/x86/mm/tlb.c, spec §7).
//!
//! ## Modelled
//! `mm_cpumask` as the CPUs currently running a task of the mm (<= v6.13: switching to another
//! user mm clears the bit; lazy CPUs are never IPIed), the 33-page full-flush ceiling, IPI costs
//! charged to the sender and as interrupt time to each receiver, and the counters.
//! ## Not modelled yet (issue 3)
//! Lazy-TLB CPUs kept in the mask, v6.14 once-per-second trimming, batched flushes.

use crate::kernel::Kernel;
use crate::vmstat::VmEvent;

/// tlb_single_page_flush_ceiling
pub const TLB_SINGLE_PAGE_FLUSH_CEILING: u64 = 33;

impl Kernel {
    /// CPUs other than `cpu` that have `mm` loaded now.
    pub fn mm_cpumask_others(&self, mm: usize, cpu: usize) -> Vec<usize> {
        (0..self.cpus.len())
            .filter(|&c| c != cpu && self.cpus[c].curr().is_some_and(|t| self.tasks[t].mm == mm))
            .collect()
    }

    /// Flush `npages` of `mm` from every CPU that may cache them; returns the sender's cost, ns.
    // arch/x86/mm/tlb.c: flush_tlb_mm_range -> native_flush_tlb_multi
    pub fn flush_tlb_mm_range(&mut self, mm: usize, cpu: usize, npages: u64) -> f64 {
        let full = npages > TLB_SINGLE_PAGE_FLUSH_CEILING;
        let targets = self.mm_cpumask_others(mm, cpu);
        let mut cost = if full {
            self.count(VmEvent::NrTlbLocalFlushAll, 1);
            self.cost.tlb_flush_local_all_ns
        } else {
            self.count(VmEvent::NrTlbLocalFlushOne, npages);
            self.cost.tlb_flush_local_one_ns * npages as f64
        };
        if !targets.is_empty() {
            self.count(VmEvent::NrTlbRemoteFlush, 1);
            self.count(VmEvent::NrTlbRemoteFlushReceived, targets.len() as u64);
            cost += self.cost.ipi_send_ns + self.cost.ipi_per_target_ns * targets.len() as f64;
            let handler = self.cost.ipi_receive_ns;
            for c in targets {
                // flush_tlb_func on the target: irq_tlb_count, time taken from the running task
                self.irq_tlb_count[c] += 1;
                if let Some(t) = self.cpus[c].curr() {
                    self.tasks[t].sys_ns += handler;
                    self.tasks[t].sys_debt_ns += handler;
                }
            }
        }
        cost
    }
}

#[cfg(test)]
mod tests {
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
        // a CPU running nothing of this mm is not a target
        k.cpus[3].rq.clear();
        k.flush_tlb_mm_range(0, 0, 64);
        assert_eq!(k.irq_tlb_count, vec![0, 3, 3, 2]);
    }
}
