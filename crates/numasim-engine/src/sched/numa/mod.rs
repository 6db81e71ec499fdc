//! kernel/sched/fair.c's NUMA-balancing section, split by concern.

pub mod fault;
pub mod group;
pub mod numa_stats;
pub mod placement;
pub mod scan;
pub mod scan_period;
pub mod scan_vma;
pub mod task_migrate;
#[cfg(test)]
mod tests_migrate;
pub mod tiering;
pub mod weights;
