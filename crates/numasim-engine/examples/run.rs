//! Run a scenario file and print a summary: `cargo run --release --example run -- FILE.toml`.
//! `PHASES=SECONDS` prints wall time and resident memory as the run goes; `RESULT_JSON=PATH`
//! writes the whole result.
fn main() {
    let path = std::env::args().nth(1).expect("usage: run FILE.toml");
    let text = std::fs::read_to_string(&path).expect("read scenario");
    let s = match numasim_engine::parse_scenario(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    // PHASES=SECONDS: print the wall time at every SECONDS of simulated time
    let phases: Option<f64> = std::env::var("PHASES").ok().and_then(|v| v.parse().ok());
    let wall = std::time::Instant::now();
    let mut sim = numasim_engine::Simulation::new(&s).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    if let Some(every) = phases {
        eprintln!("built at {:.2} wall s, {} MB resident", wall.elapsed().as_secs_f64(), resident_mb());
        let mut next = every;
        while sim.step().unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1)
        }) {
            if sim.now_s() >= next {
                eprintln!("sim {:6.1} s at {:6.2} wall s, {} MB resident", sim.now_s(), wall.elapsed().as_secs_f64(), resident_mb());
                next += every;
            }
        }
    }
    if phases.is_some() {
        eprintln!("stepped at {:.2} wall s", wall.elapsed().as_secs_f64());
    }
    let r = sim.finish().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    if phases.is_some() {
        eprintln!("finished at {:.2} wall s", wall.elapsed().as_secs_f64());
    }
    // RESULT_JSON=PATH: write the whole result (to compare builds byte for byte)
    if let Ok(out) = std::env::var("RESULT_JSON") {
        std::fs::write(&out, r.to_json().to_string()).expect("write RESULT_JSON");
    }
    println!("elapsed {:.3}s user {:.1}s sys {:.2}s completed {} ticks {}", r.elapsed_s, r.user_s, r.system_s, r.completed, r.ticks);
    let with_mem: Vec<_> = r.tasks.iter().filter(|t| t.mem_node.is_some()).collect();
    let agree = with_mem.iter().filter(|t| t.preferred_nid == t.mem_node).count();
    println!("  tasks: {} with sweeps, preferred == memory node for {}, groups {:?}", with_mem.len(), agree, {
        let mut g: Vec<_> = r.tasks.iter().filter_map(|t| t.numa_group).collect();
        g.sort();
        g.dedup();
        g.len()
    });
    if std::env::var("TASKS").is_ok() {
        for t in &r.tasks {
            println!("  task {} node {} pref {:?} mem {:?} group {:?}", t.pid, t.node, t.preferred_nid, t.mem_node, t.numa_group);
        }
    }
    for tgid in r.tasks.iter().map(|t| t.tgid).collect::<std::collections::BTreeSet<_>>() {
        let nodes: Vec<usize> = r.tasks.iter().filter(|t| t.tgid == tgid && t.mem_node.is_some()).map(|t| t.node).collect();
        let mut per = vec![0; r.nr_nodes];
        nodes.iter().for_each(|&n| per[n] += 1);
        println!("  process {tgid}: threads per node {:?}", &per[..r.nr_nodes]);
    }
    let tput: f64 = r.processes.iter().map(|p| p.throughput_aps).sum();
    if tput > 0.0 {
        println!("  throughput_aps {tput:.4e}  TLB irqs {}", r.tlb_irqs.iter().sum::<u64>());
    }
    for (n, v) in &r.counters {
        if *v > 0 {
            println!("  {n:32} {v}");
        }
    }
    for v in &r.kvm {
        println!("  kvm {} ({} vCPUs, {:.2} scan passes, {:.2} while running): {}", v.pid, v.vcpus, v.scan_passes, v.running_scan_passes, serde_json::to_string(&v.stats).unwrap_or_default());
    }
}

/// The process's resident set (VmRSS) in MB, or 0 where /proc is missing.
fn resident_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    kb.unwrap_or(0) / 1024
}
