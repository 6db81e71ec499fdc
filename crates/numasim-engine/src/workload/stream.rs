//! A `program` stream (`Op::Stream`): loads, stores or both over every `stride`-th page of a
//! range, one step per page. The named kinds' store streams take whole clean blocks in one step
//! (exec.rs: sweep); a load stream or a strided one cannot, as a page it skips or only reads
//! may need no fault where the next needs one.

use super::Access;
use crate::cost::PAGE_SIZE;
use crate::kernel::Kernel;
use crate::sched::task::SweepState;

impl Kernel {
    /// Run `Op::Stream` with `b` ns of the tick left; true when it is done: `passes` passes, or
    /// `duration_ns` after the op started when that is nonzero.
    #[allow(clippy::too_many_arguments)]
    pub fn stream_op(&mut self, t: usize, vma: usize, first: u64, npages: u64, stride: u64, access: Access, passes: u32, duration_ns: u64, b: &mut f64) -> bool {
        if duration_ns == 0 {
            return self.stream(t, vma, first, npages, stride, access, passes, b);
        }
        self.for_duration(t, duration_ns, b, |k, bb| {
            k.stream(t, vma, first, npages, stride, access, u32::MAX, bb);
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn stream(&mut self, t: usize, vma: usize, first: u64, npages: u64, stride: u64, access: Access, passes: u32, b: &mut f64) -> bool {
        // the tick's costs per page, out of the task while its stream runs (as exec.rs: sweep)
        let cost = std::mem::take(&mut self.tasks[t].page_cost);
        let done = self.stream_at(t, vma, first, npages, stride, access, passes, b, &cost);
        self.tasks[t].page_cost = cost;
        done
    }

    #[allow(clippy::too_many_arguments)]
    fn stream_at(&mut self, t: usize, vma: usize, first: u64, npages: u64, stride: u64, access: Access, passes: u32, b: &mut f64, cost: &[f64]) -> bool {
        let mm = self.tasks[t].mm;
        let count = npages.div_ceil(stride);
        let anon = self.mms[mm].vmas[vma].shmem.is_none();
        loop {
            let SweepState { mut pass, mut pos } = self.tasks[t].sweep;
            if pass >= passes || count == 0 {
                return true;
            }
            if *b <= 0.0 || self.oom.is_some() || self.parked() {
                return false;
            }
            let whole = pos as u64;
            let frac = pos - whole as f64;
            let i = first + whole * stride;
            if frac == 0.0 && !self.inflight.is_empty() {
                // interleaved (sim/interleave.rs): page i is one another thread's fault is changing
                let at = self.now as f64 + (self.tick_ns as f64 - *b);
                if self.inflight_stop(t, mm, vma, i, i + 1, at) == Some(i) {
                    if self.must_park(*b) {
                        return false;
                    }
                    self.take_fault_race(t, vma, i, b);
                    if *b <= 0.0 {
                        return false;
                    }
                }
            }
            if frac == 0.0 && !self.stream_fault(t, vma, i, access, anon, pass, b) {
                return false;
            }
            if *b <= 0.0 {
                return false;
            }
            // a page never written that a load reads is the zero page: charged at the task's node
            let pt = &self.mms[mm].vmas[vma].pt;
            let n = if pt.populated(i) { pt.nid(i) as usize } else { self.cpu_node(self.tasks[t].cpu) };
            let left = (1.0 - frac) * cost[n];
            let p = &mut self.tasks[t];
            if left > *b {
                // the budget ends inside page i
                let part = *b / cost[n];
                p.user_ns += *b;
                p.cur_bytes[n] += part * PAGE_SIZE;
                pos += part;
                *b = 0.0;
            } else {
                *b -= left;
                p.user_ns += left;
                p.cur_bytes[n] += (1.0 - frac) * PAGE_SIZE;
                pos = (whole + 1) as f64;
                if whole + 1 >= count {
                    pass += 1;
                    pos = 0.0;
                }
            }
            self.tasks[t].sweep = SweepState { pass, pos };
        }
    }

    /// The fault(s) the stream's first access to page `i` needs, paid from `b`; false on
    /// out-of-memory. A load of a private page never written maps the shared zero page, once
    /// (on the stream's first pass: the zero-page PTE is not recorded, mm/memory.rs).
    // mm/memory.c: handle_pte_fault (do_anonymous_page's zero page, do_numa_page, do_wp_page)
    #[allow(clippy::too_many_arguments)]
    fn stream_fault(&mut self, t: usize, vma: usize, i: u64, access: Access, anon: bool, pass: u32, b: &mut f64) -> bool {
        let pt = &self.mms[self.tasks[t].mm].vmas[vma].pt;
        if access == Access::Load && anon && !pt.populated(i) {
            if pass == 0 {
                let c = self.do_anonymous_reads(1);
                self.charge_sys(t, c, b);
            }
            return true;
        }
        let ok = match access {
            Access::Load => pt.populated(i) && !pt.protnone(i),
            _ => pt.store_ok(i),
        };
        // interleaved: a fault waits until every other thread of the group has reached it
        if ok || self.must_park(*b) {
            return ok;
        }
        match access {
            Access::Load => self.access_page(t, vma, i, false, b),
            Access::Store => self.access_page(t, vma, i, true, b),
            Access::Rmw => {
                // the load comes first: a fault on an unmapped shmem page is a read fault
                self.stream_loads_first = true;
                let ok = self.access_page(t, vma, i, true, b);
                self.stream_loads_first = false;
                ok
            }
        }
    }
}
