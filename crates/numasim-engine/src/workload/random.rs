//! Random access streams (pmbench) without visiting each access.
//!
//! All threads of a process draw pages from one fixed distribution p(k). Between NUMA events an
//! access costs the mean latency over the populated pages, kept as probability mass per node
//! (O(nodes)). A page that needs a fault on its next access (not yet populated, made PROT_NONE
//! by the scanner, read-only after a migration) gets a threshold on the process's access
//! counter drawn from the geometric distribution of "accesses until page k is hit", so the
//! first toucher is exact in distribution and the cost follows the number of NUMA events.

use crate::kernel::Kernel;
use crate::mm::pgtable::{PageEntry, PageTable};
use crate::sim::prefetch::prefetch;
use crate::sim::rng::Rng;
use crate::topology::MAX_NODES;
use crate::workload::Op;
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

/// An event: (threshold, tag) with tag = page << 9 | generation << 1 | write-only; ordered
/// by threshold, then page.
type Event = (u64, u64);

fn event(at: u64, page: u64, generation: u8, write_only: bool) -> Event {
    (at, page << 9 | (generation as u64) << 1 | write_only as u64)
}

fn unpack(e: Event) -> (u64, u64, u8, bool) {
    (e.0, e.1 >> 9, (e.1 >> 1) as u8, e.1 & 1 != 0)
}

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

/// log2 of a calendar bucket's width, in accesses.
const BUCKET_SHIFT: u32 = 18;
/// Buckets held in the ring; events further out wait in an ordered map.
const RING: u64 = 1024;
/// Bits of a tag in a bucket's packed entry: a page index below 2^(TAG_BITS - 9).
const TAG_BITS: u32 = 64 - BUCKET_SHIFT;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;

/// An event of a known bucket in 8 bytes: its threshold's offset in the bucket above its tag,
/// so that packed entries of one bucket compare as their events do.
fn pack(e: Event) -> u64 {
    debug_assert!(e.1 <= TAG_MASK);
    (e.0 & ((1 << BUCKET_SHIFT) - 1)) << TAG_BITS | e.1
}

/// The event of packed entry `p` of bucket `key`.
fn unpack_in(key: u64, p: u64) -> Event {
    (key << BUCKET_SHIFT | p >> TAG_BITS, p & TAG_MASK)
}

/// A calendar queue: events in buckets of 2^BUCKET_SHIFT accesses. The bucket being consumed is sorted
/// once when its first event is taken (events pushed into it later go to a small heap); the
/// next RING - 1 buckets are a ring of unsorted vectors, and events further out (rarely hit pages)
/// an ordered map, so they cost nothing until their bucket comes up. A bucket becomes current
/// only when its first event is popped, that is when the access counter has reached it, so
/// new events (drawn after the counter) never land before the current bucket. Buckets hold
/// their events packed (`pack`).
#[derive(Debug, Clone)]
struct Calendar {
    /// The current bucket, sorted descending (the earliest event last).
    current: Vec<u64>,
    /// Events pushed into the current bucket after it was sorted.
    late: BinaryHeap<Reverse<Event>>,
    current_key: u64,
    /// Buckets current_key+1 .. current_key+RING-1, at index key % RING.
    ring: Vec<Vec<u64>>,
    in_ring: usize,
    far: BTreeMap<u64, Vec<u64>>,
    /// The next non-empty bucket after the current one and its earliest event, once looked up.
    next: Option<(u64, Event)>,
    /// Scratch space of `sort_bucket`.
    sorted: Vec<u64>,
    bins: Vec<usize>,
}

impl Default for Calendar {
    fn default() -> Self {
        Calendar {
            current: Vec::new(),
            late: BinaryHeap::new(),
            current_key: 0,
            ring: vec![Vec::new(); RING as usize],
            in_ring: 0,
            far: BTreeMap::new(),
            next: None,
            sorted: Vec::new(),
            bins: Vec::new(),
        }
    }
}

impl Calendar {
    fn push(&mut self, e: Event) {
        let key = e.0 >> BUCKET_SHIFT;
        if key <= self.current_key {
            self.late.push(Reverse(e));
            return;
        }
        if key < self.current_key + RING {
            self.ring[(key % RING) as usize].push(pack(e));
            self.in_ring += 1;
        } else {
            self.far.entry(key).or_default().push(pack(e));
        }
        self.next = match self.next {
            Some((k, m)) if k < key || (k == key && m <= e) => Some((k, m)),
            Some((k, _)) if k == key => Some((k, e)),
            // an earlier bucket, empty until now
            Some(_) => Some((key, e)),
            None => None,
        };
    }

    /// The earliest event of the buckets after the current one.
    fn look_ahead(&mut self) -> Option<(u64, Event)> {
        if self.next.is_none() {
            let key = if self.in_ring > 0 { (self.current_key + 1..self.current_key + RING).find(|&k| !self.ring[(k % RING) as usize].is_empty())? } else { *self.far.keys().next()? };
            let bucket = if self.in_ring > 0 { &self.ring[(key % RING) as usize] } else { &self.far[&key] };
            self.next = bucket.iter().min().map(|&m| (key, unpack_in(key, m)));
        }
        self.next
    }

    /// Make bucket `key` (the next non-empty one) current (out of line: once a bucket).
    #[inline(never)]
    fn adopt(&mut self, key: u64) {
        let from_far = self.in_ring == 0;
        self.current_key = key;
        self.next = None;
        let mut bucket = if from_far {
            self.far.remove(&key).unwrap_or_default()
        } else {
            let b = std::mem::take(&mut self.ring[(key % RING) as usize]);
            self.in_ring -= b.len();
            b
        };
        // the ring's window moved on: far buckets now inside it enter it
        while let Some(entry) = self.far.first_entry() {
            if *entry.key() >= key + RING {
                break;
            }
            let (k, events) = entry.remove_entry();
            self.in_ring += events.len();
            self.ring[(k % RING) as usize].extend(events);
        }
        sort_bucket(&bucket, &mut self.sorted, &mut self.bins);
        bucket.clear();
        let sorted = std::mem::replace(&mut self.sorted, bucket);
        let spare = std::mem::replace(&mut self.current, sorted);
        if spare.capacity() > 0 && self.ring[(key % RING) as usize].is_empty() {
            self.ring[(key % RING) as usize] = spare;
            self.ring[(key % RING) as usize].clear();
        }
    }

    /// The earliest event of the current bucket, without the late ones.
    fn current_last(&self) -> Option<Event> {
        self.current.last().map(|&p| unpack_in(self.current_key, p))
    }

    fn peek(&mut self) -> Option<Event> {
        let now = match (self.current_last(), self.late.peek()) {
            (Some(a), Some(&Reverse(b))) => Some(a.min(b)),
            (Some(a), None) => Some(a),
            (None, Some(&Reverse(b))) => Some(b),
            (None, None) => None,
        };
        now.or_else(|| self.look_ahead().map(|(_, e)| e))
    }

    fn pop(&mut self) -> Option<Event> {
        if self.current.is_empty() && self.late.is_empty() {
            let (key, _) = self.look_ahead()?;
            self.adopt(key);
        }
        // the earlier of the two fronts, the current bucket's on a tie
        match (self.current_last(), self.late.peek()) {
            (Some(a), Some(&Reverse(b))) if b < a => self.late.pop().map(|r| r.0),
            (Some(a), _) => {
                self.current.pop();
                Some(a)
            }
            (None, _) => self.late.pop().map(|r| r.0),
        }
    }
}

/// Sort a bucket's packed entries descending into `out`: distributed on their top bits (the
/// threshold's offset) into about one bin per entry, then each bin sorted; the order of
/// sorting them whole, in about linear time.
fn sort_bucket(v: &[u64], out: &mut Vec<u64>, bins: &mut Vec<usize>) {
    out.clear();
    out.extend_from_slice(v);
    if v.len() < 64 {
        out.sort_unstable_by(|a, b| b.cmp(a));
        return;
    }
    let bits = (usize::BITS - v.len().leading_zeros()).min(BUCKET_SHIFT);
    let shift = 64 - bits;
    // bin of !e: the highest entries first
    bins.clear();
    bins.resize((1 << bits) + 1, 0);
    for &e in v {
        bins[(!e >> shift) as usize + 1] += 1;
    }
    for i in 1..bins.len() {
        bins[i] += bins[i - 1];
    }
    for &e in v {
        let d = (!e >> shift) as usize;
        out[bins[d]] = e;
        bins[d] += 1;
    }
    // bins[d] is now where bin d ends
    let mut start = 0;
    for &end in &bins[..1 << bits] {
        if end - start > 1 {
            out[start..end].sort_unstable_by(|a, b| b.cmp(a));
        }
        start = end;
    }
}

/// Stable sort of keys on their bits from `low` up: an LSD radix sort, 8 bits per pass, as many
/// passes as the highest key needs (linear time). 8-bit digits: 256 scatter targets stay in
/// the TLB and write-combine, where 2048 took a TLB miss per key.
fn sort_keys(v: &mut Vec<u64>, low: u32) {
    const BITS: u32 = 8;
    let max = v.iter().copied().max().unwrap_or(0);
    let passes = (64 - max.leading_zeros()).saturating_sub(low).div_ceil(BITS);
    let mut tmp = vec![0u64; v.len()];
    for pass in 0..passes {
        let shift = low + pass * BITS;
        let mut count = [0usize; 1 << BITS];
        for &e in v.iter() {
            count[((e >> shift) as usize) & ((1 << BITS) - 1)] += 1;
        }
        let mut sum = 0;
        for c in count.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        for &e in v.iter() {
            let d = ((e >> shift) as usize) & ((1 << BITS) - 1);
            tmp[count[d]] = e;
            count[d] += 1;
        }
        std::mem::swap(v, &mut tmp);
    }
}

/// The first-touch events in (threshold, page) order: packed as threshold << page_bits | page
/// (8 bytes) while the threshold fits, then the rest, beyond any of those, as pairs; consumed
/// from `cursor`, whose event is `front`.
#[derive(Debug, Clone, Default)]
struct FirstTouch {
    packed: Vec<u64>,
    page_bits: u32,
    rest: Vec<(u64, u64)>,
    cursor: usize,
    front: Option<(u64, u64)>,
}

impl FirstTouch {
    /// Kinds of first-touch event, in the low bit of the queue's page code (2 k + kind): the
    /// page's first access (`ANY`), or its first store after a first load mapped the zero page
    /// (`ZERO_COW`).
    const ANY: u64 = 0;
    const ZERO_COW: u64 = 1;

    fn code(k: u64, kind: u64) -> u64 {
        2 * k + kind
    }

    fn decode(code: u64) -> (u64, u64) {
        (code / 2, code % 2)
    }

    /// An empty queue for page codes below `n`, with room for `events`.
    fn new(n: usize, events: usize) -> Self {
        let page_bits = usize::BITS - n.saturating_sub(1).leading_zeros();
        FirstTouch { packed: Vec::with_capacity(events), page_bits, rest: Vec::new(), cursor: 0, front: None }
    }

    fn push(&mut self, at: u64, page: u64) {
        if self.page_bits == 0 || at >> (64 - self.page_bits) == 0 {
            self.packed.push(at << self.page_bits | page);
        } else {
            self.rest.push((at, page));
        }
    }

    /// Put the events in order once all are pushed, in page order: a stable sort on the
    /// thresholds leaves ties in page order.
    fn sort(&mut self) {
        sort_keys(&mut self.packed, self.page_bits);
        self.rest.sort_unstable();
        self.front = self.get(self.cursor);
    }

    /// Move on to the next event.
    fn advance(&mut self) {
        self.cursor += 1;
        self.front = self.get(self.cursor);
        if self.front.is_none() {
            // all taken: free the queue (8 bytes a page) for the calendar's buckets to reuse
            (self.packed, self.rest, self.cursor) = (Vec::new(), Vec::new(), 0);
        }
    }

    /// Event `i` in order: (threshold, page).
    #[inline]
    fn get(&self, i: usize) -> Option<(u64, u64)> {
        match self.packed.get(i) {
            Some(&e) => Some((e >> self.page_bits, e & ((1 << self.page_bits) - 1))),
            None => self.rest.get(i - self.packed.len()).copied(),
        }
    }
}

/// log2 of the grain, in accesses, by which the zero-page reads are counted.
const ZERO_READ_GRAIN: u32 = 16;
/// Grains counted one by one (4 bytes each); reads beyond them are kept as thresholds.
const ZERO_READ_GRAINS: u64 = 1 << 20;

/// The first accesses that are loads (zero-page faults), by threshold: only counted and timed,
/// so they are kept as counts per grain of 2^ZERO_READ_GRAIN accesses (~1 ms of a process's
/// time), and a grain's are taken once the counter has passed its end (never early).
#[derive(Debug, Clone, Default)]
struct ZeroReads {
    /// Loads per grain (threshold >> ZERO_READ_GRAIN) below ZERO_READ_GRAINS.
    per_grain: Vec<u32>,
    /// Thresholds of the loads beyond those grains (rarely hit pages), sorted once pushed.
    beyond: Vec<u64>,
    /// Grains, then `beyond` entries, taken so far.
    grains_taken: usize,
    beyond_taken: usize,
    /// The counter at which `take` has something again (set by `sort` and `take`).
    next_due: f64,
}

impl ZeroReads {
    fn push(&mut self, at: u64) {
        let g = at >> ZERO_READ_GRAIN;
        if g < ZERO_READ_GRAINS {
            if g as usize >= self.per_grain.len() {
                self.per_grain.resize(g as usize + 1, 0);
            }
            self.per_grain[g as usize] += 1;
        } else {
            self.beyond.push(at);
        }
    }

    fn sort(&mut self) {
        self.beyond.sort_unstable();
        self.set_next_due();
    }

    /// The next grain's end, or the next threshold beyond the grains.
    fn set_next_due(&mut self) {
        self.next_due = if self.grains_taken < self.per_grain.len() {
            ((self.grains_taken as u64 + 1) << ZERO_READ_GRAIN) as f64
        } else {
            self.beyond.get(self.beyond_taken).map_or(f64::INFINITY, |&at| at as f64)
        };
    }

    /// How many loads the counter has passed since the last call.
    #[inline]
    fn take(&mut self, counter: f64) -> u64 {
        if counter < self.next_due {
            return 0;
        }
        let n = self.take_due(counter);
        self.set_next_due();
        n
    }

    #[inline(never)]
    fn take_due(&mut self, counter: f64) -> u64 {
        let mut n = 0;
        while let Some(&c) = self.per_grain.get(self.grains_taken) {
            if (((self.grains_taken as u64 + 1) << ZERO_READ_GRAIN) as f64) > counter {
                return n;
            }
            n += c as u64;
            self.grains_taken += 1;
        }
        while self.beyond.get(self.beyond_taken).is_some_and(|&at| at as f64 <= counter) {
            n += 1;
            self.beyond_taken += 1;
        }
        n
    }
}

// one bit per node in `AccessSampler::mean_known`, and one for the total
const _: () = assert!(MAX_NODES < 16);
const TOTAL_KNOWN: u16 = 1 << MAX_NODES;

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
    mass: [f64; MAX_NODES],
    /// `Kernel::mean_access_ns` from each node while `mass` is unchanged, known by bit.
    mean_ns: [Cell<f64>; MAX_NODES],
    /// The sum of `mass` while unchanged, known by bit TOTAL_KNOWN.
    mass_total: Cell<f64>,
    mean_known: Cell<u16>,
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
    rng: Rng,
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
            mean_ns: Default::default(),
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
    fn take_zero_reads(&mut self) -> u64 {
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
    fn schedule(&mut self, pages: &mut [PageEntry], k: u64, write_only: bool) {
        if let Some(at) = self.draw(k, write_only) {
            self.push_event(pages, k, at, write_only);
        }
    }

    /// Schedule page `k`'s event at a draw with per-access probability `p`.
    fn schedule_with(&mut self, pages: &mut [PageEntry], k: u64, p: f64, write_only: bool) {
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
    fn ahead(&self, d: usize) -> Option<u64> {
        if self.next_initial {
            self.initial.get(self.initial.cursor + d).map(|e| FirstTouch::decode(e.1).0)
        } else {
            let c = &self.heap.current;
            c.len().checked_sub(1 + d).map(|j| (c[j] & TAG_MASK) >> 9)
        }
    }

    /// The sum of `mass` over all nodes.
    fn mass_total(&self) -> f64 {
        let known = self.mean_known.get();
        if known & TOTAL_KNOWN != 0 {
            return self.mass_total.get();
        }
        let total: f64 = self.mass.iter().sum();
        self.mass_total.set(total);
        self.mean_known.set(known | TOTAL_KNOWN);
        total
    }

    /// `n` ordinary accesses from a node whose latency to each memory node falls in `buckets`
    /// (`Kernel::latency_buckets`, one per node of the machine), split over the memory nodes by
    /// probability mass.
    fn record_latencies(&mut self, buckets: &[u8], n: f64) {
        let total = self.mass_total();
        if total <= 0.0 || n <= 0.0 {
            return;
        }
        for (&mass, &b) in self.mass.iter().zip(buckets) {
            if mass > 0.0 {
                self.latency_hist[b as usize] += n * mass / total;
            }
        }
    }

    /// Add `w` to the probability mass on `node`.
    fn add_mass(&mut self, node: usize, w: f64) {
        self.mass[node] += w;
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
    fn until_next(&mut self, pages: &[PageEntry]) -> f64 {
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
    fn pop(&mut self, pages: &mut [PageEntry]) -> Option<(u64, bool, u64)> {
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

impl Kernel {
    fn sampler_of(&self, mm: usize, vma: usize) -> Option<usize> {
        self.mms[mm].sampler.filter(|&s| self.samplers[s].vma == vma)
    }

    /// Sampler `s` and the page entries of its VMA, which hold its events' generations
    /// (none once its process has exited).
    fn sampler_pages(&mut self, s: usize) -> (&mut AccessSampler, &mut [PageEntry]) {
        let smp = &mut self.samplers[s];
        let pages = self.mms[smp.mm].vmas.get_mut(smp.vma).map_or(&mut [][..], |v| &mut v.pt.pages[..]);
        (smp, pages)
    }

    /// A page of a sampled VMA was populated on `node`.
    pub fn sampler_populated(&mut self, mm: usize, vma: usize, idx: u64, node: usize) {
        if let Some(s) = self.sampler_of(mm, vma) {
            let s = &mut self.samplers[s];
            let w = s.weight.get(idx as usize).copied().unwrap_or(0.0);
            s.add_mass(node, w);
        }
    }

    /// A page of a sampled VMA moved between nodes.
    pub fn sampler_moved(&mut self, mm: usize, vma: usize, idx: u64, from: usize, to: usize) {
        if let Some(s) = self.sampler_of(mm, vma) {
            let s = &mut self.samplers[s];
            let w = s.weight.get(idx as usize).copied().unwrap_or(0.0);
            s.add_mass(from, -w);
            s.add_mass(to, w);
        }
    }

    /// The sampler of (mm, vma) whose pages take fault events (a guest's take EPT violations,
    /// scheduled by `sampler_refault`).
    pub fn fault_sampler(&self, mm: usize, vma: usize) -> Option<usize> {
        self.sampler_of(mm, vma).filter(|&s| self.samplers[s].kvm.is_none())
    }

    /// The page's next access (or next write) needs a fault: draw when it comes.
    pub fn sampler_needs_fault(&mut self, mm: usize, vma: usize, idx: u64, write_only: bool) {
        if let Some(s) = self.fault_sampler(mm, vma) {
            self.sampler_schedule(s, idx, 1, write_only);
        }
    }

    /// The next access to any page of [first, first + n) (one folio's protected pages) needs a
    /// fault, which handles them all: one event at the first of them, drawn with their summed
    /// probability.
    pub fn sampler_needs_fault_range(&mut self, mm: usize, vma: usize, first: u64, n: u64, write_only: bool) {
        if let Some(s) = self.fault_sampler(mm, vma) {
            self.sampler_schedule(s, first, n, write_only);
        }
    }

    /// The folio at [head, head + nr) was split: its pages that need a fault on their next
    /// access (PROT_NONE) or store (read-only), so far one event for the folio, get one each
    /// (a redraw: geometric waits are memoryless).
    pub fn sampler_folio_split(&mut self, mm: usize, vma: usize, head: u64, nr: u64) {
        let Some(s) = self.fault_sampler(mm, vma) else { return };
        for i in head..head + nr {
            let pt = &self.mms[mm].vmas[vma].pt;
            let write_only = match (pt.protnone(i), pt.populated(i) && !pt.writable(i)) {
                (true, _) => false,
                (false, true) => true,
                (false, false) => continue,
            };
            self.sampler_schedule(s, i, 1, write_only);
        }
    }

    /// `sampler_needs_fault_range` on sampler `s` (from `fault_sampler`, looked up once for
    /// many ranges), and a guest's refault.
    pub fn sampler_schedule(&mut self, s: usize, first: u64, n: u64, write_only: bool) {
        let (smp, pages) = self.sampler_pages(s);
        let lo = (first as usize).min(smp.weight.len());
        let hi = ((first + n) as usize).min(smp.weight.len());
        if n == 1 && lo < hi {
            smp.schedule(pages, first, write_only);
        } else if lo < hi {
            let p: f64 = smp.weight[lo..hi].iter().sum();
            smp.schedule_with(pages, first, p, write_only);
        }
    }

    /// A guest's SPTEs of [first, first + n) were zapped: the next access to any of them takes an
    /// EPT violation (one event for a huge SPTE).
    pub fn sampler_refault(&mut self, s: usize, first: u64, n: u64) {
        self.sampler_schedule(s, first, n, false);
    }

    /// Does another thread of the process touch page `idx` while the faulting task `t` has it
    /// isolated for `window_ns`? Returns that thread. (v5.13 changelog: the second thread takes
    /// the hint fault too, fails folio_isolate_lru and maps the page.)
    pub fn concurrent_fault_race(&mut self, t: usize, vma: usize, idx: u64, window_ns: f64) -> Option<usize> {
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
        let mut on_node = [0u32; MAX_NODES];
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

    /// Threads of a random-access process that touch a page while it is unmapped for migration
    /// wait on its migration entry until it is remapped. Batched (v6.3), the pages of a batch
    /// are unmapped one by one, flushed once, then copied and remapped one by one, so each is
    /// unmapped for about half the batch's `duration_ns` D; a thread with h expected hits in that
    /// time waits about D/4 for a hit, at most once (D/4 * h/(h+1)). One folio at a time, each
    /// page is unmapped for D/n only. Off the CPU, not system time.
    // mm/migrate.c: migration_entry_wait
    pub fn migration_entry_stalls(&mut self, pages: &[crate::mm::rmap::PageRef], duration_ns: f64, batched: bool) {
        let Some(first) = pages.first() else { return };
        let Some(s) = self.sampler_of(first.mm, first.vma) else {
            return;
        };
        let mass: f64 = pages.iter().map(|p| self.samplers[s].weight.get(p.idx as usize).copied().unwrap_or(0.0)).sum();
        let mm = first.mm;
        let window = if batched { duration_ns } else { duration_ns / pages.len() as f64 };
        // the wait depends on the thread's node only: compute it once per node
        let mut wait_on = [None; MAX_NODES];
        for c in 0..self.cpus.len() {
            let Some(t) = self.cpus[c].curr().filter(|&t| self.tasks[t].mm == mm) else {
                continue;
            };
            let node = self.topo.cpu_node[c];
            let wait = match wait_on[node] {
                Some(w) => w,
                None => {
                    let w = self.migration_entry_wait_ns(s, node, pages, window, mass, batched);
                    wait_on[node] = Some(w);
                    w
                }
            };
            self.tasks[t].wait_debt_ns += wait;
            self.tasks[t].migration_wait_ns += wait;
        }
    }

    /// Expected migration-entry wait of one thread on `node` (see `migration_entry_stalls`).
    fn migration_entry_wait_ns(&self, s: usize, node: usize, pages: &[crate::mm::rmap::PageRef], window: f64, mass: f64, batched: bool) -> f64 {
        let per_access = self.mean_access_ns(s, node) + self.samplers[s].overhead_ns;
        if batched {
            let hits = window / 2.0 / per_access * mass;
            window / 4.0 * hits / (hits + 1.0)
        } else {
            // page k's own window is hit with probability 1 - exp(-(window / per_access) p(k))
            let w = &self.samplers[s].weight;
            let p_hit: f64 = pages.iter().map(|p| -libm::expm1(-window / per_access * w.get(p.idx as usize).copied().unwrap_or(0.0))).sum();
            p_hit * window / 2.0
        }
    }

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
    fn mean_access_ns(&self, s: usize, node: usize) -> f64 {
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
            0.0
        };
        self.charge_sys(t, cost, b);
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::parse_scenario;
    use crate::simulation::Simulation;
    use crate::testutil::{pin, place_page};
    use crate::vmstat::VmEvent::*;

    fn hot_page_kernel(features: &str) -> crate::kernel::Kernel {
        // a 1 MiB set whose middle page (128) takes almost every access
        let text = format!(
            "[machine]\nprofile = \"intel-2s-128g\"\ncpus_per_node = 2\nsmt = 1\n[kernel.features]\n{features}\n\
             [[workload]]\nkind = \"pmbench\"\nthreads = 4\nset_mib = 1\nmap_mib = 1\npattern = \"normal\"\nshape = 0.01\nduration_s = 10.0\nimage = \"none\"\n"
        );
        let mut sim = Simulation::new(&parse_scenario(&text).unwrap()).unwrap();
        while sim.k.tasks.iter().filter(|t| t.runnable() && t.parent.is_some()).count() < 4 {
            sim.step().unwrap();
        }
        for cpu in 0..sim.k.cpus.len() {
            let next = sim.k.cpus[cpu].curr().map(|t| sim.k.tasks[t].mm);
            sim.k.switch_mm(cpu, next);
        }
        sim.k.collect_sampler_threads();
        sim.k
    }

    /// The calendar queue pops events in threshold order whatever the mix of near, ring and far
    /// buckets, including events pushed before a bucket that `peek` has already looked at.
    #[test]
    fn calendar_pops_in_threshold_order() {
        let mut cal = super::Calendar::default();
        let mut rng = crate::sim::rng::Rng::new(7, 0);
        let (mut now, mut last, mut popped, mut pushed) = (0u64, 0u64, 0usize, 0usize);
        for round in 0..20_000u64 {
            // new events lie after the counter: near, a few buckets out, or far beyond the ring
            let ahead = match rng.next_u64() % 3 {
                0 => rng.next_u64() % (1 << 16),
                1 => rng.next_u64() % (1 << 24),
                _ => rng.next_u64() % (1 << 34),
            };
            cal.push(super::event(now + 1 + ahead, round, 2, false));
            pushed += 1;
            // the sampler peeks at every step and pops only some of the time, so pushes
            // land between a peek and the next pop
            let at = cal.peek().unwrap().0;
            if rng.next_u64().is_multiple_of(3) {
                let e = cal.pop().unwrap();
                assert_eq!(e.0, at, "pop returns what peek showed");
                assert!(e.0 >= last, "events come out in order");
                (last, now) = (e.0, e.0);
                popped += 1;
            }
        }
        while let Some(e) = cal.pop() {
            assert!(e.0 >= last);
            last = e.0;
            popped += 1;
        }
        assert_eq!(popped, pushed, "no event lost");
    }

    /// Zero-page reads are taken once the counter has passed their grain's end, never before
    /// their threshold and at most one grain late, each exactly once, including thresholds
    /// beyond the counted grains.
    #[test]
    fn zero_reads_are_counted_after_their_threshold_within_a_grain() {
        use super::{ZERO_READ_GRAIN, ZERO_READ_GRAINS};
        let grain = 1u64 << ZERO_READ_GRAIN;
        let far = ZERO_READ_GRAINS * grain;
        let at = [1, 5, grain - 1, grain, 3 * grain + 7, far + 3, far + 2, far + 3 * grain];
        let mut z = super::ZeroReads::default();
        at.iter().for_each(|&a| z.push(a));
        z.sort();
        let mut taken = 0;
        for counter in [0, grain - 1, grain, 2 * grain, 4 * grain - 1, 4 * grain, far + 2, far + 3, u64::MAX / 2] {
            taken += z.take(counter as f64);
            let due = at.iter().filter(|&&a| a <= counter).count() as u64;
            let late = at.iter().filter(|&&a| a <= counter.saturating_sub(grain)).count() as u64;
            assert!(taken <= due, "counter {counter}: {taken} taken, only {due} due");
            assert!(taken >= late, "counter {counter}: {taken} taken, {late} due a grain ago");
        }
        assert_eq!(taken, at.len() as u64, "each read counted once");
        assert_eq!(z.take(f64::MAX), 0);
    }

    /// A bucket's binned sort gives the order of a plain descending sort, spread or clustered.
    #[test]
    fn bucket_sort_matches_descending_order() {
        let mut rng = crate::sim::rng::Rng::new(5, 0);
        let (mut out, mut bins) = (Vec::new(), Vec::new());
        for (len, spread) in [(0, 18), (5, 18), (63, 18), (64, 18), (3000, 18), (3000, 4), (5000, 0), (70_000, 18)] {
            let v: Vec<u64> = (0..len).map(|_| super::pack((rng.next_u64() % (1 << spread), rng.next_u64() % (1 << 20)))).collect();
            let mut want = v.clone();
            want.sort_unstable_by(|a, b| b.cmp(a));
            super::sort_bucket(&v, &mut out, &mut bins);
            assert_eq!(out, want, "{len} entries over 2^{spread}");
        }
    }

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

    /// The first-touch queue gives the pairs' own order, ties by page, whether packed or not.
    #[test]
    fn first_touch_order_matches_pair_order() {
        let mut rng = crate::sim::rng::Rng::new(3, 0);
        let v: Vec<(u64, u64)> = (0..5000u64).map(|k| (rng.next_u64() % if k % 2 == 0 { 1 << 40 } else { 300 }, k)).collect();
        let mut want = v.clone();
        want.sort_unstable();
        for n in [5000, 1 << 30] {
            let mut q = super::FirstTouch::new(n, n);
            v.iter().for_each(|&(at, k)| q.push(at, k));
            q.sort();
            assert_eq!(q.rest.is_empty(), n == 5000);
            assert_eq!((0..want.len()).map(|i| q.get(i).unwrap()).collect::<Vec<_>>(), want);
            assert_eq!(q.get(want.len()), None);
        }
    }

    /// pmbench's histogram: ordinary accesses land in the buckets of their node's latency, in
    /// proportion to the probability mass on each node; the timed loop only.
    #[test]
    fn latency_histogram_follows_page_placement() {
        assert_eq!((super::latency_bucket(90.0), super::latency_bucket(145.0), super::latency_bucket(1.0)), (6, 7, 0));
        let mut k = hot_page_kernel("");
        let s = 0;
        k.samplers[s].mass = [0.0; 8];
        k.samplers[s].add_mass(0, 0.75);
        k.samplers[s].add_mass(1, 0.25);
        k.samplers[s].latency_hist = [0.0; super::LATENCY_BUCKETS];
        k.samplers[s].record_latencies(&k.latency_buckets[0][..2], 1000.0); // node 0: 90 ns local, 145 ns remote
        let h = k.samplers[s].latency_hist;
        assert_eq!((h[6], h[7]), (750.0, 250.0));
    }

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
