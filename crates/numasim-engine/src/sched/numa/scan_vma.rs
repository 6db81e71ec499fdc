//! Which VMAs a scan window visits: the skip rules of task_numa_work and, from 6.4, the per-VMA
//! state (`struct vma_numab_state`) of each release (kernel/sched/fair.c, spec §1.5-1.6).

use crate::kernel::Kernel;
use crate::mm::types::{VmaNumabState, VM_EXEC, VM_IO, VM_PFNMAP, VM_READ, VM_WRITE};
use crate::variants::VmaScanRules;

/// include/linux/hash.h: GOLDEN_RATIO_32
const GOLDEN_RATIO_32: u32 = 0x61C8_8647;

// include/linux/hash.h: hash_32
pub fn hash_32(val: u32, bits: u32) -> u32 {
    val.wrapping_mul(GOLDEN_RATIO_32) >> (32 - bits)
}

/// Why task_numa_work passed a VMA by (the reasons of the `sched_skip_vma_numa` tracepoint,
/// 6.7+, include/trace/events/sched.h: numa_vma_skip_reason), counted per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaVmaSkip {
    Unsuitable,
    SharedRo,
    Inaccessible,
    ScanDelay,
    PidInactive,
    /// Not a skip: a VMA the PID filter would refuse is scanned because its scan began.
    IgnorePid,
    SeqCompleted,
}

impl NumaVmaSkip {
    pub const ALL: [NumaVmaSkip; 7] = [Self::Unsuitable, Self::SharedRo, Self::Inaccessible, Self::ScanDelay, Self::PidInactive, Self::IgnorePid, Self::SeqCompleted];
    /// The tracepoint's name of the reason, lower case.
    pub fn name(self) -> &'static str {
        ["unsuitable", "shared_ro", "inaccessible", "scan_delay", "pid_inactive", "ignore_pid", "seq_completed"][self as usize]
    }
}

/// What task_numa_work does with one VMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmaGate {
    Scan,
    Skip(NumaVmaSkip),
}

impl Kernel {
    fn count_vma_skip(&mut self, why: NumaVmaSkip) -> VmaGate {
        self.trace.skip_vma[why as usize] += 1;
        VmaGate::Skip(why)
    }

    /// The rules every release applies (spec §1.5 rules 1-6): not migratable (VM_IO, VM_PFNMAP:
    /// the [vvar] page) or no migrate-on-fault policy, a read-only file mapping (shared
    /// libraries), an inaccessible (PROT_NONE) VMA.
    // kernel/sched/fair.c: task_numa_work (vma_migratable, vma_policy_mof, ...)
    pub(super) fn vma_suitable(&mut self, t: usize, vma: usize) -> VmaGate {
        let v = &self.mms[self.tasks[t].mm].vmas[vma];
        let (shared_ro, inaccessible) = (!v.anon && v.flags & VM_READ != 0 && v.flags & VM_WRITE == 0, v.flags & (VM_READ | VM_WRITE | VM_EXEC) == 0);
        // include/linux/mempolicy.h: vma_migratable
        let migratable = v.flags & (VM_IO | VM_PFNMAP) == 0;
        if !migratable || !self.vma_policy_mof(t, vma) {
            self.count_vma_skip(NumaVmaSkip::Unsuitable)
        } else if shared_ro {
            self.count_vma_skip(NumaVmaSkip::SharedRo)
        } else if inaccessible {
            self.count_vma_skip(NumaVmaSkip::Inaccessible)
        } else {
            VmaGate::Scan
        }
    }

    /// The per-VMA rules of the release (spec §1.4-1.6), for a suitable VMA; `forced` is the
    /// 6.7+ retry that ignores the PID filter.
    pub(super) fn vma_numab_gate(&mut self, t: usize, vma: usize, forced: bool) -> VmaGate {
        match self.variants().vma_scan_rules {
            VmaScanRules::Base => VmaGate::Scan,
            VmaScanRules::V6_4 => self.vma_numab_gate_v6_4(t, vma),
            VmaScanRules::V6_7 | VmaScanRules::V6_8 | VmaScanRules::V6_12 => self.vma_numab_gate_v6_7(t, vma, forced),
        }
    }

    /// The VMA's numab state, created at the scanner's first visit: a scan delay from now, the
    /// PID windows rotating every 4 scan delays after it (`VMA_PID_RESET_PERIOD`).
    fn vma_numab_state(&mut self, mm: usize, vma: usize) -> &mut VmaNumabState {
        let now = self.now;
        let delay = self.cfg.sysctl.numa_balancing_scan_delay_ms as u64 * 1_000_000;
        let seq = self.mms[mm].numa_scan_seq;
        self.mms[mm].vmas[vma].numab.get_or_insert_with(|| VmaNumabState {
            next_scan: now + delay,
            pids_active_reset: now + delay + 4 * delay,
            pids_active: [0; 2],
            start_scan_seq: seq,
            prev_scan_seq: seq.wrapping_sub(1),
        })
    }

    /// Rotate the PID windows once their period is over (the deadline moves by one period,
    /// not to now + period).
    fn vma_pids_rotate(&mut self, mm: usize, vma: usize) {
        let (now, seq) = (self.now, self.mms[mm].numa_scan_seq);
        let delay = self.cfg.sysctl.numa_balancing_scan_delay_ms as u64 * 1_000_000;
        if let Some(ns) = self.mms[mm].vmas[vma].numab.as_mut() {
            if seq != 0 && now > ns.pids_active_reset {
                ns.pids_active_reset += 4 * delay;
                ns.pids_active = [ns.pids_active[1], 0];
            }
        }
    }

    /// 6.4-6.6: scan delay, then the PID filter, then (for a VMA that passes) the rotation.
    // fc137c0ddab2, ef6a22b70f6d, 20f586486bb4 (6.4): task_numa_work, vma_is_accessed
    fn vma_numab_gate_v6_4(&mut self, t: usize, vma: usize) -> VmaGate {
        let mm = self.tasks[t].mm;
        let (now, seq) = (self.now, self.mms[mm].numa_scan_seq);
        let next_scan = self.vma_numab_state(mm, vma).next_scan;
        if seq != 0 && now < next_scan {
            return self.count_vma_skip(NumaVmaSkip::ScanDelay);
        }
        if !self.vma_is_accessed(t, vma) {
            return self.count_vma_skip(NumaVmaSkip::PidInactive);
        }
        self.vma_pids_rotate(mm, vma);
        VmaGate::Scan
    }

    /// 6.7+: scan delay, rotation (2e2675db1906), a VMA already scanned in this pass is passed
    /// by (prev_scan_seq), then the PID filter unless forced (f169c62ff7cd).
    // kernel/sched/fair.c: task_numa_work (6.7+)
    fn vma_numab_gate_v6_7(&mut self, t: usize, vma: usize, forced: bool) -> VmaGate {
        let mm = self.tasks[t].mm;
        let (now, seq) = (self.now, self.mms[mm].numa_scan_seq);
        let next_scan = self.vma_numab_state(mm, vma).next_scan;
        if seq != 0 && now < next_scan {
            return self.count_vma_skip(NumaVmaSkip::ScanDelay);
        }
        self.vma_pids_rotate(mm, vma);
        if self.vma_numab_state(mm, vma).prev_scan_seq == seq {
            self.mms[mm].numa_scan_offset = self.mms[mm].vmas[vma].end();
            return self.count_vma_skip(NumaVmaSkip::SeqCompleted);
        }
        if !forced && !self.vma_is_accessed(t, vma) {
            return self.count_vma_skip(NumaVmaSkip::PidInactive);
        }
        VmaGate::Scan
    }

    /// Whether the scanning thread faulted in this VMA recently, with the release's exceptions
    /// (spec §1.6).
    // kernel/sched/fair.c: vma_is_accessed
    fn vma_is_accessed(&mut self, t: usize, vma: usize) -> bool {
        let rules = self.variants().vma_scan_rules;
        let m = &self.mms[self.tasks[t].mm];
        let v = &m.vmas[vma];
        let ns = v.numab.as_ref().expect("numab state exists");
        // the first two passes are unconditional: per mm up to 6.7, per VMA from 6.8
        let young = if rules >= VmaScanRules::V6_8 { m.numa_scan_seq.wrapping_sub(ns.start_scan_seq) as i32 } else { m.numa_scan_seq as i32 };
        if young < 2 {
            return true;
        }
        let pids = ns.pids_active[0] | ns.pids_active[1];
        if pids & (1u64 << hash_32(self.tasks[t].pid, 6)) != 0 {
            return true;
        }
        // b7a5b537c55c (6.7): finish a VMA whose scan began
        if rules >= VmaScanRules::V6_7 && m.numa_scan_offset > v.start {
            self.trace.skip_vma[NumaVmaSkip::IgnorePid as usize] += 1;
            return true;
        }
        // f22cde4371f3 (6.12): a VMA unscanned for more passes than the process has threads
        rules >= VmaScanRules::V6_12 && m.numa_scan_seq.wrapping_sub(ns.prev_scan_seq) as i32 > m.users as i32
    }

    /// A hint fault records its task in the VMA's current PID window.
    // include/linux/mm.h: vma_set_access_pid_bit
    pub fn vma_set_access_pid_bit(&mut self, mm: usize, vma: usize, pid: u32) {
        if let Some(ns) = self.mms[mm].vmas[vma].numab.as_mut() {
            ns.pids_active[1] |= 1u64 << hash_32(pid, 6);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{small_kernel, thread};

    #[test]
    fn hash_32_spreads_pids_over_64_bits() {
        // include/linux/hash.h: hash_32(val, bits) = val * GOLDEN_RATIO_32 >> (32 - bits)
        assert_eq!(hash_32(1, 6), 0x61C8_8647 >> 26);
        assert!((0..1000).all(|p| hash_32(p, 6) < 64));
    }

    /// A kernel of `version` whose only VMA was seen by the scanner at seq 0 (first pass), now
    /// at pass `seq`, with no PID recorded; `t` is a thread of it.
    fn seen_vma(version: &str, seq: u32) -> (Kernel, usize) {
        let mut k = small_kernel(&format!("[kernel]\nversion = \"{version}\""));
        let t = thread(&k, 0);
        k.vma_numab_state(0, 0);
        k.mms[0].numa_scan_seq = seq;
        k.now = 20_000_000_000; // past the scan delay and several PID periods
        (k, t)
    }

    /// fc137c0ddab2 (6.4): a VMA no thread faulted in is skipped from the third pass on; the
    /// 6.4 rules rotate the PID windows only for a VMA that passes the access test, so its
    /// stale windows are never cleared; 6.7 (2e2675db1906) rotates before the test.
    #[test]
    fn pid_filter_and_rotation_order_by_release() {
        for (version, rotated) in [("6.4", false), ("6.12", true)] {
            let (mut k, t) = seen_vma(version, 1);
            assert_eq!(k.vma_numab_gate(t, 0, false), VmaGate::Scan, "{version}: second pass is unconditional");
            let (mut k, t) = seen_vma(version, 5);
            let other = hash_32(k.tasks[t].pid + 1, 6);
            k.mms[0].vmas[0].numab.as_mut().unwrap().pids_active = [0, 1 << other];
            k.mms[0].vmas[0].numab.as_mut().unwrap().prev_scan_seq = 4;
            assert_eq!(k.vma_numab_gate(t, 0, false), VmaGate::Skip(NumaVmaSkip::PidInactive), "{version}");
            let ns = k.mms[0].vmas[0].numab.as_ref().unwrap();
            assert_eq!(ns.pids_active == [1 << other, 0], rotated, "{version}: {:?}", ns.pids_active);
        }
    }

    /// 84db47ca7146 (6.8): the two unconditional passes count from the VMA's first visit; up to
    /// 6.7 they count from the mm's start, so a VMA first seen at pass 5 is filtered at once.
    #[test]
    fn unconditional_passes_per_vma_from_6_8() {
        for (version, scanned) in [("6.6", false), ("6.12", true)] {
            let mut k = small_kernel(&format!("[kernel]\nversion = \"{version}\""));
            let t = thread(&k, 0);
            k.mms[0].numa_scan_seq = 5;
            k.now = 1; // the VMA's numab state is created now (seq 5)
            k.vma_numab_state(0, 0);
            k.now = 20_000_000_000;
            let gate = k.vma_numab_gate(t, 0, false);
            assert_eq!(gate == VmaGate::Scan, scanned, "{version}: {gate:?}");
        }
    }

    /// f22cde4371f3 (6.12): a VMA not scanned for more passes than the process has threads is
    /// scanned without PID activity; 6.8 leaves it to the forced retry.
    #[test]
    fn starving_vma_is_scanned_from_6_12() {
        for (version, scanned) in [("6.9", false), ("6.12", true)] {
            let (mut k, t) = seen_vma(version, 10);
            k.mms[0].vmas[0].numab.as_mut().unwrap().prev_scan_seq = 2;
            let gate = k.vma_numab_gate(t, 0, false);
            assert_eq!(gate == VmaGate::Scan, scanned, "{version}: {gate:?}");
        }
    }

    /// 6.7+: a VMA completed in this pass (prev_scan_seq == seq) is passed by and the scan
    /// offset moves past it; before 6.7 nothing records a completed VMA.
    #[test]
    fn completed_vma_is_passed_by_from_6_7() {
        let (mut k, t) = seen_vma("6.12", 3);
        k.mms[0].vmas[0].numab.as_mut().unwrap().prev_scan_seq = 3;
        assert_eq!(k.vma_numab_gate(t, 0, true), VmaGate::Skip(NumaVmaSkip::SeqCompleted));
        assert_eq!(k.mms[0].numa_scan_offset, k.mms[0].vmas[0].end());
        assert_eq!(k.trace.skip_vma[NumaVmaSkip::SeqCompleted as usize], 1);
    }
}
