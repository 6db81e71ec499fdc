//! `run.trace`: what the kernel's tracepoints would show of a run (issue 31), for `numasim run
//! --trace` (a Perfetto trace and a table): every scan window (`task_numa_work`), numa_group
//! creations and joins, preferred-node changes (`sched_setnuma`'s effect) and, per 10 ms bin,
//! `migrate_pages()` calls (`mm_migrate_pages`) and TLB-flush IPI rounds (`tlb_flush`). The
//! scheduler's own tracepoints are `numa_events` (trace.rs), recorded with or without it. Off
//! (the default) nothing is recorded and the result has no `trace` key; on, the run's
//! behaviour is unchanged (only records are added).

use std::collections::BTreeMap;

use crate::kernel::Kernel;
use crate::mm::migrate::MigrateMode;
use crate::sched::numa::scan_vma::NumaVmaSkip;
use crate::vmstat::VmEvent;
use serde_json::{json, Map, Value};

/// The bin of the aggregated records (migrations, TLB rounds), ns.
pub const BIN_NS: u64 = 10_000_000;
/// Records kept per list (windows, groups, preferred); later ones are counted as dropped.
pub const MAX_RECORDS: usize = 200_000;

/// Why `migrate_pages()` ran (the kernel's `enum migrate_reason`, as far as the model calls it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MigrateReason {
    /// MR_NUMA_MISPLACED between nodes of one tier
    NumaMisplaced,
    /// MR_NUMA_MISPLACED from a lower tier (counted as a promotion)
    Promotion,
    /// MR_DEMOTION
    Demotion,
    /// MR_SYSCALL: migrate_pages(2), move_pages(2)
    Syscall,
}

impl MigrateReason {
    pub fn name(self) -> &'static str {
        match self {
            Self::NumaMisplaced => "numa_misplaced",
            Self::Promotion => "promotion",
            Self::Demotion => "demotion",
            Self::Syscall => "syscall",
        }
    }
}

/// Where a flush IPI round was sent from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FlushSite {
    /// arch/x86/mm/tlb.c: flush_tlb_mm_range (scan windows, unbatched unmaps)
    MmRange,
    /// arch/x86/mm/tlb.c: arch_tlbbatch_flush (batched migration and reclaim unmaps)
    Batch,
}

impl FlushSite {
    pub fn name(self) -> &'static str {
        match self {
            Self::MmRange => "flush_tlb_mm_range",
            Self::Batch => "arch_tlbbatch_flush",
        }
    }
}

/// One task_numa_work window that passed the numa_next_scan gate.
#[derive(Debug, Clone, Copy)]
pub struct WindowRec {
    pub start: u64,
    pub end: u64,
    pub pid: u32,
    pub tgid: u32,
    pub cpu: usize,
    pub seq: u32,
    pub period_ms: u32,
    pub pte_updates: u64,
    pub huge_pmd_updates: u64,
    pub vmas: u32,
    /// sched_skip_vma_numa hits by reason (NumaVmaSkip order)
    pub skipped: [u64; 7],
}

/// What a window started with, to take the differences at its end.
#[derive(Debug, Clone, Copy)]
pub struct WindowStart {
    start: u64,
    task: usize,
    seq: u32,
    period_ms: u32,
    pte_updates: u64,
    huge_pmd_updates: u64,
    skipped: [u64; 7],
}

#[derive(Debug, Clone, Default)]
pub struct EventTrace {
    /// (ns, task, created (else joined), gid, nr_tasks after)
    pub groups: Vec<(u64, usize, bool, u32, u32)>,
    /// (ns, task, from, to)
    pub preferred: Vec<(u64, usize, Option<usize>, Option<usize>)>,
    /// (bin, reason, src, dst) -> [calls, succeeded, failed]
    pub migrate: BTreeMap<(u64, MigrateReason, usize, usize), [u64; 3]>,
    /// (bin, site) -> [rounds, ipis]
    pub tlb: BTreeMap<(u64, FlushSite), [u64; 2]>,
    /// dropped groups, preferred
    pub dropped: [u64; 2],
}

impl Kernel {
    fn tracepoints(&mut self) -> Option<&mut EventTrace> {
        self.trace.tracepoints.as_deref_mut()
    }

    /// A scan window of task `t` begins (now, at `self.clock`); None when windows are not
    /// recorded.
    pub fn trace_window_begin(&self, t: usize) -> Option<WindowStart> {
        if !self.trace.records_windows() {
            return None;
        }
        let p = &self.tasks[t];
        Some(WindowStart {
            start: self.clock,
            task: t,
            seq: p.numa.scan_seq,
            period_ms: p.numa.scan_period,
            pte_updates: self.vmstat.get(VmEvent::NumaPteUpdates),
            huge_pmd_updates: self.vmstat.get(VmEvent::NumaHugePteUpdates),
            skipped: self.trace.skip_vma,
        })
    }

    /// The window begun as `w` ended at `end` ns, having walked `vmas` VMAs.
    pub fn trace_window_end(&mut self, w: WindowStart, end: u64, vmas: u32) {
        let p = &self.tasks[w.task];
        let (pid, tgid, cpu) = (p.pid, p.tgid, p.cpu);
        let mut skipped = self.trace.skip_vma;
        for (s, s0) in skipped.iter_mut().zip(w.skipped) {
            *s -= s0;
        }
        let rec = WindowRec {
            start: w.start,
            end,
            pid,
            tgid,
            cpu,
            seq: w.seq,
            period_ms: w.period_ms,
            pte_updates: self.vmstat.get(VmEvent::NumaPteUpdates) - w.pte_updates,
            huge_pmd_updates: self.vmstat.get(VmEvent::NumaHugePteUpdates) - w.huge_pmd_updates,
            vmas,
            skipped,
        };
        if self.trace.scan_windows.len() < MAX_RECORDS {
            self.trace.scan_windows.push(rec);
        } else {
            self.trace.scan_windows_dropped += 1;
        }
    }

    /// Task `t` created (`created`) or joined numa_group `g`.
    pub fn trace_group(&mut self, t: usize, created: bool, g: usize) {
        let (now, gid, nr) = (self.clock, self.numa_groups[g].gid, self.numa_groups[g].nr_tasks);
        let Some(tr) = self.tracepoints() else { return };
        if tr.groups.len() < MAX_RECORDS {
            tr.groups.push((now, t, created, gid, nr));
        } else {
            tr.dropped[0] += 1;
        }
    }

    /// Task `t`'s preferred node changes from `from` (its value now) to `to`.
    pub fn trace_preferred(&mut self, t: usize, to: Option<usize>) {
        let (now, from) = (self.clock, self.tasks[t].numa.preferred_nid);
        if from == to {
            return;
        }
        let Some(tr) = self.tracepoints() else { return };
        if tr.preferred.len() < MAX_RECORDS {
            tr.preferred.push((now, t, from, to));
        } else {
            tr.dropped[1] += 1;
        }
    }

    /// Why the migrate_pages() call from `src` to `dst` in `mode` runs.
    pub fn migrate_reason(&self, mode: MigrateMode, src: usize, dst: usize) -> MigrateReason {
        if self.migrating_for_demotion {
            MigrateReason::Demotion
        } else if mode == MigrateMode::Sync {
            MigrateReason::Syscall
        } else if !self.tiers.toptier[src] && self.tiers.toptier[dst] {
            MigrateReason::Promotion
        } else {
            MigrateReason::NumaMisplaced
        }
    }

    /// A migrate_pages() call: its pages counted under its first page's node `src`.
    pub fn trace_migrate(&mut self, reason: MigrateReason, src: usize, dst: usize, succeeded: u64, failed: u64) {
        let bin = self.clock / BIN_NS;
        let Some(tr) = self.tracepoints() else { return };
        let e = tr.migrate.entry((bin, reason, src, dst)).or_default();
        e[0] += 1;
        e[1] += succeeded;
        e[2] += failed;
    }

    /// A flush IPI round to `ipis` CPUs.
    pub fn trace_flush(&mut self, site: FlushSite, ipis: usize) {
        let bin = self.clock / BIN_NS;
        let Some(tr) = self.tracepoints() else { return };
        let e = tr.tlb.entry((bin, site)).or_default();
        e[0] += 1;
        e[1] += ipis as u64;
    }

    /// The result's `trace` object.
    pub fn trace_json(&self, tr: &EventTrace) -> Value {
        let s = |ns: u64| ns as f64 / 1e9;
        let pid = |t: usize| self.tasks[t].pid;
        let tgid = |t: usize| self.tasks[t].tgid;
        let nid = |n: Option<usize>| n.map_or(-1, |n| n as i64);
        let windows: Vec<Value> = self
            .trace
            .scan_windows
            .iter()
            .map(|w| {
                let skipped: Map<String, Value> = NumaVmaSkip::ALL.iter().filter(|r| w.skipped[**r as usize] > 0).map(|r| (r.name().to_string(), json!(w.skipped[*r as usize]))).collect();
                json!({"t": s(w.start), "end": s(w.end), "task": w.pid, "tgid": w.tgid, "cpu": w.cpu, "seq": w.seq, "period_ms": w.period_ms,
                       "pte_updates": w.pte_updates, "huge_pmd_updates": w.huge_pmd_updates, "vmas": w.vmas, "skipped": skipped})
            })
            .collect();
        let groups: Vec<Value> = tr
            .groups
            .iter()
            .map(|&(t, task, created, gid, nr)| json!({"t": s(t), "event": if created { "create" } else { "join" }, "task": pid(task), "tgid": tgid(task), "gid": gid, "nr_tasks": nr}))
            .collect();
        let preferred: Vec<Value> = tr.preferred.iter().map(|&(t, task, from, to)| json!({"t": s(t), "task": pid(task), "tgid": tgid(task), "from": nid(from), "to": nid(to)})).collect();
        let migrate: Vec<Value> = tr
            .migrate
            .iter()
            .map(|(&(bin, reason, src, dst), c)| json!({"t": s(bin * BIN_NS), "reason": reason.name(), "src": src, "dst": dst, "calls": c[0], "succeeded": c[1], "failed": c[2]}))
            .collect();
        let tlb: Vec<Value> = tr.tlb.iter().map(|(&(bin, site), c)| json!({"t": s(bin * BIN_NS), "reason": site.name(), "rounds": c[0], "ipis": c[1]})).collect();
        json!({"bin_ms": BIN_NS / 1_000_000, "scan_windows": windows, "groups": groups, "preferred": preferred, "migrate": migrate, "tlb": tlb,
               "dropped": {"scan_windows": self.trace.scan_windows_dropped, "groups": tr.dropped[0], "preferred": tr.dropped[1]}})
    }
}
