//! Whole runs: kernel invariants, determinism, and the directions the acceptance names.

use numasim_engine::{parse_scenario, run, RunResult};

fn run_toml(text: &str) -> RunResult {
    let r = run(&parse_scenario(text).expect("scenario parses")).expect("run succeeds");
    check_invariants(&r);
    r
}

/// /proc/vmstat relations that hold on every kernel.
fn check_invariants(r: &RunResult) {
    assert!(r.completed, "every task finished");
    assert!(r.counter("numa_hint_faults_local") <= r.counter("numa_hint_faults"));
    assert!(r.counter("numa_pages_migrated") <= r.counter("pgmigrate_success"));
    assert!(r.counter("numa_hint_faults") <= r.counter("pgfault"));
    assert_eq!(r.counter("numa_hit") + r.counter("numa_miss"), r.counter("numa_local") + r.counter("numa_other"));
    assert_eq!(r.counter("pgalloc_normal"), r.counter("pgfree"), "every page is freed at exit");
    for w in r.samples.vmstat.windows(2) {
        assert!(w[0].iter().zip(w[1].iter()).all(|(a, b)| a <= b), "counters never decrease");
    }
    // the placement map and the image add up to the resident pages of the same sample, per process and node
    let mut sums = std::collections::BTreeMap::new();
    for &(i, pid, _, node, pages) in &r.samples.placement {
        *sums.entry((i, pid, node as usize)).or_insert(0u64) += pages;
    }
    for &(i, pid, node, pages) in &r.samples.image {
        *sums.entry((i, pid, node as usize)).or_insert(0u64) += pages;
    }
    for (&(i, pid, node), &pages) in &sums {
        let resident = r.samples.memory.iter().find(|m| m.0 == i && m.1 == pid && m.2 == node).map_or(0, |m| m.3);
        assert_eq!(pages, resident, "placement of pid {pid} node {node} at sample {i}");
    }
    assert!(r.samples.tasks.iter().all(|t| (t.4 as i64) < r.nr_nodes as i64 && (t.3 as usize) < r.nr_nodes));
}

/// `kind` alone on the default machine, without a process image (workload/image.rs: its
/// thread stacks and libraries change how fast the scanner reaches the buffers, which the
/// tests using this look past).
fn workload(kind: &str, balancing: bool) -> String {
    format!("[kernel]\nnuma_balancing = {balancing}\n[[workload]]\nkind = \"{kind}\"\nimage = \"none\"\n")
}

/// Hint-local percent over the last `frac` of the run and the faults it rests on. If no hint
/// fault fell in that window (the kernel scans rarely once converged), the window reaches back
/// to the last sample interval that took faults.
fn hint_local_pct_tail(r: &RunResult, frac: f64) -> (f64, u64) {
    let (faults, local) = (2, 3); // indices of numa_hint_faults and numa_hint_faults_local
    let v = &r.samples.vmstat;
    let t = &r.samples.time_ns;
    let end = *t.last().unwrap();
    let from = end - (end as f64 * frac) as u64;
    let mut i = t.iter().position(|&x| x >= from).unwrap().saturating_sub(1);
    if v.last().unwrap()[faults] == v[i][faults] {
        let last_growth = (1..v.len()).rev().find(|&j| v[j][faults] > v[j - 1][faults]).unwrap_or(1);
        i = last_growth - 1;
    }
    let df = v.last().unwrap()[faults] - v[i][faults];
    let dl = v.last().unwrap()[local] - v[i][local];
    (if df == 0 { 100.0 } else { 100.0 * dl as f64 / df as f64 }, df)
}

#[test]
fn vmstat_series_indices_match_names() {
    assert_eq!(numasim_engine::vmstat::VM_EVENT_NAMES[2], "numa_hint_faults");
    assert_eq!(numasim_engine::vmstat::VM_EVENT_NAMES[3], "numa_hint_faults_local");
}

/// Issue 2 acceptance on the 2-node 128-CPU profile: with balancing, numa02 converges (hint
/// faults local at the end) and runs within 15% of HARD_BIND; without, no hint faults and a
/// time between HARD_BIND and INVERSE_BIND.
#[test]
fn numa02_balancing_converges_to_hard_bind() {
    let on = run_toml(&workload("numa02", true));
    let off = run_toml(&workload("numa02", false));
    let hard = run_toml(&workload("numa02_HARD_BIND", false));
    let inverse = run_toml(&workload("numa02_INVERSE_BIND", false));
    let (tail, faults) = hint_local_pct_tail(&on, 0.1);
    assert!(faults > 0 && tail >= 80.0, "hint-local % at the end: {tail} over {faults} faults");
    assert!(on.counter("numa_pages_migrated") > 0);
    assert!((on.elapsed_s - hard.elapsed_s).abs() / hard.elapsed_s <= 0.15, "on {} vs hard {}", on.elapsed_s, hard.elapsed_s);
    assert_eq!(off.counter("numa_hint_faults"), 0);
    assert_eq!(off.counter("numa_pte_updates"), 0);
    assert!(hard.elapsed_s <= off.elapsed_s && off.elapsed_s <= inverse.elapsed_s, "hard {} off {} inverse {}", hard.elapsed_s, off.elapsed_s, inverse.elapsed_s);
    // bound memory never migrates
    let hard_on = run_toml(&workload("numa02_HARD_BIND", true));
    assert_eq!(hard_on.counter("numa_pages_migrated"), 0);
}

/// The same scenario and seed give bit-identical results; the seed picks numa01's node.
#[test]
fn runs_are_deterministic() {
    let text = "seed = 7\n[machine]\ncpus_per_node = 8\nsmt = 2\n[[workload]]\nkind = \"numa01\"\nsize_mib = 64\npasses = 30\n";
    let a = run_toml(text).to_json().to_string();
    let b = run_toml(text).to_json().to_string();
    assert_eq!(a, b);
}

/// Large folios keep runs deterministic, fragmentation draws included, and conserve pages
/// (the invariants run at every sample, including the PMD-THP uniformity check).
#[test]
fn large_folio_runs_are_deterministic() {
    let text = "seed = 3\n[machine]\ncpus_per_node = 8\nsmt = 2\nfragmentation = 0.5\n[kernel.sysctl]\nnuma_balancing_scan_delay_ms = 100\n[kernel.thp]\nenabled = \"always\"\nsizes = { \"64K\" = \"always\" }\n[[workload]]\nkind = \"numa01_THREAD_ALLOC\"\nsize_mib = 64\npasses = 100\n";
    let a = run_toml(text);
    assert_eq!(a.to_json().to_string(), run_toml(text).to_json().to_string());
    assert!(a.counter("thp_fault_alloc") > 0 && a.counter("thp_fault_fallback") > 0, "some PMDs fall back at fragmentation 0.5");
    assert!(a.mthp.iter().any(|(size, alloc, _)| size == "64kB" && *alloc > 0));
    assert!(a.counter("numa_pages_migrated") > 0);
}

/// Every autonuma-benchmark variant runs to completion at small scale with consistent counters.
#[test]
fn every_autonuma_variant_completes() {
    for kind in numasim_engine::workload::autonuma::KINDS {
        for balancing in [false, true] {
            let text = format!("[machine]\ncpus_per_node = 8\nsmt = 2\n[kernel]\nnuma_balancing = {balancing}\n[[workload]]\nkind = \"{kind}\"\nsize_mib = 128\npasses = 40\n");
            let r = run_toml(&text);
            assert!(r.elapsed_s > 0.0, "{kind}");
            if !balancing {
                assert_eq!(r.counter("numa_hint_faults"), 0, "{kind}");
            }
        }
    }
}

/// numa01 at full scale with balancing is the heaviest case; here at a quarter of the passes.
#[test]
fn numa01_with_balancing_keeps_counters_consistent() {
    let r = run_toml("[[workload]]\nkind = \"numa01\"\npasses = 5\n");
    assert!(r.counter("numa_hint_faults") > 0);
    assert!(r.counter("numa_pages_migrated") > 0, "shared pages ping-pong between nodes");
    let per_process = r.samples.memory.iter().filter(|m| m.0 == 1).count();
    assert_eq!(per_process, 2 * 2, "two processes x two nodes in the memory series");
}

/// Random small machines and workloads: every outcome is a result or a clean error, never a panic.
#[test]
fn random_scenarios_never_panic() {
    let mut x: u64 = 0x1234_5678;
    let mut next = |n: u64| xorshift(&mut x) % n;
    let kinds = numasim_engine::workload::autonuma::KINDS;
    let (mut ran, mut refused) = (0, 0);
    for _ in 0..60 {
        let nodes = next(5); // 0..4: 0 and 1 must be refused cleanly
        let smt = 1 + next(2);
        let cpus = smt * (1 + next(4));
        let mem = [0.05, 0.25, 1.0, 4.0][next(4) as usize];
        let kind = kinds[next(kinds.len() as u64) as usize];
        let text = format!(
            "seed = {}\n[machine]\nnodes = {nodes}\ncpus_per_node = {cpus}\nsmt = {smt}\nmemory_gib_per_node = {mem}\n[kernel]\nnuma_balancing = {}\n[kernel.sysctl]\nnuma_balancing_scan_delay_ms = {}\nnuma_balancing_scan_size_mb = {}\n[run]\nmax_sim_s = 30\n[[workload]]\nkind = \"{kind}\"\nsize_mib = {}\npasses = {}\nthreads = {}\n",
            next(1000),
            next(2) == 1,
            next(1500),
            next(300),
            1 + next(300),
            1 + next(20),
            1 + next(12),
        );
        let full = text.replace("[kernel]\n", &format!("{}\n[kernel]\n", cost_table(nodes as usize)));
        match run_or_refuse(&full) {
            Some(true) => ran += 1,
            Some(false) => refused += 1,
            None => {}
        }
    }
    assert!(ran >= 20 && refused >= 5, "ran {ran}, refused {refused}");
}

fn cost_table(n: usize) -> String {
    let m = |l: f64, r: f64| format!("[{}]", (0..n).map(|a| format!("[{}]", (0..n).map(|b| if a == b { l } else { r }.to_string()).collect::<Vec<_>>().join(", "))).collect::<Vec<_>>().join(", "));
    let v = |x: f64| format!("[{}]", vec![x.to_string(); n].join(", "));
    let d = format!("[{}]", (0..n).map(|a| format!("[{}]", (0..n).map(|b| if a == b { "10" } else { "21" }).collect::<Vec<_>>().join(", "))).collect::<Vec<_>>().join(", "));
    format!(
        "distances = {d}\n[machine.cost]\nstream_gibps = {}\npage_store_gibps = {}\ntouch_gibps = {}\nsmt_share = 0.5\nlatency_ns = {}\nnode_bandwidth_gibps = {}\ndram_bytes_per_store = 2.0\ninterconnect_gibps = 40.0\nfault_entry_exit_ns = 900.0\nclear_page_ns = 350.0\npte_update_ns = 5.0\nhint_fault_ns = 1200.0\nmigrate_page_ns = 3000.0\npage_copy_gibps = 6.0\nipi_send_ns = 700.0\nipi_per_target_ns = 150.0\nipi_receive_ns = 1200.0\ntlb_flush_local_all_ns = 200.0\ntlb_flush_local_one_ns = 100.0\nclone_ns = 15000.0\nvm_exit_ns = 600.0\nept_violation_ns = 2500.0\nclock_read_ns = 22.0\nclock_read_sys_ns = 0.0\n",
        m(2.5, 1.7),
        m(2.5, 1.7),
        m(2.5, 1.7),
        m(100.0, 180.0),
        v(100.0)
    )
}

const SMALL_MACHINE: &str = "[machine]\ncpus_per_node = 8\nsmt = 2\n";

/// migrate_pages(2) back and forth on a running workload: batching (v6.3) turns one IPI round
/// per page into one per 512 pages and migrates faster (seed 002's direction).
#[test]
fn migratepages_loop_batched_vs_per_folio() {
    let scenario = |batch: bool| {
        format!(
            "{SMALL_MACHINE}[kernel]\nnuma_balancing = false\n[kernel.features]\nmigrate-batch-flush = {batch}\n\
             [[workload]]\nkind = \"numa02\"\nsize_mib = 256\npasses = 2000\n\
             [[workload]]\nkind = \"migratepages\"\ntarget = 0\nfrom = 0\nto = 1\nloops = 4\nstart_s = 0.5\n"
        )
    };
    let batched = run_toml(&scenario(true));
    let single = run_toml(&scenario(false));
    let per_page = |r: &RunResult| r.counter("nr_tlb_remote_flush_received") as f64 / r.counter("pgmigrate_success") as f64;
    assert!(batched.counter("pgmigrate_success") > 100_000 && single.counter("pgmigrate_success") > 100_000);
    let drop = 1.0 - per_page(&batched) / per_page(&single);
    assert!(drop >= 0.95, "IPIs per migrated page fall by {:.3}", drop);
    let rate = |r: &RunResult| {
        let p = r.processes.iter().find(|p| p.comm == "migratepages").unwrap();
        r.counter("pgmigrate_success") as f64 / p.system_s
    };
    assert!(rate(&batched) > 1.5 * rate(&single), "pages per second of migration work: {} vs {}", rate(&batched), rate(&single));
    assert_eq!(batched.counter("numa_pages_migrated"), 0, "syscall migrations are not NUMA-balancing ones");
}

/// A memory eater fills its node (MPOL_BIND), so a workload started after it spills to the other
/// node by zonelist fallback; the eater's memory comes back when it is killed.
#[test]
fn memory_eater_holds_then_frees_its_node() {
    let text = format!(
        "{SMALL_MACHINE}memory_gib_per_node = 2\n[kernel]\nnuma_balancing = false\n\
         [[workload]]\nkind = \"memory_eater\"\nsize_gib = 1.8\nnode = 0\nfree_at_s = 3.0\n\
         [[workload]]\nkind = \"numa02\"\nsize_mib = 512\npasses = 100\nstart_s = 2.0\n"
    );
    let r = run_toml(&text);
    assert!(r.counter("numa_miss") > 0, "numa02's first touch spilled to node 1");
    let eater = r.processes.iter().find(|p| p.comm == "memhog").unwrap();
    assert!((eater.elapsed_s - 3.0).abs() < 0.01, "killed at 3 s: {}", eater.elapsed_s);
    let eater_pid = eater.pid;
    let held: Vec<u64> = r.samples.memory.iter().filter(|m| m.1 == eater_pid && m.2 == 0).map(|m| m.3).collect();
    assert!(held.iter().any(|&p| p >= (1.8 * 262144.0) as u64 - 1));
}

/// Keys that belong to another kind of workload are refused, not ignored.
#[test]
fn workload_keys_are_checked_per_kind() {
    let e = parse_scenario("[[workload]]\nkind = \"numa02\"\nsize_gib = 3.0\n").unwrap_err();
    assert!(e.to_string().contains("does not apply"), "{e}");
    let e = parse_scenario("[[workload]]\nkind = \"migratepages\"\ntarget = 0\n").unwrap_err();
    assert!(e.to_string().contains("another [[workload]]"), "{e}");
}

/// pmbench bound to node 1 next to a memory eater: pages spill to node 0, and once the eater is
/// killed NUMA balancing brings them back. Delaying the mapping (v5.13) removes almost every
/// TLB shootdown of those migrations (seed 000's direction); the same pages migrate either way.
#[test]
fn pmbench_with_eater_delay_map_cuts_shootdowns() {
    let scenario = |delay: bool| {
        format!(
            "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 8\nmemory_gib_per_node = 2\n\
             [kernel.features]\nnuma-delay-map = {delay}\n\
             [[workload]]\nkind = \"memory_eater\"\nsize_gib = 1.5\nnode = 1\nfree_at_s = 4.0\n\
             [[workload]]\nkind = \"pmbench\"\nprocesses = 2\nthreads = 4\nset_mib = 512\npattern = \"normal\"\nshape = 21845.0\n\
             nodes = [1]\nduration_s = 8.0\nstart_s = 2.0\n"
        )
    };
    let on = run_toml(&scenario(true));
    let off = run_toml(&scenario(false));
    for r in [&on, &off] {
        assert!(r.counter("numa_miss") > 0, "pmbench spilled to node 0");
        assert!(r.counter("numa_pages_migrated") > 10_000, "pages came back after the eater died");
        assert!(r.processes.iter().filter(|p| p.comm == "pmbench").all(|p| p.throughput_aps > 0.0));
    }
    let irqs = |r: &RunResult| r.tlb_irqs.iter().sum::<u64>() as f64;
    assert!(irqs(&on) < 0.1 * irqs(&off), "TLB shootdowns {} vs {}", irqs(&on), irqs(&off));
    let migrated = (on.counter("numa_pages_migrated") as f64, off.counter("numa_pages_migrated") as f64);
    assert!((migrated.0 / migrated.1 - 1.0).abs() < 0.2, "{migrated:?}");
}

/// The host-memory estimate grows with the pages simulated and counts a sampler's state.
#[test]
fn host_memory_estimate_counts_page_state() {
    let small = numasim_engine::estimate_host_bytes(&parse_scenario("[[workload]]\nkind = \"numa02\"\nsize_mib = 64\n").unwrap());
    let big = numasim_engine::estimate_host_bytes(&parse_scenario("[[workload]]\nkind = \"numa02\"\nsize_mib = 65536\n").unwrap());
    assert!(big - small >= (65536 - 64) * 256 * 6);
    let pm = numasim_engine::estimate_host_bytes(&parse_scenario("[[workload]]\nkind = \"pmbench\"\nset_mib = 65536\nduration_s = 1.0\n").unwrap());
    assert!(pm - big >= 65536 * 256 * 30, "random-access state per page");
    let err = numasim_engine::run_toml("[[workload]]\nkind = \"numa02\"\n", Some(1 << 20)).unwrap_err();
    assert!(matches!(err, numasim_engine::Error::Capacity { .. }));
}

/// move_pages(2) moves exactly the requested range: the pages of the first 64 MiB that are not
/// on the destination yet, in batches, and nothing else.
#[test]
fn move_pages_moves_the_requested_range() {
    let text = format!(
        "{SMALL_MACHINE}[kernel]\nnuma_balancing = false\n\
         [[workload]]\nkind = \"numa02_SMT\"\nsize_mib = 256\npasses = 400\nimage = \"none\"\n\
         [[workload]]\nkind = \"move_pages\"\ntarget = 0\nnode = 1\nfirst_mib = 0\nsize_mib = 64\nstart_s = 0.5\n"
    );
    let r = run_toml(&text);
    assert_eq!(r.counter("pgmigrate_success"), 64 * 256, "the main thread first-touched all 256 MiB on node 0");
    let pid = r.processes.iter().find(|p| p.comm == "numa02_SMT").unwrap().pid;
    let last = r.samples.memory.iter().filter(|m| m.1 == pid).map(|m| m.0).max().unwrap();
    let on1: u64 = r.samples.memory.iter().filter(|m| m.0 == last && m.1 == pid && m.2 == 1).map(|m| m.3).sum();
    assert_eq!(on1, 64 * 256);
    assert_eq!(r.counter("nr_tlb_remote_flush"), 32, "one batched flush per 512 pages");
}

/// Random mixes of pmbench, memory eaters and migration loops on small machines: a result or a
/// clean error, never a panic, and the counters stay consistent.
#[test]
fn random_syscall_and_pmbench_mixes_never_panic() {
    let mut x: u64 = 0x9e37_79b9;
    let mut next = |n: u64| xorshift(&mut x) % n;
    let patterns = ["uniform", "normal", "normal_ih", "pareto", "normal", "uniform", "pareto", "linear", "zipf"];
    let (mut ran, mut refused) = (0, 0);
    for _ in 0..160 {
        let nodes = 1 + next(3) as usize;
        let table = cost_table(nodes);
        let (distances, cost) = table.split_once("[machine.cost]").unwrap();
        let mut text = format!(
            "seed = {}\n[machine]\nnodes = {nodes}\ncpus_per_node = {}\nsmt = 1\nmemory_gib_per_node = {}\n{distances}[machine.cost]{cost}\n\
             [kernel]\nnuma_balancing = {}\n[kernel.features]\nmigrate-batch-flush = {}\nnuma-delay-map = {}\n[run]\nmax_sim_s = 8\n",
            next(100),
            1 + next(4),
            [0.25, 0.5, 1.0][next(3) as usize],
            next(2) == 1,
            next(2) == 1,
            next(2) == 1,
        );
        text += &format!(
            "[[workload]]\nkind = \"pmbench\"\nprocesses = {}\nthreads = {}\nset_mib = {}\npattern = \"{}\"\nshape = {}\nnodes = [{}]\nduration_s = {}\nstart_s = {}\n",
            1 + next(2),
            1 + next(4),
            1 + next(200),
            patterns[next(patterns.len() as u64) as usize],
            [0.5, 1.161, 100.0, 5000.0][next(4) as usize],
            (next(4 * nodes as u64 + 1) / 4),
            [0.5, 2.0, 1.0, 0.5, 0.0][next(5) as usize],
            next(2),
        );
        match next(4) {
            0 => text += &format!("[[workload]]\nkind = \"memory_eater\"\nsize_gib = {}\nnode = {}\nfree_at_s = {}\n", [0.05, 0.2, 5.0][next(3) as usize], next(nodes as u64), 1 + next(4)),
            1 => text += &format!("[[workload]]\nkind = \"migratepages\"\ntarget = {}\nfrom = {}\nto = {}\nloops = {}\n", next(5) / 4, next(nodes as u64), next(nodes as u64), 1 + next(3)),
            2 => text += &format!("[[workload]]\nkind = \"move_pages\"\ntarget = {}\nnode = {}\nsize_mib = {}\n", next(5) / 4, next(nodes as u64 + 1), 1 + next(64)),
            _ => {}
        }
        match run_or_refuse(&text) {
            Some(true) => ran += 1,
            Some(false) => refused += 1,
            None => {}
        }
    }
    assert!(ran >= 30 && refused >= 10, "ran {ran}, refused {refused}");
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Some(true): ran with consistent counters; Some(false): refused with problems; None: a
/// simulated out-of-memory. Anything else (another error, a panic) fails the test.
fn run_or_refuse(text: &str) -> Option<bool> {
    match parse_scenario(text) {
        Err(numasim_engine::Error::Scenario(p)) => {
            assert!(!p.is_empty());
            Some(false)
        }
        Err(e) => panic!("unexpected error kind: {e}"),
        Ok(s) => match run(&s) {
            Ok(r) => {
                assert!(r.counter("numa_hint_faults_local") <= r.counter("numa_hint_faults"));
                assert!(r.counter("numa_pages_migrated") <= r.counter("pgmigrate_success"));
                Some(true)
            }
            Err(numasim_engine::Error::OutOfMemory { .. }) => None,
            Err(e) => panic!("{text}\n-> {e}"),
        },
    }
}

/// kernel/sched/fair.c: task_numa_migrate with numa_group — on 2 nodes numa01's two processes
/// converge: while both run, each process's threads are on one node, each on a different node.
/// (Once one process has exited, the load balancer spreads the other over the idle node: after
/// cache_nice_tries failures, and by active balancing, which ignores locality.) (On 6.1: from
/// 6.10 the scanner protects the folios waiting in LRU add batches, whose isolation then fails,
/// and every thread that meets one scans ever slower; see docs/model.md.)
#[test]
fn numa01_processes_converge_on_separate_nodes() {
    let r = run_toml(&workload("numa01", true).replace("[kernel]\n", "[kernel]\nversion = \"6.1\"\n"));
    let threads = r.tasks.iter().filter(|t| t.tgid != t.pid).count();
    // the last placement sample with every thread (and no main thread: they sleep) running
    let tasks = &r.samples.tasks;
    let last = (0..=tasks.last().unwrap().0).rev().find(|&i| tasks.iter().filter(|x| x.0 == i && x.1 != x.2).count() == threads).unwrap();
    let mut nodes_of: std::collections::BTreeMap<u32, std::collections::BTreeSet<u8>> = Default::default();
    for x in tasks.iter().filter(|x| x.0 == last && x.1 != x.2) {
        nodes_of.entry(x.2).or_default().insert(x.3);
    }
    assert_eq!(nodes_of.len(), 2);
    let sets: Vec<_> = nodes_of.values().collect();
    assert!(sets.iter().all(|s| s.len() == 1), "threads per process on one node: {sets:?}");
    assert_ne!(sets[0], sets[1]);
    assert!(r.tasks.iter().any(|t| t.numa_group.is_some()), "threads sharing pages are grouped");
}

/// numa02 on the 4-node 48-CPU machine: at least 90% of the threads end preferring the node
/// that holds most of their slice (task_numa_placement's preferred node).
#[test]
fn numa02_threads_prefer_their_memory_node() {
    let r = run_toml("[machine]\nprofile = \"intel-4s-48c\"\n[[workload]]\nkind = \"numa02\"\n");
    let threads: Vec<_> = r.tasks.iter().filter(|t| t.tgid != t.pid).collect();
    let agree = threads.iter().filter(|t| t.preferred_nid.is_some() && t.preferred_nid == t.mem_node).count();
    assert!(agree * 10 >= threads.len() * 9, "{agree} of {}", threads.len());
}

/// mm/memory.c: do_numa_page — without numa-preserve-write (4.0-rc1..rc4) the first write after
/// a hinting fault takes an extra write fault; with it (b191f9b106ea) none.
#[test]
fn preserving_the_write_bit_saves_write_faults() {
    let text = |preserve: bool| format!("[kernel.features]\nnuma-preserve-write = {preserve}\n[[workload]]\nkind = \"numa02\"\nimage = \"none\"\n");
    let (off, on) = (run_toml(&text(false)), run_toml(&text(true)));
    let extra = off.counter("pgfault") - off.counter("numa_hint_faults");
    let base = on.counter("pgfault") - on.counter("numa_hint_faults");
    assert!(extra > base + on.counter("numa_hint_faults") / 2, "{extra} vs {base}");
}

/// The validation workload: buffer first-touched on node 0, streamed from node 1. With
/// balancing every page ends on node 1 (each migrated once) but the last ones the main thread
/// touched: its CPU's LRU add batch (mm/swap.c, 31 folios on 6.12) still holds them, so their
/// isolation fails every pass; without balancing, none moves. With
/// MADV_NOHUGEPAGE no THP is allocated even with THP "always"; with MADV_HUGEPAGE the buffer is
/// PMD-mapped and scanned as 2 MiB units.
#[test]
fn remote_toucher_pulls_buffer_to_the_run_node() {
    let sc = |balancing: bool, thp: &str, advice: &str| {
        format!(
            "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 2\nmemory_gib_per_node = 2\n[kernel]\nnuma_balancing = {balancing}\n[kernel.thp]\nenabled = \"{thp}\"\n\
             [[workload]]\nkind = \"remote_toucher\"\nsize_mib = 32\nduration_s = 6\nmadvise = \"{advice}\"\nimage = \"none\"\n[run]\nsample_interval_ms = 1000\n"
        )
    };
    let last_on_node = |r: &RunResult, node: usize| r.samples.memory.iter().filter(|m| m.2 == node).map(|m| (m.0, m.3)).max().map_or(0, |m| m.1);
    let on = run_toml(&sc(true, "never", "none"));
    let batched = 32 * 256 % 31;
    assert_eq!(on.counter("numa_pages_migrated"), 32 * 256 - batched, "every page moves once, but the batched ones");
    let off = run_toml(&sc(false, "never", "none"));
    assert_eq!(off.counter("numa_pages_migrated"), 0);
    assert_eq!(off.counter("numa_hint_faults"), 0);
    assert!(last_on_node(&on, 1) > last_on_node(&off, 1));
    let last = on.samples.placement.iter().map(|p| p.0).max().expect("placement map sampled");
    let on_node1: u64 = on.samples.placement.iter().filter(|p| p.0 == last && p.3 == 1).map(|p| p.4).sum();
    assert_eq!(on_node1, 32 * 256 - batched, "the map shows the buffer on node 1");
    assert!(on.samples.tasks.iter().any(|t| t.4 == 1), "workers prefer node 1");
    let nohuge = run_toml(&sc(true, "always", "nohugepage"));
    assert_eq!(nohuge.counter("thp_fault_alloc"), 0);
    assert_eq!(nohuge.counter("numa_huge_pte_updates"), 0);
    let huge = run_toml(&sc(true, "madvise", "hugepage"));
    assert_eq!(huge.counter("thp_fault_alloc"), 16, "32 MiB = 16 PMDs");
    assert!(huge.counter("numa_huge_pte_updates") >= 16);
    assert_eq!(huge.counter("numa_pte_updates"), 512 * huge.counter("numa_huge_pte_updates"));
    assert_eq!(huge.counter("thp_migration_success"), 16);
}

/// Seed 004 on a small VM whose RAM is all pinned by VFIO: the base kernel protects the pinned
/// THPs (hint faults, failed migrations) and KVM flushes its vCPUs for every NUMA chunk; with the
/// RFC's three patches none of that happens, and the guest's own work is unchanged.
#[test]
fn pinned_guest_with_the_rfc_loses_numa_flushes_hint_faults_and_failures() {
    let sc = |patched: bool| {
        let f = if patched { "[kernel.features]\nnuma-skip-pinned = true\nmmu-notifier-range-numa = true\nkvm-skip-pinned-zap = true\n" } else { "" };
        format!(
            "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 4\n[kernel]\nversion = \"6.4\"\n{f}[kernel.thp]\nenabled = \"madvise\"\n\
             [[workload]]\nkind = \"kvm_guest\"\nvcpus = 8\nmemory_mib = 2048\nduration_s = 20\nimage = \"none\"\n"
        )
    };
    let (base, patched) = (run_toml(&sc(false)), run_toml(&sc(true)));
    let (b, p) = (&base.kvm[0].stats, &patched.kvm[0].stats);
    assert!(b.numa_remote_tlb_flush >= 5 && b.numa_remote_tlb_flush_ipis >= 5 * b.numa_remote_tlb_flush, "{b:?}");
    assert!(b.pinned_hint_faults > 0 && base.counter("pgmigrate_fail") > 0 && base.counter("numa_huge_pte_updates") > 0);
    assert_eq!((p.numa_remote_tlb_flush, p.pinned_hint_faults, p.sptes_zapped), (0, 0, 0));
    assert_eq!((patched.counter("pgmigrate_fail"), patched.counter("numa_hint_faults"), patched.counter("numa_pte_updates")), (0, 0, 0));
    assert!(p.sptes_kept_pinned > 0, "the scanner still reached the pinned RAM");
    assert_eq!(b.ept_violations - b.sptes_zapped.min(b.ept_violations), p.ept_violations, "beyond refaults, the guest faults the same");
    assert_eq!(run_toml(&sc(false)).to_json(), base.to_json(), "deterministic");
}

/// pmbench's linear pattern (pattern.c: linear_get_number, stride 1): every thread walks the
/// set in page order from page 0, so the warm-up pass first-touches each page of the set once
/// and nothing of the map beyond it; a timed access then costs one memory latency plus the
/// generator overhead. With balancing on, the walk meets the scanner's PROT_NONE pages in
/// order: hint faults, and the pages first touched off the threads' node come home.
/// pmbench would loop on page 0 with a stride of 0, and strides above 1 are not modelled.
#[test]
fn pmbench_linear_walks_the_set_in_order() {
    let text = |balancing: bool, extra: &str| {
        format!(
            "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 8\nmemory_gib_per_node = 2\n[kernel]\nnuma_balancing = {balancing}\n\
             [[workload]]\nkind = \"pmbench\"\nthreads = 2\nset_mib = 64\nmap_mib = 128\npattern = \"linear\"\nnodes = [0]\nduration_s = 3.0\nimage = \"none\"\n{extra}"
        )
    };
    let r = run_toml(&text(false, ""));
    assert_eq!(r.counter("pgalloc_normal"), 64 * 256, "the set, once");
    assert_eq!(r.counter("pgfault"), 64 * 256);
    let p = r.processes.iter().find(|p| p.comm == "pmbench" && p.threads > 1).expect("pmbench");
    // intel-2s-128g: 90 ns local latency, 30 ns overhead per access
    let ideal = 2.0 * 1e9 / (90.0 + 30.0);
    assert!((p.throughput_aps / ideal - 1.0).abs() < 0.01, "{} vs {ideal}", p.throughput_aps);
    // a memory eater fills node 0 first: the set spills to node 1, and balancing brings it back
    let eater = "[[workload]]\nkind = \"memory_eater\"\nsize_gib = 1.95\nnode = 0\nfree_at_s = 2.0\n";
    let spilled = run_toml(&text(true, &format!("start_s = 1.5\n{eater}")));
    assert!(spilled.counter("numa_miss") > 0, "pages first touched on node 1");
    assert!(spilled.counter("numa_hint_faults") > 0 && spilled.counter("numa_pages_migrated") > 0);
    for shape in [0.5, 2.0, 16.0] {
        let e = parse_scenario(&text(false, &format!("shape = {shape}\n"))).unwrap_err();
        assert!(e.to_string().contains("stride 1"), "{e}");
    }
}

/// mm/memory.c: do_anonymous_page maps the shared zero page for a first access that is a load
/// (no page allocated, nothing for NUMA balancing to scan); the first store then copies it
/// (do_wp_page -> wp_page_copy), a second fault. pmbench's loads and stores: read-only runs
/// allocate nothing, write-only runs fault once per page, mixed runs in between.
#[test]
fn pmbench_first_loads_map_the_zero_page() {
    let run = |read_ratio: u32, balancing: bool| {
        run_toml(&format!(
            "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 8\nmemory_gib_per_node = 2\n[kernel]\nnuma_balancing = {balancing}\n\
             [[workload]]\nkind = \"pmbench\"\nthreads = 4\nset_mib = 64\npattern = \"uniform\"\nread_ratio = {read_ratio}\nduration_s = 3.0\nimage = \"none\"\n"
        ))
    };
    let pages = 64 * 256;
    let reads = run(100, true);
    assert_eq!(reads.counter("pgalloc_normal"), 0, "only the zero page is mapped");
    assert_eq!(reads.counter("pgfault"), pages, "one read fault per page");
    assert_eq!(reads.counter("numa_pte_updates") + reads.counter("numa_hint_faults"), 0, "nothing to scan");
    let writes = run(0, false);
    assert_eq!((writes.counter("pgalloc_normal"), writes.counter("pgfault")), (pages, pages));
    let mixed = run(50, false);
    let (alloc, faults) = (mixed.counter("pgalloc_normal"), mixed.counter("pgfault"));
    assert_eq!(alloc, pages, "every page is stored to within 3 s");
    // about half the pages are loaded first: a zero-page fault, then the copy
    let extra = (faults - alloc) as f64 / pages as f64;
    assert!((extra - 0.5).abs() < 0.03, "{extra}");
}

/// numa02 on 4 nodes that are not directly connected (kernel/sched/topology.c:
/// init_numa_topology_type): the result names the topology type, and with score_nearby_nodes
/// in the weights most threads still end up preferring the node of their slice.
#[test]
fn numa02_converges_on_mesh_and_backplane_topologies() {
    let mesh = "[[10, 20, 30, 20], [20, 10, 20, 30], [30, 20, 10, 20], [20, 30, 20, 10]]";
    let backplane = "[[10, 12, 32, 32], [12, 10, 32, 32], [32, 32, 10, 12], [32, 32, 12, 10]]";
    for (slit, kind) in [(mesh, numasim_engine::topology::NumaTopologyType::GluelessMesh), (backplane, numasim_engine::topology::NumaTopologyType::Backplane)] {
        let machine = cost_table(4).replace(&cost_table(4).lines().next().unwrap().to_string(), &format!("distances = {slit}"));
        let r = run_toml(&format!("[machine]\nnodes = 4\ncpus_per_node = 8\nsmt = 2\nmemory_gib_per_node = 4\n{machine}[[workload]]\nkind = \"numa02\"\n"));
        assert_eq!(r.numa_topology_type, kind);
        let threads: Vec<_> = r.tasks.iter().filter(|t| t.tgid != t.pid).collect();
        let agree = threads.iter().filter(|t| t.preferred_nid.is_some() && t.preferred_nid == t.mem_node).count();
        assert!(agree * 10 >= threads.len() * 8, "{kind:?}: {agree} of {}", threads.len());
    }
}

/// A time-bound stream reads the clock once per 256 pages (numaw's loops): each read costs
/// `clock_read_ns` and is charged `clock_read_sys_ns` of system time (HPET: a system call), and
/// more with more CPUs busy where the figures are given per number of other busy CPUs (an
/// emulated HPET under QEMU). The toucher's loop crosses pages at `touch_gibps`, not at the
/// memset rate, so the reads come as often as that rate says.
#[test]
fn a_time_bound_touchers_clock_reads_are_system_time_at_its_touch_rate() {
    let sc = |clock_ns: &str, threads: usize| {
        let sys_ns = clock_ns.replace("5000.0", "4000.0").replace("20000.0", "16000.0");
        format!(
            "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 2\nsmt = 1\nmemory_gib_per_node = 2\n[machine.cost]\ntouch_gibps = [[8.0, 8.0], [8.0, 8.0]]\nnode_bandwidth_gibps = [1000.0, 1000.0]\ninterconnect_gibps = 1000.0\n\
             clock_read_ns = {clock_ns}\nclock_read_sys_ns = {sys_ns}\n[kernel]\nnuma_balancing = false\n\
             [[workload]]\nkind = \"remote_toucher\"\nsize_mib = 32\nthreads = {threads}\nduration_s = 2\nimage = \"none\"\n"
        )
    };
    let touch_ns = 4096.0 / (8.0 * (1u64 << 30) as f64 / 1e9);
    // each worker streams for 2 s: its reads' system time over its time per page
    let want = |workers: f64, read_ns: f64| workers * 2.0 * (read_ns * 0.8 / 256.0) / (touch_ns + read_ns / 256.0);
    for (threads, clock, read_ns) in [(1, "5000.0", 5000.0), (1, "[5000.0, 20000.0]", 5000.0), (2, "[5000.0, 20000.0]", 20000.0)] {
        let (plain, clocked) = (run_toml(&sc("0.0", threads)), run_toml(&sc(clock, threads)));
        let got = clocked.system_s - plain.system_s;
        let want = want(threads as f64, read_ns);
        assert!((got / want - 1.0).abs() < 0.03, "{threads} workers, clock_read_ns = {clock}: {got:.4} s of system time, the touch rate gives {want:.4} s");
        assert!((clocked.user_s + clocked.system_s - plain.user_s - plain.system_s).abs() < 0.01, "the same CPU time, split otherwise");
    }
}

/// A run cut off at `max_sim_s` while a time-bound stream runs still charges the clock reads it
/// made up to the cut, the last bandwidth tick's included: the reads' system time is the full
/// run's rate times the time streamed.
#[test]
fn a_run_cut_off_mid_stream_charges_the_clock_reads_made_before_the_cut() {
    let sc = |clock_ns: &str, max_s: f64| {
        format!(
            "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 2\nsmt = 1\nmemory_gib_per_node = 2\n[machine.cost]\ntouch_gibps = [[8.0, 8.0], [8.0, 8.0]]\nnode_bandwidth_gibps = [1000.0, 1000.0]\ninterconnect_gibps = 1000.0\n\
             clock_read_ns = {clock_ns}\nclock_read_sys_ns = {clock_ns}\n[kernel]\nnuma_balancing = false\n[run]\nmax_sim_s = {max_s}\n\
             [[workload]]\nkind = \"remote_toucher\"\nsize_mib = 32\nthreads = 1\nduration_s = 2\nimage = \"none\"\n"
        )
    };
    let times = |clock_ns: &str, max_s: f64| {
        let r = run(&parse_scenario(&sc(clock_ns, max_s)).expect("scenario parses")).expect("run succeeds");
        assert_eq!(r.completed, max_s > 2.5, "a run cut at {max_s} s is not reported finished");
        (r.user_s, r.system_s)
    };
    // the full run: its reads' system time per second streamed, and the CPU time before the stream
    let (plain, clocked) = (times("0.0", 10.0), times("5000.0", 10.0));
    let per_s = (clocked.1 - plain.1) / 2.0;
    let setup = plain.0 + plain.1 - 2.0;
    // within half a tick (HZ=250) of streaming: a lost last tick is 4 ms of reads short
    for max_s in [0.05, 0.5] {
        let cut = times("5000.0", max_s).1 - times("0.0", max_s).1;
        let want = per_s * (max_s - setup);
        assert!((cut - want).abs() < per_s * 0.002, "cut at {max_s} s: {cut:.6} s of clock-read system time, {want:.6} s for {:.3} s streamed", max_s - setup);
    }
}
