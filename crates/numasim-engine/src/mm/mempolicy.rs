//! Memory policies (mm/mempolicy.c): allocation node choice, vma_policy_mof, mpol_misplaced.

use crate::topology::{mask_nodes, nodes_below, NodeMask};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MpolMode {
    /// MPOL_DEFAULT: falls back to preferred_node_policy[this node] (PREFERRED, MOF | MORON).
    Default,
    Preferred(usize),
    /// MPOL_BIND to a node mask (bit n = node n).
    Bind(NodeMask),
    Local,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mempolicy {
    pub mode: MpolMode,
    /// MPOL_F_NUMA_BALANCING (gives MPOL_F_MOF | MPOL_F_MORON to an explicit policy).
    pub numa_balancing: bool,
}

impl Mempolicy {
    pub const DEFAULT: Mempolicy = Mempolicy { mode: MpolMode::Default, numa_balancing: false };

    pub fn bind(mask: NodeMask) -> Self {
        Mempolicy { mode: MpolMode::Bind(mask), numa_balancing: false }
    }

    /// MPOL_F_MOF: the default policy always has it, explicit ones only with MPOL_F_NUMA_BALANCING.
    pub fn mof(&self) -> bool {
        matches!(self.mode, MpolMode::Default) || self.numa_balancing
    }

    /// The policy as a user would write it: `MPOL_BIND to nodes 0,1`, node numbers, not a mask.
    pub fn describe(&self) -> String {
        match self.mode {
            MpolMode::Default => "the default policy (local node first)".into(),
            MpolMode::Local => "MPOL_LOCAL".into(),
            MpolMode::Preferred(n) => format!("MPOL_PREFERRED to node {n}"),
            MpolMode::Bind(mask) => {
                let nodes: Vec<String> = mask_nodes(mask).map(|n| n.to_string()).collect();
                format!("MPOL_BIND to node{} {}", if nodes.len() == 1 { "" } else { "s" }, nodes.join(","))
            }
        }
    }

    /// Node the allocator tries first and the nodes it may use (policy_node / policy_nodemask).
    pub fn alloc_nodes(&self, this_node: usize, nr_nodes: usize) -> (usize, NodeMask) {
        let all = nodes_below(nr_nodes);
        match self.mode {
            MpolMode::Default | MpolMode::Local => (this_node, all),
            MpolMode::Preferred(n) => (n, all),
            MpolMode::Bind(mask) => {
                let first = if mask & (1 << this_node) != 0 { this_node } else { mask.trailing_zeros() as usize };
                (first, mask)
            }
        }
    }
}

use crate::kernel::Kernel;
use crate::variants::VmaPolicyMof;

impl Kernel {
    /// The policy that governs `vma` for task `t` (__get_vma_policy, then the task's).
    pub fn vma_policy(&self, t: usize, vma: usize) -> Mempolicy {
        let task = &self.tasks[t];
        self.mms[task.mm].vmas[vma].policy.unwrap_or(task.policy)
    }

    /// Whether NUMA balancing may scan `vma`: its policy migrates on fault. Until 7.2 a shmem
    /// VMA, which has `vm_ops->get_policy` (shmem_get_policy), counts only the file's shared
    /// policy: without one (no mbind on it) it is never scanned. Since, a missing shared
    /// policy falls back to the task's, as every other policy lookup does.
    // mm/mempolicy.c: vma_policy_mof (fc3147245d19, v3.13; "fix automatic numa balancing for shmem", 7.2)
    pub fn vma_policy_mof(&self, t: usize, vma: usize) -> bool {
        let v = &self.mms[self.tasks[t].mm].vmas[vma];
        match v.shmem {
            Some(_) if self.variants().vma_policy_mof == VmaPolicyMof::Base => v.policy.is_some_and(|p| p.mof()),
            _ => self.vma_policy(t, vma).mof(),
        }
    }

    /// Node a hinting-fault page should move to, or None (spec §3.1).
    // mm/mempolicy.c: mpol_misplaced
    pub fn mpol_misplaced(&mut self, t: usize, vma: usize, idx: u64, cur: usize) -> Option<usize> {
        let pol = self.vma_policy(t, vma);
        if !pol.mof() {
            return None;
        }
        let thisnid = self.task_node(t);
        let moron = pol.numa_balancing || pol.mode == MpolMode::Default;
        let polnid = match pol.mode {
            // default = preferred_node_policy[thisnid]: PREFERRED this node, MOF | MORON
            MpolMode::Default | MpolMode::Local if cur == thisnid => return None,
            MpolMode::Default | MpolMode::Local => thisnid,
            MpolMode::Preferred(n) if cur == n => return None,
            MpolMode::Preferred(n) => n,
            MpolMode::Bind(mask) => {
                if moron {
                    if mask & (1 << thisnid) == 0 {
                        return None;
                    }
                } else if mask & (1 << cur) != 0 {
                    return None;
                }
                thisnid
            }
        };
        let polnid = if moron {
            if !self.should_numa_migrate_memory(t, vma, idx, cur) {
                return None;
            }
            thisnid
        } else {
            polnid
        };
        (cur != polnid).then_some(polnid)
    }
}

impl Kernel {
    /// Protect one chunk for NUMA hinting; one TLB flush for the whole call. Returns (pages, sys ns).
    // mm/mempolicy.c: change_prot_numa
    pub fn change_prot_numa(&mut self, t: usize, vma: usize, start: u64, end: u64) -> (u64, f64) {
        let notify = self.mmu_notifier_prot_numa(t, vma, start, end);
        let (changed, walked) = self.change_protection_prot_numa(t, vma, start, end);
        let mut cost = notify + (changed + walked) as f64 * self.cost.pte_update_ns;
        if changed > 0 {
            self.count(crate::vmstat::VmEvent::NumaPteUpdates, changed);
            self.events.pte_updates += changed;
            // tlb_finish_mmu: one flush_tlb_mm_range over the gathered range
            let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
            cost += self.flush_tlb_mm_range(mm, cpu, end - start);
        }
        (changed, cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Error messages name nodes, not bitmasks.
    #[test]
    fn describe_names_nodes() {
        assert_eq!(Mempolicy::bind(0b10).describe(), "MPOL_BIND to node 1");
        assert_eq!(Mempolicy::bind(0b101).describe(), "MPOL_BIND to nodes 0,2");
        assert_eq!(Mempolicy { mode: MpolMode::Preferred(3), numa_balancing: false }.describe(), "MPOL_PREFERRED to node 3");
    }
}
