//! Engine errors: every bad input becomes one of these, never a panic.

use serde::Serialize;
use std::fmt;

/// One problem found in a scenario, with where it is and a stable kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScenarioProblem {
    /// Dotted path (`machine.nodes`) or `line L, column C` for syntax errors.
    pub loc: String,
    /// Stable machine-readable kind: `toml_syntax`, `unknown_key`, `invalid_value`,
    /// `impossible_topology`, `exceeds_machine_memory`, `not_modelled`.
    pub kind: String,
    pub msg: String,
}

impl ScenarioProblem {
    /// A problem; the message is kept to one line.
    pub fn new(loc: impl Into<String>, kind: &str, msg: impl Into<String>) -> Self {
        let msg: String = msg.into();
        let msg = msg.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
        Self { loc: loc.into(), kind: kind.to_string(), msg }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The scenario is malformed or impossible; all problems are listed.
    #[error("invalid scenario: {}", format_problems(.0))]
    Scenario(Vec<ScenarioProblem>),
    /// The host cannot hold the simulation state.
    #[error("the simulation needs about {} of host memory but only {} is available", human_bytes(*.needed), human_bytes(*.available))]
    Capacity { needed: u64, available: u64 },
    /// The simulated kernel ran out of memory (e.g. MPOL_BIND node full).
    #[error("simulated out-of-memory at t={at_s:.3}s: {detail}")]
    OutOfMemory { at_s: f64, detail: String },
    /// The run reached a case the engine does not model (it stops rather than guess).
    #[error("not modelled (t={at_s:.3}s): {detail}")]
    NotModelled { at_s: f64, detail: String },
    /// A kernel invariant broke: this is an engine bug.
    #[error("invariant {name} violated at t={at_s:.3}s: {detail}")]
    Invariant { name: String, at_s: f64, detail: String },
}

/// `3.2 GiB`, or `640 MiB` below a GiB: the units a user thinks in, not bytes.
fn human_bytes(bytes: u64) -> String {
    let gib = bytes as f64 / (1u64 << 30) as f64;
    if gib >= 1.0 {
        format!("{gib:.1} GiB")
    } else {
        format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

fn format_problems(p: &[ScenarioProblem]) -> String {
    p.iter().map(|x| format!("{}: {}", x.loc, x.msg)).collect::<Vec<_>>().join("; ")
}

impl Error {
    pub fn scenario(loc: impl Into<String>, kind: &str, msg: impl Into<String>) -> Self {
        Error::Scenario(vec![ScenarioProblem::new(loc, kind, msg)])
    }
}

impl fmt::Display for ScenarioProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.loc, self.msg, self.kind)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    #[test]
    fn capacity_speaks_gib_and_mib() {
        let e = super::Error::Capacity { needed: 3 << 30, available: 512 << 20 };
        assert_eq!(e.to_string(), "the simulation needs about 3.0 GiB of host memory but only 512 MiB is available");
    }
}
