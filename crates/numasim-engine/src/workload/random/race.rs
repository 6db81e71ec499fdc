//! Races between a process's random accesses and the kernel's work on its pages: another thread
//! hitting a page under a hint-fault migration, threads meeting migration entries.

use crate::kernel::Kernel;
use crate::mm::rmap::PageRef;

impl Kernel {
    /// Does another thread of the process touch page `idx` while the faulting task `t` has it
    /// isolated for `window_ns`? Returns that thread. (v5.13 changelog: the second thread takes
    /// the hint fault too, fails folio_isolate_lru and maps the page.)
    pub(super) fn concurrent_fault_race(&mut self, t: usize, vma: usize, idx: u64, window_ns: f64) -> Option<usize> {
        let mm = self.tasks[t].mm;
        let s = self.sampler_of(mm, vma)?;
        let p = self.samplers[s].weight.get(idx as usize).copied().unwrap_or(0.0);
        if p <= 0.0 {
            return None;
        }
        let threads = self.sampler_threads.get(s).map_or(&[][..], |v| &v[..]);
        if threads.iter().all(|&o| o == t) {
            return None;
        }
        let p = p.min(1.0 - 1e-12);
        let overhead = self.samplers[s].overhead_ns;
        let u = self.samplers[s].rng.unit();
        // quick rejection, the same answer as the exact test below: hit = 1 - (1 - p)^n is at
        // most n p / (1 - p), and n at most every thread at the lowest latency (a margin
        // covers rounding)
        // (u >= n w / (L + o) * p / (1 - p) * (1 + 1e-9), multiplied out: no division)
        if u * (1.0 - p) * (self.min_latency_ns + overhead) >= threads.len() as f64 * window_ns * p * (1.0 + 1e-9) {
            return None;
        }
        // accesses the process's other threads in their access loop make during the window
        let mut on_node = vec![0u32; self.topo.nr_nodes];
        for &o in threads.iter().filter(|&&o| o != t) {
            on_node[self.topo.cpu_node[self.tasks[o].cpu]] += 1;
        }
        let others: u64 = on_node.iter().map(|&c| c as u64).sum();
        let n: f64 = (0..self.topo.nr_nodes).filter(|&m| on_node[m] > 0).map(|m| on_node[m] as f64 * window_ns / (self.mean_access_ns(s, m) + overhead)).sum();
        let hit = -libm::expm1(n * libm::log1p(-p));
        if u >= hit {
            return None;
        }
        let pick = self.samplers[s].rng_next() % others;
        self.sampler_threads[s].iter().copied().filter(|&o| o != t).nth(pick as usize)
    }

    /// Expected migration-entry wait of a thread on `node` that touches `pages` (one VMA's)
    /// while they are unmapped for migration, each for `window` ns (all at once, if
    /// `batched`). Batched (v6.3), the pages of a batch are unmapped one by one, flushed once,
    /// then copied and remapped one by one, so each is unmapped for about half the batch's
    /// duration D; a thread with h expected hits in that time waits about D/4 for a hit, at most
    /// once (D/4 * h/(h+1)). One folio at a time, each page is unmapped for D/n only.
    pub(super) fn migration_entry_wait_ns(&self, pages: &[PageRef], node: usize, window: f64, batched: bool) -> Option<f64> {
        let first = pages.first()?;
        let s = self.sampler_of(first.mm, first.vma)?;
        let w = &self.samplers[s].weight;
        let per_access = self.mean_access_ns(s, node) + self.samplers[s].overhead_ns;
        Some(if batched {
            let mass: f64 = pages.iter().map(|p| w.get(p.idx as usize).copied().unwrap_or(0.0)).sum();
            let hits = window / 2.0 / per_access * mass;
            window / 4.0 * hits / (hits + 1.0)
        } else {
            // page k's own window is hit with probability 1 - exp(-(window / per_access) p(k))
            let p_hit: f64 = pages.iter().map(|p| -libm::expm1(-window / per_access * w.get(p.idx as usize).copied().unwrap_or(0.0))).sum();
            p_hit * window / 2.0
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{hot_page_kernel, pin, place_page};
    use crate::vmstat::VmEvent::*;

    /// mm/migrate.c: migration_entry_wait — pages unmapped together for a whole batch stall
    /// the threads that touch them far longer than pages unmapped one folio at a time; the
    /// wait is off the CPU (not system time).
    #[test]
    fn batched_unmap_stalls_readers_longer() {
        let stall = |batched: bool| {
            let mut k = hot_page_kernel("");
            let pages: Vec<_> = (0..256).map(|idx| crate::mm::rmap::PageRef { mm: 0, vma: 0, idx }).collect();
            let sys: f64 = k.tasks.iter().map(|t| t.sys_ns).sum();
            k.migration_entry_stalls(&pages, 1_000_000.0, batched);
            assert_eq!(k.tasks.iter().map(|t| t.sys_ns).sum::<f64>(), sys);
            k.tasks.iter().map(|t| t.migration_wait_ns).sum::<f64>()
        };
        let (batched, single) = (stall(true), stall(false));
        assert!(batched > 10.0 * single && batched <= 4.0 * 250_000.0, "{batched} vs {single}");
    }

    /// mm/memory.c: do_numa_page (b99a342d4f11's race) — with the PTE left PROT_NONE during the
    /// migration, a second thread hitting the page faults too, fails folio_isolate_lru
    /// (TNF_MIGRATE_FAIL) and maps it; the first thread's unmap then flushes an accessible PTE.
    #[test]
    fn second_thread_faulting_on_an_isolated_page_maps_it() {
        let mut k = hot_page_kernel("numa-delay-map = true");
        let t = k.tasks.iter().position(|x| x.parent.is_some()).unwrap();
        pin(&mut k, t, 2);
        place_page(&mut k, 128, 0);
        k.mms[0].vmas[0].pt.make_protnone(128);
        let before = (k.vmstat.get(NumaHintFaults), k.vmstat.get(NrTlbRemoteFlush));
        k.do_numa_page(t, 0, 128);
        assert_eq!(k.vmstat.get(NumaHintFaults) - before.0, 2, "both threads took the hint fault");
        assert_eq!(k.mms[0].vmas[0].pt.nid(128), 1, "the first thread's migration still completes");
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush) - before.1, 1, "the now accessible PTE needs a flush");
        let failed: u64 = k.tasks.iter().map(|x| x.numa.faults_locality[2]).sum();
        assert_eq!(failed, 1, "the second thread recorded TNF_MIGRATE_FAIL");
    }
}
