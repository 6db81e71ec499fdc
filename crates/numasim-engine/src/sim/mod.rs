pub mod interleave;
pub mod prefetch;
pub mod rng;
