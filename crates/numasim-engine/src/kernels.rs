//! Kernel version profiles: the feature set of a mainline release, from each feature's
//! `since`/`until` in the feature table, and the variant of every mechanism (variants.rs): the
//! newest one released at or before it. A scenario starts from `[kernel] version` and may flip
//! single features or pick other variants on top.

use crate::features::{Feature, FeatureSet};
use crate::variants::Variants;

/// The versions a scenario may name (docs/model.md has them as a table): every release a
/// shipped experiment names, the releases Debian ships (6.1, 6.12, 7.3), 6.6, and 5.19 (the
/// memory-tiering mode that 6.1's hot page selection was measured against).
pub const KERNEL_VERSIONS: &[&str] = &["3.19", "4.0-rc4", "4.0", "4.9", "5.12", "5.13", "5.19", "6.1", "6.3", "6.4", "6.6", "6.9", "6.10", "6.12", "6.14", "7.3"];

/// The version whose feature set is the engine's default.
pub const DEFAULT_VERSION: &str = "6.12";

/// Sort key of a release: (major, minor, 0 for -rcN with N, 1 for the release).
pub fn version_key(v: &str) -> Option<(u32, u32, u32, u32)> {
    let (base, rc) = match v.split_once("-rc") {
        Some((b, n)) => (b, Some(n.parse::<u32>().ok()?)),
        None => (v, None),
    };
    let (major, minor) = base.split_once('.')?;
    let (major, minor) = (major.parse().ok()?, minor.parse().ok()?);
    Some(match rc {
        Some(n) => (major, minor, 0, n),
        None => (major, minor, 1, 0),
    })
}

/// Whether mainline release `v` has the feature, from its `since`/`until` columns.
fn in_release(f: Feature, v: (u32, u32, u32, u32)) -> bool {
    let info = f.info();
    let Some(since) = version_key(info.since) else {
        return false;
    };
    let before_until = version_key(info.until).is_none_or(|u| v < u);
    if f == Feature::NumaPreserveWrite && v < since {
        // _PAGE_NUMA hinting kept the write bit until 4.0-rc1 switched to PROT_NONE
        // (4d9424669946); b191f9b106ea preserved it again for 4.0
        return v < version_key("4.0-rc1").unwrap_or_default();
    }
    since <= v && before_until
}

/// Feature set of a named release, or None for a version not in [`KERNEL_VERSIONS`].
pub fn kernel_features(version: &str) -> Option<FeatureSet> {
    if !KERNEL_VERSIONS.contains(&version) {
        return None;
    }
    let v = version_key(version)?;
    Some(FeatureSet::from_fn(|f| in_release(f, v)))
}

/// The variant of every mechanism in release `version`: the newest released at or before it.
pub fn kernel_variants(version: &str) -> Option<Variants> {
    if !KERNEL_VERSIONS.contains(&version) {
        return None;
    }
    let v = version_key(version)?;
    Some(Variants::from_fn(|_, m| m.variants.iter().rposition(|x| version_key(x.since).is_none_or(|s| s <= v)).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FEATURES;

    #[test]
    fn all_lists_every_feature_in_table_order() {
        assert_eq!(Feature::ALL.len(), FEATURES.len());
        for (i, f) in Feature::ALL.iter().enumerate() {
            assert_eq!(*f as usize, i);
        }
    }

    #[test]
    fn release_candidates_sort_before_the_release() {
        assert!(version_key("3.19") < version_key("4.0-rc4"));
        assert!(version_key("4.0-rc4") < version_key("4.0"));
        assert!(version_key("6.9") < version_key("6.10"));
        assert_eq!(version_key("six"), None);
    }

    /// seed 003: 3.19 groups by pte_write and keeps the write bit (_PAGE_NUMA); 4.0-rc4 groups
    /// by pte_dirty (53da3bc2ba9e) and loses the write bit (PROT_NONE hinting); 4.0 has the
    /// three patches.
    #[test]
    fn profiles_follow_the_2015_series() {
        let f = |v: &str| kernel_features(v).unwrap();
        let (a, b, c) = (f("3.19"), f("4.0-rc4"), f("4.0"));
        assert!(!a.on(Feature::GroupByPteDirty) && a.on(Feature::NumaPreserveWrite) && !a.on(Feature::NumaSlowscanOnMigrateFail));
        assert!(b.on(Feature::GroupByPteDirty) && !b.on(Feature::GroupByVmaFlags) && !b.on(Feature::NumaPreserveWrite));
        assert!(!c.on(Feature::GroupByPteDirty));
        assert!(c.on(Feature::GroupByVmaFlags) && c.on(Feature::NumaPreserveWrite) && c.on(Feature::NumaSlowscanOnMigrateFail));
        assert!(a.on(Feature::NumaMigrateRatelimit) && !f("5.12").on(Feature::NumaMigrateRatelimit));
        assert!(!f("5.12").on(Feature::NumaDelayMap) && f("5.13").on(Feature::NumaDelayMap));
        assert!(!f("6.1").on(Feature::MigrateBatchFlush) && f("6.3").on(Feature::MigrateBatchFlush));
        assert!(!f("4.9").on(Feature::GroupByVmaFlags));
        assert!(kernel_features("2.6").is_none());
    }

    /// The engine's default features are those of its default version.
    #[test]
    fn default_is_the_default_version() {
        assert_eq!(kernel_features(DEFAULT_VERSION).unwrap(), FeatureSet::default());
    }
}
