//! Built-in machine profiles, compiled in from `profiles/machines/*.toml`.

const PROFILES: &[(&str, &str)] = &[
    ("xeon-platinum-2n-128c", include_str!("../../profiles/machines/xeon-platinum-2n-128c.toml")),
    ("xeon-icx-2n-128c", include_str!("../../profiles/machines/xeon-icx-2n-128c.toml")),
    ("intel-2s-128g", include_str!("../../profiles/machines/intel-2s-128g.toml")),
    ("intel-4s-48c", include_str!("../../profiles/machines/intel-4s-48c.toml")),
    ("intel-2s-dram-pmem", include_str!("../../profiles/machines/intel-2s-dram-pmem.toml")),
];

pub const DEFAULT_MACHINE: &str = "xeon-platinum-2n-128c";

pub fn machine_profile_names() -> Vec<&'static str> {
    PROFILES.iter().map(|p| p.0).collect()
}

pub fn machine_profile_toml(name: &str) -> Option<&'static str> {
    PROFILES.iter().find(|p| p.0 == name).map(|p| p.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn every_profile_resolves_alone() {
        for name in machine_profile_names() {
            let text = format!("[machine]\nprofile = \"{name}\"\n[[workload]]\nkind = \"numa02\"\nsize_mib = 64\n");
            let s = crate::scenario::parse_scenario(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(s.machine.name, name);
        }
    }
}
