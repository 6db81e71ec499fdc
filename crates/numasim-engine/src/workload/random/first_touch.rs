//! First-touch bookkeeping: the events of each page's first access, drawn at the start, and the
//! first loads that map the zero page.

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
pub(super) struct FirstTouch {
    packed: Vec<u64>,
    page_bits: u32,
    rest: Vec<(u64, u64)>,
    pub(super) cursor: usize,
    pub(super) front: Option<(u64, u64)>,
}

impl FirstTouch {
    /// Kinds of first-touch event, in the low bit of the queue's page code (2 k + kind): the
    /// page's first access (`ANY`), or its first store after a first load mapped the zero page
    /// (`ZERO_COW`).
    pub(super) const ANY: u64 = 0;
    pub(super) const ZERO_COW: u64 = 1;

    pub(super) fn code(k: u64, kind: u64) -> u64 {
        2 * k + kind
    }

    pub(super) fn decode(code: u64) -> (u64, u64) {
        (code / 2, code % 2)
    }

    /// An empty queue for page codes below `n`, with room for `events`.
    pub(super) fn new(n: usize, events: usize) -> Self {
        let page_bits = usize::BITS - n.saturating_sub(1).leading_zeros();
        FirstTouch { packed: Vec::with_capacity(events), page_bits, rest: Vec::new(), cursor: 0, front: None }
    }

    pub(super) fn push(&mut self, at: u64, page: u64) {
        if self.page_bits == 0 || at >> (64 - self.page_bits) == 0 {
            self.packed.push(at << self.page_bits | page);
        } else {
            self.rest.push((at, page));
        }
    }

    /// Put the events in order once all are pushed, in page order: a stable sort on the
    /// thresholds leaves ties in page order.
    pub(super) fn sort(&mut self) {
        sort_keys(&mut self.packed, self.page_bits);
        self.rest.sort_unstable();
        self.front = self.get(self.cursor);
    }

    /// Move on to the next event.
    pub(super) fn advance(&mut self) {
        self.cursor += 1;
        self.front = self.get(self.cursor);
        if self.front.is_none() {
            // all taken: free the queue (8 bytes a page) for the calendar's buckets to reuse
            (self.packed, self.rest, self.cursor) = (Vec::new(), Vec::new(), 0);
        }
    }

    /// Event `i` in order: (threshold, page).
    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<(u64, u64)> {
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
pub(super) struct ZeroReads {
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
    pub(super) fn push(&mut self, at: u64) {
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

    pub(super) fn sort(&mut self) {
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
    pub(super) fn take(&mut self, counter: f64) -> u64 {
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

#[cfg(test)]
mod tests {
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
}
