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
        V4_5 = ("4.5", "51170840fe91", false, "4.5", "node_stamp += 32 x the window's CPU time: scanning costs at most ~3% of runtime"),
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
    update_scan_period: UpdateScanPeriod ("scan period reset on a node change", "kernel/sched/fair.c: update_scan_period, task_numa_migrate") {
        Base = ("base", "", true, "", "a move by the load balancer keeps the scan period; task_numa_migrate resets it to task_scan_min when it moves the task"),
        V4_19 = ("4.19", "05cbdf4f5c19", false, "4.19", "every cross-node move resets the period to task_scan_start, unless the task has scanned and moves to or away from a non-preferred node (3f9672baaa4f, 05cbdf4f5c19)"),
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
