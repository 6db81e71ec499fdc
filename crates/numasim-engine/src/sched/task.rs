//! struct task_struct: the fields numasim needs, including the NUMA-balancing ones (spec §1.1).

use crate::mm::mempolicy::Mempolicy;
use crate::workload::Op;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Created by the workload, not yet forked/cloned.
    NotStarted,
    Runnable,
    /// Waiting for its children (pthread_join / wait).
    Sleeping,
    Exited,
}

/// NUMA-balancing state of a task (include/linux/sched.h).
#[derive(Debug, Clone, Default)]
pub struct TaskNuma {
    /// ms
    pub scan_period: u32,
    /// ms
    pub scan_period_max: u32,
    /// ns of runtime
    pub node_stamp: u64,
    /// task_numa_work queued (runs on return to user).
    pub work_pending: bool,
    pub scan_seq: u32,
    pub preferred_nid: Option<usize>,
    /// ns (jiffies in the kernel)
    pub migrate_retry: u64,
    /// numa_faults[8 x nodes]: empty until the first hint fault (allocated lazily).
    pub faults: Vec<i64>,
    pub total_faults: i64,
    /// [remote, local, failed migrations], in pages.
    pub faults_locality: [u64; 3],
    pub pages_migrated: u64,
    pub last_task_numa_placement: u64,
    /// Index into Kernel::numa_groups.
    pub group: Option<usize>,
    pub last_sum_exec_runtime: u64,
}

/// Progress through a Sweep op.
#[derive(Debug, Clone, Copy, Default)]
pub struct SweepState {
    pub pass: u32,
    /// Pages done in the current pass (fractional inside a page).
    pub pos: f64,
}

#[derive(Debug, Clone)]
pub struct Task {
    pub pid: u32,
    pub tgid: u32,
    pub mm: usize,
    pub comm: String,
    pub workload: usize,
    pub state: TaskState,
    /// CPU the task is queued on (valid while Runnable).
    pub cpu: usize,
    /// Allowed CPUs (sched_setaffinity).
    pub allowed: Vec<bool>,
    /// Task mempolicy (set_mempolicy).
    pub policy: Mempolicy,
    pub program: Vec<Op>,
    pub pc: usize,
    pub sweep: SweepState,
    /// When the current time-bounded op started (ns), for `Op::SweepFor`.
    pub op_start_ns: Option<f64>,
    pub children: Vec<usize>,
    /// Children the current `Op::Spawn` has cloned so far: one clone per step, each paid for.
    pub spawned_children: usize,
    pub parent: Option<usize>,
    /// Sleeping until this time (ns) rather than for children.
    pub wake_at: Option<u64>,
    /// SIGKILL at this time (ns): the task exits then, whatever its program is doing.
    pub kill_at: Option<u64>,
    /// Accesses made in a timed random-access phase, and its CPU time so far (pmbench).
    pub accesses: f64,
    pub access_ns: f64,
    /// A migrate_pages(2) call in progress: the queued pages and how many are done.
    pub syscall: Option<(Vec<crate::mm::rmap::PageRef>, usize)>,
    pub sum_exec_runtime: u64,
    pub user_ns: f64,
    pub sys_ns: f64,
    /// System time already accounted but not yet taken from the CPU (IPIs, overrun of a tick).
    pub sys_debt_ns: f64,
    /// Time the task will spend waiting (e.g. on a migration entry): off the CPU, not system time.
    pub wait_debt_ns: f64,
    /// Total time spent in migration_entry_wait.
    pub migration_wait_ns: f64,
    pub start_ns: u64,
    pub exit_ns: u64,
    pub numa: TaskNuma,
    /// Node holding most of the pages the task swept, taken when it exits (before exit_mmap).
    pub mem_node_at_exit: Option<usize>,
    /// Bytes streamed to each node in the last tick (the bandwidth-contention mix); one entry
    /// per node of the machine, as the two below.
    pub last_bytes: Vec<f64>,
    pub cur_bytes: Vec<f64>,
    /// ns per page to each memory node this tick, after contention and SMT sharing.
    pub page_cost: Vec<f64>,
    /// Its store streams memset one page per call (a `program`'s threads: `page_store_gibps`),
    /// not a whole range at once (`stream_gibps`).
    pub page_stores: bool,
    /// System time per page of the clock reads `page_cost` includes (a time-bound stream's:
    /// membw.rs, StreamLoop), ns.
    pub clock_sys_per_page: f64,
    /// Small pages the thread touches all the time it runs (its stack, its arguments):
    /// (VMA, page, written).
    pub hot: Vec<(usize, u64, bool)>,
    /// Not part of what is measured (the sampler): the run ends without it, and its CPU time
    /// is not in the run's times.
    pub background: bool,
    /// CPU time left of the sampler's current sample, ns, and the samples it has begun.
    pub busy_left_ns: f64,
    pub samples_begun: u64,
}

impl Task {
    pub fn runnable(&self) -> bool {
        self.state == TaskState::Runnable
    }
}
