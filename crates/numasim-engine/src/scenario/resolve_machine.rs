//! `[machine]` of a scenario -> [`Machine`]: topology, memory types, the cost table and the
//! provenance of its constants, collecting every problem with its location.

use super::raw::*;
use super::Machine;
use crate::cost::{Interconnect, COST_KEYS};
use crate::error::ScenarioProblem;
use crate::mm::memory_tiers::MemoryType;
use crate::topology::{Topology, MAX_NODES};
use std::collections::BTreeMap;

type Problems = Vec<ScenarioProblem>;

/// The kinds of `[machine.source]` (issue 28): a datasheet or stated fact, a measurement, a
/// fit to a named experiment's own runs (its figures are then in-sample), an estimate.
pub const SOURCE_KINDS: [&str; 4] = ["spec", "measured", "derived", "assumed"];
const SOURCE_TOP_KEYS: [&str; 11] = ["nodes", "cpus_per_node", "smt", "memory_gib_per_node", "memory_type", "hmat", "distances", "fragmentation", "host_cores", "steal_in_runtime", "tick_sys_share"];

/// `[machine.source]`: every key a machine or cost constant, every value "KIND: citation".
fn check_sources(source: Option<&BTreeMap<String, String>>, p: &mut Problems) {
    for (key, v) in source.into_iter().flatten() {
        let loc = format!("machine.source.{key}");
        if !SOURCE_TOP_KEYS.contains(&key.as_str()) && !COST_KEYS.contains(&key.as_str()) {
            p.push(ScenarioProblem::new(loc, "unknown_key", "not a machine or [machine.cost] constant"));
            continue;
        }
        let kind = v.split(':').next().unwrap_or("").trim();
        if !SOURCE_KINDS.contains(&kind) || !v.contains(':') {
            p.push(ScenarioProblem::new(loc, "invalid_value", format!("\"KIND: citation\" with KIND one of {}, got {v:?}", SOURCE_KINDS.join(", "))));
        }
    }
}

/// `machine.KEY`, one value per node (or one for all): missing, or a list of the wrong
/// length, is a problem.
fn per_node<T: Clone>(raw: Option<&PerNode<T>>, nodes: usize, key: &str, what: &str, p: &mut Problems) -> Option<Vec<T>> {
    let loc = format!("machine.{key}");
    match raw.map(|c| c.expand(nodes)) {
        None => {
            p.push(ScenarioProblem::new(loc, "invalid_value", "missing"));
            None
        }
        Some(None) => {
            p.push(ScenarioProblem::new(loc, "impossible_topology", format!("needs one {what} per node ({nodes} nodes)")));
            None
        }
        Some(v) => v,
    }
}

pub(super) fn resolve_machine(raw: Option<RawMachine>, p: &mut Problems) -> Option<Machine> {
    let Some(m) = raw else {
        p.push(ScenarioProblem::new("machine", "invalid_value", "missing [machine]"));
        return None;
    };
    let start = p.len();
    check_sources(m.source.as_ref(), p);
    let bad = |p: &mut Problems, loc: &str, msg: String| p.push(ScenarioProblem::new(loc, "impossible_topology", msg));
    let nodes = match m.nodes {
        None => {
            p.push(ScenarioProblem::new("machine.nodes", "invalid_value", "missing: give `nodes` or a `profile`"));
            return None;
        }
        Some(n) if n < 1 => {
            bad(p, "machine.nodes", format!("a machine needs at least one node, got {n}"));
            return None;
        }
        Some(n) if n as usize > MAX_NODES => {
            bad(p, "machine.nodes", format!("at most {MAX_NODES} nodes are supported, got {n}"));
            return None;
        }
        Some(n) => n as usize,
    };
    let smt = m.smt.unwrap_or(1);
    if !(1..=8).contains(&smt) {
        bad(p, "machine.smt", format!("SMT threads per core must be 1..=8, got {smt}"));
    }
    let cpus = match per_node(m.cpus_per_node.as_ref(), nodes, "cpus_per_node", "CPU count", p) {
        None => None,
        Some(v) => {
            for (n, &c) in v.iter().enumerate() {
                if c < 0 {
                    bad(p, "machine.cpus_per_node", format!("node {n}: {c} CPUs"));
                } else if smt >= 1 && c % smt != 0 {
                    bad(p, "machine.cpus_per_node", format!("node {n}: {c} CPUs is not a multiple of smt = {smt}"));
                } else if c > 4096 {
                    bad(p, "machine.cpus_per_node", format!("node {n}: {c} CPUs is more than 4096"));
                }
            }
            if v.iter().all(|&c| c < 1) {
                bad(p, "machine.cpus_per_node", "every node is CPU-less: at least one node needs CPUs".to_string());
            }
            Some(v.into_iter().map(|c| c.max(0) as usize).collect::<Vec<_>>())
        }
    };
    let memory_type = resolve_memory_type(m.memory_type.as_ref(), nodes, cpus.as_deref(), p);
    let mem = match per_node(m.memory_gib_per_node.as_ref(), nodes, "memory_gib_per_node", "size", p) {
        None => None,
        Some(v) => {
            for (n, &g) in v.iter().enumerate() {
                if !(g > 0.0 && g <= 65536.0) {
                    bad(p, "machine.memory_gib_per_node", format!("node {n}: {g} GiB is not in (0, 65536]"));
                }
            }
            Some(v.iter().map(|g| (g * 262144.0) as u64).collect::<Vec<_>>())
        }
    };
    let distances = match &m.distances {
        None => (0..nodes).map(|a| (0..nodes).map(|b| if a == b { 10 } else { 20 }).collect()).collect(),
        Some(d) => {
            if d.len() != nodes || d.iter().any(|r| r.len() != nodes) {
                bad(p, "machine.distances", format!("must be a {nodes}x{nodes} matrix (SLIT)"));
            } else {
                for a in 0..nodes {
                    for b in 0..nodes {
                        let v = d[a][b];
                        if a == b && v != 10 {
                            bad(p, "machine.distances", format!("distance[{a}][{a}] must be 10 (SLIT local), got {v}"));
                        } else if a != b && !(11..=254).contains(&v) {
                            bad(p, "machine.distances", format!("distance[{a}][{b}] must be in 11..=254, got {v}"));
                        }
                    }
                }
            }
            d.iter().map(|r| r.iter().map(|&v| v.clamp(0, 255) as u32).collect()).collect()
        }
    };
    let fragmentation = m.fragmentation.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&fragmentation) {
        p.push(ScenarioProblem::new("machine.fragmentation", "invalid_value", format!("a probability in [0, 1], got {fragmentation}")));
    }
    let host_cores = m.host_cores.and_then(|h| {
        if (1.0..=4096.0).contains(&h) {
            Some(h)
        } else {
            p.push(ScenarioProblem::new("machine.host_cores", "invalid_value", format!("the host cores a VM's vCPUs share, 1..=4096 (fractional: a measured capacity), got {h}")));
            None
        }
    });
    let cost = match m.cost {
        None => {
            p.push(ScenarioProblem::new("machine.cost", "invalid_value", "missing [machine.cost] (or give a profile)"));
            None
        }
        Some(c) => {
            check_cost(&c, nodes, p);
            Some(c)
        }
    };
    if p.len() > start {
        return None;
    }
    let topology = Topology::build(&cpus?, smt as usize, mem?, distances);
    let steal_in_runtime = m.steal_in_runtime.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&steal_in_runtime) {
        p.push(ScenarioProblem::new("machine.steal_in_runtime", "invalid_value", format!("a share in [0, 1], got {steal_in_runtime}")));
    } else if m.steal_in_runtime.is_some() && host_cores.is_none() {
        p.push(ScenarioProblem::new("machine.steal_in_runtime", "invalid_value", "only for a VM: give machine.host_cores too"));
    }
    let tick_sys_share = m.tick_sys_share.unwrap_or(0.0);
    if !(0.0..1.0).contains(&tick_sys_share) {
        p.push(ScenarioProblem::new("machine.tick_sys_share", "invalid_value", format!("a share in [0, 1), got {tick_sys_share}")));
    }
    Some(Machine {
        name: m.name.or(m.profile).unwrap_or_else(|| "custom".into()),
        description: m.description.unwrap_or_default(),
        topology,
        fragmentation,
        host_cores,
        steal_in_runtime,
        tick_sys_share,
        memory_type,
        hmat: m.hmat.unwrap_or(false),
        cost: cost?,
    })
}

/// `machine.memory_type`: "dram" or "kmem" per node; a kmem node (device memory onlined by
/// dax/kmem) has no CPUs.
fn resolve_memory_type(raw: Option<&PerNode<String>>, nodes: usize, cpus: Option<&[usize]>, p: &mut Problems) -> Vec<MemoryType> {
    let Some(raw) = raw else { return vec![MemoryType::Dram; nodes] };
    let Some(v) = raw.expand(nodes) else {
        p.push(ScenarioProblem::new("machine.memory_type", "impossible_topology", format!("needs one type per node ({nodes} nodes)")));
        return vec![MemoryType::Dram; nodes];
    };
    v.iter()
        .enumerate()
        .map(|(n, t)| match t.as_str() {
            "dram" => MemoryType::Dram,
            "kmem" => {
                if cpus.is_some_and(|c| c[n] > 0) {
                    p.push(ScenarioProblem::new("machine.memory_type", "impossible_topology", format!("node {n}: a kmem node (dax/kmem device memory) has no CPUs")));
                }
                MemoryType::Kmem
            }
            other => {
                p.push(ScenarioProblem::new("machine.memory_type", "invalid_value", format!("node {n}: unknown memory type `{other}`, expected dram or kmem")));
                MemoryType::Dram
            }
        })
        .collect()
}

fn check_cost(c: &crate::cost::CostProfile, nodes: usize, p: &mut Problems) {
    let mut square = |name: &str, m: &Vec<Vec<f64>>| {
        if m.len() != nodes || m.iter().any(|r| r.len() != nodes) {
            p.push(ScenarioProblem::new(format!("machine.cost.{name}"), "impossible_topology", format!("must be a {nodes}x{nodes} matrix")));
        } else if m.iter().flatten().any(|v| !(*v > 0.0 && v.is_finite())) {
            p.push(ScenarioProblem::new(format!("machine.cost.{name}"), "invalid_value", "entries must be positive"));
        }
    };
    square("stream_gibps", &c.stream_gibps);
    square("page_store_gibps", &c.page_store_gibps);
    square("touch_gibps", &c.touch_gibps);
    square("latency_ns", &c.latency_ns);
    let link = match &c.interconnect_gibps {
        Interconnect::Uniform(v) => *v,
        Interconnect::PerPair(m) => {
            // the diagonal is never used: a node's own traffic takes no link
            let off_diagonal = m.iter().enumerate().map(|(a, r)| r.iter().enumerate().map(|(b, &v)| if a == b { 1.0 } else { v }).collect()).collect();
            square("interconnect_gibps", &off_diagonal);
            1.0
        }
    };
    if c.node_bandwidth_gibps.len() != nodes {
        p.push(ScenarioProblem::new("machine.cost.node_bandwidth_gibps", "impossible_topology", format!("needs {nodes} entries")));
    }
    if !(c.dram_bytes_per_store >= 1.0 && c.dram_bytes_per_store.is_finite()) {
        p.push(ScenarioProblem::new("machine.cost.dram_bytes_per_store", "invalid_value", format!("must be at least 1 (a stored byte is written once), got {}", c.dram_bytes_per_store)));
    }
    let positive = [("smt_share", c.smt_share), ("interconnect_gibps", link), ("page_copy_gibps", c.page_copy_gibps)];
    for (name, v) in positive.into_iter().chain(c.node_bandwidth_gibps.iter().map(|&v| ("node_bandwidth_gibps", v))) {
        if !(v > 0.0 && v.is_finite()) {
            p.push(ScenarioProblem::new(format!("machine.cost.{name}"), "invalid_value", format!("must be positive, got {v}")));
        }
    }
    let non_negative = [
        ("fault_entry_exit_ns", c.fault_entry_exit_ns),
        ("clear_page_ns", c.clear_page_ns),
        ("pte_update_ns", c.pte_update_ns),
        ("hint_fault_ns", c.hint_fault_ns),
        ("migrate_page_ns", c.migrate_page_ns),
        ("ipi_send_ns", c.ipi_send_ns),
        ("ipi_per_target_ns", c.ipi_per_target_ns),
        ("ipi_receive_ns", c.ipi_receive_ns),
        ("tlb_flush_local_all_ns", c.tlb_flush_local_all_ns),
        ("tlb_flush_local_one_ns", c.tlb_flush_local_one_ns),
        ("clone_ns", c.clone_ns),
        ("vm_exit_ns", c.vm_exit_ns),
        ("ept_violation_ns", c.ept_violation_ns),
    ];
    for (name, v) in non_negative {
        if !(v >= 0.0 && v.is_finite()) {
            p.push(ScenarioProblem::new(format!("machine.cost.{name}"), "invalid_value", format!("must be >= 0, got {v}")));
        }
    }
    for (name, v) in [("clock_read_ns", &c.clock_read_ns), ("clock_read_sys_ns", &c.clock_read_sys_ns)] {
        if v.values().is_empty() || v.values().iter().any(|x| !(*x >= 0.0 && x.is_finite())) {
            p.push(ScenarioProblem::new(
                format!("machine.cost.{name}"),
                "invalid_value",
                format!("must be a number >= 0, or a non-empty list of them (one per number of other busy CPUs), got {:?}", v.values()),
            ));
        }
    }
}
