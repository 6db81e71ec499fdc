//! The access loop: a process's threads run their random accesses until the next page event,
//! whose fault the kernel then takes.

use super::first_touch::FirstTouch;
use super::sampler::{latency_bucket, AccessSampler};
use crate::kernel::Kernel;
use crate::mm::pgtable::PageTable;
use crate::sim::prefetch::prefetch;
use crate::workload::Op;

impl Kernel {
    /// Prefetch the per-page state of the sampler's event a few places ahead, after a pop
    /// (speed only). Only the popped queue's: the other's was prefetched when it came near, and
    /// prefetching it again would walk the page tables again once its TLB entry is gone.
    /// The weight, which only a first touch or a migration reads, is prefetched later, from the
    /// page entry prefetched before: only for a page not yet populated or away from `node`.
    fn prefetch_ahead(smp: &AccessSampler, pt: &PageTable, node: usize) {
        const AHEAD: usize = 12;
        const NEAR: usize = 4;
        if let Some(k) = smp.ahead(AHEAD) {
            pt.prefetch(k);
        }
        if let Some(k) = smp.ahead(NEAR) {
            if pt.pages.get(k as usize).is_some_and(|e| e.node as usize != node) {
                prefetch(&smp.weight, k as usize);
            }
        }
    }

    /// Threads of each sampler's process that are on a CPU in their random-access loop.
    pub fn collect_sampler_threads(&mut self) {
        let mut v = std::mem::take(&mut self.sampler_threads);
        v.iter_mut().for_each(|x| x.clear());
        v.resize(self.samplers.len(), Vec::new());
        for c in 0..self.cpus.len() {
            if let Some(t) = self.cpus[c].curr() {
                if let Some(Op::RandomAccess { sampler, .. }) = self.tasks[t].program.get(self.tasks[t].pc) {
                    v[*sampler].push(t);
                }
            }
        }
        self.sampler_threads = v;
    }

    /// The thread whose access hits a page event. The threads of a tick run one after another
    /// here but at the same time on the machine: the access is any running thread's, not the
    /// first one's to reach the event (which would take every fault of a freshly protected range).
    fn faulting_thread(&mut self, t: usize, s: usize) -> usize {
        let n = self.sampler_threads.get(s).map_or(0, |v| v.len());
        if n <= 1 {
            return t;
        }
        let r = self.samplers[s].rng_next();
        // r % n, without a division for a power of two
        let i = (if n.is_power_of_two() { r & (n as u64 - 1) } else { r % n as u64 }) as usize;
        self.sampler_threads[s][i]
    }

    /// Mean ns per access for a task on `node` over the populated pages.
    #[inline]
    pub(super) fn mean_access_ns(&self, s: usize, node: usize) -> f64 {
        let smp = &self.samplers[s];
        let known = smp.mean_known.get();
        if known & 1 << node != 0 {
            return smp.mean_ns[node].get();
        }
        let mean = self.mean_access_ns_of(s, node);
        smp.mean_ns[node].set(mean);
        smp.mean_known.set(smp.mean_known.get() | 1 << node);
        mean
    }

    /// `mean_access_ns` computed from the masses (out of line: after a change only).
    #[inline(never)]
    fn mean_access_ns_of(&self, s: usize, node: usize) -> f64 {
        let smp = &self.samplers[s];
        let total = smp.mass_total();
        if total <= 0.0 {
            return self.cost.latency_ns[node][node];
        }
        (0..self.topo.nr_nodes).map(|n| smp.mass[n] * self.cost.latency_ns[node][n]).sum::<f64>() / total
    }

    /// Run `accesses` more accesses of task `t` (or until the budget ends); returns how many ran.
    /// `timed`: the accesses belong to the timed loop and enter the latency histogram.
    pub fn random_access(&mut self, t: usize, s: usize, accesses: f64, overhead_ns: f64, timed: bool, b: &mut f64) -> f64 {
        let mut done = 0.0;
        while *b > 0.0 && done < accesses && self.oom.is_none() {
            let node = self.task_node(t);
            let cost = self.mean_access_ns(s, node) + overhead_ns;
            // the queues, the counter and the histogram, under one borrow of the sampler and its pages
            let smp = &mut self.samplers[s];
            let mut pt = self.mms[smp.mm].vmas.get_mut(smp.vma).map(|v| &mut v.pt);
            let pages = pt.as_deref_mut().map_or(&mut [][..], |p| &mut p.pages[..]);
            let until = smp.until_next(pages);
            let can = (*b / cost).min(accesses - done);
            let hit = until <= can;
            let n = if hit { until } else { can };
            smp.counter += n;
            done += n;
            let zero = smp.take_zero_reads();
            if timed {
                smp.record_latencies(&self.latency_buckets[node][..self.topo.nr_nodes], n);
            }
            let event = if hit {
                *b -= n * cost;
                let e = smp.pop(pages);
                if let (Some(_), Some(pt)) = (e, pt.as_deref()) {
                    Self::prefetch_ahead(smp, pt, node);
                }
                e
            } else {
                // no event before the budget or the requested accesses run out
                let phase_ends = can >= accesses - done;
                *b = if phase_ends { (*b - n * cost).max(0.0) } else { 0.0 };
                None
            };
            self.tasks[t].user_ns += n * cost;
            if let Some((k, write_only, kind)) = event {
                self.set_clock(*b);
                let u = self.faulting_thread(t, s);
                let sys = self.tasks[u].sys_ns;
                // another thread's fault: its time is taken from that thread's CPU
                let mut none = 0.0;
                let bu = if u == t { &mut *b } else { &mut none };
                self.access_fault(u, s, k, write_only, kind, bu);
                if timed {
                    // the faulting access takes the fault's time on top of the access
                    let fault = self.tasks[u].sys_ns - sys;
                    self.samplers[s].latency_hist[latency_bucket(fault + self.cost.latency_ns[node][node])] += 1.0;
                }
            }
            if zero > 0 {
                // the first loads among these accesses: zero-page faults, in aggregate
                let c = self.do_anonymous_reads(zero);
                self.charge_sys(t, c, b);
                if timed {
                    self.samplers[s].latency_hist[latency_bucket(self.cost.fault_entry_exit_ns + self.cost.latency_ns[node][node])] += zero as f64;
                }
            }
        }
        done
    }

    /// After a hint fault on page `k` of a base folio: a store dirties the PTE; a load leaves a
    /// PTE that a migration rebuilt clean (before 6.1) clean until the next store, which is
    /// then an event of its own, only where the kernel reads the bit (TNF_NO_GROUP by
    /// pte_dirty, 4.0-rc2..rc4): elsewhere nothing observes it.
    fn track_dirty_after_fault(&mut self, mm: usize, vma: usize, k: u64, store: bool) {
        let pt = &mut self.mms[mm].vmas[vma].pt;
        if pt.folio(k).1 != 1 || pt.protnone(k) {
            return;
        }
        if store {
            pt.set_dirty(k, true);
        } else if !pt.dirty(k) && pt.writable(k) && self.feature(crate::features::Feature::GroupByPteDirty) {
            self.sampler_needs_fault(mm, vma, k, true);
        }
    }

    /// The first access to page `k` since it needed a fault.
    // mm/memory.c: handle_pte_fault dispatch
    fn access_fault(&mut self, t: usize, s: usize, k: u64, write_only: bool, kind: u64, b: &mut f64) {
        if let Some(vm) = self.samplers[s].kvm {
            let c = self.kvm_tdp_page_fault(t, vm, k);
            return self.charge_sys(t, c, b);
        }
        let (mm, vma) = (self.samplers[s].mm, self.samplers[s].vma);
        let pt = &self.mms[mm].vmas[vma].pt;
        let cost = if !pt.populated(k) {
            if kind == FirstTouch::ZERO_COW {
                // the first store after a first load copies the zero page
                self.do_wp_zero_page(t, vma, k).unwrap_or(0.0)
            } else {
                self.do_anonymous_page(t, vma, k).unwrap_or(0.0)
            }
        } else if pt.protnone(k) {
            let c = self.do_numa_page(t, vma, k);
            self.track_dirty_after_fault(mm, vma, k, write_only);
            // pages the fault left read-only take a write fault on their next store (a THP's
            // PMD one for all of them)
            let pt = &self.mms[mm].vmas[vma].pt;
            let (head, nr) = pt.folio(k);
            if pt.pmd_mapped(k) {
                if !pt.writable(head) {
                    self.sampler_needs_fault_range(mm, vma, head, nr, true);
                }
            } else if nr == 1 {
                if !pt.writable(k) {
                    self.sampler_needs_fault(mm, vma, k, true);
                }
            } else {
                let ro: Vec<u64> = (head..head + nr).filter(|&i| pt.populated(i) && !pt.protnone(i) && !pt.writable(i)).collect();
                for i in ro {
                    self.sampler_needs_fault(mm, vma, i, true);
                }
            }
            c
        } else if write_only && !pt.writable(k) {
            self.do_wp_page(t, vma, k)
        } else {
            if write_only {
                // a store to a present writable PTE: the CPU sets its dirty bit, no fault
                self.mms[mm].vmas[vma].pt.set_dirty(k, true);
            }
            0.0
        };
        self.charge_sys(t, cost, b);
    }
}
