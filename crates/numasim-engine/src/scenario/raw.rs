//! What the user wrote: every field optional, unknown keys rejected.

use crate::cost::CostProfile;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub seed: Option<u64>,
    pub machine: Option<RawMachine>,
    pub kernel: Option<RawKernel>,
    pub workload: Option<Vec<RawWorkload>>,
    pub run: Option<RawRun>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PerNode<T> {
    Same(T),
    Each(Vec<T>),
}

impl<T: Clone> PerNode<T> {
    pub fn expand(&self, nodes: usize) -> Option<Vec<T>> {
        match self {
            PerNode::Same(v) => Some(vec![v.clone(); nodes]),
            PerNode::Each(v) if v.len() == nodes => Some(v.clone()),
            PerNode::Each(_) => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMachine {
    pub profile: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub nodes: Option<i64>,
    pub cpus_per_node: Option<PerNode<i64>>,
    pub smt: Option<i64>,
    pub memory_gib_per_node: Option<PerNode<f64>>,
    pub distances: Option<Vec<Vec<i64>>>,
    pub cost: Option<CostProfile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKernel {
    pub numa_balancing: Option<bool>,
    pub hz: Option<i64>,
    pub sysctl: Option<RawSysctl>,
    pub features: Option<BTreeMap<String, bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSysctl {
    pub numa_balancing_scan_delay_ms: Option<i64>,
    pub numa_balancing_scan_period_min_ms: Option<i64>,
    pub numa_balancing_scan_period_max_ms: Option<i64>,
    pub numa_balancing_scan_size_mb: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    pub kind: String,
    pub threads: Option<i64>,
    pub size_mib: Option<i64>,
    pub passes: Option<i64>,
    pub start_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    pub sample_interval_ms: Option<i64>,
    pub max_sim_s: Option<f64>,
}
