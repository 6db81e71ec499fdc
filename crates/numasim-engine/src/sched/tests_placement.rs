//! Tests of fork/exec placement, wake-ups and DELAY_DEQUEUE against the kernel's rules.

use crate::kernel::Kernel;
use crate::scenario::parse_scenario;
use crate::sched::task::TaskState;
use crate::simulation::Simulation;
use crate::testutil::SMALL;

/// 2 nodes x `cpus` CPUs (no SMT), release `version` (+ `extra` kernel lines), `threads` threads
/// not started yet, and the main thread running on CPU 0.
pub fn forking(version: &str, extra: &str, cpus: usize, threads: usize, balancing: bool) -> (Kernel, usize, Vec<usize>) {
    let text = SMALL.replace("cpus_per_node = 2", &format!("cpus_per_node = {cpus}")).replace("threads = 4", &format!("threads = {threads}"));
    let s = parse_scenario(&format!("[kernel]\nversion = \"{version}\"\nnuma_balancing = {balancing}\n{extra}\n{text}")).expect("parses");
    let mut k = Simulation::new(&s).expect("builds").k;
    let main = k.tasks.iter().position(|t| t.parent.is_none()).unwrap();
    let children = k.tasks[main].children.clone();
    k.tasks[main].state = TaskState::Runnable;
    k.tasks[main].cpu = 0;
    k.cpus[0].rq.push(main);
    (k, main, children)
}

/// The nodes `children` start on, forked one after the other by a running parent.
fn fork_all(k: &mut Kernel, children: &[usize]) -> Vec<usize> {
    children
        .iter()
        .map(|&c| {
            k.wake_up_new_task(c);
            k.task_node(c)
        })
        .collect()
}

/// kernel/sched/fair.c: find_idlest_group — where a running parent on node 0 (2 x 8 CPUs)
/// puts its threads, by release: the old load comparison (3.x-4.9) and 6.0's idle-CPU rule
/// with imb_numa_nr 1 (cb29a5c19d2d, 026b98a93bbd) alternate from the first thread; 5.5 stays
/// while node 0 has an idle CPU (57abff067a08); 5.11 while node 0 runs < 16 / 4 tasks
/// (23e6082a522e); 5.18 while its running + 1 <= imb_numa_nr = 8 >> 2 (2cfb7a1b031b).
#[test]
fn fork_numa_imbalance_by_release() {
    let cases: [(&str, &str, &[usize]); 5] = [
        ("4.9", "", &[1, 0, 1, 0, 1, 0]),
        ("6.1", "", &[1, 0, 1, 0, 1, 0]),
        ("5.12", "[kernel.variants]\nfind_idlest_group = \"5.5\"", &[0, 0, 0, 0, 0, 0, 0, 1, 1]),
        ("5.12", "", &[0, 0, 0, 1, 1, 1, 1, 0]),
        ("6.1", "[kernel.variants]\nfind_idlest_group = \"5.18\"\nimb_numa_nr = \"5.18\"", &[0, 1, 1, 0]),
    ];
    for (version, extra, expect) in cases {
        let (mut k, _, children) = forking(version, extra, 8, expect.len(), false);
        assert_eq!(fork_all(&mut k, &children), expect.to_vec(), "{version} {extra}");
    }
}

/// kernel/sched/fair.c: find_idlest_group (CONFIG_NUMA_BALANCING) — with spare capacity a
/// thread starts on the preferred node it inherits from its parent (init_numa_balancing keeps
/// numa_preferred_nid for CLONE_VM), here node 1 while the parent runs on node 0; the 3.x code
/// has no such rule and spreads them.
#[test]
fn threads_start_on_the_inherited_preferred_node() {
    for (version, expect) in [("6.12", vec![1, 1, 1, 1, 1, 1]), ("5.12", vec![1, 1, 1, 1, 1, 1]), ("4.9", vec![1, 0, 1, 0, 1, 0])] {
        let (mut k, main, children) = forking(version, "", 8, 6, true);
        k.tasks[main].numa.preferred_nid = Some(1);
        assert_eq!(fork_all(&mut k, &children), expect, "{version}");
    }
}

/// kernel/sched/core.c: sched_exec, kernel/sched/fair.c: update_sg_wakeup_stats — at exec the
/// task is not counted where it runs: a program started while another task runs on node 0
/// is forked to node 1 (more idle CPUs) and stays there at exec; on an idle machine it stays
/// where the launcher runs (CPU 0).
#[test]
fn exec_balancing_leaves_the_task_out() {
    let (mut k, main, _) = forking("6.12", "", 8, 2, false);
    k.cpus[0].rq.clear();
    k.tasks[main].state = TaskState::NotStarted;
    k.wake_up_new_task(main);
    assert_eq!(k.tasks[main].cpu, 0);
    let (mut k, main, _) = forking("6.12", "", 8, 2, false);
    let other = k.tasks[main].children[0];
    k.cpus[0].rq.clear();
    (k.tasks[other].state, k.tasks[other].cpu) = (TaskState::Runnable, 1);
    k.cpus[1].rq.push(other);
    k.tasks[main].state = TaskState::NotStarted;
    k.wake_up_new_task(main);
    assert_eq!(k.task_node(main), 1);
}

/// kernel/sched/fair.c: select_idle_sibling — a woken task takes its previous CPU if idle,
/// else an idle CPU of the same LLC (node), else its previous CPU: never another node.
#[test]
fn wakeups_stay_in_the_node() {
    let (mut k, main, children) = forking("6.12", "", 2, 3, false);
    fork_all(&mut k, &children);
    // node 0: main on CPU 0 and a child on CPU 1; node 1 has the other two
    assert_eq!((0..4).map(|c| k.cpus[c].rq.len()).collect::<Vec<_>>(), vec![1, 1, 1, 1]);
    let t = k.cpus[1].rq[0];
    k.task_sleep(t);
    k.task_sleep(main);
    k.wake_up_process(t);
    assert_eq!(k.tasks[t].cpu, 1, "its previous CPU is idle");
    let u = children.iter().copied().find(|&c| k.task_node(c) == 1).unwrap();
    let prev = k.tasks[u].cpu;
    k.task_sleep(u);
    k.cpus[prev].rq.push(main);
    k.tasks[main].state = TaskState::Runnable;
    k.wake_up_process(u);
    assert_eq!(k.task_node(u), 1, "previous CPU busy, no idle CPU in node 1: stacked there, not moved to node 0's idle CPU");
}

/// 152e11f6df29 (6.12): a task that blocks while sharing its CPU stays queued (sched_delayed),
/// counted in rq->nr_running, until the end of the next tick; a lone task leaves at once.
/// 1a49104496d3 (6.14): update_numa_stats counts h_nr_runnable, without it. Before 6.12 it
/// leaves at once. A wake-up while delayed requeues it where it is.
#[test]
fn delay_dequeue_keeps_a_blocked_task_counted() {
    for (version, delayed, numa_counted) in [("6.1", false, false), ("6.12", true, true), ("6.14", true, false)] {
        let (mut k, main, children) = forking(version, "", 2, 1, false);
        let c = children[0];
        k.wake_up_new_task(c);
        k.move_task(c, 0); // share CPU 0 with main
        k.task_sleep(c);
        assert_eq!(k.nr_running(0), 1 + delayed as usize, "{version}");
        assert_eq!(k.numa_nr_running(0), 1 + numa_counted as usize, "{version}");
        k.scheduler_tick(1);
        assert_eq!(k.nr_running(0), 1 + delayed as usize, "{version}: through the next tick");
        k.now += k.tick_ns;
        k.scheduler_tick(2);
        assert_eq!(k.nr_running(0), 1, "{version}: gone after it");
        if delayed {
            // woken while delayed: back on CPU 0 although CPUs 1-3 are idle
            k.task_sleep(main);
            let cpu = k.tasks[main].cpu;
            assert!(k.cpus[cpu].delayed.is_empty(), "a lone task is dequeued at once");
            k.cpus[cpu].rq.push(main);
            k.tasks[main].state = TaskState::Runnable;
            k.wake_up_process(c);
            k.move_task(c, cpu);
            k.task_sleep(c);
            k.wake_up_process(c);
            assert_eq!(k.tasks[c].cpu, cpu, "{version}: ttwu_runnable");
        }
    }
}

/// 70ce3ea9aa4e (6.0): a new task's numa_migrate_retry is zeroed; before, it is its parent's.
#[test]
fn numa_migrate_retry_at_fork() {
    for (version, inherited) in [("5.13", true), ("6.1", false)] {
        let (mut k, main, children) = forking(version, "", 2, 1, true);
        k.tasks[main].numa.migrate_retry = 5_000_000_000;
        k.wake_up_new_task(children[0]);
        assert_eq!(k.tasks[children[0]].numa.migrate_retry == 5_000_000_000, inherited, "{version}");
    }
}

/// A release's own variants only: a 5.18+ reader of sd->imb_numa_nr with a release that does
/// not compute it is refused.
#[test]
fn imb_numa_nr_readers_need_it() {
    let text = format!("[kernel]\nversion = \"5.13\"\n[kernel.variants]\nadjust_numa_imbalance = \"6.0\"\n{SMALL}");
    let e = parse_scenario(&text).unwrap_err().to_string();
    assert!(e.contains("kernel.variants.adjust_numa_imbalance") && e.contains("imb_numa_nr"), "{e}");
    assert!(parse_scenario(&text.replace("[kernel.variants]\n", "[kernel.variants]\nimb_numa_nr = \"6.0\"\n")).is_ok());
}

/// numa01 (2 threads per process, 6.1, glibc image) until every task has started, with the
/// fault entry cost `fault_ns`: (main thread, forked child), and each process's (main node,
/// its threads' nodes), and the processes in the order of their clones (0 = the first's).
fn numa01_fork(fault_ns: f64, clone_ns: f64) -> (Vec<(usize, Vec<usize>)>, Vec<usize>) {
    let text = SMALL.replace("kind = \"numa02\"", "kind = \"numa01\"").replace("threads = 4", "threads = 2").replace("image = \"none\"", "image = \"glibc\"").replace("passes = 1000", "passes = 2");
    let text = text.replace("fault_entry_exit_ns = 1000.0", &format!("fault_entry_exit_ns = {fault_ns}")).replace("clone_ns = 0.0", &format!("clone_ns = {clone_ns}"));
    let s = parse_scenario(&format!("[kernel]\nversion = \"6.1\"\n{text}")).expect("parses");
    let mut sim = Simulation::new(&s).expect("builds");
    // the first process's main thread and the child it forks (numa01.c: fork() before malloc)
    let k = &sim.k;
    let mains: Vec<usize> = (0..k.tasks.len()).filter(|&t| k.tasks[t].parent.is_none_or(|p| k.tasks[p].mm != k.tasks[t].mm)).collect();
    assert_eq!(mains.len(), 2);
    assert_eq!(k.tasks[mains[1]].parent, Some(mains[0]), "the second process is forked by the first");
    assert!(sim.step().expect("steps"));
    let k = &sim.k;
    assert!(k.tasks.iter().all(|t| t.state != TaskState::NotStarted), "the child starts in the tick of its fork and clones its threads in it");
    let nodes = mains.iter().map(|&m| (k.task_node(m), k.tasks[m].children.iter().filter(|&&c| k.tasks[c].mm == k.tasks[m].mm).map(|&c| k.task_node(c)).collect())).collect();
    let order = k.trace.events.iter().filter(|e| e.event == crate::trace::TraceKind::WakeupNew && e.pid != e.tgid).map(|e| usize::from(e.tgid != k.tasks[mains[0]].pid)).collect();
    (nodes, order)
}

/// kernel/fork.c: kernel_clone -> wake_up_new_task, at the instant of each clone. numa01.c
/// forks, then each process creates its threads and blocks in pthread_join. The child wakes
/// on an idle CPU of the other node (a reschedule IPI later) and clones in the same tick, so
/// the clones race. The parent returns from fork first but copies the stack and heap pages
/// it stores to (wp_page_copy) before its first pthread_create; the child then finds them its
/// own and only reuses them (wp_page_reuse), so it clones first (a traced 6.1 boot: child,
/// parent, child, parent). When a clone costs its creator more than that head start, the
/// clones alternate, 6.1's find_idlest_group sees the other process on the other node at
/// every clone, and each process stays on its node; when clones cost nothing and faults are
/// cheap, the child clones both threads before the parent's first, its second thread goes
/// to the idler node and both processes split (the VM's split starts, docs/model.md).
#[test]
fn forked_process_clones_race_with_its_parents_in_time_order() {
    // a 17 us pthread_create (the seed profiles' clone_ns): alternating clones, child first
    let (nodes, order) = numa01_fork(5000.0, 17000.0);
    assert_eq!(order, [1, 0, 1, 0], "clones alternate, the child's first: {order:?}");
    assert_ne!(nodes[0].0, nodes[1].0, "the child is forked to the other node: {nodes:?}");
    for (main_node, threads) in &nodes {
        assert!(threads.iter().all(|n| n == main_node), "each process's threads on its node: {nodes:?}");
    }
    // free clones and a 0.9 us fault: the child clones both first and the processes split
    let (nodes, order) = numa01_fork(500.0, 0.0);
    assert_eq!(order, [1, 1, 0, 0], "the child clones both first: {order:?}");
    assert!(nodes.iter().all(|(_, threads)| threads[0] != threads[1]), "both processes split: {nodes:?}");
}

/// include/trace/events/sched.h: sched_wakeup_new — one event per new task, naming the node of
/// the CPU wake_up_new_task gave it (what `numasim validate` compares as `placement_fork`); a
/// task that has not moved since is still there, and a clone's source is its parent's node.
#[test]
fn wakeup_new_names_each_new_tasks_first_node() {
    use crate::trace::TraceKind;
    let text = SMALL.replace("kind = \"numa02\"", "kind = \"numa01\"").replace("threads = 4", "threads = 2").replace("passes = 1000", "passes = 2");
    let s = parse_scenario(&format!("[kernel]\nversion = \"6.12\"\n{text}")).expect("parses");
    let mut sim = Simulation::new(&s).expect("builds");
    while sim.k.tasks.iter().any(|t| t.state == TaskState::NotStarted) {
        assert!(sim.step().expect("steps"));
    }
    let ev = &sim.k.trace.events;
    for (t, task) in sim.k.tasks.iter().enumerate() {
        let mine: Vec<_> = ev.iter().filter(|e| e.event == TraceKind::WakeupNew && e.pid == task.pid).collect();
        assert_eq!(mine.len(), 1, "task {t}: {mine:?}");
        let moved = ev.iter().any(|e| e.event == TraceKind::MigrateTask && e.pid == task.pid);
        if !moved {
            assert_eq!(mine[0].dst_nid, sim.k.task_node(t) as i32, "task {t}");
        }
        assert_eq!(mine[0].src_nid >= 0, task.parent.is_some(), "task {t}");
    }
}
