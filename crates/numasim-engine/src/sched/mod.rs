//! The scheduler side: runqueues, placement, load balancing, and NUMA balancing (kernel/sched/).

pub mod core;
pub mod numa;
pub mod task;
