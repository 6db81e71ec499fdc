//! How far the workloads are through what they planned to do, for a progress display: each
//! thread's program weighted by the time its ops should take. Read-only: nothing here changes
//! the simulation.

use super::Op;
use crate::kernel::Kernel;
use crate::sched::task::{Task, TaskState};

/// Weight of a syscall op (migrate_pages, move_pages) whose length is not known up front, ns.
const SYSCALL_NS: f64 = 1e6;

impl Kernel {
    /// Fraction in [0, 1] of the planned work done: store streams by passes and pages, timed
    /// loops and sleeps by time. 0 when nothing is planned (then only the time limit tells).
    pub fn work_done(&self) -> f64 {
        let page_ns = self.page_store_ns();
        let (mut done, mut total) = (0.0, 0.0);
        for t in &self.tasks {
            let planned: f64 = t.program.iter().map(|op| op_ns(op, t, page_ns)).sum();
            if planned <= 0.0 {
                continue; // a main thread that only spawns and joins
            }
            total += planned;
            done += match t.state {
                TaskState::Exited => planned,
                TaskState::NotStarted => 0.0,
                _ => self.task_done_ns(t, page_ns).min(planned),
            };
        }
        if total > 0.0 {
            (done / total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// ns one page of a store stream takes a thread alone, local memory (the cost model's).
    fn page_store_ns(&self) -> f64 {
        let gibps = self.cost.stream_gibps.first().and_then(|r| r.first()).copied().unwrap_or(10.0);
        if gibps > 0.0 {
            4096.0 / (gibps * (1u64 << 30) as f64) * 1e9
        } else {
            400.0
        }
    }

    /// Planned ns of the ops `t` has finished, plus the part done of the current one.
    fn task_done_ns(&self, t: &Task, page_ns: f64) -> f64 {
        let pc = t.pc.min(t.program.len());
        let mut done: f64 = t.program[..pc].iter().map(|op| op_ns(op, t, page_ns)).sum();
        let now = self.now as f64;
        // a sleeping op has already advanced `pc`: take off what is left of the sleep
        if let (TaskState::Sleeping, Some(at), Some(prev)) = (t.state, t.wake_at, pc.checked_sub(1).and_then(|i| t.program.get(i))) {
            if matches!(prev, Op::SleepUntil(_) | Op::SleepFor(_) | Op::DirectIo { .. }) {
                done -= (at as f64 - now).clamp(0.0, op_ns(prev, t, page_ns));
            }
        }
        if let Some(op) = t.program.get(pc) {
            done += current_op_done_ns(op, t, now, page_ns);
        }
        done
    }
}

/// The time op `op` of task `t` should take, ns.
fn op_ns(op: &Op, t: &Task, page_ns: f64) -> f64 {
    match *op {
        Op::Sweep { npages, passes, .. } => npages as f64 * passes as f64 * page_ns,
        Op::SweepFor { duration_ns, .. } => duration_ns as f64,
        Op::Stream { duration_ns, .. } if duration_ns > 0 => duration_ns as f64,
        Op::Stream { npages, stride, passes, .. } => npages.div_ceil(stride) as f64 * passes as f64 * page_ns,
        Op::LinearAccess { npages, duration_ns, .. } => npages as f64 * page_ns + duration_ns as f64,
        Op::RandomAccess { warmup, duration_ns, overhead_ns, .. } => warmup as f64 * (overhead_ns + 100.0) + duration_ns as f64,
        Op::SleepUntil(at) => at.saturating_sub(t.start_ns) as f64,
        Op::SleepFor(ns) | Op::DirectIo { ns, .. } => ns as f64,
        Op::MigratePages { .. } | Op::MovePages { .. } => SYSCALL_NS,
        Op::SetPolicy(_) | Op::SetAffinity(_) | Op::SetCpus(_) | Op::Exec | Op::Spawn | Op::Join | Op::PinLongterm { .. } | Op::Sample { .. } => 0.0,
    }
}

/// The part of `op` (the task's current op) done at `now`, ns.
fn current_op_done_ns(op: &Op, t: &Task, now: f64, page_ns: f64) -> f64 {
    let since = |start: Option<f64>| start.map_or(0.0, |s| (now - s).max(0.0));
    let s = t.sweep;
    let full = op_ns(op, t, page_ns);
    let part = match *op {
        Op::Sweep { npages, .. } => (s.pass as f64 * npages as f64 + s.pos) * page_ns,
        Op::SweepFor { .. } => since(t.op_start_ns),
        Op::Stream { duration_ns, .. } if duration_ns > 0 => since(t.op_start_ns),
        Op::Stream { npages, stride, .. } => (s.pass as f64 * npages.div_ceil(stride) as f64 + s.pos) * page_ns,
        // the warm-up pass, then the timed loop since op_start_ns
        Op::LinearAccess { npages, .. } => match t.op_start_ns {
            None => (s.pass as f64 * npages as f64 + s.pos) * page_ns,
            Some(_) => npages as f64 * page_ns + since(t.op_start_ns),
        },
        // pass 0: `pos` warm-up accesses done; pass 1: `pos` is the timed loop's start
        Op::RandomAccess { warmup, overhead_ns, .. } => {
            let warm = warmup as f64 * (overhead_ns + 100.0);
            if s.pass == 0 {
                s.pos * (overhead_ns + 100.0)
            } else {
                warm + since(Some(s.pos))
            }
        }
        _ => 0.0,
    };
    part.clamp(0.0, full)
}

#[cfg(test)]
mod tests {
    /// numa02 with 20 passes ends in ~0.3 s of a 7200 s limit: by time a progress bar would
    /// stay at 0; by the planned passes the fraction rises steadily to 1 (issue 29, item 11).
    #[test]
    fn the_fraction_follows_the_planned_passes_not_the_time_limit() {
        let text = "seed = 7\n[machine]\nprofile = \"xeon-platinum-2n-128c\"\ncpus_per_node = 4\n\
                    [[workload]]\nkind = \"numa02\"\nsize_mib = 64\npasses = 20\nimage = \"none\"\n";
        let mut sim = crate::prepare_toml(text, None).expect("scenario");
        let mut seen = vec![sim.fraction_done()];
        let mut t = 0;
        while sim.step_until(t).expect("runs") {
            seen.push(sim.fraction_done());
            t += 10_000_000;
        }
        seen.push(sim.fraction_done());
        assert_eq!(seen[0], 0.0);
        assert_eq!(*seen.last().unwrap(), 1.0);
        assert!(seen.windows(2).all(|w| w[0] <= w[1] + 1e-12), "never goes back: {seen:?}");
        let mid = seen[seen.len() / 2];
        assert!((0.2..0.8).contains(&mid), "half the run, about half the passes: {mid} of {seen:?}");
        let (now, max, _) = sim.progress();
        assert!((now as f64) / (max as f64) < 0.001, "the time limit is far: {now} of {max}");
    }
}
