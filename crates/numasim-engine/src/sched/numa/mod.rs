//! kernel/sched/fair.c's NUMA-balancing section, split by concern.

pub mod fault;
pub mod group;
pub mod placement;
pub mod scan;
pub mod scan_period;
pub mod scan_vma;
pub mod task_migrate;
