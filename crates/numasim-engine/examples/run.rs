//! Run a scenario file and print a summary: `cargo run --release --example run -- FILE.toml`.
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
    let r = numasim_engine::run(&s).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    println!("elapsed {:.3}s user {:.1}s sys {:.2}s completed {} ticks {}", r.elapsed_s, r.user_s, r.system_s, r.completed, r.ticks);
    let tput: f64 = r.processes.iter().map(|p| p.throughput_aps).sum();
    if tput > 0.0 {
        println!("  throughput_aps {tput:.4e}  TLB irqs {}", r.tlb_irqs.iter().sum::<u64>());
    }
    for (n, v) in &r.counters {
        if *v > 0 {
            println!("  {n:32} {v}");
        }
    }
}
