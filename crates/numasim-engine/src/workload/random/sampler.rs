//! The access distribution of one process: p(k), the probability mass per node, and the
//! geometric draws of "accesses until page k is hit".

use super::calendar::{event, unpack, Calendar, Event, TAG_BITS, TAG_MASK};
use super::first_touch::{FirstTouch, ZeroReads};
use crate::mm::pgtable::PageEntry;
use crate::sim::rng::Rng;
use crate::topology::MAX_NODES;
use std::cell::Cell;
use std::sync::Arc;

/// Power-of-two latency buckets, 1 ns .. 2^40 ns (pmbench's histogram, coarser).
pub const LATENCY_BUCKETS: usize = 41;

/// Bucket of a latency in ns.
pub fn latency_bucket(ns: f64) -> usize {
    if ns < 2.0 {
        0
    } else {
        // floor(log2(ns)): the binary exponent (that of the integer part, at least 2)
        (((ns.to_bits() >> 52) & 0x7ff) as usize - 1023).min(LATENCY_BUCKETS - 1)
    }
}

// one bit per node in `AccessSampler::mean_known`, and one for the total
const _: () = assert!(MAX_NODES < 128);
const TOTAL_KNOWN: u128 = 1 << MAX_NODES;

/// One process's access distribution and pending page events.
#[derive(Debug, Clone)]
pub struct AccessSampler {
    pub mm: usize,
    pub vma: usize,
    /// p(k) for every page of the working set (pages beyond it are never touched); shared by
    /// the processes of one workload.
    pub weight: Arc<[f64]>,
    /// Share of accesses that are writes.
    pub write_share: f64,
    /// Per-access cost besides the memory access, ns (for the process's access rate).
    pub overhead_ns: f64,
    /// Probability mass of the populated pages on each node (changed by `add_mass` only).
    pub(super) mass: [f64; MAX_NODES],
    /// Nodes that ever held mass are below this one (sums stop there: cost by used nodes).
    mass_nodes: usize,
    /// `Kernel::mean_access_ns` from each node while `mass` is unchanged, known by bit.
    pub(super) mean_ns: [Cell<f64>; MAX_NODES],
    /// The sum of `mass` while unchanged, known by bit TOTAL_KNOWN.
    mass_total: Cell<f64>,
    pub(super) mean_known: Cell<u128>,
    /// Accesses made by all threads of the process so far.
    pub counter: f64,
    /// Timed-loop accesses by latency: bucket b holds latencies in [2^b, 2^(b+1)) ns.
    pub latency_hist: [f64; LATENCY_BUCKETS],
    /// First-touch events, drawn at the start and sorted: (threshold, page), generation 1.
    initial: FirstTouch,
    /// Whether the earliest event (as of the last `until_next`) is `initial`'s front.
    next_initial: bool,
    /// Later events (PROT_NONE, read-only pages), by threshold. The generation of each
    /// page's latest event is in its page entry (`PageEntry::event_gen`), passed to the
    /// methods below as `pages`: an older event for the page is stale.
    heap: Calendar,
    pub(super) rng: Rng,
    /// The VM (index in `Kernel::kvms`) whose vCPUs make these accesses through its secondary
    /// MMU: a page needs a fault when its SPTE is gone, whatever the host PTE says.
    pub kvm: Option<usize>,
    /// A first access that is a load maps the zero page (pmbench's plain loads; not a buffer
    /// that I/O or a guest fills first).
    pub zero_page_reads: bool,
    /// The first accesses that are loads: zero-page faults, counted as the counter passes them
    /// (no page state, nothing for NUMA balancing to place).
    zero_reads: ZeroReads,
    /// `ln_miss_table` of `weight`, if the workload made one.
    ln_miss: Option<Arc<[f64]>>,
}

/// `x.ceil().max(1.0)` without the libm call of a baseline x86-64 build: below 2^52 through
/// the integer part (exact), above it `x` is whole (and NaN gives 1 either way).
#[inline]
fn ceil_at_least_1(x: f64) -> f64 {
    if x < (1u64 << 52) as f64 {
        let t = x as i64 as f64;
        (if t < x { t + 1.0 } else { t }).max(1.0)
    } else {
        x.max(1.0)
    }
}

/// `x.min(2^63) as u64` through the signed conversion baseline x86-64 has.
#[inline]
fn threshold(x: f64) -> u64 {
    let x = x.min(u64::MAX as f64 / 2.0);
    if x < (1u64 << 63) as f64 {
        x.max(0.0) as i64 as u64
    } else {
        1 << 63
    }
}

/// ln(1 - p) for a geometric draw with per-access probability p, or 0 when p <= 0 (never hit)
/// and -inf when p >= 1 (hit at the next access).
fn ln_miss(p: f64) -> f64 {
    if p <= 0.0 {
        0.0
    } else if p >= 1.0 {
        f64::NEG_INFINITY
    } else {
        libm::log1p(-p)
    }
}

impl AccessSampler {
    /// `ln_miss` of every page's p(k), computed once for all the processes of a workload
    /// instead of at every draw of any access (first touch, scanned page), which come in
    /// page order. (Write draws, at random pages, recompute theirs: a table entry would be a
    /// cache miss.)
    pub fn ln_miss_table(weight: &[f64]) -> Arc<[f64]> {
        weight.iter().map(|&p| ln_miss(p)).collect()
    }

    pub fn new(mm: usize, vma: usize, weight: Arc<[f64]>, write_share: f64, overhead_ns: f64, rng: Rng) -> Self {
        Self::with_table(mm, vma, weight, None, write_share, overhead_ns, rng, false)
    }

    /// `new` with the `ln_miss_table` of `weight`; `zero_page_reads`: see the field.
    #[allow(clippy::too_many_arguments)]
    pub fn with_table(mm: usize, vma: usize, weight: Arc<[f64]>, ln_miss: Option<Arc<[f64]>>, write_share: f64, overhead_ns: f64, rng: Rng, zero_page_reads: bool) -> Self {
        let n = weight.len();
        assert!(ln_miss.as_ref().is_none_or(|t| t.len() == n));
        assert!((n as u64) < 1 << (TAG_BITS - 9), "a sampled working set of {n} pages is too large");
        let mut s = AccessSampler {
            mm,
            vma,
            weight,
            write_share,
            overhead_ns,
            mass: [0.0; MAX_NODES],
            mass_nodes: 0,
            mean_ns: std::array::from_fn(|_| Cell::new(0.0)),
            mass_total: Cell::new(0.0),
            mean_known: Cell::new(0),
            counter: 0.0,
            latency_hist: [0.0; LATENCY_BUCKETS],
            initial: FirstTouch::new(2 * n, n), // one event per page
            zero_reads: ZeroReads::default(),
            next_initial: false,
            heap: Calendar::default(),
            rng,
            kvm: None,
            zero_page_reads,
            ln_miss,
        };
        for k in 0..n as u64 {
            if let Some(at) = s.draw(k, false) {
                if s.zero_page_reads && s.draws_a_read() {
                    // a load first: the zero page now, the page itself at the first store
                    s.zero_reads.push(at);
                    if let Some(w) = s.draw(k, true) {
                        s.initial.push(at.saturating_add(w), FirstTouch::code(k, FirstTouch::ZERO_COW));
                    }
                } else {
                    s.initial.push(at, FirstTouch::code(k, FirstTouch::ANY));
                }
            }
        }
        s.initial.sort();
        s.zero_reads.sort();
        s
    }

    /// How many first loads (zero-page faults) the counter has passed since the last call.
    #[inline]
    pub(super) fn take_zero_reads(&mut self) -> u64 {
        self.zero_reads.take(self.counter)
    }

    /// Access count at which page `k` is next hit (by a write, if `write_only`): the counter
    /// plus a geometric number of accesses.
    fn draw(&mut self, k: u64, write_only: bool) -> Option<u64> {
        match &self.ln_miss {
            Some(t) if !write_only => {
                let l = t[k as usize];
                self.draw_ln(l)
            }
            _ => self.draw_with(self.weight[k as usize], write_only),
        }
    }

    /// As `draw` for an event hit with probability `p` per access.
    fn draw_with(&mut self, p: f64, write_only: bool) -> Option<u64> {
        let p = p * if write_only { self.write_share } else { 1.0 };
        self.draw_ln(ln_miss(p))
    }

    /// As `draw` for an event missed with log-probability `l` = `ln_miss(p)` per access.
    fn draw_ln(&mut self, l: f64) -> Option<u64> {
        if l == 0.0 {
            return None;
        }
        // E standard exponential (-ln U); N = ceil(E / -ln(1 - p)), at least 1
        let n = if l == f64::NEG_INFINITY { 1.0 } else { ceil_at_least_1(self.rng.exp1() / -l) };
        Some(threshold(self.counter + n))
    }

    /// Accesses until page `k` is next hit (by a write only, if `write_only`): geometric.
    pub(super) fn schedule(&mut self, pages: &mut [PageEntry], k: u64, write_only: bool) {
        if let Some(at) = self.draw(k, write_only) {
            self.push_event(pages, k, at, write_only);
        }
    }

    /// Schedule page `k`'s event at a draw with per-access probability `p`.
    pub(super) fn schedule_with(&mut self, pages: &mut [PageEntry], k: u64, p: f64, write_only: bool) {
        if let Some(at) = self.draw_with(p, write_only) {
            self.push_event(pages, k, at, write_only);
        }
    }

    /// Make page `k`'s event at access count `at` its only live one.
    fn push_event(&mut self, pages: &mut [PageEntry], k: u64, at: u64, write_only: bool) {
        // generation 1 belongs to the initial events; later ones skip it when wrapping
        let e = &mut pages[k as usize];
        e.event_gen = match e.event_gen.wrapping_add(1) {
            1 => 2,
            g => g,
        };
        self.heap.push(event(at, k, e.event_gen, write_only));
    }

    /// Drop stale events at the front of both queues; returns the calendar's front.
    fn skip_stale(&mut self, pages: &[PageEntry]) -> Option<Event> {
        while let Some((_, code)) = self.initial.front {
            if pages[FirstTouch::decode(code).0 as usize].event_gen == 1 {
                break;
            }
            self.initial.advance();
        }
        while let Some(e) = self.heap.peek() {
            let (_, k, g, _) = unpack(e);
            if pages[k as usize].event_gen == g {
                return Some(e);
            }
            self.heap.pop();
        }
        None
    }

    /// Page of the event `d` places ahead in the queue of the last popped event (the first-touch
    /// queue or the current bucket): the one the pop brought `d` places near.
    pub(super) fn ahead(&self, d: usize) -> Option<u64> {
        if self.next_initial {
            self.initial.get(self.initial.cursor + d).map(|e| FirstTouch::decode(e.1).0)
        } else {
            let c = &self.heap.current;
            c.len().checked_sub(1 + d).map(|j| (c[j] & TAG_MASK) >> 9)
        }
    }

    /// The sum of `mass` over all nodes.
    pub(super) fn mass_total(&self) -> f64 {
        let known = self.mean_known.get();
        if known & TOTAL_KNOWN != 0 {
            return self.mass_total.get();
        }
        let total: f64 = self.mass[..self.mass_nodes].iter().sum();
        self.mass_total.set(total);
        self.mean_known.set(known | TOTAL_KNOWN);
        total
    }

    /// `n` ordinary accesses from a node whose latency to each memory node falls in `buckets`
    /// (`Kernel::latency_buckets`, one per node of the machine), split over the memory nodes by
    /// probability mass.
    pub(super) fn record_latencies(&mut self, buckets: &[u8], n: f64) {
        let total = self.mass_total();
        if total <= 0.0 || n <= 0.0 {
            return;
        }
        for (&mass, &b) in self.mass[..self.mass_nodes].iter().zip(buckets) {
            if mass > 0.0 {
                self.latency_hist[b as usize] += n * mass / total;
            }
        }
    }

    /// Add `w` to the probability mass on `node`.
    pub(super) fn add_mass(&mut self, node: usize, w: f64) {
        self.mass[node] += w;
        self.mass_nodes = self.mass_nodes.max(node + 1);
        self.mean_known.set(0);
    }

    pub fn rng_next(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Whether a first access is a load (probability 1 - `write_share`).
    fn draws_a_read(&mut self) -> bool {
        self.write_share < 1.0 && self.rng.unit() >= self.write_share
    }

    /// Accesses left before the next pending event (f64::INFINITY if none).
    pub(super) fn until_next(&mut self, pages: &[PageEntry]) -> f64 {
        let b = self.skip_stale(pages).map(|e| e.0);
        let a = self.initial.front.map(|e| e.0);
        // the first-touch front on a tie
        self.next_initial = a.is_some_and(|a| b.is_none_or(|b| a <= b));
        match a.into_iter().chain(b).min() {
            // thresholds are at most 2^63 (`threshold`): i64::MAX converts to that same f64
            Some(at) => (at.min(i64::MAX as u64) as i64 as f64 - self.counter).max(0.0),
            None => f64::INFINITY,
        }
    }

    /// Take the earliest event; call right after `until_next`, which dropped stale fronts and
    /// found the queue it is in.
    /// Returns the page, whether only a store counts (write_only), and the first-touch kind.
    pub(super) fn pop(&mut self, pages: &mut [PageEntry]) -> Option<(u64, bool, u64)> {
        if self.next_initial {
            let (_, code) = self.initial.front?;
            self.initial.advance();
            let (k, kind) = FirstTouch::decode(code);
            pages[k as usize].event_gen = 0;
            Some((k, false, kind))
        } else {
            self.heap.pop().map(|e| {
                let (_, k, _, w) = unpack(e);
                (k, w, FirstTouch::ANY)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::hot_page_kernel;

    /// The fast ceil and conversion agree with the plain ones on every kind of input.
    #[test]
    fn ceil_at_least_1_matches_ceil() {
        let mut rng = crate::sim::rng::Rng::new(9, 0);
        let mut xs = vec![0.0, -0.0, 0.5, 1.0, 1.5, 2.0, -1.5, -1e300, 1e300, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 4503599627370495.5, 4503599627370496.0, 9007199254740993.0];
        xs.extend((0..100_000).map(|_| f64::from_bits(rng.next_u64())));
        xs.extend((0..100_000).map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << (rng.next_u64() % 53)) as f64));
        for x in xs {
            assert_eq!(super::ceil_at_least_1(x).to_bits(), x.ceil().max(1.0).to_bits(), "{x}");
            assert_eq!(super::threshold(x), x.min(u64::MAX as f64 / 2.0) as u64, "{x}");
        }
    }

    /// pmbench's histogram: ordinary accesses land in the buckets of their node's latency, in
    /// proportion to the probability mass on each node; the timed loop only.
    #[test]
    fn latency_histogram_follows_page_placement() {
        assert_eq!((super::latency_bucket(90.0), super::latency_bucket(145.0), super::latency_bucket(1.0)), (6, 7, 0));
        let mut k = hot_page_kernel("");
        let s = 0;
        k.samplers[s].mass = [0.0; crate::topology::MAX_NODES];
        k.samplers[s].add_mass(0, 0.75);
        k.samplers[s].add_mass(1, 0.25);
        k.samplers[s].latency_hist = [0.0; super::LATENCY_BUCKETS];
        k.samplers[s].record_latencies(&k.latency_buckets[0][..2], 1000.0); // node 0: 90 ns local, 145 ns remote
        let h = k.samplers[s].latency_hist;
        assert_eq!((h[6], h[7]), (750.0, 250.0));
    }
}
