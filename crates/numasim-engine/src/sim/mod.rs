pub mod prefetch;
pub mod rng;
