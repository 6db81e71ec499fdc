//! Machine topology: nodes, CPUs, SMT siblings, SLIT distances (kernel/sched/topology.c vocabulary).

use serde::Serialize;

/// Most nodes a scenario may have (arrays sized by it stay on the stack).
pub const MAX_NODES: usize = 8;

#[derive(Debug, Clone, Serialize)]
pub struct Topology {
    pub nr_nodes: usize,
    /// Node of each CPU; CPUs of a node are contiguous, as Linux numbers them on most servers.
    pub cpu_node: Vec<usize>,
    /// Core id of each CPU (SMT siblings share it).
    pub cpu_core: Vec<usize>,
    pub smt: usize,
    pub node_cpus: Vec<Vec<usize>>,
    /// SMT siblings of each CPU, itself excluded.
    pub cpu_siblings: Vec<Vec<usize>>,
    /// Nodes by distance from each node, itself first (the zonelist order).
    pub zonelist: Vec<Vec<usize>>,
    pub node_pages: Vec<u64>,
    pub distance: Vec<Vec<u32>>,
}

impl Topology {
    pub fn build(cpus_per_node: &[usize], smt: usize, node_pages: Vec<u64>, distance: Vec<Vec<u32>>) -> Self {
        let mut cpu_node = Vec::new();
        let mut cpu_core = Vec::new();
        let mut node_cpus = vec![Vec::new(); cpus_per_node.len()];
        let mut core_base = 0;
        for (n, &c) in cpus_per_node.iter().enumerate() {
            for i in 0..c {
                node_cpus[n].push(cpu_node.len());
                cpu_node.push(n);
                cpu_core.push(core_base + i / smt);
            }
            core_base += c / smt;
        }
        let cpu_siblings = (0..cpu_node.len()).map(|c| node_cpus[cpu_node[c]].iter().copied().filter(|&s| s != c && cpu_core[s] == cpu_core[c]).collect()).collect();
        let nr_nodes = cpus_per_node.len();
        let zonelist = (0..nr_nodes)
            .map(|from| {
                let mut v: Vec<usize> = (0..nr_nodes).collect();
                v.sort_by_key(|&n| (distance[from][n], n));
                v
            })
            .collect();
        Topology { nr_nodes, cpu_node, cpu_core, smt, node_cpus, cpu_siblings, zonelist, node_pages, distance }
    }

    pub fn nr_cpus(&self) -> usize {
        self.cpu_node.len()
    }

    /// SMT siblings of `cpu`, itself excluded.
    pub fn siblings(&self, cpu: usize) -> impl Iterator<Item = usize> + '_ {
        self.cpu_siblings[cpu].iter().copied()
    }

    /// Nodes ordered by distance from `from` (itself first), ties by id: the zonelist order.
    pub fn nodes_by_distance(&self, from: usize) -> &[usize] {
        &self.zonelist[from]
    }
}
