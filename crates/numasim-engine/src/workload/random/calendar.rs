//! The sampler's event calendar: page events ordered by their threshold on the access counter.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// An event: (threshold, tag) with tag = page << 9 | generation << 1 | write-only; ordered
/// by threshold, then page.
pub(super) type Event = (u64, u64);

pub(super) fn event(at: u64, page: u64, generation: u8, write_only: bool) -> Event {
    (at, page << 9 | (generation as u64) << 1 | write_only as u64)
}

pub(super) fn unpack(e: Event) -> (u64, u64, u8, bool) {
    (e.0, e.1 >> 9, (e.1 >> 1) as u8, e.1 & 1 != 0)
}

/// log2 of a calendar bucket's width, in accesses.
const BUCKET_SHIFT: u32 = 18;
/// Buckets held in the ring; events further out wait in an ordered map.
const RING: u64 = 1024;
/// Bits of a tag in a bucket's packed entry: a page index below 2^(TAG_BITS - 9).
pub(super) const TAG_BITS: u32 = 64 - BUCKET_SHIFT;
pub(super) const TAG_MASK: u64 = (1 << TAG_BITS) - 1;

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
pub(super) struct Calendar {
    /// The current bucket, sorted descending (the earliest event last).
    pub(super) current: Vec<u64>,
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
    pub(super) fn push(&mut self, e: Event) {
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

    pub(super) fn peek(&mut self) -> Option<Event> {
        let now = match (self.current_last(), self.late.peek()) {
            (Some(a), Some(&Reverse(b))) => Some(a.min(b)),
            (Some(a), None) => Some(a),
            (None, Some(&Reverse(b))) => Some(b),
            (None, None) => None,
        };
        now.or_else(|| self.look_ahead().map(|(_, e)| e))
    }

    pub(super) fn pop(&mut self) -> Option<Event> {
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

#[cfg(test)]
mod tests {
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
}
