//! The scheduler side: runqueues, placement, load balancing, and NUMA balancing (kernel/sched/).

pub mod balance;
pub mod balance_locality;
pub mod balance_mc;
pub mod core;
pub mod domain;
pub mod numa;
pub mod select;
pub mod stats;
pub mod task;
#[cfg(test)]
pub(crate) mod tests_balance;
#[cfg(test)]
pub(crate) mod tests_placement;
