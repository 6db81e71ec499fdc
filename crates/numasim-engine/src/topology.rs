//! Machine topology: nodes, CPUs, SMT siblings, SLIT distances (kernel/sched/topology.c vocabulary).

use serde::Serialize;

/// Most nodes a scenario may have: x86_64's CONFIG_NODES_SHIFT = 6 of distribution kernels
/// (MAX_NUMNODES = 64). Per-node arrays sized by it are small and loops run over the machine's
/// `nr_nodes` only; per-page-table node counts are sized by `nr_nodes` (mm/pgtable.rs).
pub const MAX_NODES: usize = 64;

/// A set of nodes, bit n = node n (nodemask_t of MAX_NUMNODES = 64).
pub type NodeMask = u64;

/// The mask of node `n` alone (node_set).
#[inline]
pub const fn node_bit(n: usize) -> NodeMask {
    1 << n
}

/// The mask of nodes `0..nr`.
pub const fn nodes_below(nr: usize) -> NodeMask {
    if nr >= MAX_NODES {
        NodeMask::MAX
    } else {
        (1 << nr) - 1
    }
}

/// The nodes of `mask`, ascending (for_each_node_mask).
pub fn mask_nodes(mask: NodeMask) -> impl Iterator<Item = usize> {
    let mut m = mask;
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let n = m.trailing_zeros() as usize;
            m &= m - 1;
            n
        })
    })
}

/// SLIT distance of a node to itself (include/linux/topology.h: LOCAL_DISTANCE).
pub const LOCAL_DISTANCE: u32 = 10;

/// How the nodes are connected, as NUMA placement sees it (kernel/sched/topology.c:
/// enum numa_topology_type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NumaTopologyType {
    /// Every node at one distance from every other (at most two distance levels).
    Direct,
    /// The two furthest nodes share a nearer neighbour: traffic hops through nodes.
    GluelessMesh,
    /// The furthest nodes have no nearer node in common: groups of nodes joined by a backplane.
    Backplane,
}

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
    /// The distinct distances, ascending (sched_domains_numa_distance; the first is local).
    pub numa_distances: Vec<u32>,
    /// The largest distance (sched_max_numa_distance).
    pub max_numa_distance: u32,
    pub numa_topology_type: NumaTopologyType,
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
        // sched_init_numa: every distance between two nodes with CPUs is one level (CPU-less
        // nodes left out since 0fb3978b0aac, 5.17)
        let cpu_nodes: Vec<usize> = (0..cpus_per_node.len()).filter(|&n| cpus_per_node[n] > 0).collect();
        let mut numa_distances: Vec<u32> = cpu_nodes.iter().flat_map(|&a| cpu_nodes.iter().map(move |&b| (a, b))).map(|(a, b)| distance[a][b]).collect();
        numa_distances.sort_unstable();
        numa_distances.dedup();
        let max_numa_distance = numa_distances.last().copied().unwrap_or(LOCAL_DISTANCE);
        let cpu_distance: Vec<Vec<u32>> = cpu_nodes.iter().map(|&a| cpu_nodes.iter().map(|&b| distance[a][b]).collect()).collect();
        let numa_topology_type = init_numa_topology_type(&cpu_distance, numa_distances.len(), max_numa_distance);
        Topology { nr_nodes, cpu_node, cpu_core, smt, node_cpus, cpu_siblings, zonelist, node_pages, distance, numa_distances, max_numa_distance, numa_topology_type }
    }

    /// SLIT distance from node `a` to node `b`.
    pub fn node_distance(&self, a: usize, b: usize) -> u32 {
        self.distance[a][b]
    }

    /// Whether two nodes are `dist` apart somewhere in the machine.
    // kernel/sched/topology.c: find_numa_distance
    pub fn find_numa_distance(&self, dist: u32) -> bool {
        self.numa_distances.contains(&dist)
    }

    /// node_state(node, N_CPU).
    pub fn has_cpu(&self, node: usize) -> bool {
        !self.node_cpus[node].is_empty()
    }

    /// `node` if it has CPUs, else the nearest node that has (the lowest id among ties).
    pub fn nearest_cpu_node(&self, node: usize) -> usize {
        if self.has_cpu(node) {
            return node;
        }
        (0..self.nr_nodes).filter(|&n| self.has_cpu(n)).min_by_key(|&n| (self.distance[node][n], n)).unwrap_or(node)
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

/// Classify the topology from its distance levels and its two furthest nodes.
// kernel/sched/topology.c: init_numa_topology_type
fn init_numa_topology_type(distance: &[Vec<u32>], levels: usize, max: u32) -> NumaTopologyType {
    if levels <= 2 {
        return NumaTopologyType::Direct;
    }
    let n = distance.len();
    // the first pair found at the largest distance decides, as the kernel's loop does
    for a in 0..n {
        for b in 0..n {
            if distance[a][b] < max {
                continue;
            }
            let intermediary = (0..n).any(|c| distance[a][c] < max && distance[b][c] < max);
            return if intermediary { NumaTopologyType::GluelessMesh } else { NumaTopologyType::Backplane };
        }
    }
    NumaTopologyType::Direct
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nodemask_t of MAX_NUMNODES = 64: node 63 is a member like node 0, and the mask of all
    /// nodes does not overflow.
    #[test]
    fn node_masks_hold_64_nodes() {
        assert_eq!(nodes_below(64), u64::MAX);
        assert_eq!(nodes_below(3), 0b111);
        let m = node_bit(0) | node_bit(9) | node_bit(63);
        assert_eq!(mask_nodes(m).collect::<Vec<_>>(), [0, 9, 63]);
        assert_eq!(mask_nodes(0).count(), 0);
    }

    fn topo(distance: Vec<Vec<u32>>) -> Topology {
        let n = distance.len();
        Topology::build(&vec![2; n], 1, vec![1; n], distance)
    }

    /// kernel/sched/topology.c: init_numa_topology_type — two distance levels are DIRECT
    /// whatever the node count; beyond that the furthest pair's common neighbours decide.
    #[test]
    fn topology_type_follows_the_furthest_pair() {
        let two_socket = topo(vec![vec![10, 21], vec![21, 10]]);
        assert_eq!(two_socket.numa_topology_type, NumaTopologyType::Direct);
        assert_eq!((two_socket.max_numa_distance, two_socket.numa_distances.clone()), (21, vec![10, 21]));
        let four_direct = topo((0..4).map(|a| (0..4).map(|b| if a == b { 10 } else { 20 }).collect()).collect());
        assert_eq!(four_direct.numa_topology_type, NumaTopologyType::Direct);
        // 4 sockets in a ring: 0-2 and 1-3 are two hops apart, through 1 or 3 (or 0 or 2)
        let ring = topo(vec![vec![10, 20, 30, 20], vec![20, 10, 20, 30], vec![30, 20, 10, 20], vec![20, 30, 20, 10]]);
        assert_eq!(ring.numa_topology_type, NumaTopologyType::GluelessMesh);
        // 2 sockets x 2 dies: the dies of a socket are near, the sockets share no node
        let backplane = topo(vec![vec![10, 12, 32, 32], vec![12, 10, 32, 32], vec![32, 32, 10, 12], vec![32, 32, 12, 10]]);
        assert_eq!(backplane.numa_topology_type, NumaTopologyType::Backplane);
        assert!(backplane.find_numa_distance(12) && !backplane.find_numa_distance(20));
    }
}
