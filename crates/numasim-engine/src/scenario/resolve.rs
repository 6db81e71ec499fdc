//! Raw options -> concrete [`Scenario`], collecting every problem with its location.

use super::profiles::{machine_profile_toml, DEFAULT_MACHINE};
use super::raw::*;
use super::resolve_machine::resolve_machine;
use super::{KernelConfig, RunConfig, Scenario, Sysctl, Tiering};
use crate::error::{Error, Result, ScenarioProblem};
use crate::features::{FeatureSet, FEATURES};
use crate::mm::huge_memory::{self, ThpConfig, ThpMode};
use crate::topology::Topology;
use crate::variants::{mechanism_index, variant_index, Variants, MECHANISMS};
use crate::workload;

type Problems = Vec<ScenarioProblem>;

/// Parse and validate a scenario; on failure every problem found is returned.
pub fn parse_scenario(text: &str) -> Result<Scenario> {
    let mut value: toml::Value = toml::from_str(text).map_err(|e| syntax_error(text, &e))?;
    let profile = merge_machine_profile(&mut value)?;
    let raw: RawScenario = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        // serde appends "in `table`" on further lines: the path already says where
        let msg = e.inner().to_string().lines().next().unwrap_or_default().trim().to_string();
        let kind = if msg.contains("unknown field") { "unknown_key" } else { "invalid_value" };
        let loc = if path == "." { "scenario".to_string() } else { path };
        Error::scenario(loc, kind, msg)
    })?;
    let mut p = Problems::new();
    let machine = resolve_machine(raw.machine, &mut p);
    let kernel = resolve_kernel(raw.kernel, &mut p);
    let run = resolve_run(raw.run, &mut p);
    let (workloads, images) = match &machine {
        Some(m) => resolve_workloads(raw.workload, &m.topology, &mut p),
        None => (Vec::new(), Vec::new()),
    };
    if !p.is_empty() {
        if let Some(profile) = profile {
            profile.annotate(&mut p);
        }
        return Err(Error::Scenario(p));
    }
    let machine = machine.expect("machine resolved when no problems");
    Ok(Scenario { seed: raw.seed.unwrap_or(1), machine, kernel, workloads, images, run })
}

fn syntax_error(text: &str, e: &toml::de::Error) -> Error {
    let loc = match e.span() {
        Some(s) => {
            let before = &text[..s.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            format!("line {line}, column {col}")
        }
        None => "scenario".to_string(),
    };
    let msg = e.message().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
    Error::scenario(loc, "toml_syntax", msg)
}

/// A machine profile merged under the scenario's `[machine]`, and the keys the scenario gave.
struct MergedProfile {
    name: String,
    given: Vec<String>,
}

impl MergedProfile {
    /// A problem with a machine key the scenario did not write points at the profile's value:
    /// say so, so the user knows which key of theirs to add.
    fn annotate(&self, p: &mut Problems) {
        for x in p.iter_mut() {
            let Some(key) = x.loc.strip_prefix("machine.") else { continue };
            let key = key.split(['[', ' ']).next().unwrap_or(key);
            if key != "profile" && !self.given.iter().any(|g| g == key) {
                x.msg = format!("{}; this value comes from profile `{}` (numasim machines --show {}): set machine.{key} too", x.msg, self.name, self.name);
            }
        }
    }
}

/// `[machine] profile = "..."`: the built-in profile's keys, overridden by the scenario's.
fn merge_machine_profile(value: &mut toml::Value) -> Result<Option<MergedProfile>> {
    let Some(root) = value.as_table_mut() else {
        return Ok(None);
    };
    let machine = root.entry("machine").or_insert_with(|| toml::Value::Table(Default::default()));
    let Some(mt) = machine.as_table_mut() else {
        return Ok(None);
    };
    let name = match mt.get("profile") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => return Err(Error::scenario("machine.profile", "invalid_value", "must be a string")),
        None if mt.contains_key("nodes") => return Ok(None),
        None => DEFAULT_MACHINE.to_string(),
    };
    let mut given: Vec<String> = mt.keys().cloned().collect();
    if let Some(cost) = mt.get("cost").and_then(|c| c.as_table()) {
        given.retain(|k| k != "cost"); // the profile's other cost keys still come from it
        given.extend(cost.keys().map(|k| format!("cost.{k}")));
    }
    let Some(text) = machine_profile_toml(&name) else {
        let known = super::machine_profile_names().join(", ");
        return Err(Error::scenario("machine.profile", "invalid_value", format!("unknown machine profile `{name}`, expected one of {known}")));
    };
    let mut base: toml::Value = toml::from_str(text).expect("built-in profiles parse");
    deep_merge(&mut base, machine.clone());
    base.as_table_mut().expect("profile is a table").insert("profile".into(), toml::Value::String(name.clone()));
    *machine = base;
    Ok(Some(MergedProfile { name, given }))
}

fn deep_merge(base: &mut toml::Value, over: toml::Value) {
    match (base, over) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(bv) if bv.is_table() && v.is_table() => deep_merge(bv, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

fn resolve_kernel(raw: Option<RawKernel>, p: &mut Problems) -> KernelConfig {
    let mut raw = raw.unwrap_or(RawKernel { version: None, numa_balancing: None, hz: None, sysctl: None, features: None, variants: None, thp: None });
    let hz = raw.hz.unwrap_or(250);
    if ![100, 250, 300, 1000].contains(&hz) {
        p.push(ScenarioProblem::new("kernel.hz", "invalid_value", format!("CONFIG_HZ must be 100, 250, 300 or 1000, got {hz}")));
    }
    let mut sysctl = Sysctl::default();
    let tiering_sysctl =
        raw.sysctl.as_mut().map(|s| (s.numa_balancing_promote_rate_limit_mbps.take(), s.numa_balancing_hot_threshold_ms.take(), s.demotion_enabled.take(), s.watermark_scale_factor.take()));
    if let Some(s) = raw.sysctl {
        let mut set = |name: &str, v: Option<i64>, min: i64, slot: &mut u32| {
            if let Some(v) = v {
                if v < min || v > u32::MAX as i64 / 1000 {
                    p.push(ScenarioProblem::new(format!("kernel.sysctl.{name}"), "invalid_value", format!("must be >= {min}, got {v}")));
                } else {
                    *slot = v as u32;
                }
            }
        };
        set("numa_balancing_scan_delay_ms", s.numa_balancing_scan_delay_ms, 0, &mut sysctl.numa_balancing_scan_delay_ms);
        set("numa_balancing_scan_period_min_ms", s.numa_balancing_scan_period_min_ms, 1, &mut sysctl.numa_balancing_scan_period_min_ms);
        set("numa_balancing_scan_period_max_ms", s.numa_balancing_scan_period_max_ms, 1, &mut sysctl.numa_balancing_scan_period_max_ms);
        set("numa_balancing_scan_size_mb", s.numa_balancing_scan_size_mb, 0, &mut sysctl.numa_balancing_scan_size_mb);
        // min above max is accepted, as the kernel does (debugfs u32s, no cross-check):
        // task_scan_max is then task_scan_min (kernel/sched/fair.c: max(smin, smax))
    }
    let mut features = FeatureSet::default();
    let mut variants = Variants::default();
    if let Some(v) = &raw.version {
        match (crate::kernels::kernel_features(v), crate::kernels::kernel_variants(v)) {
            (Some(f), Some(m)) => (features, variants) = (f, m),
            _ => p.push(ScenarioProblem::new("kernel.version", "invalid_value", format!("unknown kernel version `{v}`, expected one of {}", crate::kernels::KERNEL_VERSIONS.join(", ")))),
        }
    }
    for (name, choice) in raw.variants.unwrap_or_default() {
        let Some(m) = mechanism_index(&name) else {
            let known: Vec<_> = MECHANISMS.iter().map(|m| m.name).collect();
            p.push(ScenarioProblem::new(format!("kernel.variants.{name}"), "unknown_key", format!("unknown mechanism `{name}`, expected one of {}", known.join(", "))));
            continue;
        };
        match variant_index(m, &choice) {
            Some(i) => variants.set(m, i),
            None => {
                let known: Vec<_> = MECHANISMS[m].variants.iter().map(|v| v.name).collect();
                p.push(ScenarioProblem::new(
                    format!("kernel.variants.{name}"),
                    "invalid_value",
                    format!("unknown variant `{choice}` of {name}, expected one of {} (or a variant's commit id)", known.join(", ")),
                ));
            }
        }
    }
    p.extend(crate::sched::domain::variant_conflicts(&variants).into_iter().map(|(loc, msg)| ScenarioProblem::new(loc, "invalid_value", msg)));
    for (name, on) in raw.features.unwrap_or_default() {
        match FeatureSet::index_of(&name) {
            None => {
                let known: Vec<_> = FEATURES.iter().map(|f| f.name).collect();
                p.push(ScenarioProblem::new(format!("kernel.features.{name}"), "unknown_key", format!("unknown feature `{name}`, expected one of {}", known.join(", "))));
            }
            Some(i) if !FEATURES[i].modelled && on != FEATURES[i].default => {
                p.push(ScenarioProblem::new(format!("kernel.features.{name}"), "not_modelled", format!("feature `{name}` is not modelled yet; it can only stay {}", FEATURES[i].default)));
            }
            Some(i) => features.set(i, on),
        }
    }
    use crate::features::Feature::{KvmSkipPinnedZap, MmuNotifierRangeNuma};
    if features.on(KvmSkipPinnedZap) && !features.on(MmuNotifierRangeNuma) {
        // KVM can only tell NUMA invalidations apart by the RFC's notifier flag (patch 1/3)
        p.push(ScenarioProblem::new("kernel.features.kvm-skip-pinned-zap", "invalid_value", "kvm-skip-pinned-zap needs mmu-notifier-range-numa = true".to_string()));
    }
    let thp = resolve_thp(raw.thp, p);
    let tiering = resolve_tiering(raw.numa_balancing, tiering_sysctl, &variants, &features, p);
    KernelConfig { version: raw.version, numa_balancing: tiering.mode != 0, tiering, hz: hz.clamp(100, 1000) as u32, sysctl, features, variants, thp }
}

/// The tiering sysctls as written: rate limit, hot threshold, demotion_enabled, watermark_scale_factor.
type TieringKnobs = (Option<i64>, Option<i64>, Option<bool>, Option<i64>);

/// `kernel.numa_balancing` (a boolean, or the bit field 0-3 from 5.18) and the tiering knobs,
/// each refused where the release does not have it.
fn resolve_tiering(raw: Option<NumaBalancingRaw>, knobs: Option<TieringKnobs>, v: &Variants, f: &FeatureSet, p: &mut Problems) -> Tiering {
    use crate::features::Feature::{NumaTieringAutoThreshold, NumaTieringHotThreshold, NumaTieringRateLimit};
    for (feat, name) in [(NumaTieringRateLimit, "numa-tiering-rate-limit"), (NumaTieringAutoThreshold, "numa-tiering-auto-threshold")] {
        if f.on(feat) && !f.on(NumaTieringHotThreshold) {
            p.push(ScenarioProblem::new(format!("kernel.features.{name}"), "invalid_value", format!("{name} works on the hot threshold: it needs numa-tiering-hot-threshold = true")));
        }
    }
    use crate::variants::{MemoryTiers, NumaTiering};
    let mut t = Tiering::default();
    match raw {
        None => {}
        Some(NumaBalancingRaw::Bool(b)) => t.mode = b as u8,
        Some(NumaBalancingRaw::Mode(m)) if (0..=1).contains(&m) => t.mode = m as u8,
        Some(NumaBalancingRaw::Mode(m)) if (2..=3).contains(&m) && v.numa_tiering == NumaTiering::Base => {
            p.push(ScenarioProblem::new("kernel.numa_balancing", "invalid_value", format!("{m} sets NUMA_BALANCING_MEMORY_TIERING, which the kernel has from 5.18 (variant numa_tiering)")));
        }
        Some(NumaBalancingRaw::Mode(m)) if (2..=3).contains(&m) => t.mode = m as u8,
        Some(NumaBalancingRaw::Mode(m)) => {
            p.push(ScenarioProblem::new("kernel.numa_balancing", "invalid_value", format!("0 (off), 1 (normal), 2 (memory tiering), 3 (both) or a boolean, got {m}")));
        }
    }
    let Some((rate, threshold, demotion, wsf)) = knobs else { return t };
    let loc = |k: &str| format!("kernel.sysctl.{k}");
    if let Some(r) = rate {
        if !f.on(NumaTieringRateLimit) {
            p.push(ScenarioProblem::new(loc("numa_balancing_promote_rate_limit_MBps"), "invalid_value", "the promotion rate limit exists from 6.1 (feature numa-tiering-rate-limit)"));
        } else if !(0..=i64::from(u32::MAX)).contains(&r) {
            p.push(ScenarioProblem::new(loc("numa_balancing_promote_rate_limit_MBps"), "invalid_value", format!("MB/s in 0..=4294967295, got {r}")));
        } else {
            t.promote_rate_limit_mbps = r as u64;
        }
    }
    if let Some(h) = threshold {
        if !f.on(NumaTieringHotThreshold) {
            p.push(ScenarioProblem::new(loc("numa_balancing_hot_threshold_ms"), "invalid_value", "the hot threshold exists from 6.1 (feature numa-tiering-hot-threshold)"));
        } else if !(0..=i64::from(u32::MAX / 2)).contains(&h) {
            p.push(ScenarioProblem::new(loc("numa_balancing_hot_threshold_ms"), "invalid_value", format!("ms in 0..=2147483647, got {h}")));
        } else {
            t.hot_threshold_ms = h as u32;
        }
    }
    if let Some(d) = demotion {
        if d && v.memory_tiers == MemoryTiers::Base {
            p.push(ScenarioProblem::new(loc("demotion_enabled"), "invalid_value", "demotion during reclaim exists from 5.15 (variant memory_tiers)"));
        } else {
            t.demotion_enabled = d;
        }
    }
    if let Some(w) = wsf {
        // mm/page_alloc.c: watermark_scale_factor_sysctl_handler (SYSCTL_ONE..3000)
        if !(1..=3000).contains(&w) {
            p.push(ScenarioProblem::new(loc("watermark_scale_factor"), "invalid_value", format!("in 1..=3000 (1/10000 of a zone), got {w}")));
        } else {
            t.watermark_scale_factor = w as u32;
        }
    }
    t
}

fn resolve_thp(raw: Option<super::raw::RawThp>, p: &mut Problems) -> ThpConfig {
    let mut thp = ThpConfig::default();
    let Some(raw) = raw else { return thp };
    if let Some(e) = raw.enabled {
        match ThpMode::parse(&e, false) {
            Some(m) => thp.enabled = m,
            None => p.push(ScenarioProblem::new("kernel.thp.enabled", "invalid_value", format!("expected always, madvise or never, got `{e}`"))),
        }
    }
    for (size, mode) in raw.sizes.unwrap_or_default() {
        let loc = format!("kernel.thp.sizes.{size}");
        match (huge_memory::parse_size(&size), ThpMode::parse(&mode, true)) {
            (None, _) => {
                let known: Vec<_> = huge_memory::ANON_ORDERS.map(huge_memory::size_name).collect();
                p.push(ScenarioProblem::new(loc, "unknown_key", format!("no anonymous mTHP size `{size}`, expected one of {}", known.join(", "))));
            }
            (_, None) => p.push(ScenarioProblem::new(loc, "invalid_value", format!("expected always, inherit, madvise or never, got `{mode}`"))),
            (Some(o), Some(m)) => thp.sizes[o as usize] = m,
        }
    }
    thp
}

fn resolve_run(raw: Option<RawRun>, p: &mut Problems) -> RunConfig {
    let raw =
        raw.unwrap_or(RawRun { sample_interval_ms: None, max_sim_s: None, placement_interval_ms: None, numa_maps_interval_ms: None, interleave_max_threads: None, trace_faults: None, trace: None });
    let sample = raw.sample_interval_ms.unwrap_or(100);
    if !(1..=3_600_000).contains(&sample) {
        p.push(ScenarioProblem::new("run.sample_interval_ms", "invalid_value", format!("must be in 1..=3600000, got {sample}")));
    }
    let max = raw.max_sim_s.unwrap_or(7200.0);
    if !(max > 0.0 && max <= 1e6) {
        p.push(ScenarioProblem::new("run.max_sim_s", "invalid_value", format!("must be in (0, 1e6], got {max}")));
    }
    let placement = raw.placement_interval_ms.unwrap_or(1000);
    if !(0..=3_600_000).contains(&placement) {
        p.push(ScenarioProblem::new("run.placement_interval_ms", "invalid_value", format!("must be in 0..=3600000 (0: off), got {placement}")));
    }
    let maps = raw.numa_maps_interval_ms;
    if let Some(m) = maps.filter(|m| !(1..=3_600_000).contains(m)) {
        p.push(ScenarioProblem::new("run.numa_maps_interval_ms", "invalid_value", format!("must be in 1..=3600000, got {m}")));
    }
    let interleave = raw.interleave_max_threads.unwrap_or(crate::sim::interleave::DEFAULT_MAX_THREADS as i64);
    if !(0..=4096).contains(&interleave) {
        p.push(ScenarioProblem::new("run.interleave_max_threads", "invalid_value", format!("must be in 0..=4096 (0: off), got {interleave}")));
    }
    RunConfig {
        sample_interval_ms: sample.max(1) as u64,
        max_sim_s: max,
        placement_interval_ms: placement.max(0) as u64,
        numa_maps_interval_ms: maps.map(|m| m.max(1) as u64),
        interleave_max_threads: interleave.clamp(0, 4096) as usize,
        trace_faults: raw.trace_faults.unwrap_or(false),
        trace: raw.trace.unwrap_or(false),
    }
}

fn resolve_workloads(raw: Option<Vec<RawWorkload>>, topo: &Topology, p: &mut Problems) -> (Vec<workload::WorkloadSpec>, Vec<workload::image::ImagePreset>) {
    let raw = raw.unwrap_or_default();
    if raw.is_empty() {
        p.push(ScenarioProblem::new("workload", "invalid_value", "at least one [[workload]] is needed"));
    }
    let (specs, images): (Vec<_>, Vec<_>) = raw.iter().enumerate().filter_map(|(i, w)| Some((workload::resolve(w, i, raw.len(), topo, p)?, workload::resolve_image(w, i, p)))).unzip();
    let need: u64 = specs.iter().map(|s| s.footprint_pages()).sum();
    let have: u64 = topo.node_pages.iter().sum();
    if need > have {
        p.push(ScenarioProblem::new("workload", "exceeds_machine_memory", format!("workloads need {:.1} GiB but the machine has {:.1} GiB", need as f64 / 262144.0, have as f64 / 262144.0)));
    }
    (specs, images)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<ScenarioProblem> {
        match parse_scenario(text) {
            Err(Error::Scenario(p)) => p,
            other => panic!("expected scenario error, got {other:?}"),
        }
    }

    const OK: &str = "[[workload]]\nkind = \"numa02\"\n";

    /// `nodes = 4` on a 2-node profile: the problem is the profile's 2x2 distances, which the
    /// user never wrote; the message says where it comes from, and not for keys they wrote.
    #[test]
    fn problems_with_profile_values_name_the_profile() {
        let p = problems("[machine]\nprofile = \"xeon-platinum-2n-128c\"\nnodes = 4\nsmt = 0\n[[workload]]\nkind = \"numa02\"\n");
        let dist = p.iter().find(|x| x.loc == "machine.distances").expect("distances problem");
        assert!(dist.msg.contains("comes from profile `xeon-platinum-2n-128c`") && dist.msg.contains("set machine.distances too"), "{dist:?}");
        let smt = p.iter().find(|x| x.loc == "machine.smt").expect("smt problem");
        assert!(!smt.msg.contains("profile"), "{smt:?}");
    }

    #[test]
    fn defaults_to_the_two_node_profile_and_kernel_defaults() {
        let s = parse_scenario(OK).unwrap();
        assert_eq!(s.machine.name, "xeon-platinum-2n-128c");
        assert_eq!(s.machine.topology.nr_cpus(), 128);
        assert!(s.kernel.numa_balancing);
        assert_eq!(s.kernel.sysctl.numa_balancing_scan_size_mb, 256);
        assert_eq!(s.kernel.sysctl.numa_balancing_scan_delay_ms, 1000);
    }

    #[test]
    fn malformed_toml_is_a_syntax_error() {
        let p = problems("seed = 1\n[[workload]\nkind=");
        assert_eq!(p[0].kind, "toml_syntax");
        assert!(p[0].loc.starts_with("line 2, column"), "{:?}", p[0]);
        assert!(!p[0].msg.contains('\n'));
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_path() {
        let p = problems("[kernel]\nnuma_balancing = true\nbogus = 1\n[[workload]]\nkind = \"numa02\"\n");
        assert_eq!(p[0].kind, "unknown_key");
        assert!(p[0].loc.starts_with("kernel"), "{:?}", p[0]);
    }

    #[test]
    fn zero_nodes_is_an_impossible_topology() {
        let p = problems("[machine]\nnodes = 0\n[[workload]]\nkind = \"numa02\"\n");
        assert_eq!(p[0].kind, "impossible_topology");
    }

    #[test]
    fn cpus_must_cover_every_node() {
        let p = problems("[machine]\nnodes = 3\ncpus_per_node = [4, 4]\n[[workload]]\nkind = \"numa02\"\n");
        assert!(p.iter().any(|x| x.loc == "machine.cpus_per_node" && x.kind == "impossible_topology"), "{p:?}");
        let p = problems("[machine]\ncpus_per_node = [0, 0]\n[[workload]]\nkind = \"numa02\"\n");
        assert!(p.iter().any(|x| x.msg.contains("every node is CPU-less")), "{p:?}");
        // a CPU-less node is memory only (a lower tier, 6.1+ only with a driver type or HMAT)
        let p = problems("[machine]\ncpus_per_node = [64, 0]\nmemory_type = [\"kmem\", \"kmem\"]\n[[workload]]\nkind = \"numa02\"\n");
        assert!(p.iter().any(|x| x.loc == "machine.memory_type" && x.msg.contains("node 0: a kmem node")), "{p:?}");
        assert!(!p.iter().any(|x| x.loc == "machine.cpus_per_node"), "{p:?}");
    }

    /// kernel.numa_balancing: a boolean or the bit field; tiering from 5.18, its knobs from 6.1.
    #[test]
    fn numa_balancing_modes_and_tiering_knobs_by_release() {
        let s = parse_scenario(&format!("[kernel]\nversion = \"6.12\"\nnuma_balancing = 2\n[kernel.sysctl]\nnuma_balancing_promote_rate_limit_MBps = 100\n{OK}")).expect("parses");
        assert_eq!((s.kernel.numa_balancing, s.kernel.tiering.mode, s.kernel.tiering.promote_rate_limit_mbps), (true, 2, 100));
        let p = problems(&format!("[kernel]\nversion = \"5.13\"\nnuma_balancing = 3\n{OK}"));
        assert!(p.iter().any(|x| x.loc == "kernel.numa_balancing" && x.msg.contains("5.18")), "{p:?}");
        let p = problems(&format!("[kernel]\nversion = \"5.19\"\nnuma_balancing = 2\n[kernel.sysctl]\nnuma_balancing_hot_threshold_ms = 10\n{OK}"));
        assert!(p.iter().any(|x| x.loc == "kernel.sysctl.numa_balancing_hot_threshold_ms" && x.msg.contains("6.1")), "{p:?}");
        let p = problems(&format!("[kernel]\nnuma_balancing = 4\n{OK}"));
        assert!(p.iter().any(|x| x.loc == "kernel.numa_balancing"), "{p:?}");
        assert!(!parse_scenario(&format!("[kernel]\nnuma_balancing = 0\n{OK}")).expect("parses").kernel.numa_balancing);
    }

    #[test]
    fn distance_matrix_must_match_the_nodes() {
        let p = problems("[machine]\ndistances = [[10, 20, 20], [20, 10, 20], [20, 20, 10]]\n[[workload]]\nkind = \"numa02\"\n");
        assert!(p.iter().any(|x| x.loc == "machine.distances"), "{p:?}");
    }

    /// `interconnect_gibps` is one figure or a per-pair matrix whose off-diagonal entries
    /// must be positive; the diagonal (no link) may be anything finite or not.
    #[test]
    fn interconnect_is_a_figure_or_a_matrix_of_links() {
        let with = |v: &str| format!("[machine.cost]\ninterconnect_gibps = {v}\n{OK}");
        assert!(parse_scenario(&with("[[0.0, 30.0], [45.0, 0.0]]")).is_ok());
        let p = problems(&with("[[0.0, 30.0]]"));
        assert!(p.iter().any(|x| x.loc == "machine.cost.interconnect_gibps" && x.kind == "impossible_topology"), "{p:?}");
        let p = problems(&with("[[0.0, -1.0], [45.0, 0.0]]"));
        assert!(p.iter().any(|x| x.loc == "machine.cost.interconnect_gibps" && x.kind == "invalid_value"), "{p:?}");
        let p = problems(&with("0.0"));
        assert!(p.iter().any(|x| x.loc == "machine.cost.interconnect_gibps"), "{p:?}");
    }

    /// A custom machine (no profile) gives every cost: one written before `clone_ns` existed
    /// is refused with the key named, never run with a default clone cost.
    #[test]
    fn a_full_cost_table_without_clone_ns_names_it() {
        let full = crate::testutil::SMALL;
        assert!(parse_scenario(full).is_ok());
        let e = parse_scenario(&full.replace("clone_ns = 0.0\n", "")).unwrap_err().to_string();
        assert!(e.contains("machine.cost") && e.contains("clone_ns"), "{e}");
        let p = problems(&full.replace("clone_ns = 0.0", "clone_ns = -1.0"));
        assert!(p.iter().any(|x| x.loc == "machine.cost.clone_ns" && x.kind == "invalid_value"), "{p:?}");
    }

    /// The clock-read costs: a number or one per number of other busy CPUs; a negative cost or
    /// an empty list is refused with the key named.
    #[test]
    fn clock_read_costs_take_a_number_or_a_list_per_busy_cpus() {
        let full = crate::testutil::SMALL;
        let with = |ns: &str, sys: &str| full.replace("clock_read_ns = 0.0", &format!("clock_read_ns = {ns}")).replace("clock_read_sys_ns = 0.0", &format!("clock_read_sys_ns = {sys}"));
        assert!(parse_scenario(&with("[1400.0, 2500.0, 13000.0]", "[1300.0, 2600.0, 15000.0]")).is_ok());
        assert!(parse_scenario(&with("22.0", "0.0")).is_ok());
        for (ns, share, key) in [("-1.0", "0.0", "clock_read_ns"), ("[]", "0.0", "clock_read_ns"), ("22.0", "-5.0", "clock_read_sys_ns"), ("22.0", "[0.5, nan]", "clock_read_sys_ns")] {
            let p = problems(&with(ns, share));
            assert!(p.iter().any(|x| x.loc == format!("machine.cost.{key}") && x.kind == "invalid_value"), "{ns} {share}: {p:?}");
        }
        let e = parse_scenario(&full.replace("clock_read_ns = 0.0\n", "")).unwrap_err().to_string();
        assert!(e.contains("clock_read_ns"), "{e}");
    }

    #[test]
    fn workload_larger_than_the_machine_is_refused() {
        let p = problems("[machine]\nmemory_gib_per_node = 1\n[[workload]]\nkind = \"numa01\"\n");
        assert!(p.iter().any(|x| x.kind == "exceeds_machine_memory"), "{p:?}");
    }

    #[test]
    fn unknown_and_inconsistent_features_are_refused() {
        let p = problems("[kernel.features]\nkvm-skip-pinned-zap = true\n[[workload]]\nkind = \"numa02\"\n");
        assert_eq!((p[0].kind.as_str(), p[0].loc.as_str()), ("invalid_value", "kernel.features.kvm-skip-pinned-zap"));
        assert!(parse_scenario("[kernel.features]\nkvm-skip-pinned-zap = true\nmmu-notifier-range-numa = true\n[[workload]]\nkind = \"numa02\"\n").is_ok());
        let p = problems("[kernel.features]\nno-such-thing = true\n[[workload]]\nkind = \"numa02\"\n");
        assert_eq!(p[0].kind, "unknown_key");
        assert!(parse_scenario("[kernel.features]\nnuma-delay-map = false\n[[workload]]\nkind = \"numa02\"\n").is_ok());
    }

    #[test]
    fn unknown_workload_kind_lists_the_known_ones() {
        let p = problems("[[workload]]\nkind = \"numa03\"\n");
        assert!(p[0].msg.contains("numa02_SMT"), "{p:?}");
    }
}
