//! KVM's side of NUMA balancing on the host (virt/kvm/kvm_main.c, arch/x86/kvm/mmu/; spec §8):
//! a VM is a process whose guest RAM is one memslot-backed VMA, run by vCPU threads through a
//! secondary MMU (EPT). Host invalidations zap SPTEs; the guest refaults them (EPT violations).

pub mod mmu;

use crate::features::Feature;
use crate::kernel::Kernel;
use crate::sched::task::TaskState;
use serde::Serialize;

/// Per-VM counters (KVM's debugfs names where it has one).
#[derive(Debug, Clone, Default, Serialize)]
pub struct KvmStats {
    /// kvm_flush_remote_tlbs calls (`remote_tlb_flush_requests`).
    pub remote_tlb_flush_requests: u64,
    /// Of those, the ones that kicked at least one running vCPU (`remote_tlb_flush`).
    pub remote_tlb_flush: u64,
    /// Call-function IPIs sent to pCPUs running this VM's vCPUs in guest mode.
    pub remote_tlb_flush_ipis: u64,
    /// invalidate_range_start calls received, and those from NUMA protection (change_prot_numa).
    pub mmu_notifier_invalidations: u64,
    pub numa_invalidations: u64,
    /// Guest pages covered by NUMA invalidations of the memslot, and those covered once a vCPU
    /// has started (the guest runs; before that, e.g. while VFIO pins, no SPTE exists).
    pub numa_invalidated_pages: u64,
    pub numa_invalidated_pages_running: u64,
    /// KVM remote TLB flushes caused by NUMA invalidations (the seed-004 RFC's metric).
    pub numa_remote_tlb_flush: u64,
    pub numa_remote_tlb_flush_ipis: u64,
    /// Leaf SPTEs zapped (a huge SPTE counts once), and those kept because the page is pinned.
    pub sptes_zapped: u64,
    pub sptes_kept_pinned: u64,
    /// EPT violations resolved (`pf_taken`), and those that took a host NUMA hint fault.
    pub ept_violations: u64,
    pub ept_hint_faults: u64,
    /// Host hint faults on long-term pinned pages (the RFC's wasted work).
    pub pinned_hint_faults: u64,
}

/// struct kvm: one VM.
#[derive(Debug, Clone)]
pub struct Vm {
    pub mm: usize,
    /// The VMA backing guest RAM (one memslot covering all of it).
    pub memslot_vma: usize,
    pub vcpus: Vec<usize>,
    /// SPTE present, one bit per guest page; a huge SPTE sets its 512 bits.
    pub spte: Vec<u64>,
    pub stats: KvmStats,
}

impl Vm {
    pub fn new(mm: usize, memslot_vma: usize, pages: u64) -> Self {
        Vm { mm, memslot_vma, vcpus: Vec::new(), spte: vec![0; pages.div_ceil(64) as usize], stats: KvmStats::default() }
    }

    /// Passes of NUMA invalidations over guest RAM: the pages they covered over its size.
    pub fn scan_passes(&self, k: &Kernel) -> f64 {
        self.stats.numa_invalidated_pages as f64 / self.guest_pages(k)
    }

    /// `scan_passes` counted from the start of the first vCPU.
    pub fn running_scan_passes(&self, k: &Kernel) -> f64 {
        self.stats.numa_invalidated_pages_running as f64 / self.guest_pages(k)
    }

    fn guest_pages(&self, k: &Kernel) -> f64 {
        k.mms[self.mm].vmas[self.memslot_vma].pt.len().max(1) as f64
    }

    /// Whether a vCPU thread has started.
    pub fn running(&self, k: &Kernel) -> bool {
        self.vcpus.iter().any(|&t| k.tasks[t].state != TaskState::NotStarted)
    }

    pub fn spte_present(&self, idx: u64) -> bool {
        self.spte.get((idx / 64) as usize).is_some_and(|w| w >> (idx % 64) & 1 == 1)
    }

    pub fn set_spte(&mut self, idx: u64) {
        if let Some(w) = self.spte.get_mut((idx / 64) as usize) {
            *w |= 1 << (idx % 64);
        }
    }

    pub fn clear_spte(&mut self, idx: u64) -> bool {
        let Some(w) = self.spte.get_mut((idx / 64) as usize) else { return false };
        let was = *w >> (idx % 64) & 1 == 1;
        *w &= !(1 << (idx % 64));
        was
    }
}

impl Kernel {
    /// The VM whose guest RAM lives in `mm`, if any (KVM registered its MMU notifier there).
    pub fn kvm_of(&self, mm: usize) -> Option<usize> {
        self.kvms.iter().position(|v| v.mm == mm)
    }

    /// An invalidation of pages [first, end) of VMA `vma` reaches KVM. `numa`: sent by
    /// change_prot_numa (MMU_NOTIFY_PROTECTION_VMA); KVM can only tell that apart with the RFC's
    /// MMU_NOTIFIER_RANGE_NUMA flag. Returns the cost to the invalidating task, ns.
    // virt/kvm/kvm_main.c: kvm_mmu_notifier_invalidate_range_start -> kvm_mmu_unmap_gfn_range
    pub fn kvm_mmu_notifier_invalidate_range_start(&mut self, vm: usize, vma: usize, first: u64, end: u64, numa: bool, cpu: usize) -> f64 {
        let flagged = numa && self.feature(Feature::MmuNotifierRangeNuma);
        let st = &mut self.kvms[vm].stats;
        st.mmu_notifier_invalidations += 1;
        st.numa_invalidations += numa as u64;
        if vma != self.kvms[vm].memslot_vma {
            return 0.0; // no memslot overlaps: only the counter and the pfn-cache check
        }
        if numa {
            let running = self.kvms[vm].running(self);
            let st = &mut self.kvms[vm].stats;
            st.numa_invalidated_pages += end.saturating_sub(first);
            if running {
                st.numa_invalidated_pages_running += end.saturating_sub(first);
            }
        }
        let skip_pinned = flagged && self.feature(Feature::KvmSkipPinnedZap);
        let zapped = self.kvm_tdp_mmu_unmap_gfn_range(vm, first, end, skip_pinned);
        let mut cost = zapped as f64 * self.cost.pte_update_ns;
        if zapped > 0 {
            let ipis = self.kvms[vm].stats.remote_tlb_flush_ipis;
            cost += self.kvm_flush_remote_tlbs(vm, cpu);
            if numa {
                let st = &mut self.kvms[vm].stats;
                st.numa_remote_tlb_flush += 1;
                st.numa_remote_tlb_flush_ipis += st.remote_tlb_flush_ipis - ipis;
            }
        }
        cost
    }

    /// Make every vCPU flush its guest TLB: a kick (call-function IPI, waited for) to each pCPU
    /// running one of the VM's vCPUs in guest mode, except the current CPU. Returns the sender's
    /// cost; each kicked vCPU pays a VM exit and a full flush.
    // virt/kvm/kvm_main.c: kvm_flush_remote_tlbs -> kvm_make_all_cpus_request(KVM_REQ_TLB_FLUSH)
    pub fn kvm_flush_remote_tlbs(&mut self, vm: usize, cpu: usize) -> f64 {
        self.kvms[vm].stats.remote_tlb_flush_requests += 1;
        let targets: Vec<(usize, usize)> = (0..self.cpus.len()).filter(|&c| c != cpu).filter_map(|c| self.cpus[c].curr().filter(|t| self.kvms[vm].vcpus.contains(t)).map(|t| (c, t))).collect();
        if targets.is_empty() {
            return 0.0;
        }
        let st = &mut self.kvms[vm].stats;
        st.remote_tlb_flush += 1;
        st.remote_tlb_flush_ipis += targets.len() as u64;
        let handler = self.cost.vm_exit_ns + self.cost.tlb_flush_local_all_ns;
        for &(_, t) in &targets {
            self.tasks[t].sys_ns += handler;
            self.tasks[t].sys_debt_ns += handler;
        }
        self.cost.ipi_send_ns + self.cost.ipi_per_target_ns * targets.len() as f64 + self.cost.vm_exit_ns
    }
}
