//! The named kernel changes numasim can switch on and off: one table, like ruff's rule table.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct FeatureInfo {
    pub name: &'static str,
    /// First mainline release that has the change ("" for a change never merged).
    pub since: &'static str,
    /// First mainline release without it again ("" if still there).
    pub until: &'static str,
    /// Seed changelog (file prefix in shared/seeds) or upstream commit.
    pub seed: &'static str,
    pub summary: &'static str,
    /// Whether the engine models the switch yet; an unmodelled feature may only keep its default.
    pub modelled: bool,
    /// Value in the default (v6.12-like) kernel.
    pub default: bool,
}

macro_rules! features {
    ($( $id:ident = ($name:literal, $since:literal, $until:literal, $seed:literal, $modelled:literal, $default:literal, $summary:literal) ),* $(,)?) => {
        /// Index of a feature in [`FEATURES`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        pub enum Feature { $( $id ),* }
        impl Feature {
            /// Every feature, in table order.
            pub const ALL: &'static [Feature] = &[ $( Feature::$id ),* ];
        }
        pub const FEATURES: &[FeatureInfo] = &[
            $( FeatureInfo { name: $name, since: $since, until: $until, seed: $seed, summary: $summary, modelled: $modelled, default: $default } ),*
        ];
    };
}

features! {
    NumaDelayMap = ("numa-delay-map", "5.13", "", "000 (b99a342d4f11)", true, true,
        "do_numa_page keeps the PTE PROT_NONE while migrating; maps it only if migration is skipped or fails"),
    NumaPreserveWrite = ("numa-preserve-write", "4.0", "", "003 (patch 2/3, b191f9b106ea)", true, true,
        "the write bit survives a NUMA hinting fault: no extra write fault afterwards (_PAGE_NUMA kept it before 4.0-rc1)"),
    NumaSlowscanOnMigrateFail = ("numa-slowscan-on-migrate-fail", "4.0", "", "003 (patch 3/3)", true, true,
        "TNF_MIGRATE_FAIL feeds numa_faults_locality[2], which doubles the scan period"),
    GroupByVmaFlags = ("group-by-vma-flags", "4.0", "4.9", "003 (patch 1/3, bea66fbd11af)", true, false,
        "TNF_NO_GROUP from !(vm_flags & VM_WRITE) instead of the page table (numa_group joining)"),
    GroupByPteDirty = ("group-by-pte-dirty", "4.0-rc2", "4.0", "003 (before; 53da3bc2ba9e)", true, false,
        "TNF_NO_GROUP from !pte_dirty, after PROT_NONE hinting (4.0-rc1) made pte_write useless"),
    NumaMigrateRatelimit = ("numa-migrate-ratelimit", "3.8", "4.19", "efaffc5e40ae removed it", true, false,
        "at most 128 MiB migrated to a node per 100 ms window; beyond it the migration fails"),
    NumaScanGroupScale = ("numa-scan-group-scale", "4.14", "", "b5dd77c8bdad", true, true,
        "task_scan_max and task_scan_start grow with the numa_group's size and its share of shared faults"),
    TlbLazyCpumask = ("tlb-lazy-cpumask", "6.14", "", "spec 7.2 (x86/mm/tlb: Update mm_cpumask lazily)", true, false,
        "mm_cpumask bits survive a switch to another mm; stale CPUs are trimmed by one flush IPI per second"),
    NumaDropSavedwrite = ("numa-drop-savedwrite", "6.3", "", "6a56ccbcf6c6", true, true,
        "the PROT_NONE PTE no longer keeps the write bit: a page migrated from it comes back read-only, and a failed migration maps it read-only"),
    MigrateBatchFlush = ("migrate-batch-flush", "6.3", "", "002 (7e12beb8ca2a)", true, true,
        "migrate_pages() unmaps up to 512 pages, flushes the TLB once, then copies and remaps"),
    MigrateSkipInaccessibleFlush = ("migrate-skip-inaccessible-flush", "6.4", "", "4d4b6d66db63", true, true,
        "the batched unmap skips the deferred flush when the PTE is not accessible"),
    NumaMthp = ("numa-mthp", "6.10", "", "001", true, true,
        "NUMA balancing scans and migrates PTE-mapped multi-size THP"),
    NumaSkipCowRefcount = ("numa-skip-cow-refcount", "4.19", "", "859d4adc3415 (spec 1.7 rule 3)", true, true,
        "in a COW mapping the scanner skips folios with extra references (page_count != 1: DMA-pinned or shared)"),
    MmuNotifierPud = ("mmu-notifier-pud", "6.12", "", "spec 1.7 (mm/mprotect: push mmu notifier to PUDs)", true, true,
        "change_protection issues one MMU-notifier invalidation per 512 GiB region instead of per 1 GiB"),
    NumaSkipPinned = ("numa-skip-pinned", "", "", "004 (patch 2/3, RFC 2023)", true, false,
        "change_prot_numa leaves maybe-DMA-pinned pages and THPs accessible, in any mapping"),
    MmuNotifierRangeNuma = ("mmu-notifier-range-numa", "", "", "004 (patch 1/3, RFC 2023)", true, false,
        "MMU_NOTIFIER_RANGE_NUMA flag on NUMA-purpose invalidations"),
    KvmSkipPinnedZap = ("kvm-skip-pinned-zap", "", "", "004 (patch 3/3, RFC 2023)", true, false,
        "KVM keeps SPTEs of maybe-pinned pages on NUMA invalidations (needs mmu-notifier-range-numa)"),
    NumaTieringHotThreshold = ("numa-tiering-hot-threshold", "6.1", "", "33024536bafd (memory tiering: hot page selection, 1/3)", true, true,
        "tiering mode promotes a slow-tier page only if its hint fault came within hot_threshold_ms of the scan that protected it (or the target has free space enough)"),
    NumaTieringRateLimit = ("numa-tiering-rate-limit", "6.1", "", "c6833e10008f (2/3)", true, true,
        "promotion candidates per target node are limited to numa_balancing_promote_rate_limit_MBps a second (pgpromote_candidate)"),
    NumaTieringAutoThreshold = ("numa-tiering-auto-threshold", "6.1", "", "c959924b0dc5 (3/3)", true, true,
        "every scan_period_max the hot threshold moves by 1/8 toward the rate limit's candidate count"),
}

impl Feature {
    pub fn info(self) -> &'static FeatureInfo {
        &FEATURES[self as usize]
    }
}

/// Feature switches of one run, bit i for [`Feature`] i (read on every fault: one load and a
/// test); serialized as a name -> bool map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSet(u64);

const _: () = assert!(FEATURES.len() <= 64);

impl Serialize for FeatureSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(FEATURES.len()))?;
        for (i, f) in FEATURES.iter().enumerate() {
            m.serialize_entry(f.name, &self.get(i))?;
        }
        m.end()
    }
}

impl Default for FeatureSet {
    fn default() -> Self {
        FeatureSet::from_fn(|f| f.info().default)
    }
}

impl FeatureSet {
    /// The set with feature f on where `on(f)`.
    pub fn from_fn(on: impl Fn(Feature) -> bool) -> Self {
        FeatureSet(Feature::ALL.iter().fold(0, |bits, &f| bits | (on(f) as u64) << f as usize))
    }
    pub fn on(&self, f: Feature) -> bool {
        self.get(f as usize)
    }
    /// Feature `i` of [`FEATURES`].
    pub fn get(&self, i: usize) -> bool {
        self.0 >> i & 1 != 0
    }
    pub fn set(&mut self, i: usize, on: bool) {
        self.0 = self.0 & !(1 << i) | (on as u64) << i;
    }
    pub fn index_of(name: &str) -> Option<usize> {
        FEATURES.iter().position(|f| f.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn table_names_are_unique_and_indexed_in_order() {
        for (i, f) in FEATURES.iter().enumerate() {
            assert_eq!(FeatureSet::index_of(f.name), Some(i), "{}", f.name);
        }
        assert_eq!(Feature::NumaDelayMap.info().name, "numa-delay-map");
        assert_eq!(Feature::KvmSkipPinnedZap.info().name, "kvm-skip-pinned-zap");
    }
}
