//! The scheduler's NUMA tracepoints (include/trace/events/sched.h): what task_numa_migrate and
//! the load balancer decided, as a bounded event log in the result (`numa_events`).

use crate::kernel::Kernel;
use serde::Serialize;

/// Events kept per run; later ones are counted, not stored.
pub const MAX_EVENTS: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    /// sched_move_numa: task_numa_migrate moved `pid` to an idle CPU (migrate_task_to).
    MoveNuma,
    /// sched_swap_numa: `pid` and `dst_pid` traded CPUs (migrate_swap).
    SwapNuma,
    /// sched_stick_numa: no better CPU, or the move failed.
    StickNuma,
    /// sched_migrate_task: any move of a task between CPUs (load balancing included).
    MigrateTask,
    /// sched_wakeup_new: a new task's first CPU (fork/clone placement); `src_nid` is the node
    /// of its parent's CPU.
    WakeupNew,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TraceEvent {
    pub t_ns: u64,
    pub event: TraceKind,
    pub pid: u32,
    pub tgid: u32,
    pub src_nid: i32,
    pub dst_nid: i32,
    /// The swapped task (swap_numa, stick_numa of a swap), else 0.
    pub dst_pid: u32,
}

#[derive(Debug, Clone, Default)]
pub struct TraceLog {
    pub events: Vec<TraceEvent>,
    pub dropped: u64,
    /// sched_skip_vma_numa hits by reason (`NumaVmaSkip` order).
    pub skip_vma: [u64; 7],
    /// task_numa_fault calls with TNF_MIGRATE_FAIL (what `numasim validate`'s kprobe counts).
    pub migrate_fail_faults: u64,
    /// `run.trace_faults`: task_numa_fault calls by thread, 10 ms and kind (None: off).
    pub fault_kinds: Option<std::collections::BTreeMap<FaultKind, u64>>,
    /// `run.trace_faults` or `run.trace`: each task_numa_work window that passed the
    /// numa_next_scan gate (at most tracepoints::MAX_RECORDS; the rest counted).
    pub scan_windows: Vec<crate::tracepoints::WindowRec>,
    pub scan_windows_dropped: u64,
    /// `run.trace`: the tracepoints of tracepoints.rs (None: off).
    pub tracepoints: Option<Box<crate::tracepoints::EventTrace>>,
}

/// One kind of hint fault as `numasim validate --trace-faults` counts it in the VM (a kprobe
/// on task_numa_fault): the 10 ms it falls in, the thread, TNF_FAULT_LOCAL, whose pid the
/// page's last_cpupid held (0 none, 1 the faulting thread's, 2 another's), TNF_MIGRATED and
/// TNF_MIGRATE_FAIL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FaultKind {
    pub centisecond: u64,
    pub pid: u32,
    pub local: bool,
    pub last: u8,
    pub migrated: bool,
    pub failed: bool,
}

impl FaultKind {
    pub const LAST: [&'static str; 3] = ["first", "own", "other"];
}

impl TraceLog {
    /// `run.trace_faults`: hint-fault kinds and scan windows are recorded.
    pub fn tracing_faults(&self) -> bool {
        self.fault_kinds.is_some()
    }

    /// Scan windows are recorded (`run.trace_faults` or `run.trace`).
    pub fn records_windows(&self) -> bool {
        self.tracing_faults() || self.tracepoints.is_some()
    }
}

impl Kernel {
    /// Record a tracepoint hit of task `t` (bounded: see MAX_EVENTS).
    pub fn trace_sched(&mut self, event: TraceKind, t: usize, src_nid: Option<usize>, dst_nid: Option<usize>, other: Option<usize>) {
        if self.trace.events.len() >= MAX_EVENTS {
            self.trace.dropped += 1;
            return;
        }
        let nid = |n: Option<usize>| n.map_or(-1, |n| n as i32);
        let e = TraceEvent { t_ns: self.now, event, pid: self.tasks[t].pid, tgid: self.tasks[t].tgid, src_nid: nid(src_nid), dst_nid: nid(dst_nid), dst_pid: other.map_or(0, |o| self.tasks[o].pid) };
        self.trace.events.push(e);
    }
}
