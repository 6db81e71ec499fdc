"""Wall time and peak RSS against the node count (docs/performance.md, "Scaling with nodes").

A machine of 128 CPUs and 256 GiB cut into N nodes (N = 2 .. 32; SLIT 10 local, 20 to a node
of the same socket-pair, 30 beyond; latency and stream bandwidth to match), on two workloads:
numa01 (event-sparse: two processes of 64 threads streaming a shared 3 GiB each) and pmbench
(event-dense: 16 threads, 16 GiB uniform, 30 s). NUMA events: PTE updates + hint faults + pages
migrated (each run's own counters), and the wall time per event. Runs the engine's example runner, the fastest of --repeat runs:

    cargo build --release --example run
    python scripts/node-scaling.py target/release/examples/run [--repeat 2] [--nodes 2,4,8,16,32]
    python scripts/node-scaling.py target/release/examples/run --cpus 64,128,256,512,1024   # CPU axis
    python scripts/node-scaling.py target/release/examples/run --set-gib 16,64,256   # memory axis
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

CPUS, MEM_GIB = 128, 256


def matrix(n, f):
    return "[" + ", ".join("[" + ", ".join(str(f(i, j)) for j in range(n)) + "]" for i in range(n)) + "]"


def machine(n: int, cpus: int = CPUS) -> str:
    near = lambda i, j: i == j or i // 2 == j // 2  # noqa: E731
    dist = lambda i, j: 10 if i == j else 20 if near(i, j) else 30  # noqa: E731
    lat = lambda i, j: 90.0 if i == j else 140.0 if near(i, j) else 190.0  # noqa: E731
    stream = lambda i, j: 2.5 if i == j else 1.75 if near(i, j) else 1.2  # noqa: E731
    return f"""[machine]
profile = "xeon-platinum-2n-128c"
name = "scale-{n}n"
nodes = {n}
cpus_per_node = {cpus // n}
memory_gib_per_node = {MEM_GIB // n}
distances = {matrix(n, dist)}
[machine.cost]
latency_ns = {matrix(n, lat)}
stream_gibps = {matrix(n, stream)}
node_bandwidth_gibps = {[100.0] * n}
"""


WORKLOADS = {
    "numa01": '[[workload]]\nkind = "numa01"\n',
    "pmbench": '[[workload]]\nkind = "pmbench"\nthreads = 16\nset_mib = 16384\npattern = "uniform"\nduration_s = 30\n',
}


EVENTS = ("numa_pte_updates", "numa_hint_faults", "numa_pages_migrated")


def run(bin_path: str, text: str) -> tuple:
    """(wall s, peak RSS MiB, NUMA events) of one run."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", bin_path, f.name], capture_output=True, text=True)
    Path(f.name).unlink()
    if out.returncode != 0:
        sys.exit(f"{bin_path} failed: {out.stderr.strip()[-400:]}")
    wall, rss_kb = out.stderr.strip().splitlines()[-1].split()
    counters = dict(line.split()[:2] for line in out.stdout.splitlines() if line.strip().split()[:1] and line.split()[0] in EVENTS)
    return float(wall), int(rss_kb) / 1024, sum(int(counters.get(e, 0)) for e in EVENTS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--nodes", default="2,4,8,16,32")
    ap.add_argument("--cpus", help="instead: these CPU counts (comma-separated) on 8 nodes, numa01 only")
    ap.add_argument("--set-gib", help="instead: pmbench working sets of these GiB (comma-separated; 16 threads, "
                    "uniform, 30 s) on 2 nodes with room for them")
    a = ap.parse_args()
    if a.set_gib:
        print("| workload | set GiB | wall s (min) | peak RSS MiB | bytes per set page | NUMA events | us per event |")
        print("|---|---|---|---|---|---|---|")
        for g in (int(x) for x in a.set_gib.split(",")):
            w = WORKLOADS["pmbench"].replace("set_mib = 16384", f"set_mib = {g * 1024}")
            m = machine(2).replace(f"memory_gib_per_node = {MEM_GIB // 2}", f"memory_gib_per_node = {max(MEM_GIB // 2, g)}")
            runs = [run(a.bin, f"seed = 1\n{m}{w}") for _ in range(a.repeat)]
            wall, rss, events = min(r[0] for r in runs), max(r[1] for r in runs), runs[0][2]
            per_page = rss * 2**20 / (g * 2**18)
            print(f"| pmbench | {g} | {wall:.2f} | {rss:.0f} | {per_page:.1f} | {events:.3g} | {wall / events * 1e6:.3f} |", flush=True)
        return
    nodes = [int(x) for x in a.nodes.split(",")]
    if a.cpus:
        print("| workload | nodes | CPUs | wall s (min) | peak RSS MiB | NUMA events | us per event |")
        print("|---|---|---|---|---|---|---|")
        for c in (int(x) for x in a.cpus.split(",")):
            text = f"seed = 1\n{machine(8, c)}{WORKLOADS['numa01']}"
            runs = [run(a.bin, text) for _ in range(a.repeat)]
            wall, rss, events = min(r[0] for r in runs), max(r[1] for r in runs), runs[0][2]
            print(f"| numa01 | 8 | {c} | {wall:.2f} | {rss:.0f} | {events:.3g} | {wall / events * 1e6:.3f} |", flush=True)
        return
    print("| workload | nodes | CPUs/node | wall s (min) | peak RSS MiB | NUMA events | us per event |")
    print("|---|---|---|---|---|---|---|")
    for name, w in WORKLOADS.items():
        for n in nodes:
            text = f"seed = 1\n{machine(n)}{w}"
            runs = [run(a.bin, text) for _ in range(a.repeat)]
            wall = min(r[0] for r in runs)
            rss = max(r[1] for r in runs)
            events = runs[0][2]
            per = f"{wall / events * 1e6:.3f}" if events else "-"
            print(f"| {name} | {n} | {CPUS // n} | {wall:.2f} | {rss:.0f} | {events:.3g} | {per} |", flush=True)


if __name__ == "__main__":
    main()
