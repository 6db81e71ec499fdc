//! `run.trace` (tracepoints.rs): the records add up to the counters they explain, and tracing
//! changes nothing else in the run.

use numasim_engine::{parse_scenario, run, RunResult};
use serde_json::Value;

fn numa01(trace: bool, extra: &str) -> RunResult {
    let text = format!("seed = 3\n[[workload]]\nkind = \"numa01\"\npasses = 6\n{extra}\n[run]\ntrace = {trace}\n");
    run(&parse_scenario(&text).expect("scenario parses")).expect("run succeeds")
}

fn sum(list: &Value, key: &str) -> u64 {
    list.as_array().expect("a list").iter().map(|e| e[key].as_u64().expect("a count")).sum()
}

#[test]
fn tracing_changes_nothing_and_its_records_add_up() {
    let (plain, traced) = (numa01(false, ""), numa01(true, ""));
    let mut a = plain.to_json();
    let mut b = traced.to_json();
    assert!(a.get("trace").is_none(), "no trace key when off");
    let tr = b.as_object_mut().unwrap().remove("trace").expect("a trace key when on");
    for v in [&mut a, &mut b] {
        v.as_object_mut().unwrap().remove("scenario");
    }
    assert_eq!(a, b, "the traced run is the same run");

    let windows = &tr["scan_windows"];
    assert!(!windows.as_array().unwrap().is_empty());
    assert_eq!(sum(windows, "pte_updates"), traced.counter("numa_pte_updates"), "every PTE update falls in a window");
    assert_eq!(sum(windows, "huge_pmd_updates"), traced.counter("numa_huge_pte_updates"));
    for w in windows.as_array().unwrap() {
        assert!(w["end"].as_f64() >= w["t"].as_f64(), "a window ends after it starts: {w}");
    }
    assert!(traced.counter("pgmigrate_success") > 0);
    assert_eq!(sum(&tr["migrate"], "succeeded"), traced.counter("pgmigrate_success"), "mm_migrate_pages adds up to pgmigrate_success");
    assert_eq!(sum(&tr["migrate"], "failed"), traced.counter("pgmigrate_fail"));
    assert_eq!(sum(&tr["tlb"], "ipis"), traced.counter("nr_tlb_remote_flush_received"), "every IPI belongs to a round");
    for p in tr["preferred"].as_array().unwrap() {
        assert_ne!(p["from"], p["to"], "only changes are recorded: {p}");
    }
    // a join moves a task into a group that already has one
    for g in tr["groups"].as_array().unwrap() {
        let nr = g["nr_tasks"].as_u64().unwrap();
        assert!(if g["event"] == "join" { nr >= 2 } else { nr == 1 }, "{g}");
    }
}

#[test]
fn demotions_are_traced_as_such() {
    // two eaters overfill a DRAM node whose demotion target is a CPU-less kmem node: kswapd
    // (and direct reclaim) demote (tests/test_tiering.py's EATERS)
    let text = "seed = 1\n[kernel]\nversion = \"6.12\"\nnuma_balancing = 2\n[kernel.sysctl]\ndemotion_enabled = true\n\
                [machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = [4, 0]\nmemory_type = [\"dram\", \"kmem\"]\nmemory_gib_per_node = [2, 4]\n\
                [[workload]]\nkind = \"memory_eater\"\nsize_gib = 1.5\nnode = 0\nfree_at_s = 8\n\
                [[workload]]\nkind = \"memory_eater\"\nsize_gib = 1.0\nnode = 0\nstart_s = 2.0\nfree_at_s = 6\n[run]\ntrace = true\n";
    let r = match parse_scenario(text) {
        Ok(s) => run(&s).expect("run succeeds"),
        Err(e) => panic!("scenario: {e}"),
    };
    let tr = r.tracepoints.as_ref().expect("traced");
    let demoted: u64 = tr["migrate"].as_array().unwrap().iter().filter(|m| m["reason"] == "demotion").map(|m| m["succeeded"].as_u64().unwrap()).sum();
    assert!(demoted > 0, "demotions appear under their reason");
    assert_eq!(demoted, r.counter("pgdemote_kswapd") + r.counter("pgdemote_direct"));
}
