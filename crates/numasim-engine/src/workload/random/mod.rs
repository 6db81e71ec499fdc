//! Random access streams (pmbench) without visiting each access.
//!
//! All threads of a process draw pages from one fixed distribution p(k). Between NUMA events an
//! access costs the mean latency over the populated pages, kept as probability mass per node
//! (O(nodes)). A page that needs a fault on its next access (not yet populated, made PROT_NONE
//! by the scanner, read-only after a migration) gets a threshold on the process's access
//! counter drawn from the geometric distribution of "accesses until page k is hit", so the
//! first toucher is exact in distribution and the cost follows the number of NUMA events.
//!
//! `sampler.rs`: the distribution and its draws; `calendar.rs`, `first_touch.rs`: the pending
//! page events; `access.rs`: the access loop; `notifier.rs`: what mm tells the model
//! (mm/access_notifier.rs); `race.rs`: what its threads do to a page the kernel is working on.

mod access;
mod calendar;
mod first_touch;
mod notifier;
mod race;
mod sampler;

pub use sampler::{latency_bucket, AccessSampler, LATENCY_BUCKETS};
