//! Mechanism variants: for each kernel mechanism whose code changed between 3.19 and the newest
//! release in a way that alters NUMA balancing, the versions the engine implements (one function
//! per variant), each with the commit that introduced it and its first mainline release. A
//! kernel version picks, for every mechanism, the newest variant released at or before it; a
//! scenario may pick another one (`[kernel.variants]`). Binary changes that experiments switch
//! on and off stay in the feature table (features.rs).

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct VariantInfo {
    /// Variant name, the release that brought it ("6.7"), or "base" for the oldest code.
    pub name: &'static str,
    /// Upstream commit (12 hex digits) that introduced it (for the base: the commit whose code
    /// it is, or "").
    pub commit: &'static str,
    /// Whether the commit id and its release were read from a source (false: recalled).
    pub checked: bool,
    /// First mainline release with it ("" for the base: older than every known version).
    pub since: &'static str,
    pub summary: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct MechanismInfo {
    /// Key in `[kernel.variants]`.
    pub name: &'static str,
    /// The kernel function (or the rule inside one) that changed.
    pub title: &'static str,
    /// Kernel file and function.
    pub kernel: &'static str,
    /// Oldest first.
    pub variants: &'static [VariantInfo],
}

macro_rules! mechanisms {
    ($( $field:ident : $ty:ident ($title:literal, $kernel:literal) {
        $( $v:ident = ($vname:literal, $commit:literal, $checked:literal, $since:literal, $summary:literal) ),+ $(,)?
    } )*) => {
        $(
            #[doc = concat!("Variants of `", $title, "` (", $kernel, "), oldest first.")]
            #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
            pub enum $ty { $( $v ),+ }
            impl $ty {
                pub const ALL: &'static [$ty] = &[ $( $ty::$v ),+ ];
            }
        )*

        /// The variant of every mechanism that a run uses.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Variants { $( pub $field: $ty ),* }

        /// Every mechanism, in table order.
        pub const MECHANISMS: &[MechanismInfo] = &[ $(
            MechanismInfo { name: stringify!($field), title: $title, kernel: $kernel, variants: &[ $( VariantInfo { name: $vname, commit: $commit, checked: $checked, since: $since, summary: $summary } ),+ ] }
        ),* ];

        impl Variants {
            /// The variant index chosen for mechanism `i` of [`MECHANISMS`].
            pub fn get(&self, i: usize) -> usize {
                let mut k = 0;
                $( if i == k { return self.$field as usize; } k += 1; )*
                let _ = k;
                usize::MAX
            }
            /// Choose variant `v` of mechanism `i` (indices into [`MECHANISMS`]).
            pub fn set(&mut self, i: usize, v: usize) {
                let mut k = 0;
                $( if i == k { if let Some(&x) = $ty::ALL.get(v) { self.$field = x; } return; } k += 1; )*
                let _ = k;
            }
            /// Every mechanism at its variant `pick(mechanism index, info)`.
            #[allow(unused_assignments)]
            pub fn from_fn(pick: impl Fn(usize, &MechanismInfo) -> usize) -> Self {
                let mut k = 0;
                Variants { $( $field: { let v = $ty::ALL[pick(k, &MECHANISMS[k]).min($ty::ALL.len() - 1)]; k += 1; v } ),* }
            }
        }
    };
}

mechanisms! {
    update_task_scan_period: UpdateTaskScanPeriod ("update_task_scan_period", "kernel/sched/fair.c: update_task_scan_period") {
        Base = ("base", "a22b4b012340", false, "", "one ratio, local/remote: slow down at >= 70% local, else speed up scaled by the private share"),
        V4_14 = ("4.14", "37ec97deb3a8", true, "4.14", "two ratios: slow down when private >= 70% or local >= 70%, else speed up by the larger one"),
    }
    scan_budget: ScanBudget ("task_numa_work budget", "kernel/sched/fair.c: task_numa_work") {
        Base = ("base", "598f0ec0bc99", true, "", "scan_size pages; once a chunk updated PTEs every later chunk counts in full; no virtual cap, no overhead cap"),
        V4_3 = ("4.3", "4620f8c1fda2", false, "4.3", "only chunks that updated a PTE count; at most 8 x scan_size of virtual space per window"),
        V4_5 = ("4.5", "51170840fe91", false, "4.5", "node_stamp += 32 x the runtime the window took (a TCG guest's steal included): scanning costs at most ~3% of runtime"),
    }
    vma_scan_rules: VmaScanRules ("per-VMA scan rules", "kernel/sched/fair.c: task_numa_work, vma_is_accessed") {
        Base = ("base", "", true, "", "every suitable VMA is scanned every pass"),
        V6_4 = ("6.4", "fc137c0ddab2", false, "6.4", "vma_numab_state: 1 s delay for a VMA first seen after the first pass; PID filter (hash_32 bits of faulting tasks, two windows rotated every 4 scan delays, after the access test); unconditional while mm->numa_scan_seq < 2"),
        V6_7 = ("6.7", "f169c62ff7cd", true, "6.7", "rotation before the access test (2e2675db1906); finish a partly scanned VMA (b7a5b537c55c); prev_scan_seq skips VMAs done this pass; with budget left after PID skips, force-scan one VMA"),
        V6_8 = ("6.8", "84db47ca7146", true, "6.8", "the first two passes are unconditional per VMA (start_scan_seq), not per mm"),
        V6_12 = ("6.12", "f22cde4371f3", true, "6.12", "a VMA unscanned for more passes than the process has threads is scanned anyway"),
    }
    new_thread_scan: NewThreadScan ("first scan of a new thread", "kernel/sched/fair.c: init_numa_balancing, task_tick_numa") {
        Base = ("base", "", true, "", "a new thread starts with node_stamp 0: its first scan period is task_scan_start (task_scan_min before 4.14)"),
        V4_20 = ("4.20", "137844759843", false, "4.20", "init_numa_balancing staggers a new thread's node_stamp, so it keeps numa_scan_period = scan_delay until its first placement"),
    }
    placement_call: PlacementCall ("task_numa_placement call", "kernel/sched/fair.c: task_numa_fault") {
        Base = ("base", "", true, "", "every hint fault calls task_numa_placement (which acts once per pass)"),
        V4_19 = ("4.19", "b6a60cf36d49", false, "4.19", "task_numa_placement only when numa_migrate_retry has passed, together with numa_migrate_preferred"),
    }
    lru_add_batch: LruAddBatch ("LRU add batch size", "include/linux/pagevec.h: PAGEVEC_SIZE") {
        Base = ("base", "", true, "", "14 folios per CPU wait off the LRU before joining it"),
        V4_16 = ("4.16", "", true, "4.16", "15 folios (mm: remove cold parameter, Dec 2017)"),
        V6_10 = ("6.10", "", false, "6.10", "31 folios (mm: increase folio batch size, 2024)"),
    }
    migration_dirty: MigrationDirty ("dirty bit of a PTE rebuilt after migration", "mm/migrate.c: remove_migration_pte") {
        Base = ("base", "", true, "", "the new PTE is clean (pte_mkold(mk_pte()), the dirty bit moved to the page): clean until the next store; a THP's PMD is made dirty"),
        V6_1 = ("6.1", "2e3468778dbe", false, "6.1", "the migration entry remembers the dirty bit (is_migration_entry_dirty)"),
    }
    vma_policy_mof: VmaPolicyMof ("migrate-on-fault test of a VMA", "mm/mempolicy.c: vma_policy_mof") {
        Base = ("base", "fc3147245d19", true, "", "a VMA with vm_ops->get_policy (shmem) counts only its shared policy: without one (no mbind) it is never scanned"),
        V7_2 = ("7.2", "", false, "7.2", "__get_vma_policy, falling back to the task's policy: shmem is scanned under the default policy (mm: mempolicy: fix automatic numa balancing for shmem, 2026-06-29; 7.3 has it, 6.1.192 and 6.12.95 do not)"),
    }
    update_scan_period: UpdateScanPeriod ("scan period reset on a node change", "kernel/sched/fair.c: update_scan_period, task_numa_migrate") {
        Base = ("base", "", true, "", "a move by the load balancer keeps the scan period; task_numa_migrate resets it to task_scan_min when it moves the task"),
        V4_19 = ("4.19", "05cbdf4f5c19", false, "4.19", "every cross-node move resets the period to task_scan_start, unless the task has scanned and moves to or away from a non-preferred node (3f9672baaa4f, 05cbdf4f5c19)"),
    }
    vdso_placement: VdsoPlacement ("where exec maps [vvar] and [vdso]", "arch/x86/entry/vdso/vma.c: map_vdso_randomized") {
        Base = ("base", "", true, "", "above the main thread's stack (vdso_addr): after every other VMA"),
        V6_9 = ("6.9", "3c6539b4c177", true, "6.9", "in the mmap region at exec: below the stack, above what the program maps later (x86/vdso: Move vDSO to mmap region)"),
    }
    // ---- scheduler side (issue 26): placement and load balancing across nodes ----
    sd_init: SdInit ("sched domain defaults", "kernel/sched/topology.c: sd_init") {
        Base = ("base", "", true, "", "imbalance_pct 125 (task_numa_migrate's env 112), busy_factor 32"),
        V5_10 = ("5.10", "2208cdaa56c9", false, "5.10", "imbalance_pct 117 (env 108); busy_factor 16 (6e7499135db7)"),
    }
    imb_numa_nr: ImbNumaNr ("sd->imb_numa_nr", "kernel/sched/topology.c: build_sched_domains") {
        Base = ("base", "", true, "", "no per-domain NUMA imbalance allowance"),
        V5_18 = ("5.18", "e496132ebedd", true, "5.18", "one LLC per node: a quarter of the node's CPUs (span >> 2, may be 0); else the LLCs per node; times the span ratio at higher NUMA levels"),
        V6_0 = ("6.0", "026b98a93bbd", true, "6.0", "one LLC per node: an eighth of the node's CPUs (span >> 3), at least 1"),
    }
    adjust_numa_imbalance: AdjustNumaImbalance ("NUMA imbalance allowance", "kernel/sched/fair.c: adjust_numa_imbalance, calculate_imbalance, task_numa_find_cpu") {
        Base = ("base", "", true, "", "no allowance: the load balancer evens out nodes"),
        V5_6 = ("5.6", "b396f52326de", false, "5.6", "load balancer only: no imbalance while the busiest node runs <= 2 tasks"),
        V5_7 = ("5.7", "fb86f5b21192", true, "5.7", "adjust(imb, src_nr) = 0 while the source runs <= 2 tasks; also task_numa_find_cpu"),
        V5_11 = ("5.11", "7d2b5dd0bcc4", true, "5.11", "imbalance <= 2 allowed while the node runs < 25% of its CPUs"),
        V5_18 = ("5.18", "2cfb7a1b031b", true, "5.18", "imbalance <= 2 allowed while the destination, counting the moved task, runs <= sd->imb_numa_nr (`<=` vs `<` not pinned)"),
        V6_0 = ("6.0", "cb29a5c19d2d", true, "6.0", "the load balancer adjusts the whole difference, then halves it"),
    }
    find_idlest_group: FindIdlestGroup ("fork/exec placement", "kernel/sched/fair.c: find_idlest_group (sched_balance_find_dst_group from 6.10)") {
        Base = ("base", "", true, "", "the least loaded group unless the local one is within imbalance_pct/2 (3.x-4.9 code; 4.10's spare-capacity rules not modelled)"),
        V5_5 = ("5.5", "57abff067a08", false, "5.5", "group types (has_spare/fully_busy/overloaded); NUMA with spare: preferred node, else stay while the local node has an idle CPU"),
        V5_11 = ("5.11", "23e6082a522e", true, "5.11", "NUMA with spare: stay while the local node runs < 25% of the domain's CPUs"),
        V5_18 = ("5.18", "2cfb7a1b031b", true, "5.18", "NUMA with spare: stay while local running + 1 <= sd->imb_numa_nr"),
        V6_0 = ("6.0", "cb29a5c19d2d", true, "6.0", "NUMA with spare: stay unless the idle-CPU difference exceeds 2 or local running + 1 > min(imb_numa_nr, allowed local CPUs) (f5b2eeb49991)"),
    }
    task_numa_compare: TaskNumaCompare ("NUMA move or swap choice", "kernel/sched/fair.c: task_numa_migrate, task_numa_find_cpu, task_numa_compare") {
        Base = ("base", "", true, "", "every CPU of the node compared; a move needs free capacity at the destination; load_too_imbalanced with imbalance_pct (3.x code)"),
        V4_1 = ("4.1", "6f9aad0bc372", false, "4.1", "numa_has_capacity: only nodes less loaded than the source are tried"),
        V4_19 = ("4.19", "", false, "4.19", "maymove from load_too_imbalanced (no pct), SMALLIMP 30, numa_migrate_on reservation, preferred node = the found CPU's node"),
        V5_7 = ("5.7", "fb86f5b21192", true, "5.7", "a node with spare capacity takes a move to its cached idle CPU (ff7db0bf24db); preferred-node biases (88cca72c9673); the search stops early (a0f03b617c3b); another idle CPU when reserved (5fb52dd93a2f)"),
        V6_0 = ("6.0", "13ede3315087", true, "6.0", "no swap inside a group while the destination has spare capacity"),
        V6_16 = ("6.16", "", false, "6.16", "kernel threads and mm-less tasks count as idle CPUs (none run in the engine: same as 6.0 here)"),
    }
    migrate_degrades_locality: MigrateDegradesLocality ("load balancer locality test", "kernel/sched/fair.c: migrate_degrades_locality, can_migrate_task") {
        Base = ("base", "", true, "", "migrate_improves_locality (NUMA_FAVOUR_HIGHER) lets a task toward more faults go even if cache hot; NUMA_RESIST_LOWER is off"),
        V4_2 = ("4.2", "2a1ed24ce942", false, "4.2", "one test: leaving the preferred node (while others there are misplaced) or fewer faults degrades; to the preferred node improves; else task_hot"),
        V4_13 = ("4.13", "739294fb03f5", false, "4.13", "an idle CPU balancing ignores locality once the preferred-node rules passed"),
        V4_19 = ("4.19", "", false, "4.19", "compares task_weight/group_weight at the nodes' distance instead of raw faults"),
        V6_14 = ("6.14", "c3856c9ce6b8", true, "6.14", "returns the weight difference: equal weights leave it to task_hot"),
    }
    need_active_balance: NeedActiveBalance ("active balancing trigger", "kernel/sched/fair.c: need_active_balance") {
        Base = ("base", "", true, "", "any imbalance after more than cache_nice_tries + 2 failed balances"),
        V5_12 = ("5.12", "e9b9734b7465", false, "5.12", "only a task-count imbalance (migrate_task) after those failures (imbalanced_active_balance)"),
    }
    active_balance: ActiveBalance ("active balancing and locality", "kernel/sched/fair.c: sched_balance_rq, active_load_balance_cpu_stop, can_migrate_task") {
        Base = ("base", "", true, "", "kicking it sets nr_balance_failed = cache_nice_tries + 1, so it and the next balances ignore cache hotness and locality"),
        V5_13 = ("5.13", "91771246031b", false, "5.13", "LBF_ACTIVE_LB: the stopper ignores them; nr_balance_failed keeps counting"),
    }
    lb_spare_imbalance: LbSpareImbalance ("load balancer with spare capacity", "kernel/sched/fair.c: sched_balance_find_src_group, calculate_imbalance") {
        Base = ("base", "", true, "", "prefer_sibling: balance the task counts whenever busiest runs 2 more than local"),
        V6_6 = ("6.6", "7ff1693236f5", false, "6.6", "sibling_imbalance: only an idle CPU pulls, by task counts per core"),
    }
    delay_dequeue: DelayDequeue ("blocked tasks left on the runqueue", "kernel/sched/fair.c: dequeue_entity (DELAY_DEQUEUE), update_numa_stats") {
        Base = ("base", "", true, "", "a blocking task leaves its runqueue at once"),
        V6_12 = ("6.12", "152e11f6df29", true, "6.12", "a task that blocks while sharing its CPU stays queued (sched_delayed) until it would run again, counted in nr_running"),
        V6_14 = ("6.14", "1a49104496d3", true, "6.14", "update_numa_stats counts h_nr_runnable: delayed tasks no longer weigh in NUMA placement"),
    }
    numa_migrate_retry: NumaMigrateRetry ("numa_migrate_retry of a new task", "kernel/sched/fair.c: init_numa_balancing") {
        Base = ("base", "", true, "", "copied from the parent (dup_task_struct)"),
        V6_0 = ("6.0", "70ce3ea9aa4e", true, "6.0", "zeroed: a new task may try its preferred node at once"),
    }
    // ---- end of the scheduler side ----
    numa_tiering: NumaTiering ("memory tiering mode", "kernel/sched/fair.c: should_numa_migrate_memory; mm/migrate.c: migrate_misplaced_folio") {
        Base = ("base", "", true, "", "kernel.numa_balancing is a boolean: no tiering mode (2 and 3 are refused)"),
        V5_18 = ("5.18", "c574bbe91703", true, "5.18", "NUMA_BALANCING_MEMORY_TIERING: mode 2 scans only slow-tier pages (a1a3a2fc304d), a failed promotion wakes the fast node's kswapd to the promo watermark, pgpromote_success (e39bb6be9f2b); slow-tier folios pass the ordinary two-stage cpupid filter"),
        V6_18 = ("6.18", "", false, "6.18", "promotions without the rate limit (free space enough) count in pgpromote_candidate_nrl, not pgpromote_candidate (Ruan Shiyang, 2025; release recalled)"),
    }
    memory_tiers: MemoryTiers ("memory tier of a node", "mm/memory-tiers.c: set_node_memory_tier, node_is_toptier, establish_demotion_targets") {
        Base = ("base", "", true, "", "no tiers and no demotion: every node is top tier"),
        V5_15 = ("5.15", "79c28a416722", true, "5.15", "no tiers: a node without CPUs is a lower tier (node_is_toptier = N_CPU from 5.18) and the demotion target of its nearest CPU node (26aa2d199d6f)"),
        V6_1 = ("6.1", "", true, "6.1", "abstract distance: DRAM (and a CPU-less node with no driver) 576, dax/kmem 2880 (memory_tier22); top tier up to the slowest tier holding CPUs; demotion to the nearest nodes of the next lower tier"),
        V6_10 = ("6.10", "", false, "6.10", "HMAT: a node without a driver type gets 576 x latency/DRAM latency x DRAM bandwidth/bandwidth once HMAT is parsed (3718c02dbd4c, 6.7; CPU-less nodes deferred to it, Ho-Ren Chuang, 6.10)"),
    }
}

impl Default for Variants {
    /// The engine's default kernel's variants.
    fn default() -> Self {
        crate::kernels::kernel_variants(crate::kernels::DEFAULT_VERSION).expect("the default version is known")
    }
}

impl Serialize for Variants {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(MECHANISMS.len()))?;
        for (i, info) in MECHANISMS.iter().enumerate() {
            m.serialize_entry(info.name, info.variants[self.get(i)].name)?;
        }
        m.end()
    }
}

/// Index of the mechanism called `name` in [`MECHANISMS`].
pub fn mechanism_index(name: &str) -> Option<usize> {
    MECHANISMS.iter().position(|m| m.name == name)
}

/// Index of variant `name` (its name, its release or its commit) of mechanism `m`.
pub fn variant_index(m: usize, name: &str) -> Option<usize> {
    MECHANISMS[m].variants.iter().position(|v| v.name == name || (!v.commit.is_empty() && v.commit.starts_with(name) && name.len() >= 7))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mechanism_has_a_base_and_ordered_releases() {
        for m in MECHANISMS {
            assert_eq!(m.variants[0].since, "", "{}: the first variant is the base", m.name);
            for w in m.variants.windows(2) {
                let (a, b) = (crate::kernels::version_key(w[0].since), crate::kernels::version_key(w[1].since));
                assert!(b.is_some() && a < b, "{}: {} before {}", m.name, w[0].name, w[1].name);
            }
        }
    }

    #[test]
    fn get_and_set_round_trip() {
        let mut v = Variants::default();
        for i in 0..MECHANISMS.len() {
            for j in 0..MECHANISMS[i].variants.len() {
                v.set(i, j);
                assert_eq!(v.get(i), j);
            }
        }
        assert_eq!(variant_index(mechanism_index("vma_scan_rules").unwrap(), "f169c62"), Some(2));
    }
}
