//! kernel/sched/fair.c's NUMA-balancing section, split by concern.

pub mod fault;
pub mod group;
pub mod placement;
pub mod scan;
pub mod task_migrate;
